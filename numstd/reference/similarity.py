"""References for normalize, cosine_similarity, cosine_embedding_loss and triplet_margin_loss.

Notation per reduced vector of ``K`` elements: ``u = 2**-53``, ``d = ceil(log2 K)``; sums are
double-double pairwise sums (:func:`numstd.core.summation.pairwise_sum`, error ``<= DD_C d u^2``
times the sum of magnitudes), products of inputs formed exactly by :func:`~numstd.core.summation.two_prod`.

normalize (``p = 2``): ``s = sum x^2`` (exact products, double-double sum, rounded to a double:
relative ``u + DD_C d u^2``); ``n = sqrt(s)`` (relative ``u + (u + DD_C d u^2) / 2``); the clamp
``max(n, eps)`` is 1-Lipschitz, so it keeps the relative error of ``n`` (and is exact where
``eps`` wins); ``y = x / den`` rounds once.  ``p = 1``: ``s = sum |x|`` (exact terms), ``n = s``.
So ``|y - exact| <= NORM_C u |y|`` with ``NORM_C = 3.01``.  A zero row with ``eps = 0`` is 0/0 = NaN,
as in torch.  aux: ``K``, the length of the reduced axis, ``den``, the clamped norm (kept along dim), and
the parameters ``p`` and ``eps`` (for :attr:`numstd.ops.OpInfo.stored16_arith`).

cosine_similarity (torch >= 2.0): ``den_i = max(||x_i||, eps)`` as above (relative
``e = 2.01 u``); ``w12 = sum x1 x2`` in double-double from exact products; ``c = w12 / (den_1 den_2)``
with two roundings.  So ``|c - exact| <= (2 e + 2u) |c| + (DD_C d u^2 + u) mag``, with
``mag = sum |x1 x2| / (den_1 den_2)`` (``<= 1`` by Cauchy-Schwarz, ``>= |c|``): the condition of the
cosine near 0 is ``mag / |c|``.  aux: ``K``, ``mag`` and the clamped norms ``den1``, ``den2``.

cosine_embedding_loss: per row ``w12``, ``m_i = sum x_i^2 + 1e-12`` (double-double, rounded, plus one
rounding for the ``1e-12``), ``cos = w12 / sqrt(m_1 m_2)``: relative ``COS_C u = 5.01 u`` plus
``(DD_C d u^2 + u) mag_n`` as for cosine_similarity; ``l = 1 - cos`` or ``max(0, cos - margin)``
round once more (``u |l|``; the clamp is 1-Lipschitz).  The ``N`` losses (all ``>= 0``) are summed
in double-double (``+ |lo| + DD_C d u^2 sum l``), the mean divided by
:func:`~numstd.core.summation.dd_div_int`.  aux: ``K = D``, ``N`` (rows each output averages: 1
for ``"none"``) and ``mag``, ``mag_n + |margin|`` on target -1 rows, reduced like the loss.

triplet_margin_loss: ``t = fl(fl(a - b) + eps)`` per element (``|t - exact| <= delta = u (|a - b| + |t|)``);
``dist = ||t||_p``: the norm is 1-Lipschitz in every p-norm and ``||delta||_p <= sum delta``, so the
computed ``t`` costs ``sum delta``; evaluating ``||t||_p`` costs ``(2u + DD_C d u^2) dist`` for p = 1, 2
and ``u (4 + |ln s| / p) dist`` otherwise (``|t|^p`` by ``pow``, within one ulp, and ``s^fl(1/p)``:
the rounded exponent errs by ``u / p``, i.e. ``|ln s| u / p`` relative).  ``swap``: ``min`` of two
distances errs by at most the larger error.  ``l = max(0, fl(fl(margin + d_pos) - d_neg))``:
``+ u (|margin + d_pos| + |l|)``.  Reduced like cosine_embedding_loss's.  aux: ``K = D``, ``N``, ``P = p``
and ``mag``, ``|margin| + d_pos + max(d_neg, d_swap)`` reduced like the loss.

Non-finite inputs give numpy's IEEE result with bound 0 where the value is not finite (and an
infinite bound for reductions over a non-finite term).
"""

from __future__ import annotations

import numpy as np

from ..core.summation import DD_C, DIV_C, U, dd_div_int, pairwise_sum, sum_depth, two_prod

