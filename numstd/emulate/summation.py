"""Summation orders: how a reduction of K exact terms is evaluated in an accumulation format.

Every order below rounds each partial sum to the accumulation format ``acc`` with round to
nearest even, and differs only in *which* partial sums it forms (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2nd ed., SIAM 2002, ch. 4).  ``RN`` is rounding to ``acc``; terms are
exact float64 values (products of low-precision operands, see :mod:`numstd.emulate._terms`).

``sequential``   recursive summation, ``s_1 = RN(t_1)``, ``s_k = RN(s_{k-1} + t_k)`` (a chain of
                 fused multiply-adds when the terms are products; error bound ``gamma_{K-1}``).
``pairwise``     recursive halving: ``P(t_1..t_n) = RN(P(first ceil(n/2)) + P(rest))`` and
                 ``P(t) = RN(t)`` (bound ``gamma_{ceil(log2 K)}``; Higham §4.2).
``tree``         balanced binary tree by levels: adjacent pairs ``(1,2), (3,4), ...`` are added,
                 an odd last element is carried to the next level, until one value is left (the
                 shape of a warp/block shuffle reduction).  Equals ``pairwise`` when K is a power
                 of two.
``blocked``      blocks of ``block`` consecutive terms summed sequentially, then the block sums
                 summed sequentially (Blanchard, Higham & Mary, SIAM J. Sci. Comput. 42(3), 2020;
                 bound ``gamma_{b + K/b - 1}``): the order of tiled GPU/CPU kernels.
``splitk``       K split into ``splits`` contiguous slices of nearly equal size (the first
                 ``K mod splits`` slices one longer), each summed sequentially, slice results
                 added in slice order (split-K GEMM with an in-order reduction).
``kahan``        compensated summation with every operation in ``acc`` (Kahan 1965; Higham
                 §4.3): ``y = RN(t - c)``, ``u = RN(s + y)``, ``c = RN(RN(u - s) - y)``, ``s = u``;
                 bound ``2u + O(K u^2)``.
``exact``        the exact sum rounded once, ``RN(sum t)``: a correctly rounded reduction
                 (the most accurate legitimate result).
``random``       sequential over one seeded random permutation of the K terms (one order for all
                 outputs): a stand-in for nondeterministic (atomic) accumulation orders.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ParameterError
from ..core.formats import get_format
from ._accumulator import Accumulator
from ._terms import ArrayTerms, Terms, check_order_parameter, host_array

__all__ = ["ORDERS", "accumulate", "reduce_terms", "sequential_sum", "contiguous_slices"]

ORDERS: tuple[str, ...] = (
    "sequential", "pairwise", "tree", "blocked", "splitk", "kahan", "exact", "random",
)


def sequential_sum(terms: Terms, k0: int, k1: int, ar: Accumulator) -> np.ndarray:
    """``s = RN(t_k0)``, then ``s = RN(s + t_k)`` for k = k0+1 .. k1-1 (zeros if empty)."""
    if k1 <= k0:
        return ar.zeros(terms.shape)
    s = ar.round(terms.term(k0))
    step = terms.chunk_size()
    for c0 in range(k0 + 1, k1, step):
        for t in terms.terms(c0, min(c0 + step, k1)):
            s = ar.fma(s, t)
    return s


def _in_order(parts: list[np.ndarray], ar: Accumulator) -> np.ndarray:
    """Add partial results in list order: ``RN(RN(p_1 + p_2) + p_3) ...``."""
    s = parts[0]
    for p in parts[1:]:
        s = ar.add(s, p)
    return s


def _blocks(K: int, size: int) -> list[tuple[int, int]]:
    return [(k, min(k + size, K)) for k in range(0, K, size)]


def contiguous_slices(K: int, count: int) -> list[tuple[int, int]]:
    """Contiguous slices of nearly equal length (numpy.array_split), empty ones dropped."""
    edges = np.cumsum([0] + [K // count + (1 if i < K % count else 0) for i in range(count)])
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _pairwise(values: np.ndarray, ar: Accumulator) -> np.ndarray:
    """Recursive halving, evaluated bottom-up one depth at a time (vectorised over nodes).

    The segments at depth d+1 are the children of the internal (length > 1) segments at depth d,
    left child first, so the children of internal node j are entries 2j and 2j+1.
    """
    starts, sizes = [np.array([0])], [np.array([values.shape[0]])]
    while (sizes[-1] > 1).any():
        st, sz = starts[-1], sizes[-1]
        inner = sz > 1
        left = (sz[inner] + 1) // 2
        starts.append(np.stack([st[inner], st[inner] + left], axis=1).reshape(-1))
        sizes.append(np.stack([left, sz[inner] - left], axis=1).reshape(-1))
    below = None
    for st, sz in zip(reversed(starts), reversed(sizes)):
        leaf = sz == 1
        level = ar.zeros((st.size,) + values.shape[1:])
        level[leaf] = ar.round(values[st[leaf]])
        if below is not None:
            level[~leaf] = ar.add(below[0::2], below[1::2])
        below = level
    return below[0]


def _tree(values: np.ndarray, ar: Accumulator) -> np.ndarray:
    """Adjacent pairs level by level; an odd last element is carried up unchanged."""
    level = ar.round(values)
    while level.shape[0] > 1:
        half = level.shape[0] // 2
        paired = ar.add(level[0:2 * half:2], level[1:2 * half:2])
        level = paired if level.shape[0] % 2 == 0 else np.concatenate([paired, level[-1:]])
    return level[0]


def _kahan(terms: Terms, ar: Accumulator) -> np.ndarray:
    """Kahan's compensated summation, every operation rounded to the accumulation format."""
    s = ar.zeros(terms.shape)
    c = ar.zeros(terms.shape)
    step = terms.chunk_size()
    for c0 in range(0, terms.K, step):
        for t in terms.terms(c0, min(c0 + step, terms.K)):
            y = ar.fma(-c, t)  # RN(t - c)
            u = ar.add(s, y)
            c = ar.add(ar.add(u, -s), -y)  # RN(RN(u - s) - y)
            s = u
    return s


