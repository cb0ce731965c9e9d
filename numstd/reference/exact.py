"""References of the exact elementwise ops with limits (hardtanh, clamp): bit-exact, bound 0.

torch converts a clamp's scalar limits to the tensor's dtype before comparing
(``aten/src/ATen/native/cpu/TensorCompareKernel.cpp``: ``min.to<scalar_t>()``), so the exact
result of ``clamp(x, lo, hi)`` on a ``bfloat16`` tensor is ``min(max(x, RN(lo)), RN(hi))`` with
``RN`` the rounding to bfloat16.  Rounding is monotone, so this is also ``RN(clamp(x, lo, hi))``
for every representable ``x``: the value any correct kernel returns, whether it rounds the
limits first or the result last.  This module rounds the limits into the input's format and
evaluates the entry's ``ref`` (:mod:`numstd.ops.activation`) in float64, where it is exact.
aux: ``x`` and ``cond = |x|`` where ``x`` lies strictly inside the limits, else 0.
"""

from __future__ import annotations

import numpy as np

from ..core.formats import format_of, round_to
from ..ops import get_op

__all__ = ["exact", "rounded_limits"]

_LIMITS = ("min", "max", "min_val", "max_val")


def rounded_limits(params: dict, fmt) -> dict:
    """``params`` with the limits (``min``/``max``, ``min_val``/``max_val``) rounded to ``fmt``."""
    out = dict(params)
    for name in _LIMITS:
        if out.get(name) is not None:
            out[name] = float(np.asarray(round_to(np.float64(out[name]), fmt), dtype=np.float64))
    return out


def exact(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``op`` (hardtanh, clamp): ``(values, 0, aux)`` with the limits in the input format."""
    fmt = format_of(arrays[0])
    x = np.asarray(arrays[0], dtype=np.float64)
    v, bound, cond = get_op(op).ref(x, rounded_limits(params, fmt))
    return v, bound, {"x": x, "cond": cond}
