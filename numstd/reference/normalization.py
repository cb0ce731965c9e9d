"""References for layer_norm and rms_norm over the last axis: two-pass, double-double row sums.

Notation per row of ``K`` elements: ``u = 2**-53``, ``d = ceil(log2 K)``, ``S1 = sum |x|``; a hat
marks a computed quantity.  Every double-double sum is bounded as in
:mod:`numstd.reference.summation` (``DD_C d u^2`` times the sum of magnitudes).

layer_norm (two passes, Higham 2002 §1.9 and §4.2 — no cancellation in the variance):

1. ``mu = (mh, ml)``: double-double sum / K (:func:`~numstd.reference.summation.dd_div_int`),
   ``e_mu = DD_C d u^2 S1 / K + DIV_C u^2 |mh|`` (``DIV_C = 5``).
2. ``dev_j = fl(fl(x_j - mh) - ml)``: ``|dev_j - (x_j - mu)| <= delta_j = 2.01 u |dev_j| + u^2 |mh| + e_mu``.
3. ``V = (sum_j dev_j^2) / K`` in double-double, rounded: relative error ``<= 2u + DD_C d u^2 + DIV_C u^2``
   w.r.t. the computed ``dev``, plus ``e_V' = sum_j delta_j (2|dev_j| + delta_j) / K`` from
   ``dev``'s own error: ``e_V = (2u + DD_C d u^2 + DIV_C u^2) V + e_V'``.
4. ``W = fl(V + eps)`` (``+ u W``), ``sigma = sqrt(W)`` (correctly rounded, ``+ u sigma``):
   ``e_sigma = u sigma + (u W + e_V) / sigma`` (as ``|sqrt(a) - sqrt(b)| <= |a - b| / sqrt(a)``).
5. ``xhat_j = fl(dev_j / sigma)``:
   ``|xhat_j - exact| <= u |xhat_j| + delta_j / sigma + (|dev_j| + delta_j) e_sigma / (sigma (sigma - e_sigma))``.
6. ``y_j = fl(fl(xhat_j w_j) + b_j)``: ``|y_j - exact| <= |w_j| |xhat_j - exact| + u |xhat_j w_j| + u |y_j|``.

rms_norm: ``q = mean(x^2)`` (each square relative error ``<= u``, sum and division as above:
``e_q = (2u + DD_C d u^2 + DIV_C u^2) q``), ``W = fl(q + eps)``, ``rms = sqrt(W)`` with ``e_rms`` as in
step 4, ``xhat_j = fl(x_j / rms)`` with ``|xhat_j - exact| <= u |xhat_j| + |x_j| e_rms / (rms (rms -
e_rms))``, ``y_j = fl(xhat_j w_j)`` (``+ u |y_j|``).

When ``e_sigma >= sigma`` (a variance that is zero up to rounding and ``eps = 0``) the bound is
infinite; ``0/0`` gives NaN as in torch.

Long rows, in pieces (``check`` in bounded memory, :class:`~numstd.reference.RowPiece`): every
element is computed from the row statistics alone (``mh, ml, e_mu, sigma, e_sigma`` / ``rms,
e_rms``), so a piece gets the bits of the whole row.  Rows of at most :data:`NORM_BLOCK` elements get
their statistics as above; longer rows are cut into aligned blocks of ``NORM_BLOCK`` elements (fixed
by ``K`` alone), each summed by the pairwise double-double tree and the block sums by a second one
with their low parts (as ``sum`` does), so ``d = ceil(log2 NORM_BLOCK) + ceil(log2 nb)`` in every
bound above; ``S1`` and the ``e_V'`` sum are float64 sums of the blocks' sums.

Channel norms (group_norm, instance_norm, batch_norm with ``training=True``): the input is
rearranged losslessly into rows of ``K`` elements, one per normalised group (group_norm: the
``C/G * prod(spatial)`` values of ``(n, g)``; instance_norm: the spatial values of ``(n, c)``;
batch_norm: the ``N * prod(spatial)`` values of channel ``c``), layer_norm's steps 1-5 (without
affine) give ``xhat`` and its bound per element, and step 6 applies the per-channel ``weight[c]``,
``bias[c]``.  The aux row statistics (``mean``, ``sigma``, ``absmean``) are spread back to every
element of their group.

batch_norm with ``training=False`` (running statistics ``m``, ``v``, exact inputs):
``dev = fl(x - m)`` (``+ u |dev|``), ``W = fl(v + eps)`` (``+ u W``), ``sigma = sqrt(W)``
(``e_sigma = u sigma + u W / sigma``), then steps 5-6 with ``delta = u |dev|``.  aux ``K`` is 1
(no statistic is reduced) and ``absmean = |m|``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from typing import Any, Callable

from ..core.summation import DD_C, DIV_C, U, dd_div_int, pairwise_sum, sum_depth
from ._rows import by_row_groups, cached_stats

__all__ = ["layer_norm", "rms_norm", "group_norm", "instance_norm", "batch_norm", "NORM_BLOCK"]

#: elements per block of a long row (a constant: the row statistics depend only on the row)
NORM_BLOCK = 1 << 16


def _mean_dd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    hi, lo, depth = pairwise_sum(a, -1)
    mh, ml = dd_div_int(hi, lo, a.shape[-1])
    return mh[..., None], ml[..., None], depth


def _inverse_term(sigma: np.ndarray, e_sigma: np.ndarray) -> np.ndarray:
    """``e_sigma / (sigma (sigma - e_sigma))``; inf when ``sigma - e_sigma <= 0``."""
    gap = sigma - e_sigma
    return np.where(gap > 0, e_sigma / (sigma * np.where(gap > 0, gap, 1.0)), np.inf)


def _affine(xhat: np.ndarray, err: np.ndarray, w: np.ndarray | None, b: np.ndarray | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """y = xhat * w + b with its bound; returns y, bound, |w|, |b|."""
    absw = np.ones(xhat.shape[-1]) if w is None else np.abs(w)
    absb = np.zeros(xhat.shape[-1]) if b is None else np.abs(b)
    y = xhat if w is None else xhat * w
    prod = np.abs(y)
    if b is not None:
        y = y + b
    bound = absw * err + (0.0 if w is None else U * prod) + (0.0 if b is None else U * np.abs(y))
    return y, bound, absw, absb


def _f64(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else np.asarray(a, dtype=np.float64)


def _ln_stats(x: np.ndarray, eps: float, keep: bool = False) -> tuple:
    """layer_norm's row statistics ``(mh, ml, e_mu, sigma, e_sigma, S1)`` of whole rows ``x`` (float64,
    keepdims; module docstring steps 1-4); with ``keep``, ``(stats, (|x|, dev, |dev|, delta))``."""
    K = x.shape[-1]
    absx = np.abs(x)
    S1 = np.sum(absx, axis=-1, keepdims=True)
    mh, ml, depth = _mean_dd(x)
    e_mu = DD_C * depth * U * U * S1 / K + DIV_C * U * U * np.abs(mh)
    dev, adev, delta = _ln_dev(x, mh, ml, e_mu)
    vh, vl, _ = _mean_dd(dev * dev)
    st = (mh, ml, e_mu) + _ln_sigma(vh + vl, np.sum(delta * (2 * adev + delta), axis=-1, keepdims=True) / K,
                                    depth, eps) + (S1,)
    return (st, (absx, dev, adev, delta)) if keep else st


def _ln_dev(x: np.ndarray, mh: np.ndarray, ml: np.ndarray, e_mu: np.ndarray) -> tuple:
    """Step 2: ``dev``, ``|dev|`` and ``delta`` (elementwise given the row's mean)."""
    dev = (x - mh) - ml
    adev = np.abs(dev)
    return dev, adev, 2.01 * U * adev + U * U * np.abs(mh) + e_mu


def _ln_sigma(V: np.ndarray, ev: np.ndarray, depth: int, eps: float) -> tuple:
    """Steps 3-4: ``(sigma, e_sigma)`` from the variance ``V`` and ``e_V' = ev``."""
    e_V = (2 * U + DD_C * depth * U * U + DIV_C * U * U) * V + ev
    W = V + eps
    sigma = np.sqrt(W)
    e_sigma = U * sigma + np.where(sigma > 0, (U * W + e_V) / np.where(sigma > 0, sigma, 1.0), np.inf)
    return sigma, e_sigma


def _blocked_dd(x: np.ndarray, f: Callable[[np.ndarray], np.ndarray], extra: Callable[[np.ndarray], Any] | None = None
                ) -> tuple:
    """Double-double row sums of ``f(block)`` over aligned blocks of :data:`NORM_BLOCK` of the rows
    (last axis) of ``x`` (one block widened at a time), the blocks' sums by a second pairwise tree;
    with ``extra``, also the float64 sum over the blocks of ``extra(block)`` (a row sum, keepdims)."""
    K = x.shape[-1]
    nb = -(-K // NORM_BLOCK)
    lead = x.shape[:-1]
    ph, pl, pe = np.zeros(lead + (nb,)), np.zeros(lead + (nb,)), np.zeros(lead + (nb,))
    for k in range(nb):
        blk = np.asarray(x[..., k * NORM_BLOCK:(k + 1) * NORM_BLOCK], dtype=np.float64)
        ph[..., k], pl[..., k], _ = pairwise_sum(f(blk), -1)
        if extra is not None:
            pe[..., k] = extra(blk)[..., 0]
    hi, lo, _ = pairwise_sum(ph, -1, pl)
    return hi, lo, sum_depth(NORM_BLOCK) + sum_depth(nb), np.sum(pe, axis=-1, keepdims=True)


def _ln_row_stats(x: np.ndarray, eps: float) -> tuple:
    """:func:`_ln_stats` of whole rows ``x`` (any format, any strides) in bounded memory (module docstring)."""
    K = x.shape[-1]
    if K <= NORM_BLOCK:
        return by_row_groups(x, lambda rows: _ln_stats(np.asarray(rows, dtype=np.float64), eps), NORM_BLOCK)
    hi, lo, depth, S1 = _blocked_dd(x, lambda b: b, lambda b: np.sum(np.abs(b), axis=-1, keepdims=True))
    mh, ml = (v[..., None] for v in dd_div_int(hi, lo, K))
    e_mu = DD_C * depth * U * U * S1 / K + DIV_C * U * U * np.abs(mh)

    def squares(b: np.ndarray) -> np.ndarray:
        dev = _ln_dev(b, mh, ml, e_mu)[0]
        return dev * dev

    def ev(b: np.ndarray) -> np.ndarray:
        _, adev, delta = _ln_dev(b, mh, ml, e_mu)
        return np.sum(delta * (2 * adev + delta), axis=-1, keepdims=True)

    h2, l2, _, evs = _blocked_dd(x, squares, ev)
    vh, vl = dd_div_int(h2, l2, K)
    return (mh, ml, e_mu) + _ln_sigma((vh + vl)[..., None], evs / K, depth, eps) + (S1,)


def _ln_elements(x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, st: tuple, K: int,
                 parts: tuple | None = None, resolution: Any = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Steps 5-6 for the elements ``x`` (float64; whole rows or a piece, with its ``w``, ``b``) of rows
    whose statistics are ``st`` (``parts``: ``|x|, dev, |dev|, delta`` where already computed)."""
    mh, ml, e_mu, sigma, e_sigma, S1 = st
    absx, dev, adev, delta = parts if parts is not None else (np.abs(x),) + _ln_dev(x, mh, ml, e_mu)
    xhat = dev / sigma
    err = U * np.abs(xhat) + delta / sigma + (adev + delta) * _inverse_term(sigma, e_sigma)
    y, bound, absw, absb = _affine(xhat, err, w, b)
    aux = {"mean": mh, "sigma": sigma, "xhat": xhat, "absw": absw, "absb": absb, "absx": absx,
           "absmean": S1 / K, "K": np.asarray(float(K))}
    aux.update(stored_mean_shift(x, xhat, mh + ml, sigma, S1, K, absw, resolution=resolution))
    return y, bound, aux


def stored_mean_shift(x: np.ndarray, xhat: np.ndarray, mu: np.ndarray, sigma: np.ndarray, S1: np.ndarray, K: int,
                      absw: np.ndarray, resolution: Any = None) -> dict:
    """aux ``shift16``, ``xhat16``: the exact effect of a 16-bit kernel's stored row mean (float64).

    XLA CPU's 16-bit layer norm (``jnp`` on 16-bit arrays; numstd.corpus.normalization's
    ``xla-arith16``) stores the row mean ``m16 = RN16(RN32(s32 · RN32(1/K)))`` and normalises
    ``x − m16`` by ``sqrt(mean((x − m16)²) + eps) = sqrt(sigma² + delta²)``, ``delta = mu − m16``:
    every element of the row moves by ``xhat'(m16) − xhat`` with ``xhat'(m) = (x − m) / sqrt(sigma² +
    (mu − m)²)``, up to ``|mu|·u16/sigma`` (100 u16 on rows with |mu|/sigma = 100).  The reference knows
    the inputs, so it computes that shift exactly instead of bounding it: ``shift16 = |w|·max_m
    |xhat'(m) − xhat|`` and ``xhat16 = max_m |xhat'(m)|`` over the values ``m`` that the fp32 mean can
    round to (``RN16`` of ``mu`` and of ``mu ± e32``, ``e32 = 4 sqrt(K) 2^-24 S1/K + 2^-23 |mu|``, about 12
    standard deviations of an fp32 row sum's error; RN16 is monotone, so these are all the
    candidates while ``e32`` is below the 16-bit spacing).  ``resolution`` is the 16-bit output format
    (``check``'s resolution); for any other output the kernel stores no 16-bit mean: ``shift16 = 0``,
    ``xhat16 = |xhat|``.
    """
    from ..core.formats import get_format, round_to

    fmt = None if resolution is None else get_format(resolution)
    if fmt is None or fmt.p >= 24 or not np.size(x):
        return {"shift16": np.zeros(np.shape(xhat)), "xhat16": np.abs(xhat)}
    with np.errstate(all="ignore"):
        e32 = 4.0 * np.sqrt(K) * 2.0 ** -24 * S1 / K + 2.0 ** -23 * np.abs(mu)
        s2 = sigma * sigma
        shift = np.zeros(np.shape(xhat))
        mag = np.abs(xhat)
        for c in (mu - e32, mu, mu + e32):
            m = np.asarray(round_to(np.asarray(c, dtype=np.float64), fmt), dtype=np.float64)
            xh = (x - m) / np.sqrt(s2 + (mu - m) ** 2)
            shift = np.maximum(shift, np.abs(xh - xhat))
            mag = np.maximum(mag, np.abs(xh))
    return {"shift16": absw * shift, "xhat16": mag}


def _kernel16_stats(x: np.ndarray, eps: float, fmt: Any, centred: bool) -> tuple[np.ndarray, np.ndarray]:
    """The per-row values XLA CPU's 16-bit layer_norm / rms_norm stores (numstd.corpus.normalization's
    ``xla-arith16``): the mean ``m16`` (0 for rms_norm) and ``r16 = RN16(rsqrt(RN16(v16 + RN16(eps))))``,
    from whole rows ``x`` (float64, keepdims results); fp32 sums in numpy's order (a different order
    changes them only where RN16 of the fp32 sum is a tie-break)."""
    from ..core.formats import round_to

    f32 = np.float32
    q = lambda a: np.asarray(round_to(np.asarray(a, dtype=np.float64), fmt), dtype=np.float64)  # noqa: E731
    K = max(x.shape[-1], 1)
    inv = f32(1.0) / f32(K)
    xs = x.astype(f32)
    m16 = q(np.sum(xs, axis=-1, keepdims=True, dtype=f32) * inv) if centred else np.zeros(x.shape[:-1] + (1,))
    d = q(x - m16) if centred else x
    sq = q(d * d) if fmt.name == "float16" else d * d
    v16 = q(np.sum(sq.astype(f32), axis=-1, keepdims=True, dtype=f32) * inv)
    r16 = q(1.0 / np.sqrt(q(v16 + q(eps))))
    return m16, r16


def _stored16(values: np.ndarray, x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float,
              resolution: Any, centred: bool) -> np.ndarray:
    """aux ``stored16``: the float64 result recomputed with the values a 16-bit XLA kernel stores
    (``RN16(RN16(x − m16)·r16)·w + b``; rms_norm ``RN16(x·r16)·w``), for the bias test's ``stored_shift``
    (:attr:`numstd.ops.OpInfo.stored`): one stored ``r16`` (and ``m16``) per row moves every element of the
    row the same way.  ``values`` for any other output format, and on rows whose stored statistics
    overflow (fp16 squares above 256²: the kernel's output is then wrong, not shifted)."""
    from ..core.formats import get_format

    fmt = None if resolution is None else get_format(resolution)
    if fmt is None or fmt.p >= 24 or not np.size(x):
        return values
    from ..core.formats import round_to

    with np.errstate(all="ignore"):
        m16, r16 = _kernel16_stats(np.asarray(x, dtype=np.float64), float(eps), fmt, centred)
        q = lambda a: np.asarray(round_to(np.asarray(a, dtype=np.float64), fmt), dtype=np.float64)  # noqa: E731
        # the stored d = RN16(x − m16) and x̂ = RN16(d · r16): inputs on a 16-bit grid times one r16 per row
        # round the same way along a row (smallvar rows near 1: −0.2 ulp in fp16, measured), so they are
        # systematic like r16 itself
        y = q((q(x - m16) if centred else x) * r16)
        if w is not None:
            y = y * w
        if b is not None:
            y = y + b
        ok = np.isfinite(r16) & (r16 > 0) & np.isfinite(m16)
        return np.where(ok & np.isfinite(y), y, values)


def layer_norm(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``layer_norm(x, weight, bias, eps)``; see the module docstring for the bound."""
    x, w, b = (_f64(a) for a in arrays)
    eps = params["eps"]
    res = params.get("_resolution")
    piece = params.get("_piece")
    if piece is not None:
        whole = np.asarray(piece.whole[0])
        st = cached_stats(params, "layer_norm rows", lambda: _ln_row_stats(whole, eps))
        y, bound, aux = _ln_elements(x, w, b, st, whole.shape[-1], resolution=res)
        return y, bound, {**aux, "stored16": y}  # a piece of a row: no stored-shift allowance
    K = x.shape[-1]
    if x.size == 0:
        z = np.zeros(x.shape)
        one = z[..., :1]
        return z, z, {"mean": one, "sigma": one, "xhat": z, "absw": np.ones(K), "absb": np.zeros(K),
                      "absx": z, "absmean": one, "K": np.asarray(float(K)), "shift16": z, "xhat16": z, "stored16": z}
    if K > NORM_BLOCK:
        y, bound, aux = _ln_elements(x, w, b, _ln_row_stats(x, eps), K, resolution=res)
    else:
        st, parts = _ln_stats(x, eps, keep=True)
        y, bound, aux = _ln_elements(x, w, b, st, K, parts, resolution=res)
    return y, bound, {**aux, "stored16": _stored16(y, x, w, b, eps, res, True)}


def _rms_stats(q: np.ndarray, depth: int, eps: float) -> tuple:
    """``(rms, e_rms)`` from ``q = mean(x^2)``."""
    e_q = (2 * U + DD_C * depth * U * U + DIV_C * U * U) * q
    W = q + eps
    rms = np.sqrt(W)
    e_rms = U * rms + np.where(rms > 0, (U * W + e_q) / np.where(rms > 0, rms, 1.0), np.inf)
    return rms, e_rms


def _rms_row_stats(x: np.ndarray, eps: float) -> tuple:
    """``(rms, e_rms)`` of whole rows ``x`` (any format, any strides) in bounded memory."""
    K = x.shape[-1]
    if K <= NORM_BLOCK:
        def whole(rows: np.ndarray) -> tuple:
            r = np.asarray(rows, dtype=np.float64)
            qh, ql, depth = _mean_dd(r * r)
            return _rms_stats(qh + ql, depth, eps)

        return by_row_groups(x, whole, NORM_BLOCK)
    hi, lo, depth, _ = _blocked_dd(x, lambda b: b * b)
    qh, ql = dd_div_int(hi, lo, K)
    return _rms_stats((qh + ql)[..., None], depth, eps)


def _rms_elements(x: np.ndarray, w: np.ndarray | None, st: tuple, K: int) -> tuple[np.ndarray, np.ndarray, dict]:
    rms, e_rms = st
    xhat = x / rms
    err = U * np.abs(xhat) + np.abs(x) * _inverse_term(rms, e_rms)
    y, bound, absw, _ = _affine(xhat, err, w, None)
    return y, bound, {"rms": rms, "xhat": xhat, "absw": absw, "K": np.asarray(float(K))}


def rms_norm(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``rms_norm(x, weight, eps)``; see the module docstring for the bound."""
    x, w = (_f64(a) for a in arrays)
    eps = params["eps"]
    res = params.get("_resolution")
    piece = params.get("_piece")
    if piece is not None:
        whole = np.asarray(piece.whole[0])
        st = cached_stats(params, "rms_norm rows", lambda: _rms_row_stats(whole, eps))
        y, bound, aux = _rms_elements(x, w, st, whole.shape[-1])
        return y, bound, {**aux, "stored16": y}  # a piece of a row: no stored-shift allowance
    K = x.shape[-1]
    if x.size == 0:
        z = np.zeros(x.shape)
        return z, z, {"rms": z[..., :1], "xhat": z, "absw": np.ones(K), "K": np.asarray(float(K)), "stored16": z}
    if K > NORM_BLOCK:
        y, bound, aux = _rms_elements(x, w, _rms_row_stats(x, eps), K)
    else:
        qh, ql, depth = _mean_dd(x * x)
        y, bound, aux = _rms_elements(x, w, _rms_stats(qh + ql, depth, eps), K)
    return y, bound, {**aux, "stored16": _stored16(y, x, w, None, eps, res, False)}


# ---------------------------------------------------------------------------------------------
# channel norms: layer_norm's statistics over rearranged rows, per-channel affine
# ---------------------------------------------------------------------------------------------


def _channel_affine(xhat: np.ndarray, err: np.ndarray, w: np.ndarray | None, b: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step 6 with ``weight``/``bias`` along axis 1; returns y, bound, |w|, |b| (broadcastable)."""
    shape = (1, xhat.shape[1]) + (1,) * (xhat.ndim - 2)
    wc = None if w is None else w.reshape(shape)
    bc = None if b is None else b.reshape(shape)
    absw = np.ones(shape) if wc is None else np.abs(wc)
    absb = np.zeros(shape) if bc is None else np.abs(bc)
    y = xhat if wc is None else xhat * wc
    prod = np.abs(y)
    if bc is not None:
        y = y + bc
    bound = absw * err + (0.0 if wc is None else U * prod) + (0.0 if bc is None else U * np.abs(y))
    return y, bound, absw, absb


def _rows_of(op: str, x: np.ndarray, params: dict) -> tuple[np.ndarray, Any]:
    """``x`` as rows of one normalised group each, and the function that puts row data back."""
    n, c = x.shape[:2]
    if op == "batch_norm":
        t = np.moveaxis(x, 1, 0)
        back_shape = t.shape
        return t.reshape(c, -1), lambda r: np.moveaxis(np.broadcast_to(r, (c, t[0].size)).reshape(back_shape), 0, 1)
    groups = n * (params["num_groups"] if op == "group_norm" else c)
    rows = x.reshape(groups, -1)
    return rows, lambda r: np.broadcast_to(r, rows.shape).reshape(x.shape)


def _channel_norm(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    x, w, b = (_f64(a) for a in arrays)
    if x.size == 0:
        z = np.zeros(x.shape)
        _, _, absw, absb = _channel_affine(z, z, w, b)
        return z, z, {"mean": z, "sigma": z, "xhat": z, "absw": absw, "absb": absb, "absx": z, "absmean": z,
                      "K": np.asarray(0.0)}
    rows, back = _rows_of(op, x, params)
    K = rows.shape[-1]
    xhat, err, aux = layer_norm("layer_norm", [rows, None, None], params)
    y, bound, absw, absb = _channel_affine(back(xhat), back(err), w, b)
    out = {"mean": back(aux["mean"]), "sigma": back(aux["sigma"]), "xhat": back(xhat), "absw": absw, "absb": absb,
           "absx": np.abs(x), "absmean": back(aux["absmean"]), "K": np.asarray(float(K))}
    return y, bound, out


def group_norm(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``group_norm(x, weight, bias, num_groups, eps)`` (module docstring)."""
    return _channel_norm("group_norm", arrays, params)


def instance_norm(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``instance_norm(x, weight, bias, eps)`` (module docstring)."""
    return _channel_norm("instance_norm", arrays, params)


def batch_norm(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``batch_norm(x, running_mean, running_var, weight, bias, training, eps)``."""
    x, rm, rv, w, b = (_f64(a) for a in arrays)
    if params["training"]:
        return _channel_norm("batch_norm", [x, w, b], params)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    m, v = rm.reshape(shape), rv.reshape(shape)
    dev = x - m
    adev = np.abs(dev)
    W = v + params["eps"]
    sigma = np.sqrt(W)
    e_sigma = U * sigma + np.where(sigma > 0, U * W / np.where(sigma > 0, sigma, 1.0), np.inf)
    xhat = dev / sigma
    delta = U * adev
    err = U * np.abs(xhat) + delta / sigma + (adev + delta) * _inverse_term(sigma, e_sigma)
    y, bound, absw, absb = _channel_affine(xhat, err, w, b)
    aux = {"mean": m, "sigma": sigma, "xhat": xhat, "absw": absw, "absb": absb, "absx": np.abs(x),
           "absmean": np.abs(m), "K": np.asarray(1.0)}
    return y, bound, aux