class _Permuted(Terms):
    """The terms of another sequence in a permuted order."""

    def __init__(self, base: Terms, perm: np.ndarray) -> None:
        self.base, self.perm = base, perm
        self.K, self.shape = base.K, base.shape

    def term(self, k: int) -> np.ndarray:
        return self.base.term(int(self.perm[k]))

    def terms(self, k0: int, k1: int) -> np.ndarray:
        return np.stack([self.term(k) for k in range(k0, k1)])

    def element_terms(self, flat_index: int, k0: int, k1: int) -> np.ndarray:
        full = self.base.element_terms(flat_index, 0, self.K)
        return full[self.perm[k0:k1]]

    def chunk_size(self) -> int:
        return 1


def reduce_terms(
    terms: Terms,
    *,
    order: str,
    acc: Any,
    block: int = 32,
    splits: int = 4,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Reduce a :class:`~numstd.emulate._terms.Terms` sequence in ``order``; float64 result.

    Pairwise and tree orders hold all K terms at once (K times the output size in float64);
    callers bound the output size (see :func:`numstd.emulate.matmul`).
    """
    if order not in ORDERS:
        raise ParameterError(f"unknown summation order {order!r}; use one of {', '.join(ORDERS)}")
    fmt = get_format(acc)
    if fmt.name != "float64" and 2 * fmt.p + 2 > 53:
        raise ParameterError(f"accumulation format {fmt.name} is too wide to emulate in float64")
    ar = Accumulator(fmt, terms_in_format=fmt.name == "float64" or terms.in_format(fmt))
    K = terms.K
    if K == 0:
        return np.zeros(terms.shape)
    if order == "sequential":
        s = sequential_sum(terms, 0, K, ar)
    elif order == "blocked":
        b = check_order_parameter("block", block)
        s = _in_order([sequential_sum(terms, a, z, ar) for a, z in _blocks(K, b)], ar)
    elif order == "splitk":
        n = check_order_parameter("splits", splits)
        s = _in_order([sequential_sum(terms, a, z, ar) for a, z in contiguous_slices(K, n)], ar)
    elif order == "pairwise":
        s = _pairwise(terms.terms(0, K), ar)
    elif order == "tree":
        s = _tree(terms.terms(0, K), ar)
    elif order == "kahan":
        s = _kahan(terms, ar)
    elif order == "exact":
        s = ar.sum_exact(terms, 0, K)
    else:  # random
        if rng is None:
            raise ParameterError(
                "order='random' needs a seeded generator: pass rng=np.random.default_rng(seed) "
                "(numstd never uses a global RNG)"
            )
        s = sequential_sum(_Permuted(terms, rng.permutation(K)), 0, K, ar)
    return np.asarray(s, dtype=np.float64)


def accumulate(
    terms: Any,
    axis: int = -1,
    *,
    order: str = "sequential",
    acc: Any = "float32",
    block: int = 32,
    splits: int = 4,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Sum exact terms along ``axis`` in a given order, rounding every partial sum to ``acc``.

    Parameters
    ----------
    terms : array-like
        The terms (e.g. exact products), any float dtype; converted to float64 exactly.
    axis : int
        The reduction axis.
    order : {"sequential", "pairwise", "tree", "blocked", "splitk", "kahan", "exact", "random"}
        Summation order; formulas in :mod:`numstd.emulate.summation`.
    acc : format-like
        Accumulation format (``"float32"``, ``"bfloat16"``, ``"float16"``, ``"tf32"``,
        ``"float64"``...): every partial sum is rounded to it, round to nearest even.
    block : int
        Block length of ``order="blocked"``.
    splits : int
        Number of slices of ``order="splitk"``.
    rng : numpy.random.Generator, optional
        Source of the permutation of ``order="random"`` (required there).

    Returns
    -------
    numpy.ndarray
        float64 values of the ``acc``-format result; the shape of ``terms`` without ``axis``.
        An empty reduction gives zeros.

    Raises
    ------
    ParameterError
        Unknown order, non-positive block/splits, missing rng for ``"random"``.
    FormatError
        Unknown accumulation format.
    """
    arr = host_array(terms, "terms")
    if arr.ndim == 0:
        raise ParameterError("terms must have at least one axis to reduce")
    with np.errstate(invalid="ignore"):
        values = np.moveaxis(arr.astype(np.float64), axis, 0)
    return reduce_terms(ArrayTerms(values), order=order, acc=acc, block=block, splits=splits,
                        rng=rng)
