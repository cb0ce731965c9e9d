"""Compensated (double-double) summation in numpy: error-free transformations, pairwise sums, scans.

A *double-double* ``(hi, lo)`` represents the unevaluated sum ``hi + lo`` with ``|lo| <= u |hi|``
(``u = 2**-53``).  Everything here is vectorised: a sum over an axis of length ``n`` takes
``ceil(log2 n)`` numpy passes (a pairwise tree), a prefix sum ``~2 sqrt(n)`` passes (a blocked
two-level scan), whatever the other axes.

Error-free transformations (round to nearest, no overflow):

* ``two_sum(a, b) = (s, e)`` with ``s = fl(a + b)`` and ``s + e = a + b`` exactly (Knuth 1969,
  TAOCP vol. 2 §4.2.2; Ogita, Rump & Oishi 2005, Algorithm 3.1).  Exact also under underflow,
  because a sum of floating-point numbers that falls in the subnormal range is exact.
* ``two_prod(a, b) = (p, e)`` with ``p = fl(a * b)`` and ``p + e = a * b`` exactly (Dekker 1971
  with Veltkamp's split; Ogita, Rump & Oishi 2005, Algorithm 3.3); requires ``|a|, |b| < 2**996``
  and no underflow (``|a b| >= 2**-969``).

Double-double addition (:func:`dd_add`)::

    (s, e) = two_sum(ah, bh);  t = fl(al + bl);  f = fl(e + t);  (h, l) = two_sum(s, f)

so ``h + l = ah + bh + al + bl + E`` with ``E = d1 (al + bl) + d2 (e + t)``, ``|d1|, |d2| <= u``.
With ``|al| <= u|ah|``, ``|bl| <= u|bh|``, ``|e| <= u|s|`` and ``|s| <= (1 + u)(|ah| + |bh|)``:

    |E| <= u(2 + u)(|al| + |bl|) + u^2 |s| <= (3 + 2u) u^2 (|ah| + |bh|).

``|ah|`` is at most ``(1 + O(u))`` times the sum of ``|x|`` over the summands it represents, so
every addition adds at most ``3.0001 u^2 S`` (``S``: sum of ``|x|`` over the summands involved).
This is the analysis of Ogita, Rump & Oishi 2005 (Sum2, Proposition 4.5: ``u|s| + gamma_{n-1}^2
sum|p_i|``) applied to a tree instead of a chain:

* pairwise sum over ``n`` terms (depth ``d = ceil(log2 n)``): ``|hi + lo - s| <= 3.0001 d u^2 S``;
* a chain of ``m`` additions (the scan): ``|hi + lo - s| <= 3.0001 m u^2 S``.

:data:`DD_C` ``= 4`` is the constant used in every bound: it covers ``3.0001`` and an ``S``
computed in float64 (a sum of non-negative terms, relative error ``<= (n - 1) u``) that is low by
less than 25 %.  Rounding the double-double to a double adds ``|lo| <= u |hi|``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "U",
    "DD_C",
    "DIV_C",
    "two_sum",
    "two_prod",
    "dd_add",
    "dd_add_double",
    "dd_div_int",
    "pairwise_sum",
    "halving_sum",
    "prefix_sum",
    "prefix_sum_piece",
    "scan_block",
    "sum_depth",
]

U: float = 2.0**-53
"""Unit roundoff of float64 (round to nearest)."""

DD_C: float = 4.0
"""Constant of the double-double bounds: ``|hi + lo - s| <= DD_C * depth * U**2 * sum|x|``."""

DIV_C: float = 5.0
"""Constant of :func:`dd_div_int`: its error is at most ``DIV_C * U**2 * |hi| / k``."""

_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitting constant for float64


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s, e)``: ``s = fl(a + b)``, ``s + e = a + b`` exactly (Knuth's TwoSum, 6 flops)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p, e)``: ``p = fl(a b)``, ``p + e = a b`` exactly (Dekker's TwoProduct, 17 flops)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def dd_add(ah: np.ndarray, al: np.ndarray, bh: np.ndarray, bl: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Double-double sum ``(ah, al) + (bh, bl)``; error ``<= (3 + 2u) u^2 (|ah| + |bh|)``."""
    s, e = two_sum(ah, bh)
    f = e + (al + bl)
    return two_sum(s, f)


