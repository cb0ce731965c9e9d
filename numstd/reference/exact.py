"""References of the exact ops: hardtanh and clamp (elementwise, with limits) and the extrema
amax and amin (reductions); bit-exact, bound 0.

torch converts a clamp's scalar limits to the tensor's dtype before comparing
(``aten/src/ATen/native/cpu/TensorCompareKernel.cpp``: ``min.to<scalar_t>()``), so the exact
result of ``clamp(x, lo, hi)`` on a ``bfloat16`` tensor is ``min(max(x, RN(lo)), RN(hi))`` with
``RN`` the rounding to bfloat16.  Rounding is monotone, so this is also ``RN(clamp(x, lo, hi))``
for every representable ``x``: the value any correct kernel returns, whether it rounds the
limits first or the result last.  This module rounds the limits into the input's format and
evaluates the entry's ``ref`` (:mod:`numstd.ops.activation`) in float64, where it is exact.
aux: ``x`` and ``cond = |x|`` where ``x`` lies strictly inside the limits, else 0.

``amax``/``amin`` (:func:`extremum`): ``max``/``min`` over ``axis`` of the input widened to
float64, which is exact (the result is one of the inputs, so it is representable in the input
format and no rounding happens anywhere).  NaN propagates: a reduced slice holding a NaN gives
NaN (``numpy.max``; torch.amax and jax.numpy.max do the same).  Zeros follow IEEE 754-2019
``maximum``/``minimum`` (``-0 < +0``): the maximum of a slice whose largest value is a zero is
``+0`` when the slice holds a ``+0``, else ``-0`` (the minimum: ``-0`` when it holds a ``-0``).
The standards do not judge that sign (no ``signed_zero`` criterion; numstd.ops.reduction says
why).  aux: none (the model is ``0 * absref``).

``argmax``/``argmin`` have the reference of ``amax``/``amin`` (``check`` judges ``x`` at the returned
indices against it, :mod:`numstd.judge.indices`), and :func:`first_index`, the index torch, numpy
and jax return: the first position along the axis whose value equals the extremum (``==``, so
``-0`` and ``+0`` are equal), or the first NaN of a slice holding one.
"""

from __future__ import annotations

import numpy as np

from ..core.formats import format_of, round_to
from ..ops import get_op

__all__ = ["exact", "extremum", "first_index", "rounded_limits"]

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


def extremum(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``amax``/``amin``: ``(values, 0, {})``, exact (module docstring)."""
    x = np.asarray(arrays[0], dtype=np.float64)
    axis, keepdims = params["axis"], params["keepdims"]
    is_max = op in ("amax", "argmax")
    v = (np.max if is_max else np.min)(x, axis=axis, keepdims=keepdims)  # NaN propagates
    v = np.asarray(v, dtype=np.float64)
    zero = v == 0
    if zero.any():  # IEEE 754-2019 maximum/minimum: -0 < +0
        wanted = (x == 0) & (np.signbit(x) != is_max)  # amax: a +0; amin: a -0
        has = np.any(wanted, axis=axis, keepdims=keepdims)
        v = np.where(zero, np.where(has == is_max, 0.0, -0.0), v)
    return v, np.zeros(v.shape), {}


def first_index(op: str, x: np.ndarray, axis: int | None, keepdims: bool) -> np.ndarray:
    """The first index of the extremum of ``x`` along ``axis`` (None: of the flattened ``x``), int64.

    ``op`` is ``argmax`` or ``argmin``.  The extremum is the value :func:`extremum` gives (NaN when the
    slice holds a NaN); the index is the first position whose value compares equal to it (NaN: the
    first NaN), which is numpy's, torch's and jax's documented rule.  ``keepdims`` keeps the reduced
    axis (all axes when ``axis`` is None) with length 1.
    """
    with np.errstate(invalid="ignore"):  # (bfloat16 NaN patterns widen with a warning)
        x = np.asarray(x, dtype=np.float64)
    flat = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis
    with np.errstate(invalid="ignore"):
        m = (np.max if op == "argmax" else np.min)(flat, axis=ax, keepdims=True)  # NaN propagates
        hit = (flat == m) | (np.isnan(flat) & np.isnan(m))
    idx = np.argmax(hit, axis=ax).astype(np.int64)  # (the first True)
    if axis is None:
        return idx.reshape((1,) * x.ndim) if keepdims else idx.reshape(())
    return np.expand_dims(idx, axis) if keepdims else idx
