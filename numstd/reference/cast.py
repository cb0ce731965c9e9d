"""Reference of ``cast`` (quantize into a block-scaled format, then dequantize): exact.

``values = q * S`` (float64, exact: at most 30 significant bits) with the codes and scales of the
format's rule (:mod:`numstd.core.scaled`), computed from the exact input; the standard's ``rho``
covers the one rounding of ``q * S`` into the output format.  Bound 0.

aux ``legit``: how far a kernel that follows the rule in fp32 arithmetic may legitimately land
from ``values`` — ``max(hi - values, values - lo)`` with ``(lo, hi)`` of
:func:`numstd.core.scaled.legitimate_range` (each fp32 scale within two fp32 roundings of the
exact quotient, the element quotient within two; NVFP4's E4M3 block scale the rounding of a
quantity within four).  It is 0 for the OCP MX formats, whose scale is an exact power of two
and whose quotients are exact, so those standards are bit-exact; NaN blocks give 0.
"""

from __future__ import annotations

import numpy as np

from ..core.scaled import legitimate_range, scaled_round

__all__ = ["cast", "SCALE_OPS", "ELEM_OPS"]

#: fp32 roundings a legitimate kernel may spend on a scale (amax / max; amax * fl(1/max); 1 / fl(max / amax))
SCALE_OPS = 2
#: fp32 roundings it may spend on an element quotient (x / S; x * fl(1/S))
ELEM_OPS = 2


def cast(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(q * S, 0, {"legit": ...})`` for ``x = arrays[0]`` and ``to = params["to"]``."""
    with np.errstate(invalid="ignore"):
        x = np.asarray(arrays[0]).astype(np.float64)
    to = params["to"]
    v = scaled_round(x, to)
    lo, hi = legitimate_range(x, to, SCALE_OPS, ELEM_OPS, out="float64")
    with np.errstate(invalid="ignore"):
        legit = np.maximum(hi - v, v - lo)
    legit = np.where(np.isfinite(legit), legit, 0.0)
    return v, np.zeros(v.shape), {"legit": legit}
