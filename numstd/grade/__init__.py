"""Whole-module grading (KernelBench style): ``numstd.grade(reference, candidate, make_inputs)``.

The package is also the function: ``numstd.grade(...)`` calls :func:`.grading.grade`, and
``from numstd.grade import GradeReport`` works, whatever was imported first
(:mod:`numstd.core._callable`).  Modules: :mod:`.grading` (op detection, case runs, ``grade``),
:mod:`.frameworks` (torch/jax/numpy adapters), :mod:`.report` (``CaseVerdict``, ``GradeReport``),
:mod:`.module_standard` (the NS-MODULE errors and criteria).
"""

from __future__ import annotations

from typing import Any

from ..core._callable import make_callable
from . import grading as _grading
from .grading import *  # noqa: F401,F403  (the public names of numstd.grade)
from .grading import __all__ as __all__  # noqa: PLC0414


def __getattr__(name: str) -> Any:
    # names of numstd.grade before it became a package (private helpers tests and tools import)
    try:
        return getattr(_grading, name)
    except AttributeError:
        raise AttributeError(f"module 'numstd.grade' has no attribute {name!r}") from None


make_callable(__name__, _grading.grade)
