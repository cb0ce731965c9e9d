"""Modules that are also the function they are named after (``numstd.reference``, ``survey``, ``grade``,
and ``numstd.judge.check``, which the old path ``numstd.check`` names).

The public API is ``numstd.reference(op, inputs)``, ``numstd.survey(...)`` and ``numstd.grade(...)``,
while the code lives in modules of the same names; importing such a submodule rebinds the package
attribute to the module.  Making the module object callable keeps both ``numstd.reference(...)`` and
``from numstd.reference import Reference`` working, whatever was imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

__all__ = ["make_callable"]


class _CallableModule(types.ModuleType):
    __numstd_call__: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__numstd_call__(*args, **kwargs)


def make_callable(module_name: str, func: Callable[..., Any]) -> None:
    """Make ``sys.modules[module_name]`` forward calls to ``func``."""
    mod = sys.modules[module_name]
    mod.__class__ = _CallableModule
    mod.__numstd_call__ = func
