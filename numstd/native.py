"""The optional compiled loops (``numstd._native``, built from ``numstd/_native.c``).

``pip install`` compiles them when a C compiler is present; without one the build skips them and
numstd does the same work in numpy.  Both give the same bits: the C code performs the same IEEE
double operations in the same order (compiled without FMA contraction or fast-math), and
``tests/test_native.py`` compares the two on adversarial data.  ``NUMSTD_NATIVE=0`` in the
environment (read once, at first use) selects the numpy path.

What is compiled: the fused per-element pass of :class:`numstd.criteria.Judge` (one loop instead
of ~40 numpy passes, run without the GIL), a standard's error formula with its bound in one pass
(:meth:`numstd.models.ErrorModel.evaluate`, the formula compiled by
:meth:`numstd.models.formula.Formula.program`), :func:`numstd.ulp.ulp`'s spacing, a few one-pass
reference bounds, and a numpy allocator that reuses freed blocks while a check runs (:func:`pool`;
built when numpy's headers are there at install time, as ``pip install`` arranges).
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterator

__all__ = ["compiled", "pool"]


@functools.lru_cache(maxsize=None)
def compiled() -> Any:
    """The module ``numstd._native``, set up, or None (not built, or ``NUMSTD_NATIVE=0``)."""
    if os.environ.get("NUMSTD_NATIVE", "1") == "0":
        return None
    try:
        from . import _native
    except ImportError:
        return None
    from . import criteria, distribution
    from .models.formula import Program

    expected = {"BLOCK": distribution.BLOCK, "WORST_K": criteria.WORST_K, "DISTINCT_BITS": criteria._DISTINCT_BITS,
                "BINS_PER_OCTAVE": distribution.BINS_PER_OCTAVE, "LO_OCT": distribution._LO_OCT,
                "HI_OCT": distribution._HI_OCT, "VM_REGS": Program.REGISTERS, "VM_ARRAYS": Program.ARRAYS}
    if _native.constants() != expected:
        raise RuntimeError(f"numstd._native was compiled with {_native.constants()}, numstd expects {expected}: "
                           "rebuild it (pip install -e .) or set NUMSTD_NATIVE=0")
    _native.set_thresholds(list(distribution._THRESHOLDS))
    return _native


@contextlib.contextmanager
def pool(max_bytes: int = 1 << 22) -> Iterator[None]:
    """Inside the block, numpy arrays created in this context keep their memory for reuse when
    freed (blocks of 64 KiB or more, at most ``max_bytes`` in all — ``check`` asks for eight
    float64 arrays of one chunk, a chunk's temporaries); the last block to exit frees it.

    A check's chunks allocate the same temporaries again and again; glibc hands large freed blocks
    back to the kernel, so without the pool every chunk pays page faults for fresh memory — up to
    twice the time of the whole check, depending on the process's heap history (docs/benchmarks.md).
    numpy keeps the allocator in a context variable, so only this context (and contexts copied from
    it, as :func:`numstd.chunks.prefetch` does for its worker) use it.  A no-op without the
    compiled module.
    """
    nat = compiled()
    if nat is None or not hasattr(nat, "pool_enter"):
        yield
        return
    previous = nat.pool_enter(int(max_bytes))
    try:
        yield
    finally:
        nat.pool_exit(previous)
