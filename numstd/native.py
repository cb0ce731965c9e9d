"""The optional compiled loops (``numstd._native``, built from ``numstd/_native.c``).

``pip install`` compiles them when a C compiler is present; without one the build skips them and
numstd does the same work in numpy.  Both give the same bits: the C code performs the same IEEE
double operations in the same order (compiled without FMA contraction or fast-math), and
``tests/test_native.py`` compares the two on adversarial data.  ``NUMSTD_NATIVE=0`` in the
environment (read once, at first use) selects the numpy path.

What is compiled: the fused per-element pass of :class:`numstd.criteria.Judge` (one loop instead
of ~40 numpy passes, run without the GIL) and :func:`numstd.ulp.ulp`'s spacing.
"""

from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["compiled"]


@functools.lru_cache(maxsize=None)
def compiled() -> Any:
    """The module ``numstd._native``, set up, or None (not built, or ``NUMSTD_NATIVE=0``)."""
    if os.environ.get("NUMSTD_NATIVE", "1") == "0":
        return None
    try:
        from . import _native
    except ImportError:
        return None
    from .distribution import _THRESHOLDS

    _native.set_thresholds(list(_THRESHOLDS))
    return _native
