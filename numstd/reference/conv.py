"""References of ``conv`` and ``conv_transpose``: the implicit GEMM (im2col) through the contraction
reference :func:`dot`.

Every output element ``y[n, o, *i]`` is ``bias[o] + sum_k a_k w_k`` over the ``K = C_in/groups ×
prod(kernel)`` products of the rows of :func:`numstd.ops.conv.im2col` and one group's weight, so
per group the convolution is ``cols @ W_g.T + bias_g``, and :func:`numstd.reference.contraction.dot`
gives it with its proven bound (``gamma_{K+1} |cols| |W_g| + ...``, refined by an error-free
split and double-double sums where the float32 ULP of the result could see the float64 error).
Padding zeros enter the rows as exact zero products.

Memory: the im2col rows of a block of at most ``max(ROW_BLOCK, 2**20 / K)`` output rows (a
multiple of :data:`~numstd.reference.contraction.ROW_BLOCK`) exist at a time, never the whole
im2col matrix.

Chunk invariance: the rows are numbered ``n × P + p`` from the first image of the whole call
(``check`` splits the batch axis and passes the first image's row number), and every BLAS call
goes through :func:`~numstd.reference.contraction.padded_matmul` with those absolute numbers, so
each element has the same bits whatever the chunking.
"""

from __future__ import annotations

import numpy as np

from ..ops.conv import geometry, group_weight, im2col, pad_input, transposed_problem
from ..models import INPUT_ROUNDING_KEY
from .contraction import CACHE_KEY, RESOLUTION_KEY, ROW0_KEY, ROW_BLOCK, _float32_exact, dot
from .rounded_operands import TERMS, rounding_terms

__all__ = ["conv", "conv_transpose", "col2im16_terms", "BLOCK_ELEMENTS"]

BLOCK_ELEMENTS: int = 1 << 20
"""Most im2col elements (rows × K) one block holds (at least one ROW_BLOCK of rows)."""


