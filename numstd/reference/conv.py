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
from .contraction import CACHE_KEY, RESOLUTION_KEY, ROW0_KEY, ROW_BLOCK, _float32_exact, dot

__all__ = ["conv", "conv_transpose", "BLOCK_ELEMENTS"]

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
    xd, wt, g, terms = transposed_problem(np.asarray(x_in, dtype=np.float64), np.asarray(w_in, dtype=np.float64),
                                          params)
    return _core(x_in, w_in, b_in, xd, wt, g, terms, params)


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
    shape = (N,) + g.out_size + (g.c_out,)

    def out(t: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(t.reshape(shape), -1, 1))

    return out(values), out(bound), {"absdot": out(absdot), "K": np.asarray(float(terms))}
