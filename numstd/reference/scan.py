"""Reference of ``cumprod``: a float64 running product with its exponent kept apart.

Each prefix product is held as ``m 2^e`` (``m = frexp`` mantissa in [0.5, 1), ``e`` an int64), so
nothing underflows or overflows along the way: step ``k`` multiplies the mantissas (one rounding,
relative error ``<= u``, ``u = 2**-53``) and renormalises exactly.  Prefix ``k`` (1-based) takes
``k - 1`` roundings, so (Higham, *Accuracy and Stability*, §3.1, ``gamma_n = n u / (1 - n u)``)
``|m_k 2^e_k - P_k| <= gamma_{k-1} |P_k|``; converting to float64 at the end rounds once more
(relative ``u``, or absolutely ``2**-1075`` where the result is subnormal).  The bound used is
``1.01 k u |v| + 2**-1074`` (valid while ``k u < 10**-3``).  Rows with a non-finite element are
computed by ``numpy.cumprod`` (their non-finite results are judged as specials).
aux: ``K`` (the 1-based position along the axis).
"""

from __future__ import annotations

import numpy as np

from ..core.summation import U

__all__ = ["cumprod"]


def _scaled_cumprod(x: np.ndarray) -> np.ndarray:
    """``cumprod`` of the last axis, exponents tracked in int64 (no intermediate under/overflow)."""
    mx, ex = np.frexp(x)
    out = np.empty(x.shape, dtype=np.float64)
    if x.shape[-1] == 0:
        return out
    m, e = mx[..., 0].copy(), ex[..., 0].astype(np.int64)
    out[..., 0] = x[..., 0]
    for k in range(1, x.shape[-1]):
        m, de = np.frexp(m * mx[..., k])
        e = e + ex[..., k] + de
        out[..., k] = np.ldexp(m, np.clip(e, -2200, 2200).astype(np.int32))
    return out


def cumprod(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``cumprod(x, axis)``: ``(values, bound, {"K": positions})``."""
    x = np.asarray(arrays[0], dtype=np.float64)
    axis = params["axis"]
    xl = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    v = _scaled_cumprod(xl)
    bad = ~np.isfinite(xl).all(axis=-1)
    if bad.any():
        v[bad] = np.cumprod(xl[bad], axis=-1)
    n = xl.shape[-1]
    K = np.arange(1, n + 1, dtype=np.float64)
    bound = 1.01 * K * U * np.abs(v) + 2.0**-1074
    k_shape = [1] * x.ndim
    k_shape[axis] = n
    return np.moveaxis(v, -1, axis), np.moveaxis(bound, -1, axis), {"K": K.reshape(k_shape)}
