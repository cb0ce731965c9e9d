"""The optional compiled loops (``numstd._native``, built from ``numstd/_native.c``).

``pip install`` compiles them when a C compiler is present; without one the build skips them and
numstd does the same work in numpy.  Both give the same bits: the C code performs the same IEEE
double operations in the same order (compiled without FMA contraction or fast-math), and
``tests/test_native.py`` compares the two on adversarial data.  ``NUMSTD_NATIVE=0`` in the
environment (read once, at first use) selects the numpy path.

What is compiled: the fused per-element pass of :class:`numstd.judge.criteria.Judge` (one loop instead
of ~40 numpy passes, run without the GIL), a standard's error formula with its bound in one pass
(:meth:`numstd.models.ErrorModel.evaluate`, the formula compiled by
:meth:`numstd.models.formula.Formula.program`), :func:`numstd.core.ulp.ulp`'s spacing, a few one-pass
reference bounds, and a numpy allocator that reuses freed blocks while a check runs (:func:`pool`;
built when numpy's headers are there at install time, as ``pip install`` arranges).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from typing import Any, Iterator

__all__ = [
    "compiled", "pool", "fraction_thresholds", "BLOCK", "WORST_K", "DISTINCT_BITS", "BINS_PER_OCTAVE", "LO_OCT",
    "HI_OCT", "VM_REGS", "VM_ARRAYS",
]

# The constants of the C interface (``numstd/_native.c`` is compiled with the same numbers and
# :func:`compiled` refuses a module built with others).  The Python modules that share them import
# them from here: :mod:`numstd.core.distribution` (BLOCK, the histogram bins),
# :mod:`numstd.judge.criteria` (WORST_K, DISTINCT_BITS) and :mod:`numstd.models.formula` (VM_*).

#: values summed per block of the ULP-distribution's halving tree
BLOCK = 1024
#: worst offenders kept by the judge
WORST_K = 10
#: bits of the hash of the distinct-value map (2^20 entries)
DISTINCT_BITS = 20
#: logarithmic histogram bins per octave of |ULP error|
BINS_PER_OCTAVE = 16
#: the histogram starts at 2^-LO_OCT ulp ...
LO_OCT = 30
#: ... and ends at 2^HI_OCT ulp (the last bin takes everything above)
HI_OCT = 80
#: intermediate values a compiled error formula keeps live at once
VM_REGS = 8
#: arrays a compiled error formula may read
VM_ARRAYS = 8


def fraction_thresholds() -> tuple[int, ...]:
    """``N_j = floor(2^(j/16) · 2^52) − 2^52`` for ``j = 1..15``: the 52-bit fractions just below the
    bin edges ``2^(j/16)`` of one octave, exact (four nested integer square roots give the floor of
    the 16th root: ``floor(√floor(√x)) = floor(x^(1/4))``).  The compiled judge bins by comparing
    fraction bits with these (``set_thresholds``)."""
    out = []
    for j in range(1, BINS_PER_OCTAVE):
        x = 1 << (j + 52 * BINS_PER_OCTAVE)
        for _ in range(4):
            x = math.isqrt(x)
        out.append(x - (1 << 52))
    return tuple(out)



@functools.lru_cache(maxsize=None)
def compiled() -> Any:
    """The module ``numstd._native``, set up, or None (not built, or ``NUMSTD_NATIVE=0``)."""
    if os.environ.get("NUMSTD_NATIVE", "1") == "0":
        return None
    try:
        from .. import _native
    except ImportError:
        return None
    expected = {"BLOCK": BLOCK, "WORST_K": WORST_K, "DISTINCT_BITS": DISTINCT_BITS, "BINS_PER_OCTAVE": BINS_PER_OCTAVE,
                "LO_OCT": LO_OCT, "HI_OCT": HI_OCT, "VM_REGS": VM_REGS, "VM_ARRAYS": VM_ARRAYS}
    if _native.constants() != expected:
        raise RuntimeError(f"numstd._native was compiled with {_native.constants()}, numstd expects {expected}: "
                           "rebuild it (pip install -e .) or set NUMSTD_NATIVE=0")
    _native.set_thresholds(list(fraction_thresholds()))
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