def _group_operand(w_in: np.ndarray, w: np.ndarray, g, grp: int, exact32: bool, cache: dict | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(W_g, |W_g|)`` of one group as the GEMM's right operand (``|W_g|`` float32 where exact),
    kept in the call's ``cache`` so that every chunk of the batch uses the same arrays (and the
    contraction reference's operand facts of them are computed once)."""
    key = None
    if cache is not None:
        key = ("conv-weight", w_in.__array_interface__["data"][0], w_in.shape, w_in.strides, w_in.dtype.str, grp)
        if key in cache:
            return cache[key]
    wg = np.ascontiguousarray(group_weight(w, g, grp))
    awg = np.abs(wg)
    if exact32:
        awg = awg.astype(np.float32)
    if key is not None:
        cache[key] = (wg, awg)
    return wg, awg


def conv(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``conv(x, weight, bias)``: values, bound and aux ``absdot`` (an upper bound
    on ``|cols| @ |W_g| + |bias|``) and ``K``."""
    x_in, w_in, b_in = arrays
    g = geometry(x_in.shape, w_in.shape, params, op)
    return _core(x_in, w_in, b_in, np.asarray(x_in, dtype=np.float64), np.asarray(w_in, dtype=np.float64), g, g.K,
                 params)


def conv_transpose(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``conv_transpose(x, weight, bias)``: the stride-1 convolution of the zero-dilated
    input with the flipped, channel-swapped weight (:func:`numstd.ops.conv.transposed`; the
    inserted zeros are exact zero products), aux ``K`` the largest number of nonzero products."""
    x_in, w_in, b_in = arrays
    x64, w64 = np.asarray(x_in, dtype=np.float64), np.asarray(w_in, dtype=np.float64)
    xd, wt, g, terms = transposed_problem(x64, w64, params)
    values, bound, aux = _core(x_in, w_in, b_in, xd, wt, g, terms, params)
    s16, a16 = col2im16_terms(x64, w64, params)
    return values, bound, dict(aux, s16=s16, a16=a16)


def col2im16_terms(x: np.ndarray, w: np.ndarray, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """aux of the stored16 conv_transpose standards (docs/methodology.md §12): a col2im in a 16-bit
    format rounds every tap's channel sum ``P_j`` and every running sum ``S_k = P_1 + ... + P_k``
    after the first (``k >= 2``) to 16 bits, the taps added in kernel-index order
    (:func:`numstd.ops.conv.col2im_taps`).  Returns, per output element, ``s16 = sqrt(sum_j P_j^2 +
    sum_{k>=2} S_k^2)`` and ``a16 = sum_j |P_j| + sum_{k>=2} |S_k|`` (float64 sums of the exact
    products; the factor ``1 + 2^-7`` covers their float64 rounding and the second-order terms of
    the 16-bit roundings, ``u16 <= 2^-8``)."""
    from ..ops.conv import col2im_taps

    wide, crop, taps = col2im_taps(x.shape, w.shape, params)
    G = int(params["groups"])
    ci, co = w.shape[0] // G, w.shape[1]
    shape = (x.shape[0], G * co) + wide
    run, cnt = np.zeros(shape), np.zeros(shape[:1] + (1,) + wide, dtype=np.int32)
    sq, ab = np.zeros(shape), np.zeros(shape)
    for j, sl in taps:
        view = (slice(None), slice(None)) + sl
        part = np.concatenate([np.einsum("nc...,co->no...", x[:, grp * ci:(grp + 1) * ci],
                                         w[(slice(grp * ci, (grp + 1) * ci), slice(None)) + j]) for grp in range(G)],
                              axis=1)
        later = cnt[view] > 0  # (the first tap into a zero output is exact)
        new = run[view] + part
        sq[view] += part * part + np.where(later, new * new, 0.0)
        ab[view] += np.abs(part) + np.where(later, np.abs(new), 0.0)
        run[view] = new
        cnt[view] += 1
    out = (slice(None), slice(None)) + crop
    f = 1.0 + 2.0 ** -7
    return f * np.sqrt(sq[out]), f * ab[out]


def _core(x_in: np.ndarray, w_in: np.ndarray, b_in: np.ndarray | None, x: np.ndarray, w: np.ndarray, g,
          terms: int, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """The convolution of geometry ``g`` of float64 ``x`` and ``w`` (the inputs ``x_in``, ``w_in`` say
    whether ``|.|`` is exact in float32 and key the weight cache)."""
    exact32 = _float32_exact(x_in) and _float32_exact(w_in)
    xp = pad_input(x, g)
    b = None if b_in is None else np.asarray(b_in, dtype=np.float64)
    res = params.get(RESOLUTION_KEY)
    row0 = int(params.get(ROW0_KEY, 0))
    cache = params.get(CACHE_KEY)
    N, P, co = x_in.shape[0], g.positions, g.c_out // g.groups
    rows_total = N * P
    values = np.empty((rows_total, g.c_out))
    bound = np.empty_like(values)
    absdot = np.empty_like(values)
    rounding = params.get(INPUT_ROUNDING_KEY)  # the operands' rounding a TF32/autocast standard allows
    rterms = {n: np.empty_like(values) for n in TERMS} if rounding else {}
    step = max(ROW_BLOCK, (BLOCK_ELEMENTS // max(g.K, 1)) // ROW_BLOCK * ROW_BLOCK)
    edges = list(range(0, rows_total, step)) + [rows_total]
    for grp in range(g.groups):
        wg, awg = _group_operand(w_in, w, g, grp, exact32, cache)
        bg = None if b is None else b[grp * co:(grp + 1) * co]
        for lo, hi in zip(edges[:-1], edges[1:]):
            cols = im2col(xp, g, grp, np.arange(lo, hi))
            acols = np.abs(cols)
            if exact32:
                acols = acols.astype(np.float32)
            v, bd, ad = dot(cols, wg, bg, resolution=res or "float32", resolution_slack=res is not None,
                            absA=acols, absB=awg, row0=row0 + lo, cache=cache)
            sl = (slice(lo, hi), slice(grp * co, (grp + 1) * co))
            values[sl], bound[sl], absdot[sl] = v, bd, ad
            if rounding:  # (the im2col rows and the weight as the GEMM sees them: zero padding rounds to 0)
                for n, t in rounding_terms(cols, wg, bg, rounding, v, row0 + lo, res or "float32", cache).items():
                    rterms[n][sl] = t
    shape = (N,) + g.out_size + (g.c_out,)

    def out(t: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(t.reshape(shape), -1, 1))

    return (out(values), out(bound),
            {"absdot": out(absdot), "K": np.asarray(float(terms)), **{n: out(t) for n, t in rterms.items()}})
