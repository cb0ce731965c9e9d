"""References for matmul and linear: one BLAS product, made exact where float64 is not enough.

Three stages, each applied only where the previous one's bound is too large:

1. ``C = A @ B`` in float64 (one BLAS call) and ``|A| @ |B|``.  For any summation order of the
   BLAS, with or without FMA (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
   2002, eq. (3.5)):

       |C - AB| <= gamma_K |A||B| + K * 2**-1074,     gamma_K = K u / (1 - K u),  u = 2**-53

   (the last term covers products that underflow, possible only for float64 inputs).  An element is
   *flagged* when this bound exceeds ``2**-10`` of the float32 ulp of ``C`` (cancellation: the
   result is much smaller than ``|A||B|``).
2. The rows holding flagged elements: an Ozaki-type error-free split (Ozaki, Ogita, Oishi & Rump,
   "Error-free transformations of matrix multiplication by using fast routines of matrix
   multiplication and its applications", Numer. Algorithms 59, 2012) of those rows of ``A`` and of
   ``B``.  With ``c = ceil((53 + ceil(log2 K)) / 2)``, ``2**E_i > max_k |a_ik|`` and
   ``sigma_i = 2**(E_i + c)``, ``A1 = fl(fl(A + sigma) - sigma)`` holds integer multiples of
   ``g_i = 2**(E_i + c - 53)`` with ``|A1| <= 2**E_i`` and ``Ar = A - A1`` is exact with
   ``|Ar| <= g_i`` (Rump, Ogita & Oishi, "Accurate floating-point summation part I", SIAM J. Sci.
   Comput. 31(1), 2008, Lemma 3.3); likewise ``B1``, ``Br``, ``h_j`` per column.  Every partial
   sum of ``A1 @ B1`` is an integer multiple of ``g_i h_j`` of magnitude ``<= K 2**(106 - 2c) g_i
   h_j <= 2**53 g_i h_j``, so BLAS computes ``T1 = A1 @ B1`` *exactly* in any order.  Then
   ``T2 = fl(fl(A1 @ Br) + fl(Ar @ B))`` and ``(values, lo) = two_sum(T1, T2)``:

       |values - AB| <= |lo| + u|T2| + gamma_K (||A1_i||_1 h_j + g_i ||B_j||_1) + K 2**-1073

   For rows and columns without a large dynamic range that is about ``2**(c - 50)`` times the
   stage-1 bound (``2**-18`` for ``K = 2048``).  Three more BLAS calls on the flagged rows.
3. Elements still flagged (rows with a huge dynamic range, exact zeros): exact products
   (:func:`~numstd.reference.summation.two_prod`) summed in double-double (pairwise tree of depth
   ``d = ceil(log2 K)``): ``|values - AB| <= |lo| + DD_C d u^2 sum_k |a_ik b_kj| + K 2**-1070``.
   At most :data:`EXACT_PER_ROW` elements per row; beyond that the stage-2 bound stands.

A stage's result replaces the previous one only where its bound is smaller.  For ``linear`` the
bias is one more term of each dot product (``K + 1`` terms; aux ``K`` stays ``in_features``).

Cost: inputs without cancellation (e.g. uniform [0, 1)) need stage 1 only, two BLAS calls.  With
normal inputs about ``K u |A||B| / |C|`` decides: for ``K = 2048`` some 7 % of the elements of a
product are flagged, scattered over every row and column, so stage 2 runs on the whole matrix
(five BLAS calls in all; 2048^3 takes about 1 s on two cores against 0.35 s for stage 1).

Chunk invariance: callers (``numstd.check``) compute references in chunks of rows.  Every decision
above is taken per row, and every BLAS call goes through :func:`padded_matmul` (row count padded to
a multiple of 16, K in blocks of 256 added in order), with which OpenBLAS computes each element in
the same order whatever the chunk — multithreaded too (verified in ``tests/test_reference.py``;
another BLAS may not promise this).
"""

from __future__ import annotations

import math

from typing import Any

import numpy as np

from ..formats import get_format

from .summation import DD_C, U, pairwise_sum, two_prod, two_sum

