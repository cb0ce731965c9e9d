"""The ULP-error distribution and its chunk-independent accumulator.

``check`` and ``survey`` feed per-element ULP errors chunk by chunk (memory stays bounded) and the
result must not depend on the chunk size.  Two devices make that so:

* chunks always arrive in the global C order of the output (the chunk planner guarantees it), and
  sums are taken over fixed blocks of :data:`BLOCK` values of that global stream (an explicit halving
  tree inside a block, so alignment cannot change the result), then combined with ``math.fsum``
  (correctly rounded, hence order-free);
* quantiles come from a fixed histogram of ``|e|`` with :data:`BINS_PER_OCTAVE` logarithmic bins per
  power of two, each value's bin decided exactly (:func:`_bin_index`); counts add exactly.  A
  reported quantile is the upper edge of the bin holding it (never below the true quantile, at most
  2^(1/16)−1 ≈ 4.4 % above), capped at the exact maximum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .native import BINS_PER_OCTAVE, BLOCK, HI_OCT, LO_OCT, compiled, fraction_thresholds

__all__ = ["UlpDistribution", "DistributionAccumulator", "QUANTILES", "BLOCK", "BINS_PER_OCTAVE"]

QUANTILES = (0.5, 0.9, 0.99, 0.999)
# BLOCK and the bins are shared with the compiled judge: they are defined with its C interface
_LO_OCT, _HI_OCT = LO_OCT, HI_OCT  # bins from 2^-30 ulp to 2^80 ulp (the last bin takes everything above)
_NBINS = (_LO_OCT + _HI_OCT) * BINS_PER_OCTAVE + 2  # + the exact-zero bin + the top bin
_SIGN_BIT = np.uint64(1 << 63)


@dataclass(frozen=True)
class UlpDistribution:
    """Distribution of ULP errors over the finite, comparable elements.

    Attributes
    ----------
    count : int
        Elements in the distribution (finite actual and reference).
    max : float
        Largest ``|e_i|`` (exact).
    mean : float
        Mean of ``|e_i|`` (exact sum, correctly rounded).
    mean_signed : float
        Mean of ``sign(r_i)·e_i`` over elements with ``r_i ≠ 0``: negative when the output is
        biased toward zero (truncation), positive when biased away from zero.
    std_signed : float
        Standard deviation of ``sign(r_i)·e_i`` (population).
    quantiles : mapping of float to float
        Quantiles of ``|e_i|`` at :data:`QUANTILES` (histogram upper edges, see module doc).
    histogram : mapping
        ``{"edges": [...], "counts": [...]}``: counts of ``|e|`` in ``[0, 0.5], (0.5, 1], (1, 2], …``.
    signed_count : int
        Elements in ``mean_signed`` (nonzero reference).
    """

    count: int = 0
    max: float = 0.0
    mean: float = 0.0
    mean_signed: float = 0.0
    std_signed: float = 0.0
    signed_count: int = 0
    quantiles: Mapping[float, float] = field(default_factory=dict)
    histogram: Mapping[str, Sequence[float]] = field(default_factory=lambda: {"edges": [], "counts": []})

    def to_dict(self) -> dict:
        return {
            "count": self.count, "max": self.max, "mean": self.mean,
            "mean_signed": self.mean_signed, "std_signed": self.std_signed,
            "signed_count": self.signed_count,
            "quantiles": {str(q): v for q, v in self.quantiles.items()},
            "histogram": {"edges": list(self.histogram["edges"]), "counts": list(self.histogram["counts"])},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "UlpDistribution":
        return cls(
            count=int(d["count"]), max=float(d["max"]), mean=float(d["mean"]),
            mean_signed=float(d["mean_signed"]), std_signed=float(d["std_signed"]),
            signed_count=int(d["signed_count"]),
            quantiles={float(q): float(v) for q, v in d["quantiles"].items()},
            histogram={"edges": [float(x) for x in d["histogram"]["edges"]],
                       "counts": [int(x) for x in d["histogram"]["counts"]]},
        )


class _BlockSum:
    """Sums of ``width`` parallel streams of float64 values over fixed blocks; see the module docstring.

    The streams advance together (``add`` takes a ``(width, n)`` array), so one halving tree serves
    them all; each stream's total is the same as if it were summed alone.  ``buf[:, :fill]`` holds
    the values of the block not yet complete; the compiled judge (``numstd._native``) fills the same
    buffer and hands complete block sums to :meth:`extend`.
    """

    def __init__(self, width: int = 1) -> None:
        self.buf = np.zeros((width, BLOCK))
        self.fill = 0
        self._blocks: list[np.ndarray] = []

    def add(self, v: np.ndarray) -> None:
        width = self.buf.shape[0]
        v = v.reshape(width, -1)
        if self.fill:
            head = v[:, : BLOCK - self.fill]
            self.buf[:, self.fill : self.fill + head.shape[1]] = head
            self.fill += head.shape[1]
            v = v[:, head.shape[1]:]
            if self.fill < BLOCK:
                return
            self._blocks.append(_tree_sum(self.buf.reshape(width, 1, BLOCK)))
            self.fill = 0
        full = (v.shape[1] // BLOCK) * BLOCK
        if full:
            self._blocks.append(_tree_sum(v[:, :full].reshape(width, -1, BLOCK)))
        self.fill = v.shape[1] - full
        self.buf[:, : self.fill] = v[:, full:]

    def extend(self, sums: np.ndarray) -> None:
        """Append complete block sums, a ``(width, k)`` array (from the compiled judge)."""
        if sums.shape[1]:
            self._blocks.append(np.array(sums, dtype=np.float64))

    def totals(self) -> list[float]:
        """The sum of each stream: block sums combined by ``math.fsum`` (correctly rounded)."""
        blocks = list(self._blocks)
        if self.fill:
            pad = np.zeros((self.buf.shape[0], 1, BLOCK))
            pad[:, 0, : self.fill] = self.buf[:, : self.fill]
            blocks.append(_tree_sum(pad))
        if not blocks:
            return [0.0] * self.buf.shape[0]
        return [math.fsum(row) for row in np.concatenate(blocks, axis=1).tolist()]


def _tree_sum(a: np.ndarray) -> np.ndarray:
    """Sums over the last axis (length BLOCK, a power of two) by the explicit pairwise halving tree of
    :func:`numstd.reference.summation.halving_sum` (deterministic IEEE adds, no padding)."""
    from .summation import halving_sum

    return halving_sum(np.asarray(a, dtype=np.float64))[0]


class DistributionAccumulator:
    """Accumulates ULP errors chunk by chunk into an :class:`UlpDistribution`."""

    def __init__(self) -> None:
        self.count = 0
        self.signed_count = 0
        self.max = 0.0
        self._abs = _BlockSum()
        self._signed = _BlockSum(width=2)  # sign(r)·e and its square
        self._work = np.empty((2, 0))
        self._hist = np.zeros(_NBINS, dtype=np.int64)

    def add(self, err: np.ndarray, ref: np.ndarray, signed: np.ndarray | None = None) -> None:
        """Add finite signed ULP errors ``err`` with their references ``ref`` (1-D, C order).

        ``signed`` (boolean, optional): the elements that enter the signed statistics (default:
        those with ``ref != 0``; a caller's mask must exclude ``ref == 0``).
        """
        if err.size == 0:
            return
        err = np.ascontiguousarray(err, dtype=np.float64).reshape(-1)
        ref = np.ascontiguousarray(np.broadcast_to(ref, np.shape(err)), dtype=np.float64).reshape(-1)
        a = np.abs(err)
        self.count += int(a.size)
        self.max = max(self.max, float(a.max()))
        self._abs.add(a)
        sel = ref != 0 if signed is None else np.broadcast_to(signed, np.shape(err)).reshape(-1)
        # sign(r)·e and its square: flip the sign bit of e where r's is set
        s = np.empty(err.size)
        bits = s.view(np.uint64)
        np.bitwise_and(ref.view(np.uint64), _SIGN_BIT, out=bits)
        np.bitwise_xor(bits, err.view(np.uint64), out=bits)
        if not sel.all():
            s = s[sel]  # (1-D: boolean indexing of a 2-D array along its last axis is ~10x slower)
        if self._work.shape[1] < s.size:
            self._work = np.empty((2, s.size))
        st = self._work[:, :s.size]  # reused across chunks: a fresh 2n-element array per chunk makes
        st[0] = s                    # glibc map and unmap it each time (page faults doubled check's time)
        np.multiply(s, s, out=st[1])
        self.signed_count += int(s.size)
        self._signed.add(st)
        nat = compiled()
        if nat is not None and hasattr(nat, "hist_add"):  # (the same bins, decided on the bits)
            nat.hist_add(a, self._hist)
        else:
            self._hist += np.bincount(_bin_index(a), minlength=_NBINS)

    def result(self) -> UlpDistribution:
        if self.count == 0:
            return UlpDistribution()
        sum_s, sum_sq = self._signed.totals()
        mean_s = sum_s / self.signed_count if self.signed_count else 0.0
        var = sum_sq / self.signed_count - mean_s * mean_s if self.signed_count else 0.0
        return UlpDistribution(
            count=self.count, max=self.max, mean=self._abs.totals()[0] / self.count,
            mean_signed=mean_s, std_signed=math.sqrt(max(var, 0.0)), signed_count=self.signed_count,
            quantiles={q: self._quantile(q) for q in QUANTILES}, histogram=self._coarse(),
        )

    def _quantile(self, q: float) -> float:
        rank = max(1, math.ceil(q * self.count))
        k = int(np.searchsorted(np.cumsum(self._hist), rank))
        return min(_upper_edge(k), self.max)

    def _coarse(self) -> dict:
        """Counts in [0, 1/2], (1/2, 1], (1, 2], (2, 4], … up to the bin holding the maximum."""
        edges = [0.0]
        counts = []
        cum = np.concatenate([[0], np.cumsum(self._hist)])
        prev_k = 0
        e = -1
        while True:
            k = _edge_bin(2.0 ** e)  # last fine bin whose upper edge is 2^e
            counts.append(int(cum[k + 1] - cum[prev_k]))
            edges.append(2.0 ** e)
            prev_k = k + 1
            if 2.0 ** e >= self.max or k >= _NBINS - 2:
                break
            e += 1
        if prev_k < _NBINS:
            rest = int(cum[-1] - cum[prev_k])
            if rest:
                counts.append(rest)
                edges.append(math.inf)
        return {"edges": edges, "counts": counts}


_THRESHOLDS = fraction_thresholds()


def _edge_table() -> np.ndarray:
    """``U[k + _EDGE_OFF]``: the largest float64 ``x`` with ``x ≤ 2^(k/16)``, for ``k`` from two below the
    first bin to one above the last (exactly ``2^(k/16)`` when ``16 | k``; otherwise ``2^(k/16)`` is
    irrational and ``x = (2^52 + N_j)·2^(E−52)``, ``k = 16E + j``)."""
    ks = range(-_LO_OCT * BINS_PER_OCTAVE - 2, _HI_OCT * BINS_PER_OCTAVE + 2)
    out = []
    for k in ks:
        e, j = divmod(k, BINS_PER_OCTAVE)
        out.append(math.ldexp(1.0, e) if j == 0 else math.ldexp(float((1 << 52) + _THRESHOLDS[j - 1]), e - 52))
    return np.array(out)


_EDGE_OFF = _LO_OCT * BINS_PER_OCTAVE + 2
_EDGES = _edge_table()


def _bin_index(a: np.ndarray) -> np.ndarray:
    """Fine bin of ``|e|``: 0 for exact zero, then ``k = ceil(16·log2|e|)`` shifted and clipped.

    Exact: ``k`` is the integer with ``2^((k−1)/16) < |e| ≤ 2^(k/16)``.  ``log2`` (whose last bit
    differs between libraries) only gives an estimate, at most one off; one comparison with each
    neighbouring edge of :func:`_edge_table` settles it.  (The compiled judge decides the same ``k``
    from the exponent and fraction bits, ``numstd/_native.c``.)
    """
    lo, hi = -_LO_OCT * BINS_PER_OCTAVE, _HI_OCT * BINS_PER_OCTAVE
    with np.errstate(divide="ignore"):
        est = np.log2(a)
    est *= BINS_PER_OCTAVE
    np.ceil(est, out=est)
    np.clip(est, lo - 1, hi + 1, out=est)
    est += _EDGE_OFF
    k = est.astype(np.intp)
    k += a > _EDGES[k]
    k -= a <= _EDGES[k - 1]
    np.clip(k, lo + _EDGE_OFF, hi + _EDGE_OFF, out=k)
    k -= _EDGE_OFF - _LO_OCT * BINS_PER_OCTAVE - 1
    k[a == 0] = 0
    return k


def _upper_edge(k: int) -> float:
    if k == 0:
        return 0.0
    if k >= _NBINS - 1:
        return math.inf
    return 2.0 ** ((k - 1 - _LO_OCT * BINS_PER_OCTAVE) / BINS_PER_OCTAVE)


def _edge_bin(x: float) -> int:
    return int(round(math.log2(x) * BINS_PER_OCTAVE)) + _LO_OCT * BINS_PER_OCTAVE + 1
