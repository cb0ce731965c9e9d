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

Long contractions: with ``K >`` :data:`K_BLOCK` every stage runs over fixed K blocks (boundaries
from ``K`` alone), widening one block of ``A`` and ``B`` at a time, and adds the block results in
block order; the per-row splitting exponents of stage 2 are the maxima over the blocks.  The
extra memory is then one block's, whatever ``K`` (``benchmarks/perf/bench_memory.py --op
matmul``), and the results still do not depend on the row chunking.
"""

from __future__ import annotations

import math
import threading

from typing import Any

import numpy as np

from ..core.formats import get_format

from ..core.blas import blas_threads
from ..core.native import compiled
from ..core.summation import DD_C, U, pairwise_sum, two_prod, two_sum

__all__ = ["matmul", "linear", "dot", "dot_dd", "padded_matmul", "operand", "abs_product", "gamma", "FLAG_FRACTION",
           "EXACT_PER_ROW", "ROW_BLOCK", "K_BLOCK"]

FLAG_FRACTION: float = 2.0**-10
"""Elements whose bound exceeds this fraction of their float32 ulp are refined."""

EXACT_PER_ROW: int = 64
"""Most elements of one output row that stage 3 computes (the first ones flagged)."""

ROW_BLOCK: int = 256
"""Every BLAS call of a reference sees exactly this many rows, at their absolute positions."""

K_BLOCK: int = 8192
"""Products with more than this many terms (``K``) are computed in K blocks of this many terms.

The blocks ``[0, K_BLOCK), [K_BLOCK, 2 K_BLOCK), …`` depend on ``K`` only, and only one block of
``A`` and ``B`` is widened to float64 at a time (:func:`_k_pairs`), so the reference of a long
contraction needs memory for one block, not for the whole operands.  Block results are added in
block order, which is one more summation order of the ``K`` products: every bound of the module
docstring holds as stated (see :func:`_ozaki_blocked`, :func:`_exact_dots_blocked`).  Products
with ``K <= K_BLOCK`` are computed exactly as before (one block)."""

_TINY = 2.0**-1074


def gamma(n: int | np.ndarray) -> float | np.ndarray:
    """Higham's ``gamma_n = n u / (1 - n u)`` for float64 (``u = 2**-53``)."""
    nu = np.asarray(n, dtype=np.float64) * U
    return nu / (1.0 - nu)


