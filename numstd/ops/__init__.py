"""Layer 1: the op catalog — every op numstd knows, its inputs, parameters and output shape.

:mod:`.catalog` holds the entries and :func:`~.catalog.validate`, the one place that decides whether
a call is well formed.
"""

from __future__ import annotations

from typing import Any

from . import catalog as _catalog
from .catalog import *  # noqa: F401,F403
from .catalog import __all__ as __all__  # noqa: PLC0414


def __getattr__(name: str) -> Any:
    try:
        return getattr(_catalog, name)
    except AttributeError:
        raise AttributeError(f"module 'numstd.ops' has no attribute {name!r}") from None