__all__ = ["matmul", "linear", "dot", "dot_dd", "padded_matmul", "gamma", "FLAG_FRACTION", "EXACT_PER_ROW"]

FLAG_FRACTION: float = 2.0**-10
"""Elements whose bound exceeds this fraction of their float32 ulp are refined."""

EXACT_PER_ROW: int = 64
"""Most elements of one output row that stage 3 computes (the first ones flagged)."""

_ROW_QUANTUM = 16  # BLAS calls see row counts padded to a multiple of this (padded_matmul)
_K_BLOCK = 256  # and at most this many terms per dot product

_TINY = 2.0**-1074


def gamma(n: int | np.ndarray) -> float | np.ndarray:
    """Higham's ``gamma_n = n u / (1 - n u)`` for float64 (``u = 2**-53``)."""
    nu = np.asarray(n, dtype=np.float64) * U
    return nu / (1.0 - nu)


def padded_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` by BLAS in a fixed order: rows padded to a multiple of 16, K cut into blocks of 256.

    OpenBLAS chooses kernels and, with several threads, how to split K by problem size, so one
    element can come out differently depending on the rows computed with it.  With the row count a
    multiple of 16 and at most 256 terms per call (the block results added in order), every
    element is bit-identical whatever rows it is computed with (checked in the tests on random
    shapes).  Any order of the K products satisfies the same ``gamma_K`` bound.
    """
    m, k = a.shape[-2], a.shape[-1]
    pad = -m % _ROW_QUANTUM
    if pad:
        padded = np.zeros(a.shape[:-2] + (m + pad, k))
        padded[..., :m, :] = a
        a = padded
    out = np.matmul(a[..., :_K_BLOCK], b[..., :_K_BLOCK, :])
    for k0 in range(_K_BLOCK, k, _K_BLOCK):
        out += np.matmul(a[..., k0:k0 + _K_BLOCK], b[..., k0:k0 + _K_BLOCK, :])
    return out[..., :m, :] if pad else out


def _ulp_in(v: np.ndarray, resolution: Any) -> np.ndarray:
    from ..ulp import ulp

    return ulp(v, resolution)


#: private key under which :func:`numstd.reference.reference` passes ``resolution`` to the ops
RESOLUTION_KEY = "_resolution"


def _batch_index(arr: np.ndarray, idx: tuple) -> tuple:
    """Index into the batch axes of ``arr`` (right-aligned, broadcast) for a batch index ``idx``."""
    nb = arr.ndim - 2
    off = len(idx) - nb
    return tuple(0 if arr.shape[k] == 1 else idx[k + off] for k in range(nb))


def _ozaki(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Stage 2: ``(hi, lo, err)`` with ``|hi + lo - (a @ b + bias)| <= err``, ``lo`` the rounding
    error of ``hi``; None when the split would overflow or underflow.  Batch axes broadcast."""
    if bias is not None:
        a = np.concatenate([a, np.ones(a.shape[:-1] + (1,))], axis=-1)
        b = np.concatenate([b, np.broadcast_to(bias, b.shape[:-2] + (1, b.shape[-1]))], axis=-2)
    K = a.shape[-1]
    if a.size == 0 or b.size == 0:
        return None
    c = (53 + max(1, math.ceil(math.log2(K))) + 1) // 2
    ea = np.frexp(np.max(np.abs(a), axis=-1))[1].astype(np.int64)  # max_k |a_ik| < 2**ea_i
    eb = np.frexp(np.max(np.abs(b), axis=-2))[1].astype(np.int64)
    if ea.max() + c > 1023 or eb.max() + c > 1023 or ea.min() + eb.min() + 2 * c - 106 < -1074:
        return None
    sa = np.ldexp(1.0, ea + c)[..., :, None]
    a1 = a + sa
    a1 -= sa
    ar = a - a1
    sb = np.ldexp(1.0, eb + c)[..., None, :]
    b1 = b + sb
    b1 -= sb
    br = b - b1
    t1 = padded_matmul(a1, b1)  # exact
    del b1
    t2 = padded_matmul(a1, br)
    del br
    t2 += padded_matmul(ar, b)
    del ar
    hi, lo = two_sum(t1, t2)
    del t1
    err = np.abs(t2, out=t2)
    err *= U
    ga = np.ldexp(1.0, ea + c - 53)
    gb = np.ldexp(1.0, eb + c - 53)
    m = np.sum(np.abs(a1), axis=-1)[..., :, None] * gb[..., None, :]
    m += ga[..., :, None] * np.sum(np.abs(b), axis=-2)[..., None, :]
    m *= gamma(K)
    err += m
    err += K * 2.0 * _TINY
    return hi, lo, err


def _exact_dots(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, i: np.ndarray, j: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Stage 3 for the elements (i, j) of a @ b (+ bias): exact products, double-double sums."""
    K = a.shape[1]
    vals = np.empty(len(i))
    bnds = np.empty(len(i))
    step = max(1, (1 << 20) // max(K, 1))
    for s in range(0, len(i), step):
        ii, jj = i[s:s + step], j[s:s + step]
        p, e = two_prod(a[ii], b[:, jj].T)
        if bias is not None:
            p = np.concatenate([p, bias[jj][:, None]], axis=1)
            e = np.concatenate([e, np.zeros((len(jj), 1))], axis=1)
        hi, lo, depth = pairwise_sum(p, -1, lo=e)
        vals[s:s + step] = hi
        bnds[s:s + step] = (np.abs(lo) + DD_C * depth * U * U * np.sum(np.abs(p), axis=1)
                            + p.shape[1] * 16.0 * _TINY)
    return vals, bnds


def _refine(A: np.ndarray, B: np.ndarray, bias: np.ndarray | None, values: np.ndarray,
            bound: np.ndarray, flag: np.ndarray, slack: np.ndarray | None, resolution: Any = "float32") -> None:
    """Stages 2 and 3 on the flagged elements, updating values and bound in place.

    Every decision is taken per row (stage 2 on whole rows, the stage-3 cap per row), so a row's
    result does not depend on which other rows are computed with it.
    """
    for idx in np.ndindex(*values.shape[:-2]):
        f = flag[idx]
        if not f.any():
            continue
        a, b = A[_batch_index(A, idx)], B[_batch_index(B, idx)]
        v, bd = values[idx], bound[idx]
        rows = np.flatnonzero(f.any(axis=1))
        whole = len(rows) == a.shape[0]
        res = _ozaki(a if whole else a[rows], b, bias)
        if res is not None:
            new_v, new_b = res[0], np.abs(res[1]) + res[2]
            vs, bs, fs = (v, bd, f) if whole else (v[rows], bd[rows], f[rows])
            take = fs & (new_b < bs) & np.isfinite(new_v)
            np.copyto(vs, new_v, where=take)
            np.copyto(bs, new_b, where=take)
            if not whole:
                v[rows], bd[rows] = vs, bs
            f = f & _too_loose(v, bd, None if slack is None else slack[idx], resolution)
        f = f & (np.cumsum(f, axis=1) <= EXACT_PER_ROW)
        i, j = np.nonzero(f)
        if len(i) == 0:
            continue
        v3, b3 = _exact_dots(a, b, bias, i, j)
        take = (b3 < bd[i, j]) & np.isfinite(v3)
        v[i[take], j[take]] = v3[take]
        bd[i[take], j[take]] = b3[take]


def _too_loose(values: np.ndarray, bound: np.ndarray, slack: np.ndarray | None,
               resolution: Any = "float32") -> np.ndarray:
    limit = FLAG_FRACTION * _ulp_in(values, resolution)
    if slack is not None:
        limit = np.maximum(limit, slack)
    return (bound > limit) & np.isfinite(values) & np.isfinite(bound)


def dot(A: np.ndarray, B: np.ndarray, bias: np.ndarray | None = None,
        rel_slack: np.ndarray | None = None, resolution: Any = "float32",
        resolution_slack: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A @ B (+ bias)`` with a proven bound (module docstring).

    Parameters
    ----------
    A, B : numpy.ndarray of float64
        ``(..., m, K)`` and ``(..., K, n)``; batch axes broadcast as in ``numpy.matmul``.
    bias : numpy.ndarray of float64, optional
        ``(n,)``, added to every row.
    rel_slack : numpy.ndarray, optional
        Broadcastable to the result: elements whose bound is below ``rel_slack * |A||B|`` are not
        refined (callers whose own error terms are that large anyway, e.g. attention).
    resolution : format, optional
        The format whose ULPs the result must resolve (default float32): elements are refined where
        the float64 bound exceeds 2**-10 of an ulp of it. ``check`` passes the output format, so a
        bf16 output never pays for refinement its ULPs cannot see.
    resolution_slack : bool
        Also skip elements whose float64 bound is below ``2**-10 · u(resolution) · |A||B|`` (what
        ``check`` asks for: its standards allow at least that much accumulation error).

    Returns
    -------
    values, bound, absdot : numpy.ndarray
        ``absdot = |A| @ |B| (+ |bias|)``.
    """
    values = padded_matmul(A, B)
    absdot = padded_matmul(np.abs(A), np.abs(B))
    terms = A.shape[-1]
    if bias is not None:
        values += bias
        absdot += np.abs(bias)
        terms += 1
    bound = gamma(terms) * absdot + terms * _TINY
    if resolution_slack:
        # the caller judges against bounds of at least u(resolution)·|A||B|: refining below
        # 2**-10 of that cannot change a verdict (the bound is added to it either way)
        own = FLAG_FRACTION * get_format(resolution).u
        rel_slack = own if rel_slack is None else np.maximum(rel_slack, own)
    slack = None if rel_slack is None else np.broadcast_to(rel_slack * absdot, values.shape)
    flag = _too_loose(values, bound, slack, resolution)
    if flag.any():
        _refine(A, B, bias, values, bound, flag, slack, resolution)
    return values, bound, absdot


def dot_dd(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``A @ B`` as a double-double ``hi + lo`` (stage 2 on every element; batch axes broadcast).

    Returns
    -------
    hi, lo, err, absdot : numpy.ndarray
        ``|hi + lo - A B| <= err`` (about ``2**(21 - c)`` times ``gamma_K |A||B|``), and
        ``absdot = |A| @ |B|``.  Where the split is impossible (float64 inputs near overflow or
        underflow), ``hi = fl(A @ B)``, ``lo = 0`` and ``err`` is the stage-1 bound.
    """
    absdot = padded_matmul(np.abs(A), np.abs(B))
    res = _ozaki(A, B, None)
    if res is None:
        K = A.shape[-1]
        hi = padded_matmul(A, B)
        return hi, np.zeros_like(hi), gamma(K) * absdot + K * _TINY, absdot
    hi, lo, err = res
    return hi, lo, err, absdot


def matmul(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``matmul(A, B)`` (numpy semantics, 1-D operands included)."""
    A = np.asarray(arrays[0], dtype=np.float64)
    B = np.asarray(arrays[1], dtype=np.float64)
    K = A.shape[-1]
    res = params.get(RESOLUTION_KEY)
    values, bound, absdot = dot(A[None, :] if A.ndim == 1 else A, B[:, None] if B.ndim == 1 else B,
                                resolution=res or "float32", resolution_slack=res is not None)
    drop = tuple(ax for ax, one_d in ((-1, B.ndim == 1), (-2, A.ndim == 1)) if one_d)
    if drop:
        values, bound, absdot = (np.squeeze(t, axis=drop) for t in (values, bound, absdot))
    return values, bound, {"absdot": absdot, "K": np.asarray(float(K))}


def linear(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``linear(x, weight, bias)`` = ``x @ weight.T + bias``."""
    x = np.asarray(arrays[0], dtype=np.float64)
    W = np.asarray(arrays[1], dtype=np.float64)
    b = None if arrays[2] is None else np.asarray(arrays[2], dtype=np.float64)
    k = x.shape[-1]
    x2 = x.reshape(-1, k)
    res = params.get(RESOLUTION_KEY)
    values, bound, absdot = dot(x2, W.T, b, resolution=res or "float32", resolution_slack=res is not None)
    shape = x.shape[:-1] + (W.shape[0],)
    return (values.reshape(shape), bound.reshape(shape),
            {"absdot": absdot.reshape(shape), "K": np.asarray(float(k))})
