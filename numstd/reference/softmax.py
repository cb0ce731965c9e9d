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

Long rows, in pieces (``check`` in bounded memory).  The row statistics — ``m``, ``Zh``, ``L`` and
``devmean`` — are computed by :func:`row_stats` from the whole row; every element is then computed
from them alone (``d_j``, ``e_j``, ``y_j`` are elementwise), so a piece of a row gets the bits the
whole row gets.  Rows of at most :data:`SOFTMAX_BLOCK` elements are summed as above.  Longer rows
are cut into aligned blocks of ``SOFTMAX_BLOCK`` elements (boundaries fixed by the row length
alone, never by the caller's chunks); each block's sums use the halving tree and the ``nb`` block
sums a second one, so every term is at most ``d = ceil(log2 SOFTMAX_BLOCK) + ceil(log2 nb)``
roundings deep (``>= ceil(log2 K)``) and the bounds above hold with ``gamma_d``; ``devmean`` is
``sum_j e_j |d_j| / Zh`` (the same quantity, first order only in the bound).  Only one block of
float64 temporaries exists at a time.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..models.formula import Formula
from ._rows import by_row_groups, cached_stats
from .elementwise import C_EXP, C_LOG
from ..core.summation import U, halving_sum, sum_depth

__all__ = ["softmax", "log_softmax", "Rows", "RowStats", "exp_rows", "row_stats", "lse_error", "SOFTMAX_BLOCK"]

#: elements per block of a long row in :func:`row_stats` (a constant: the row statistics, hence
#: every element, depend only on the row, never on how a caller cuts it; rows of at most this many
#: elements are summed whole, as before pieces existed)
SOFTMAX_BLOCK = 1 << 16
#: logits per group of whole rows in :func:`row_stats` (rows of at most SOFTMAX_BLOCK): the float64
#: temporaries of one group (~5 MiB) are reused from ``check``'s pool of freed blocks (numstd.native.pool,
#: 4 MiB at the default chunk) instead of page-faulting fresh memory per group, which made larger
#: groups slower (cross_entropy of many short rows goes through here)
ROW_GROUP = 1 << 16

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
    K: int = -1          # elements of the whole row (more than d.shape[-1] for a piece of it)


class RowStats(NamedTuple):
    """What the elements of a row need from the whole row (:func:`row_stats`), last axis kept as 1."""

    m: np.ndarray        # the row maximum (exact)
    zh: np.ndarray       # row sum of e, rounded
    lse: np.ndarray      # log1p(sum of e without the first maximum); NaN without with_lse
    devmean: np.ndarray  # sum_j y_j |d_j|
    depth: int           # roundings behind the row sums
    gamma: float         # gamma_depth
    K: int               # elements per row


def row_stats(x: np.ndarray, with_lse: bool = True) -> RowStats:
    """The row statistics of the rows (last axis) of ``x`` (any float format, any strides), in
    bounded memory: the module docstring's sums, whole for rows of at most :data:`SOFTMAX_BLOCK`
    elements (groups of rows of about :data:`ROW_GROUP` elements at a time), over aligned blocks of
    it for longer rows (one block widened to float64 at a time)."""
    K = x.shape[-1]
    if K <= SOFTMAX_BLOCK:
        def whole(rows: np.ndarray) -> tuple:
            x64 = np.asarray(rows, dtype=np.float64)
            r = exp_rows(x64, with_lse)
            return np.max(x64, axis=-1, keepdims=True), r.zh, r.lse, r.devmean

        m, zh, lse, devmean = by_row_groups(x, whole, ROW_GROUP)
        depth = sum_depth(K)
    else:
        lead = x.shape[:-1]
        m, zh, lse, devmean = (np.empty(lead + (1,)) for _ in range(4))
        for idx in np.ndindex(*lead):
            m[idx], zh[idx], lse[idx], devmean[idx] = _long_row(x[idx], with_lse)
        depth = sum_depth(SOFTMAX_BLOCK) + sum_depth(-(-K // SOFTMAX_BLOCK))
    if not with_lse:
        lse = np.full(zh.shape, np.nan)
    return RowStats(m, zh, lse, devmean, depth, depth * U / (1.0 - depth * U) if depth else 0.0, K)


def _long_row(row: np.ndarray, with_lse: bool) -> tuple[float, float, float, float]:
    """(m, Zh, L, devmean) of one row longer than :data:`SOFTMAX_BLOCK` (module docstring)."""
    K = row.shape[0]
    starts = range(0, K, SOFTMAX_BLOCK)
    m, first = -np.inf, 0
    for b0 in starts:  # pass 1: the exact maximum and its first position (NaN: the first NaN)
        xb = np.asarray(row[b0:b0 + SOFTMAX_BLOCK], dtype=np.float64)
        j = int(np.argmax(xb))
        if xb[j] > m or (np.isnan(xb[j]) and not np.isnan(m)):
            m, first = float(xb[j]), b0 + j
    nb = len(starts)
    s, t, ed = np.zeros((1, nb)), np.zeros((1, nb)), np.zeros((1, nb))
    mm = np.full((1, 1), m)
    for k, b0 in enumerate(starts):  # pass 2: the block sums (halving trees of fixed blocks)
        xb = np.asarray(row[b0:b0 + SOFTMAX_BLOCK], dtype=np.float64)[None]
        d = _SHIFT.compute({"x": xb, "m": mm}, xb.shape)
        e = np.exp(d)
        s[0, k] = halving_sum(e)[0][0]
        np.abs(d, out=d)
        d *= e
        d[e <= 0] = 0.0  # (e = 0: -inf logits, whose |d| is inf, add nothing)
        ed[0, k] = halving_sum(d)[0][0]
        if with_lse:
            if b0 <= first < b0 + SOFTMAX_BLOCK:
                e[0, first - b0] = 0.0  # the maximum's exact 1 (log Z = log1p(Z - 1))
            t[0, k] = halving_sum(e)[0][0]
    zh = float(halving_sum(s)[0][0])
    lse = float(np.log1p(halving_sum(t)[0][0])) if with_lse else math.nan
    return m, zh, lse, float(halving_sum(ed)[0][0]) / zh


def exp_rows(x: np.ndarray, with_lse: bool = True, stats: RowStats | None = None) -> Rows:
    """Max-shifted exponentials, softmax and log-sum-exp of the rows (last axis) of ``x``.

    ``with_lse=False`` skips the second row sum that ``lse`` needs (``lse`` is then NaN).  With
    ``stats`` (:func:`row_stats` of the whole rows), ``x`` may be a piece of them along the last
    axis: its elements are computed from the whole rows' statistics.
    """
    if stats is not None:
        return _piece_rows(x, stats)
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
    return Rows(d, e, y, zh, lse, devmean, depth, gamma, rel, dev, x.shape[-1])


def _piece_rows(x: np.ndarray, st: RowStats) -> Rows:
    """:func:`exp_rows` of a piece ``x`` (float64) of rows whose statistics are ``st``: the same
    elementwise operations as on the whole rows, so the same bits."""
    d = _SHIFT.compute({"x": x, "m": st.m}, x.shape)
    e = np.exp(d)
    y = e / st.zh
    live = e > 0
    dev = np.abs(d)
    rel = _REL.compute({"U": U, "dev": dev if bool(live.all()) else np.where(live, dev, 0.0), "c": (2 * C_EXP + 3) * U,
                        "devmean": st.devmean, "gamma": st.gamma}, d.shape)
    return Rows(d, e, y, st.zh, st.lse, st.devmean, st.depth, st.gamma, rel, dev, st.K)


def lse_error(r: Rows | RowStats) -> np.ndarray:
    """Bound on ``|r.lse - log(sum_j exp(x_j - max))|`` (module docstring), keepdims (of the rows, or
    of their :func:`row_stats`)."""
    K = r.K if r.K >= 0 else r.d.shape[-1]
    return r.lse * ((C_LOG + C_EXP + 1) * U + r.gamma) + U * r.devmean + K * _TINY


def _aux(r: Rows) -> dict:
    return {"dev": r.dev, "devmean": r.devmean, "K": np.asarray(float(r.K))}


def _rows(x: np.ndarray, whole: np.ndarray | None, params: dict, with_lse: bool) -> Rows:
    """:func:`exp_rows` of ``x`` (float64, reduced axis last); ``whole``: the whole rows ``x`` is a
    piece of (the caller's format, reduced axis last), or None when ``x`` holds whole rows.

    Whole rows of at most :data:`SOFTMAX_BLOCK` elements take the one-pass path; pieces and longer
    rows take their statistics from :func:`row_stats` (kept in the caller's ``_cache`` for the next
    piece of the same rows), so a row's elements do not depend on how it was cut.
    """
    if whole is None:
        if x.shape[-1] <= SOFTMAX_BLOCK:
            return exp_rows(x, with_lse)
        return exp_rows(x, with_lse, row_stats(x, with_lse))
    stats = cached_stats(params, "softmax rows" if with_lse else "softmax rows (no lse)", lambda: row_stats(whole, with_lse))
    return exp_rows(x, with_lse, stats)


def _move(fn):  # run a last-axis implementation on params["axis"]
    def wrapped(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
        axis = params["axis"]
        x = np.asarray(arrays[0], dtype=np.float64)
        piece = params.get("_piece")
        whole = None if piece is None else np.asarray(piece.whole[0])
        last = axis in (-1, x.ndim - 1)  # (the usual case: no moveaxis, ~2 µs of Python per call)
        if not last:
            x = np.moveaxis(x, axis, -1)
            whole = None if whole is None else np.moveaxis(whole, axis, -1)
        if x.size == 0:
            z = np.zeros(x.shape)
            aux = {"dev": z, "devmean": z[..., :1], "K": np.asarray(float(x.shape[-1]))}
            if op == "log_softmax":
                aux["lse"] = z[..., :1]
            return np.moveaxis(z, -1, axis), np.moveaxis(z, -1, axis), {
                k: (np.moveaxis(v, -1, axis) if v.ndim else v) for k, v in aux.items()}
        values, bound, aux = fn(x, whole, params)
        if last:
            return values, bound, aux
        back = {k: (np.moveaxis(v, -1, axis) if v.ndim else v) for k, v in aux.items()}
        return np.moveaxis(values, -1, axis), np.moveaxis(bound, -1, axis), back
    wrapped.__doc__ = fn.__doc__
    wrapped.__name__ = fn.__name__
    return wrapped


@_move
def softmax(x: np.ndarray, whole: np.ndarray | None, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``softmax(x, axis)``; see the module docstring for the bound."""
    r = _rows(x, whole, params, with_lse=False)
    tiny = (r.K + 2) * _TINY
    positive = r.y > 0
    if positive.all():
        bound = _SOFTMAX_BOUND.compute({"y": r.y, "rel": r.rel, "tiny": tiny}, x.shape)
    else:
        bound = np.where(positive, r.y * r.rel, 0.0)
        bound += tiny
    return r.y, bound, _aux(r)


@_move
def log_softmax(x: np.ndarray, whole: np.ndarray | None, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``log_softmax(x, axis)``; see the module docstring for the bound."""
    r = _rows(x, whole, params, with_lse=True)
    values = r.d - r.lse
    bound = U * np.abs(values) + U * r.dev + lse_error(r)
    aux = _aux(r)
    aux["lse"] = r.lse
    return values, bound, aux
