"""References for sum, mean and cumsum: double-double sums with a bound in ``u^2 sum|x|``.

With ``u = 2**-53``, ``S = sum |x|`` over the summands of an output and the double-double result
``hi + lo`` of :mod:`numstd.reference.summation` (``values = hi``, the double nearest ``hi + lo``):

* sum:    ``|values - s| <= |lo| + DD_C * d * u^2 * S``, ``d = ceil(log2 K)`` (pairwise tree);
* mean:   the double-double sum divided by ``K`` with :func:`~numstd.reference.summation.dd_div_int`:
  ``|values - s/K| <= |lo'| + DIV_C u^2 |values| + DD_C * d * u^2 * S / K`` (``DIV_C = 5``);
* cumsum: ``|values_i - s_i| <= |lo_i| + DD_C * (b + nb) * u^2 * S_i`` with ``S_i`` the prefix sum
  of ``|x|`` and ``b + nb ~ 2 sqrt(n)`` the chain length of the blocked scan.

The ``|lo|`` term is at most ``u |values|``; the second is below ``2**-90 S`` for any axis shorter
than ``2**20``, so the reference stays accurate to far below a float32 ulp even when the sum
cancels (``1e8 + 1 - 1e8``).  Reference: Ogita, Rump & Oishi, "Accurate sum and dot product",
SIAM J. Sci. Comput. 26(6), 2005.

Non-finite inputs: outputs whose summands include ``±inf`` or NaN take numpy's IEEE result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .summation import DD_C, DIV_C, U, dd_div_int, pairwise_sum, prefix_sum

__all__ = ["sum_", "mean", "cumsum"]


def _reduced(x: np.ndarray, axis: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """x with the reduced axes flattened into one last axis, and the reduced axes."""
    axes = tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    moved = np.transpose(x, kept + axes)
    lead = tuple(x.shape[i] for i in kept)
    return moved.reshape(lead + (math.prod(x.shape[i] for i in axes),)), axes  # (explicit: an empty batch has no -1)


def _keep(a: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if not keepdims:
        return a
    return a.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))


def _sum_parts(x: np.ndarray, axis: Any) -> tuple:
    flat, axes = _reduced(x, axis)
    hi, lo, depth = pairwise_sum(flat, -1)
    S = np.sum(np.abs(flat), axis=-1)
    bad = ~np.isfinite(S)
    if bad.any():  # non-finite summands: IEEE semantics, no bound where the result stays finite
        hi = np.where(bad, np.sum(flat, axis=-1), hi)
        lo = np.where(bad, np.inf, lo)
    return hi, lo, depth, S, flat.shape[-1], axes


def sum_(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``sum(x, axis, keepdims)``; see the module docstring for the bound."""
    x = np.asarray(arrays[0], dtype=np.float64)
    hi, lo, depth, S, K, axes = _sum_parts(x, params["axis"])
    bound = np.abs(lo) + DD_C * depth * U * U * S
    kd = params["keepdims"]
    return (_keep(hi, x.shape, axes, kd), _keep(bound, x.shape, axes, kd),
            {"abssum": _keep(S, x.shape, axes, kd), "K": np.asarray(float(K))})


def mean(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``mean(x, axis, keepdims)``; see the module docstring for the bound."""
    x = np.asarray(arrays[0], dtype=np.float64)
    hi, lo, depth, S, K, axes = _sum_parts(x, params["axis"])
    finite_lo = np.where(np.isfinite(lo), lo, 0.0)
    qh, ql = dd_div_int(hi, finite_lo, K)
    qh = np.where(np.isfinite(lo), qh, hi / K)
    bound = np.where(np.isfinite(lo), np.abs(ql), np.inf) + DIV_C * U * U * np.abs(qh) + DD_C * depth * U * U * S / K
    kd = params["keepdims"]
    return (_keep(qh, x.shape, axes, kd), _keep(bound, x.shape, axes, kd),
            {"abssum": _keep(S / K, x.shape, axes, kd), "K": np.asarray(float(K))})


def cumsum(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``cumsum(x, axis)``; see the module docstring for the bound."""
    x = np.asarray(arrays[0], dtype=np.float64)
    axis = params["axis"]
    hi, lo, chain = prefix_sum(x, axis)
    S = np.cumsum(np.abs(x), axis=axis)
    bad = ~np.isfinite(S)
    if bad.any():
        hi = np.where(bad, np.cumsum(x, axis=axis), hi)
        lo = np.where(bad, np.inf, lo)
    bound = np.abs(lo) + DD_C * chain * U * U * S
    n = x.shape[axis]
    k_shape = [1] * x.ndim
    k_shape[axis] = n
    K = np.arange(1, n + 1, dtype=np.float64).reshape(k_shape)
    return hi, bound, {"abssum": S, "K": K}