def dd_add_double(ah: np.ndarray, al: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Double-double plus a double; error ``<= u |e + al| <= (2 + 2u) u^2 (|ah| + |b|)``."""
    s, e = two_sum(ah, b)
    return two_sum(s, e + al)


def dd_div_int(hi: np.ndarray, lo: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Double-double quotient ``(hi + lo) / k`` for an integer ``1 <= k < 2**53``.

    ``q1 = fl(hi / k)``; the remainder ``R = hi + lo - q1 k`` is formed with ``two_prod(q1, k)``
    (``hi - p`` is exact by Sterbenz's lemma; the two further roundings err by ``u * u|hi|`` and
    ``u * 2u|hi|``, as ``|hi - q1 k| <= u |hi|``), ``q2 = fl(R / k)`` (``+ 2 u^2 |hi| / k``).  So
    ``two_sum(q1, q2)`` is within :data:`DIV_C` ``u^2 |hi| / k`` (``DIV_C = 5``) of ``(hi + lo) / k``.
    """
    kf = float(k)
    q1 = hi / kf
    p, pe = two_prod(q1, np.full_like(q1, kf))
    r = ((hi - p) - pe) + lo
    return two_sum(q1, r / kf)


def sum_depth(n: int) -> int:
    """Depth ``ceil(log2 n)`` of the pairwise tree over ``n`` terms (0 for ``n <= 1``)."""
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0


def halving_sum(x: np.ndarray) -> tuple[np.ndarray, int, float]:
    """Float64 sum over the last axis by an explicit balanced tree (no compensation).

    The row is zero-padded to ``2**d`` terms, ``d = ceil(log2 n)``, and halved ``d`` times
    (``a[:h] + a[h:]``).  Each result is ``d`` roundings deep, so ``|s - sum| <= gamma_d sum|x|``
    with ``gamma_d = d u / (1 - d u)`` (Higham 2002, §4.2) — for nonnegative terms a relative
    error of ``1.3e-15`` at ``n = 4096``, at a fraction of the cost of :func:`pairwise_sum`.

    Returns
    -------
    s : numpy.ndarray
        The sums (last axis removed).
    depth : int
        ``d``.
    gamma : float
        ``gamma_d``.
    """
    n = x.shape[-1]
    d = sum_depth(n)
    if n == 0:
        return np.zeros(x.shape[:-1]), 0, 0.0
    gamma = d * U / (1.0 - d * U)
    from .native import compiled

    nat = compiled()
    if nat is not None and x.dtype == np.float64 and x.flags.c_contiguous and x.size:
        out = np.empty(x.shape[:-1])
        nat.halving_rows(x, out, d)  # the same additions in the same order, in C
        return out, d, gamma
    a = x
    if (1 << d) != n:
        a = np.zeros(x.shape[:-1] + (1 << d,))
        a[..., :n] = x
    while a.shape[-1] > 1:
        h = a.shape[-1] // 2
        a = a[..., :h] + a[..., h:]
    return a[..., 0], d, gamma


_ROWS_CHUNK = 1 << 17  # elements per block of rows in pairwise_sum: temporaries stay in cache


def pairwise_sum(x: np.ndarray, axis: int = -1, lo: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Double-double pairwise sum of ``x`` (float64) over ``axis``.

    Parameters
    ----------
    x : numpy.ndarray of float64
    axis : int
        The axis summed over (removed from the result).
    lo : numpy.ndarray, optional
        Low parts of the summands (e.g. product errors from :func:`two_prod`), ``|lo| <= u |x|``.

    Returns
    -------
    hi, lo : numpy.ndarray
        ``hi + lo`` is the sum, ``|lo| <= u |hi|``.
    depth : int
        ``ceil(log2 n)``: ``|hi + lo - sum| <= DD_C * depth * U**2 * sum|x|`` (module docstring).
    """
    h = np.moveaxis(x, axis, -1)
    n = h.shape[-1]
    lead = h.shape[:-1]
    rows = math.prod(lead)  # (not -1: an empty batch or axis has no inferable size)
    l = None if lo is None else np.moveaxis(lo, axis, -1).reshape(rows, n)
    h = h.reshape(rows, n)
    hi = np.zeros(h.shape[0])
    lo_out = np.zeros(h.shape[0])
    rows = max(1, _ROWS_CHUNK // max(n, 1))
    if n:
        for s in range(0, h.shape[0], rows):
            hi[s:s + rows], lo_out[s:s + rows] = _pairwise_rows(h[s:s + rows], None if l is None else l[s:s + rows])
    return hi.reshape(lead), lo_out.reshape(lead), sum_depth(n)


def _pairwise_rows(h: np.ndarray, l: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    n = h.shape[-1]
    while n > 1:
        m = n // 2
        if l is None:  # first level of plain doubles: two_sum is exact
            sh, sl = two_sum(h[..., :m], h[..., n - m:n])
        else:
            sh, sl = dd_add(h[..., :m], l[..., :m], h[..., n - m:n], l[..., n - m:n])
        if n % 2:  # the middle term waits for the next level
            mid_l = np.zeros_like(h[..., m:m + 1]) if l is None else l[..., m:m + 1]
            sh = np.concatenate([sh, h[..., m:m + 1]], axis=-1)
            sl = np.concatenate([sl, mid_l], axis=-1)
        h, l, n = sh, sl, m + n % 2
    return h[..., 0], (np.zeros_like(h[..., 0]) if l is None else l[..., 0])


def prefix_sum(x: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray, int]:
    """Double-double inclusive prefix sums of ``x`` (float64) along ``axis``.

    Blocked two-level scan: the axis (length ``n``) is cut into ``nb`` blocks of ``b = ceil(sqrt
    n)`` elements; a sequential double-double scan runs inside all blocks at once (``b - 1``
    passes), another over the block totals (``nb - 1`` passes), and each block adds its offset.

    Returns
    -------
    hi, lo : numpy.ndarray
        Same shape as ``x``; ``hi + lo`` is the prefix sum.
    chain : int
        ``b + nb``, at least the number of additions behind any output:
        ``|hi_i + lo_i - s_i| <= DD_C * chain * U**2 * sum_{j <= i} |x_j|``.
    """
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    if n == 0:
        z = np.zeros(xm.shape)
        return np.moveaxis(z, -1, axis), np.moveaxis(z.copy(), -1, axis), 0
    hi, lo, chain, _ = prefix_sum_piece(xm, 0, n)
    return np.moveaxis(hi, -1, axis), np.moveaxis(lo, -1, axis), chain


def scan_block(n: int) -> int:
    """Elements per block of :func:`prefix_sum` for an axis of ``n``: ``ceil(sqrt(n))`` (at least 1)."""
    return max(1, math.isqrt(n - 1) + 1) if n > 1 else 1


def prefix_sum_piece(x: np.ndarray, start: int, stop: int, carry: tuple | None = None
                     ) -> tuple[np.ndarray, np.ndarray, int, tuple]:
    """The elements ``start .. stop - 1`` of :func:`prefix_sum` of the rows (last axis) of ``x``.

    ``x`` holds the whole rows, in any float format (only the blocks of ``b = scan_block(n)``
    elements that overlap the piece are widened to float64).  ``carry`` is the offset of the block
    holding ``start`` (the double-double sum of all blocks before it, per row: the last value of a
    previous call for the piece before this one), ``None`` for the first block; the scan inside the
    piece's blocks and the chain of block totals from that offset are the operations of the whole
    scan, so every element gets the bits it gets there, whatever the cut.

    Returns
    -------
    hi, lo : numpy.ndarray
        ``x.shape[:-1] + (stop - start,)``.
    chain : int
        As for :func:`prefix_sum` (``b + nb`` of the whole row).
    carry : tuple
        The offset of the block holding ``stop`` (pass it with the next piece).
    """
    n = x.shape[-1]
    lead = x.shape[:-1]
    b = scan_block(n)
    nb = -(-n // b)
    b0, b1 = start // b, -(-stop // b)  # the blocks the piece overlaps
    m = b1 - b0
    rows = math.prod(lead)
    seg = x[..., b0 * b:min(b1 * b, n)]  # (a view: only the piece's blocks are copied, and widened)
    pad = np.zeros((rows, m * b))
    pad[:, :seg.shape[-1]] = seg.reshape(rows, seg.shape[-1])
    # layout (b, rows, m): column j of every block is one contiguous slab
    blocks = np.ascontiguousarray(pad.reshape(-1, m, b).transpose(2, 0, 1))
    H = np.empty_like(blocks)
    L = np.empty_like(blocks)
    h, l = blocks[0], np.zeros_like(blocks[0])
    H[0], L[0] = h, l
    for j in range(1, b):
        h, l = dd_add_double(h, l, blocks[j])
        H[j], L[j] = h, l
    # exclusive scan of the block totals from the carried offset, laid out (m + 1, rows) so that each
    # step is contiguous
    th, tl = np.ascontiguousarray(H[-1].T), np.ascontiguousarray(L[-1].T)
    oh = np.zeros((m + 1, rows))
    ol = np.zeros((m + 1, rows))
    if carry is not None:
        oh[0], ol[0] = carry
    for k in range(1, m + 1):
        oh[k], ol[k] = dd_add(oh[k - 1], ol[k - 1], th[k - 1], tl[k - 1])
    H, L = dd_add(H, L, oh[:m].T[None], ol[:m].T[None])
    off = start - b0 * b
    hi = H.transpose(1, 2, 0).reshape(rows, m * b)[:, off:off + stop - start].reshape(*lead, stop - start)
    lo = L.transpose(1, 2, 0).reshape(rows, m * b)[:, off:off + stop - start].reshape(*lead, stop - start)
    nxt = stop // b - b0  # the block holding stop (m when stop ends a block)
    return hi, lo, b + nb, (oh[nxt].copy(), ol[nxt].copy())