__all__ = ["normalize", "cosine_similarity", "cosine_embedding_loss", "triplet_margin_loss", "NORM_C", "COS_C"]

#: relative bound, in units of u, of a normalised element (module docstring)
NORM_C = 3.01

#: relative bound, in units of u, of cosine_embedding_loss's cosine (module docstring)
COS_C = 5.01


def _last(a: np.ndarray, dim: int) -> np.ndarray:
    return np.moveaxis(np.asarray(a, dtype=np.float64), dim, -1)


def _dot_dd(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``sum a b`` over the last axis: (value, ``sum |a b|``, depth), the value within
    ``DD_C depth u^2 sum |a b| + u |value|`` (exact products, double-double sum, one final rounding)."""
    p, e = two_prod(a, b)
    hi, lo, depth = pairwise_sum(p, -1, lo=e)
    return hi + lo, np.sum(np.abs(p), axis=-1), depth


def _den(x: np.ndarray, p: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``max(||x||_p, eps)`` over the last axis (keepdims) and its relative error bound."""
    K = x.shape[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        if p == 1.0:
            hi, lo, depth = pairwise_sum(np.abs(x), -1)
            n = hi + lo
            rel = U + DD_C * depth * U * U
        else:
            s, _, depth = _dot_dd(x, x)
            n = np.sqrt(s)
            rel = 2.01 * U + DD_C * depth * U * U
    return np.maximum(n, eps)[..., None], np.full(n.shape + (1,), rel if K else 0.0)


def normalize(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``normalize(input, p, dim, eps)``; see the module docstring."""
    x = np.asarray(arrays[0])
    dim = params["dim"] % x.ndim
    xl = _last(x, dim)
    den, _ = _den(xl, params["p"], params["eps"])
    with np.errstate(all="ignore"):
        y = xl / den
    bound = np.where(np.isfinite(y), NORM_C * U * np.abs(y), 0.0)
    # aux den: the clamped norm max(||x||_p, eps), kept along dim (broadcasts to the values): the
    # intermediate torch's 16-bit kernel stores (numstd.ops.similarity, OpInfo.stored)
    return (np.moveaxis(y, -1, dim), np.moveaxis(bound, -1, dim),
            {"K": np.asarray(float(xl.shape[-1])), "den": np.moveaxis(den, -1, dim),
             "p": np.asarray(float(params["p"])), "eps": np.asarray(float(params["eps"]))})


def cosine_similarity(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``cosine_similarity(x1, x2, dim, eps)``; see the module docstring."""
    x1 = np.asarray(arrays[0])
    dim = params["dim"] % x1.ndim
    a, b = _last(x1, dim), _last(arrays[1], dim)
    eps = params["eps"]
    d1, e1 = _den(a, 2.0, eps)
    d2, e2 = _den(b, 2.0, eps)
    with np.errstate(all="ignore"):
        w12, absw, depth = _dot_dd(a, b)
        dd = (d1 * d2)[..., 0]
        c = w12 / dd
        mag = absw / dd
        bound = (2 * (e1 + e2)[..., 0] + 3 * U) * np.abs(c) + (DD_C * depth * U * U + U) * mag
    bound = np.where(np.isfinite(c), bound, 0.0)
    # aux den1, den2: the clamped norms max(||x_i||, eps), one per output (the arith16 models' subnormal terms)
    return c, bound, {"K": np.asarray(float(a.shape[-1])), "mag": np.where(np.isfinite(mag), mag, 0.0),
                      "den1": d1[..., 0], "den2": d2[..., 0]}


def _reduce(loss: np.ndarray, per: np.ndarray, mag: np.ndarray, reduction: str, aux: dict
            ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Row losses ``loss >= 0`` (each within ``per``) reduced in double-double; ``mag`` reduced alike."""
    if reduction == "none":
        return loss, per, dict(aux, N=np.asarray(1.0), mag=mag)
    flat, k = loss.reshape(-1), loss.size
    div = k if reduction == "mean" else 1
    aux = dict(aux, N=np.asarray(float(max(k, 1))), mag=np.asarray(float(np.sum(mag)) / div if div else 0.0))
    if k == 0:
        return np.asarray(0.0), np.asarray(0.0), aux
    if not np.all(np.isfinite(flat)):
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(flat) / div), np.asarray(np.inf), aux
    hi, lo, depth = pairwise_sum(flat, -1)
    spread = DD_C * depth * U * U * float(np.sum(flat)) + float(np.sum(per))
    if div == 1:
        return np.asarray(hi), np.asarray(np.abs(lo) + spread), aux
    qh, ql = dd_div_int(np.asarray(hi), np.asarray(lo), div)
    return np.asarray(qh), np.asarray(np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / div), aux


def cosine_embedding_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``cosine_embedding_loss(input1, input2, target, margin, reduction)``; see the module docstring."""
    a = np.asarray(arrays[0], dtype=np.float64)
    b = np.asarray(arrays[1], dtype=np.float64)
    y = np.asarray(arrays[2], dtype=np.float64)
    a2, b2 = np.atleast_2d(a), np.atleast_2d(b)
    margin = float(params["margin"])
    with np.errstate(all="ignore"):
        w12, absw, depth = _dot_dd(a2, b2)
        m1 = _dot_dd(a2, a2)[0] + 1e-12
        m2 = _dot_dd(b2, b2)[0] + 1e-12
        den = np.sqrt(m1 * m2)
        cos = w12 / den
        magn = absw / den
        e_cos = COS_C * U * np.abs(cos) + (DD_C * depth * U * U + U) * magn
        yy = y.reshape(-1)
        loss = np.where(yy == 1, 1.0 - cos, np.maximum(cos - margin, 0.0))
        per = e_cos + U * np.abs(loss)
        mag = magn + np.where(yy == 1, 0.0, abs(margin))
    per = np.where(np.isfinite(loss), per, 0.0)
    aux = {"K": np.asarray(float(a2.shape[-1]))}
    if a.ndim == 1 and params["reduction"] == "none":
        return loss[0], per[0], dict(aux, N=np.asarray(1.0), mag=mag[0])
    return _reduce(loss, per, mag, params["reduction"], aux)


def _dist(x: np.ndarray, y: np.ndarray, p: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``pairwise_distance``: ``||x - y + eps||_p`` over the last axis and its error bound."""
    with np.errstate(all="ignore"):
        diff = x - y
        t = diff + eps
        delta = np.sum(U * (np.abs(diff) + np.abs(t)), axis=-1)
        depth = sum_depth(x.shape[-1])
        if p == 1.0:
            hi, lo, _ = pairwise_sum(np.abs(t), -1)
            d = hi + lo
            rel = 2 * U + DD_C * depth * U * U
        elif p == 2.0:
            s, _, _ = _dot_dd(t, t)
            d = np.sqrt(s)
            rel = 2.01 * U + DD_C * depth * U * U
        else:
            hi, lo, _ = pairwise_sum(np.abs(t) ** p, -1)
            s = hi + lo
            d = s ** (1.0 / p)
            rel = U * (4.0 + np.abs(np.log(np.where(s > 0, s, 1.0))) / p) + DD_C * depth * U * U
    return d, delta + rel * d


def triplet_margin_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction)``."""
    a, pos, neg = (np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in arrays)
    p, eps, margin = params["p"], params["eps"], float(params["margin"])
    d_pos, e_pos = _dist(a, pos, p, eps)
    d_neg, e_neg = _dist(a, neg, p, eps)
    big = d_neg
    if params["swap"]:
        d_sw, e_sw = _dist(pos, neg, p, eps)
        big = np.maximum(d_neg, d_sw)
        d_neg, e_neg = np.minimum(d_neg, d_sw), np.maximum(e_neg, e_sw)
    with np.errstate(all="ignore"):
        first = margin + d_pos
        loss = np.maximum(first - d_neg, 0.0)
        per = e_pos + e_neg + U * (np.abs(first) + np.abs(loss))
        mag = abs(margin) + d_pos + big
    per = np.where(np.isfinite(loss), per, 0.0)
    aux = {"K": np.asarray(float(a.shape[-1])), "P": np.asarray(float(p))}
    if np.ndim(arrays[0]) == 1 and params["reduction"] == "none":
        return loss[0], per[0], dict(aux, N=np.asarray(1.0), mag=mag[0])
    return _reduce(loss, per, mag, params["reduction"], aux)
