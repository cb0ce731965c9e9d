"""References for softmax and log_softmax: max-shifted exponentials and a balanced-tree row sum.

For a row ``x`` (the reduced axis) with exact maximum ``m`` and ``u = 2**-53``:

* ``d_j = fl(x_j - m)`` with ``|d_j - (x_j - m)| <= u |d_j|``;
* ``e_j = exp(d_j)`` with relative error ``<= C_EXP u`` (numpy's float64 ``exp``; ``C_EXP = 4``
  from :mod:`~numstd.reference.elementwise`), plus ``2**-1074`` absolute where it underflows;
  the maximum gives ``e = exp(0) = 1`` exactly, so ``Z = sum_j e_j >= 1``;
* ``Zh`` by :func:`~numstd.reference.summation.halving_sum` (all terms ``>= 0``: relative error
  ``<= gamma_d = d u / (1 - d u)``, ``d = ceil(log2 K)``; no compensation is needed without
  cancellation — ``1.3e-15`` at ``K = 4096``, far below any output format's ULP).

softmax ``y_j = fl(e_j / Zh)``.  The relative error of ``e_j`` is at most ``u|d_j| + C_EXP u``, that
of ``Z`` at most the ``y``-weighted mean of those, ``u devmean + C_EXP u`` (``devmean = sum_j y_j
|d_j|``), plus the summation error, plus one rounding for the division:

    |y_j - exact| <= y_j ((2 C_EXP + 3) u + u |d_j| + u devmean + gamma_d) + (K + 2) 2**-1074.

log_softmax ``y_j = fl(d_j - L)`` with ``L = log1p(T)``, ``T = sum_{j != argmax} e_j`` (the row
sum less the exact 1 of the maximum, so ``L`` keeps full relative accuracy when one logit
dominates and ``y_argmax = -L`` is tiny).  ``log1p`` has relative error ``<= C_LOG u`` (measured
``<= 0.55 ulp``; ``C_LOG = 4``) and ``|d log1p(T) / dT| = 1 / Z``, so

    |L - exact| <= L ((C_LOG + C_EXP + 1) u + gamma_d) + u devmean + K 2**-1074,
    |y_j - exact| <= u |y_j| + u |d_j| + |L - exact|.

``d_j <= 0 <= L``, so ``|y_j| = |d_j| + L``: no cancellation, the bound is a few ``u |y_j|``.
``-inf`` logits (masks) give ``e_j = 0`` and ``y_j = 0`` or ``-inf`` exactly; a row of ``-inf`` or
with ``+inf``/NaN gives NaN (as torch does).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..models.formula import Formula
from .elementwise import C_EXP, C_LOG
from ..core.summation import U, halving_sum

__all__ = ["softmax", "log_softmax", "Rows", "exp_rows", "lse_error"]

_TINY = 2.0**-1074

# d = x - max (a broadcast numpy is slow at: 21 µs per 16 x 4096 chunk against 9 for |x|†), rel =
# (2 C_EXP + 3) u + u |d_j| [live] + u devmean + gamma, summed in that order, and softmax's bound
# y rel + (K + 2) 2^-1074: one compiled pass each where numstd._native is built (Formula.compute:
# the same operations, the same bits)
_SHIFT = Formula.parse("x - m", {"x", "m"}, "softmax shift")
_REL = Formula.parse("U * dev + c + U * devmean + gamma", {"U", "dev", "c", "devmean", "gamma"}, "softmax rel")
_SOFTMAX_BOUND = Formula.parse("y * rel + tiny", {"y", "rel", "tiny"}, "softmax bound")


class Rows(NamedTuple):
    """The pieces of a max-shifted exponential row sum, last axis reduced (keepdims)."""

    d: np.ndarray        # fl(x - max)
    e: np.ndarray        # exp(d)
    y: np.ndarray        # e / Zh (softmax)
    zh: np.ndarray       # row sum of e, rounded (keepdims)
    lse: np.ndarray      # log1p(sum of e without the first maximum) = log(Z) (keepdims)
    devmean: np.ndarray  # sum_j y_j |d_j| (keepdims)
    depth: int           # ceil(log2 K)
    gamma: float         # gamma_depth: relative error of the row sums
    rel: np.ndarray      # bound on |y_j / exact - 1| where nothing underflows, per element
    dev: np.ndarray      # |d|


def exp_rows(x: np.ndarray, with_lse: bool = True) -> Rows:
    """Max-shifted exponentials, softmax and log-sum-exp of the rows (last axis) of ``x``.

    ``with_lse=False`` skips the second row sum that ``lse`` needs (``lse`` is then NaN).
    """
    m = np.max(x, axis=-1, keepdims=True)
    d = _SHIFT.compute({"x": x, "m": m}, x.shape)
    e = np.exp(d)
    zh, depth, gamma = halving_sum(e)
    zh = zh[..., None]
    y = e / zh
    live = e > 0
    everywhere = bool(live.all())  # (the usual case: the masks below change nothing and are skipped)
    dev = np.abs(d)
    yd = y * dev
    devmean = np.sum(yd if everywhere else np.where(live, yd, 0.0), axis=-1, keepdims=True)
    lse = np.full(zh.shape, np.nan)
    if with_lse:  # log(Z) = log1p(Z - 1), Z - 1 = the sum without the first maximum's exact 1
        first = np.argmax(x, axis=-1)[..., None]
        rest = e.copy()
        np.put_along_axis(rest, first, 0.0, axis=-1)
        th, _, _ = halving_sum(rest)
        lse = np.log1p(th)[..., None]
    rel = _REL.compute({"U": U, "dev": dev if everywhere else np.where(live, dev, 0.0), "c": (2 * C_EXP + 3) * U,
                        "devmean": devmean, "gamma": gamma}, d.shape)
    return Rows(d, e, y, zh, lse, devmean, depth, gamma, rel, dev)


def lse_error(r: Rows) -> np.ndarray:
    """Bound on ``|r.lse - log(sum_j exp(x_j - max))|`` (module docstring), keepdims."""
    K = r.d.shape[-1]
    return r.lse * ((C_LOG + C_EXP + 1) * U + r.gamma) + U * r.devmean + K * _TINY


def _aux(r: Rows, x: np.ndarray) -> dict:
    return {"dev": r.dev, "devmean": r.devmean, "K": np.asarray(float(x.shape[-1]))}


def _move(fn):  # run a last-axis implementation on params["axis"]
    def wrapped(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
        axis = params["axis"]
        x = np.asarray(arrays[0], dtype=np.float64)
        last = axis in (-1, x.ndim - 1)  # (the usual case: no moveaxis, ~2 µs of Python per call)
        if not last:
            x = np.moveaxis(x, axis, -1)
        if x.size == 0:
            z = np.zeros(x.shape)
            aux = {"dev": z, "devmean": z[..., :1], "K": np.asarray(float(x.shape[-1]))}
            if op == "log_softmax":
                aux["lse"] = z[..., :1]
            return np.moveaxis(z, -1, axis), np.moveaxis(z, -1, axis), {
                k: (np.moveaxis(v, -1, axis) if v.ndim else v) for k, v in aux.items()}
        values, bound, aux = fn(x)
        if last:
            return values, bound, aux
        back = {k: (np.moveaxis(v, -1, axis) if v.ndim else v) for k, v in aux.items()}
        return np.moveaxis(values, -1, axis), np.moveaxis(bound, -1, axis), back
    wrapped.__doc__ = fn.__doc__
    wrapped.__name__ = fn.__name__
    return wrapped


@_move
def softmax(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``softmax(x, axis)``; see the module docstring for the bound."""
    r = exp_rows(x, with_lse=False)
    tiny = (x.shape[-1] + 2) * _TINY
    positive = r.y > 0
    if positive.all():
        bound = _SOFTMAX_BOUND.compute({"y": r.y, "rel": r.rel, "tiny": tiny}, x.shape)
    else:
        bound = np.where(positive, r.y * r.rel, 0.0)
        bound += tiny
    return r.y, bound, _aux(r, x)


@_move
def log_softmax(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``log_softmax(x, axis)``; see the module docstring for the bound."""
    r = exp_rows(x)
    values = r.d - r.lse
    bound = U * np.abs(values) + U * r.dev + lse_error(r)
    aux = _aux(r, x)
    aux["lse"] = r.lse
    return values, bound, aux
