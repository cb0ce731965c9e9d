"""Accuracy surveys of elementwise functions: ``numstd.survey(op, fmt, fn=None, backend="numpy")``.

The package is also the function (:mod:`numstd.core._callable`); the code is in :mod:`.surveying`.
"""

from __future__ import annotations

from typing import Any

from ..core._callable import make_callable
from . import surveying as _surveying
from .surveying import *  # noqa: F401,F403
from .surveying import __all__ as __all__  # noqa: PLC0414


def __getattr__(name: str) -> Any:
    try:
        return getattr(_surveying, name)
    except AttributeError:
        raise AttributeError(f"module 'numstd.survey' has no attribute {name!r}") from None


make_callable(__name__, _surveying.survey)