def padded_matmul(a: np.ndarray, b: np.ndarray, row0: int = 0, rows: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` by BLAS with every output element computed the same way whatever the chunking.

    BLAS libraries choose kernels, blockings and edge code by problem size and position, so one
    element can come out differently depending on the rows computed with it (measured: OpenBLAS
    0.3.31, SkylakeX and Haswell kernels, float32 and float64, one thread or two).  Here the rows
    of ``a`` carry their absolute row numbers — ``rows``, default ``row0, row0 + 1, …`` — and
    every BLAS call is one aligned block of :data:`ROW_BLOCK` absolute rows (rows ``[i R, (i+1) R)``),
    with each row at its own position in the block and zeros where the caller has no row.  Every
    element thus comes from the same call shape, position and K order whichever chunk computes it
    (tested on random shapes and chunkings).  Any order of the K products satisfies the same
    ``gamma_K`` bound.  Calls of at most :data:`numstd.core.blas.SMALL_PRODUCT` multiply-adds
    (``ROW_BLOCK × K × N``, a function of the shape only) run on one BLAS thread
    (:func:`numstd.core.blas.blas_threads`: on a busy machine a small product otherwise waits for
    its second thread to be scheduled).
    """
    m, k = a.shape[-2], a.shape[-1]
    rows = np.arange(row0, row0 + m) if rows is None else np.asarray(rows, dtype=np.int64)
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, b.shape[-1]),
                   dtype=np.result_type(a.dtype, b.dtype))
    if m == 0:
        return out
    block = rows // ROW_BLOCK
    cuts = np.concatenate([[0], np.flatnonzero(np.diff(block)) + 1, [m]])
    with blas_threads(ROW_BLOCK * k * b.shape[-1]):  # (each GEMM call: one block, whatever the chunk)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            pos = rows[lo:hi] - block[lo] * ROW_BLOCK
            if hi - lo == ROW_BLOCK:  # a whole aligned block: no copy
                out[..., lo:hi, :] = np.matmul(a[..., lo:hi, :], b)
                continue
            x = _zero_block(a.shape[:-2] + (ROW_BLOCK, k), a.dtype)
            try:
                x[..., pos, :] = a[..., lo:hi, :]
                out[..., lo:hi, :] = np.matmul(x, b)[..., pos, :]
            finally:
                x[..., pos, :] = 0  # (zeros again for the next call: see _zero_block)
    return out


_BLOCKS = threading.local()
_BLOCK_CACHE_BYTES = 1 << 22
_BLOCKS_KEPT = 4


def _zero_block(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A zero array of ``shape`` for :func:`padded_matmul`, kept per thread when at most 4 MiB.

    The caller writes its rows into the block and sets them back to zero after the product, so the
    kept block is all zeros whenever it is handed out (a fresh ``np.zeros`` of a block costs a page
    fault per 4 KiB page: for a 32-row chunk of ``K = 512`` the 256-row float64 block is 1 MiB).
    At most :data:`_BLOCKS_KEPT` blocks per thread (shapes and dtypes: a matmul's values in float64
    and its ``|A||B|`` in float32 use two), the least recently used dropped first.
    """
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes > _BLOCK_CACHE_BYTES:
        return np.zeros(shape, dtype=dtype)
    kept = getattr(_BLOCKS, "kept", None)
    if kept is None:
        kept = _BLOCKS.kept = {}
    key = (shape, np.dtype(dtype).str)
    x = kept.pop(key, None)
    if x is None:
        x = np.zeros(shape, dtype=dtype)
    kept[key] = x  # (the most recent last)
    while len(kept) > _BLOCKS_KEPT:
        kept.pop(next(iter(kept)))
    return x


def _ulp_in(v: np.ndarray, resolution: Any) -> np.ndarray:
    from ..core.ulp import ulp

    return ulp(v, resolution)


#: private key under which :func:`numstd.reference.reference` passes ``resolution`` to the ops
RESOLUTION_KEY = "_resolution"
#: private keys under which it passes its ``cache`` (a dict, or None) and ``row_offset``
CACHE_KEY = "_cache"
ROW0_KEY = "_row0"

_F32_SMALLEST_NORMAL = 2.0**-126


def _float32_exact(x: np.ndarray) -> bool:
    """Whether every value of ``x``'s dtype is a float32 (float32, tf32, bf16, fp16, the fp8s)."""
    from ..core.formats import FORMATS

    f = FORMATS.get(x.dtype.name)
    return (f is not None and f.p <= 24 and f.max_finite <= float(np.finfo(np.float32).max)
            and f.smallest_subnormal >= 2.0**-149)


def operand(x: np.ndarray, cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(x in float64, |x|)`` for a GEMM operand; ``|x|`` is float32 when that is exact.

    ``cache`` (a dict kept by the caller for the chunks of one call) holds the result per operand
    (keyed by its memory, shape, strides and dtype), so a shared operand — ``B`` of a matmul whose
    rows are chunked — is converted once, not once per chunk.
    """
    key = None
    if cache is not None:
        key = ("operand", x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.str)
        if key in cache:
            return cache[key]
    x64 = np.asarray(x, dtype=np.float64)
    ax = np.abs(x64)
    if _float32_exact(x):
        ax = ax.astype(np.float32)
    if key is not None:
        cache[key] = (x64, ax)
    return x64, ax


def abs_product(absA: np.ndarray, absB: np.ndarray, row0: int = 0, cache: dict | None = None) -> np.ndarray:
    """An upper bound on ``|A| @ |B|`` in float64, from a float32 GEMM where that is safe.

    Every computed sum ``s^`` of ``K`` nonnegative products satisfies ``|s^ - s| <= gamma_K s`` in
    any order, with or without FMA (Higham 2002, eq. (3.5)), plus at most ``2**(emin)`` per
    operation lost to underflow (gradual or flushed), so
    ``s <= (s^ + 2 K 2**emin) (1 - K u) / (1 - 2 K u)``, which is what is returned (rounded up).
    When both operands are float32 (exact: :func:`operand`), ``K < 2**22``, nothing can overflow
    (``max|a|·max|b|·K < 2**126``) and neither holds float32 subnormals (a denormals-are-zero mode
    would drop them), the GEMM runs in float32 (``u = 2**-24``, twice as fast as float64) and the
    result exceeds the exact ``|A||B|`` by at most about ``2 K 2**-24`` relative (7.6e-5 at
    ``K = 640``); otherwise in float64 (``u = 2**-53``).  ``row0``: the absolute number of the first
    row (:func:`padded_matmul`); ``cache``: as in :func:`operand` (the maximum and subnormal test
    of a shared operand are computed once).
    """
    K = absA.shape[-1]
    if absA.dtype == np.float32 and absB.dtype == np.float32 and 0 < K < 2**22 and absA.size and absB.size:
        (ma, suba), (mb, subb) = _abs_stats(absA, None), _abs_stats(absB, cache)  # B: the shared operand
        if ma * mb * K < 2.0**126 and not suba and not subb:
            return _inflate(padded_matmul(absA, absB, row0).astype(np.float64), K, 2.0**-24, 2.0**-126)
    s = padded_matmul(np.asarray(absA, dtype=np.float64), np.asarray(absB, dtype=np.float64), row0)
    return _inflate(s, K, U, 2.0**-1022)


def _inflate(s: np.ndarray, K: int, u: float, tiny: float) -> np.ndarray:
    """``(s + 2 K tiny) (1 - K u) / (1 - 2 K u)``, rounded up (see :func:`abs_product`)."""
    nu = K * u
    if nu >= 0.25:  # pragma: no cover - K >= 2**51 float64 terms
        return np.full_like(s, np.inf)
    s += 2 * K * tiny
    s *= (1.0 - nu) / (1.0 - 2.0 * nu) * (1.0 + 2.0**-50)
    return s


def _abs_stats(ax: np.ndarray, cache: dict | None) -> tuple[float, bool]:
    """``(max, has a subnormal)`` of a nonnegative float32 operand, kept in ``cache`` when given.

    The entry holds ``ax`` itself, so its memory (part of the key) cannot be reused by another
    array while the cache lives; callers pass a cache only for the operand shared by all chunks.
    """
    key = None if cache is None else ("abs_stats", ax.__array_interface__["data"][0], ax.shape, ax.strides)
    if key is not None and key in cache:
        return cache[key][0]
    stats = (float(ax.max()), _has_subnormal(ax))
    if key is not None:
        cache[key] = (stats, ax)
    return stats


def _has_subnormal(ax: np.ndarray) -> bool:
    """Whether the nonnegative float32 array holds a subnormal."""
    small = ax < _F32_SMALLEST_NORMAL
    return bool(small.any()) and bool((ax[small] > 0).any())


def _batch_index(arr: np.ndarray, idx: tuple) -> tuple:
    """Index into the batch axes of ``arr`` (right-aligned, broadcast) for a batch index ``idx``."""
    nb = arr.ndim - 2
    off = len(idx) - nb
    return tuple(0 if arr.shape[k] == 1 else idx[k + off] for k in range(nb))


def _ozaki(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, rows: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Stage 2: ``(hi, lo, err)`` with ``|hi + lo - (a @ b + bias)| <= err``, ``lo`` the rounding
    error of ``hi``; None when the split would overflow or underflow.  Batch axes broadcast;
    ``rows``: the absolute row numbers of ``a`` (:func:`padded_matmul`)."""
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
    t1 = padded_matmul(a1, b1, rows=rows)  # exact
    del b1
    t2 = padded_matmul(a1, br, rows=rows)
    del br
    t2 += padded_matmul(ar, b, rows=rows)
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


def _k_pairs(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, sel: np.ndarray | None = None):
    """``(a block, b block)`` in float64 for each K block (:data:`K_BLOCK`) in order, then the bias.

    Only the yielded block is widened; ``sel`` picks rows of ``a`` (per block, so the selected
    rows are never copied whole).  With ``bias`` a last one-term block ``(ones, bias)`` follows.
    """
    K = a.shape[-1]
    for k0 in range(0, K, K_BLOCK):
        ab = a[..., k0:k0 + K_BLOCK]
        if sel is not None:
            ab = ab[..., sel, :]
        yield np.asarray(ab, dtype=np.float64), np.asarray(b[..., k0:k0 + K_BLOCK, :], dtype=np.float64)
    if bias is not None:
        m = a.shape[-2] if sel is None else len(sel)
        yield (np.ones(a.shape[:-2] + (m, 1)),
               np.broadcast_to(np.asarray(bias, dtype=np.float64), b.shape[:-2] + (1, b.shape[-1])))


def _accumulate(total: np.ndarray | None, part: np.ndarray) -> np.ndarray:
    """``total + part`` in place (``part`` itself for the first block)."""
    if total is None:
        return part
    total += part
    return total


def _dot_blocked(A: np.ndarray, B: np.ndarray, row0: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage 1 of ``A @ B`` in K blocks: ``(values, an upper bound on |A| @ |B|)``.

    The block products are added in block order: one summation order of the ``K`` products, so
    ``gamma_K |A||B| + K 2**-1074`` bounds ``values`` and :func:`_inflate` with ``K`` terms makes
    the float64 sum of ``|A_b| @ |B_b|`` an upper bound, as for one GEMM.
    """
    values = absum = None
    for ab, bb in _k_pairs(A, B):
        values = _accumulate(values, padded_matmul(ab, bb, row0))
        absum = _accumulate(absum, padded_matmul(np.abs(ab), np.abs(bb), row0))
    return values, _inflate(absum, A.shape[-1], U, 2.0**-1022)


def _ozaki_blocked(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, rows: np.ndarray,
                   sel: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_ozaki` in K blocks (rows ``sel`` of ``a``, all when None), one block widened at a time.

    The splitting exponents come from the maxima over all of K, taken as the maximum of the block
    maxima (exact), so every block is split at the same ``sigma_i``, ``sigma_j`` as the whole
    would be.  ``T1``'s running sums over the blocks are partial sums of the ``K`` products of
    ``A1 B1``, exact as in :func:`_ozaki`; ``fl(A1 Br)`` and ``fl(Ar B)`` summed over the blocks are
    each a ``K``-term sum in one order (``gamma_K``), added once at the end (``u |T2|``): the bound
    of :func:`_ozaki`, with the float64 sums of ``|A1|`` and ``|B|`` enlarged by ``2 gamma_K`` to
    cover their own rounding.
    """
    K = a.shape[-1] + (bias is not None)
    if a.size == 0 or b.size == 0:
        return None
    c = (53 + max(1, math.ceil(math.log2(K))) + 1) // 2
    amax = bmax = None
    for ab, bb in _k_pairs(a, b, bias, sel):
        ma, mb = np.max(np.abs(ab), axis=-1), np.max(np.abs(bb), axis=-2)
        amax = ma if amax is None else np.maximum(amax, ma)
        bmax = mb if bmax is None else np.maximum(bmax, mb)
    ea = np.frexp(amax)[1].astype(np.int64)
    eb = np.frexp(bmax)[1].astype(np.int64)
    if ea.max() + c > 1023 or eb.max() + c > 1023 or ea.min() + eb.min() + 2 * c - 106 < -1074:
        return None
    sa = np.ldexp(1.0, ea + c)[..., :, None]
    sb = np.ldexp(1.0, eb + c)[..., None, :]
    t1 = t2a = t2b = suma = sumb = None
    for ab, bb in _k_pairs(a, b, bias, sel):
        a1 = ab + sa
        a1 -= sa
        ar = ab - a1
        b1 = bb + sb
        b1 -= sb
        br = bb - b1
        t1 = _accumulate(t1, padded_matmul(a1, b1, rows=rows))  # exact
        t2a = _accumulate(t2a, padded_matmul(a1, br, rows=rows))
        t2b = _accumulate(t2b, padded_matmul(ar, bb, rows=rows))
        suma = _accumulate(suma, np.sum(np.abs(a1), axis=-1))
        sumb = _accumulate(sumb, np.sum(np.abs(bb), axis=-2))
    t2 = t2a
    t2 += t2b
    hi, lo = two_sum(t1, t2)
    err = np.abs(t2, out=t2)
    err *= U
    ga = np.ldexp(1.0, ea + c - 53)
    gb = np.ldexp(1.0, eb + c - 53)
    m = suma[..., :, None] * gb[..., None, :]
    m += ga[..., :, None] * sumb[..., None, :]
    m *= gamma(K) * (1.0 + 2.0 * gamma(K))
    err += m
    err += K * 2.0 * _TINY
    return hi, lo, err


def _exact_dots_blocked(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, i: np.ndarray, j: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_exact_dots` in K blocks: a double-double pairwise sum per block, then of the blocks.

    A block's ``(hi, lo)`` is within ``DD_C d1 u^2 S_b`` of its exact sum (``d1`` the depth of a
    block's tree, ``S_b`` the block's ``sum |p|``); the pairwise sum of the block results (depth
    ``d2``) adds at most ``DD_C d2 u^2 sum |hi_b + lo_b|``, and ``|hi_b + lo_b| <= S_b (1 + 2**-100)``,
    so ``DD_C (d1 + d2) u^2 S`` bounds the whole (``S`` enlarged by ``2**-40`` for its own rounding
    and that factor).  ``d1``, ``d2`` and the blocks depend on ``K`` only.
    """
    K = a.shape[1]
    starts = range(0, K, K_BLOCK)
    nb = len(starts) + (bias is not None)
    vals = np.empty(len(i))
    bnds = np.empty(len(i))
    step = max(1, (1 << 20) // K_BLOCK)
    for s in range(0, len(i), step):
        ii, jj = i[s:s + step], j[s:s + step]
        H = np.zeros((len(ii), nb))
        L = np.zeros((len(ii), nb))
        S = np.zeros(len(ii))
        d1 = 0
        for q, k0 in enumerate(starts):
            p, e = two_prod(np.asarray(a[ii, k0:k0 + K_BLOCK], dtype=np.float64),
                            np.asarray(b[k0:k0 + K_BLOCK, jj], dtype=np.float64).T)
            H[:, q], L[:, q], d = pairwise_sum(p, -1, lo=e)
            d1 = max(d1, d)
            S += np.sum(np.abs(p), axis=1)
        if bias is not None:
            H[:, -1] = bias[jj]
            S += np.abs(bias[jj])
        hi, lo, d2 = pairwise_sum(H, -1, lo=L)
        vals[s:s + step] = hi
        bnds[s:s + step] = (np.abs(lo) + DD_C * (d1 + d2) * U * U * (S * (1.0 + 2.0**-40))
                            + (K + nb) * 16.0 * _TINY)
    return vals, bnds


def _refine(A: np.ndarray, B: np.ndarray, bias: np.ndarray | None, values: np.ndarray,
            bound: np.ndarray, flag: np.ndarray, slack: np.ndarray | None, resolution: Any = "float32",
            row0: int = 0) -> None:
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
        blocked = a.shape[-1] > K_BLOCK
        if blocked:
            res = _ozaki_blocked(a, b, bias, row0 + rows, None if whole else rows)
        else:
            res = _ozaki(a if whole else a[rows], b, bias, row0 + rows)
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
        v3, b3 = (_exact_dots_blocked if blocked else _exact_dots)(a, b, bias, i, j)
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
        resolution_slack: bool = False, absA: np.ndarray | None = None,
        absB: np.ndarray | None = None, row0: int = 0, cache: dict | None = None
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A @ B (+ bias)`` with a proven bound (module docstring).

    Parameters
    ----------
    A, B : numpy.ndarray of float64
        ``(..., m, K)`` and ``(..., K, n)``; batch axes broadcast as in ``numpy.matmul``.  With
        ``K >`` :data:`K_BLOCK` they may be in any format float64 holds exactly (float32, bf16,
        …): the product is computed in K blocks, each widened on its own.
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
    absA, absB : numpy.ndarray, optional
        ``|A|`` and ``|B|`` when the caller has them (:func:`operand`; float32 where exact).
    row0 : int
        Absolute number of the first row of ``A`` in the whole product (callers computing a
        product in chunks of rows pass it, so that every chunking gives the same bits:
        :func:`padded_matmul`).
    cache : dict, optional
        Per-call cache of operand facts (:func:`operand`, :func:`abs_product`).

    Returns
    -------
    values, bound, absdot : numpy.ndarray
        ``absdot``: an upper bound on ``|A| @ |B| (+ |bias|)`` (:func:`abs_product`).
    """
    terms = A.shape[-1]
    if terms > K_BLOCK:  # one K block widened at a time (A and B may be in their own formats)
        values, absdot = _dot_blocked(A, B, row0)
    else:
        values = padded_matmul(A, B, row0)
        absdot = abs_product(np.abs(A) if absA is None else absA, np.abs(B) if absB is None else absB, row0,
                             cache)
    if bias is not None:
        values += bias
        absdot += np.abs(bias)
        terms += 1
    if resolution_slack:
        # the caller judges against bounds of at least u(resolution)·|A||B|: refining below
        # 2**-10 of that cannot change a verdict (the bound is added to it either way)
        own = FLAG_FRACTION * get_format(resolution).u
        rel_slack = own if rel_slack is None else np.maximum(rel_slack, own)
    nat = compiled()
    if (nat is not None and rel_slack is not None and np.ndim(rel_slack) == 0 and absdot.shape == values.shape
            and absdot.dtype == np.float64 and absdot.flags.c_contiguous):
        bound = np.empty(absdot.shape)  # the same operations as below, in C, in one pass
        if nat.dot_bound(absdot, bound, float(gamma(terms)), terms * _TINY, float(rel_slack)):
            return values, bound, absdot
    else:
        bound = gamma(terms) * absdot + terms * _TINY
    slack = None if rel_slack is None else np.broadcast_to(rel_slack * absdot, values.shape)
    if slack is not None and bool(np.all(bound <= slack)):
        return values, bound, absdot  # below the slack everywhere: nothing to refine (the usual case)
    flag = _too_loose(values, bound, slack, resolution)
    if flag.any():
        _refine(A, B, bias, values, bound, flag, slack, resolution, row0)
    return values, bound, absdot


def dot_dd(A: np.ndarray, B: np.ndarray, row0: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``A @ B`` as a double-double ``hi + lo`` (stage 2 on every element; batch axes broadcast).

    Returns
    -------
    hi, lo, err, absdot : numpy.ndarray
        ``|hi + lo - A B| <= err`` (about ``2**(21 - c)`` times ``gamma_K |A||B|``), and
        ``absdot = |A| @ |B|``.  Where the split is impossible (float64 inputs near overflow or
        underflow), ``hi = fl(A @ B)``, ``lo = 0`` and ``err`` is the stage-1 bound.
    """
    absdot = padded_matmul(np.abs(A), np.abs(B), row0)
    res = _ozaki(A, B, None, np.arange(row0, row0 + A.shape[-2]))
    if res is None:
        K = A.shape[-1]
        hi = padded_matmul(A, B, row0)
        return hi, np.zeros_like(hi), gamma(K) * absdot + K * _TINY, absdot
    hi, lo, err = res
    return hi, lo, err, absdot


def matmul(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``matmul(A, B)`` (numpy semantics, 1-D operands included)."""
    A, B = np.asarray(arrays[0]), np.asarray(arrays[1])
    K = A.shape[-1]
    if K > K_BLOCK:  # dot widens one K block at a time
        absA, absB = A, B
    else:
        A, absA = operand(A)
        B, absB = operand(B, params.get(CACHE_KEY))  # B is shared by every chunk of rows
    res = params.get(RESOLUTION_KEY)
    drop = tuple(ax for ax, one_d in ((-1, B.ndim == 1), (-2, A.ndim == 1)) if one_d)
    if A.ndim == 1:
        A, absA = A[None, :], absA[None, :]
    if B.ndim == 1:
        B, absB = B[:, None], absB[:, None]
    values, bound, absdot = dot(A, B, resolution=res or "float32", resolution_slack=res is not None,
                                absA=absA, absB=absB, row0=params.get(ROW0_KEY, 0), cache=params.get(CACHE_KEY))
    aux = {"absdot": absdot, "K": np.asarray(float(K)), "spillmag": _spill16(absdot, K)}
    aux.update(_rounding(params, A, B, None, values))
    if drop:
        values, bound = (np.squeeze(t, axis=drop) for t in (values, bound))
        aux = {k: (v if k == "K" else np.squeeze(v, axis=drop)) for k, v in aux.items()}
    return values, bound, aux


def _spill16(absdot: np.ndarray, K: int) -> np.ndarray:
    """``spillmag`` of a dot product of length ``K`` accumulated in fp16: ``(|A| @ |B|)·(1 + 2^-11)^K``, a bound
    on every partial sum any order of the K fp16 additions forms (a computed partial sum is an exact subset
    sum of the products, each at most ``|a_k||b_k|``, times at most K factors ``1 + δ``, ``|δ| <= 2^-11``;
    Higham 2002 eq. 4.4; :func:`numstd.reference.reduction.spill16`, the sums' form).  Criterion
    ``intermediate_overflow`` (:func:`numstd.judge.criteria.spill_mask`) allows a non-finite output where it
    reaches fp16's overflow threshold: a legitimate fp16 accumulation overflows there although the exact
    product is finite.  Unused by standards without the criterion."""
    from .reduction import spill16

    return spill16(absdot, K)


def _rounding(params: dict, A: np.ndarray, B: np.ndarray, bias: np.ndarray | None, values: np.ndarray) -> dict:
    """The operand-rounding terms (:mod:`numstd.reference.rounded_operands`) when the standard being
    checked allows a rounding of the operands (``[model] input_rounding``), else none."""
    from .rounded_operands import INPUT_ROUNDING_KEY, rounding_terms

    fmt = params.get(INPUT_ROUNDING_KEY)
    return {} if not fmt else rounding_terms(A, B, bias, fmt, values, params.get(ROW0_KEY, 0),
                                             params.get(RESOLUTION_KEY) or "float32", params.get(CACHE_KEY))


def linear(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``linear(x, weight, bias)`` = ``x @ weight.T + bias``."""
    x, W = np.asarray(arrays[0]), np.asarray(arrays[1])
    if x.shape[-1] > K_BLOCK:  # dot widens one K block at a time
        absx, absW = x, W
    else:
        x, absx = operand(x)
        W, absW = operand(W, params.get(CACHE_KEY))  # the weight is shared by every chunk
    b = None if arrays[2] is None else np.asarray(arrays[2], dtype=np.float64)
    k = x.shape[-1]
    res = params.get(RESOLUTION_KEY)
    values, bound, absdot = dot(x.reshape(-1, k), W.T, b, resolution=res or "float32",
                                resolution_slack=res is not None, absA=absx.reshape(-1, k), absB=absW.T,
                                row0=params.get(ROW0_KEY, 0), cache=params.get(CACHE_KEY))
    shape = x.shape[:-1] + (W.shape[0],)
    aux = {"absdot": absdot, **_rounding(params, x.reshape(-1, k), W.T, b, values)}
    return (values.reshape(shape), bound.reshape(shape),
            dict({n: v.reshape(shape) for n, v in aux.items()}, K=np.asarray(float(k))))
