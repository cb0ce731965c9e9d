"""Accumulator arithmetic: additions in one floating-point format, each rounded once.

An :class:`Accumulator` for a format F (precision ``p``) offers

- ``round(x)``: ``RN_F(x)``, round to nearest even (IEEE 754-2019 §4.3.1);
- ``add(x, y)``: ``RN_F(x + y)`` for ``x, y`` in F.  Computed as ``RN_F(RN_64(x + y))``, which
  equals ``RN_F(x + y)`` whenever ``53 >= 2p + 2`` (double rounding is innocuous for the sum of
  two p-bit numbers: Figueroa, "When is double rounding innocuous?", SIGNUM Newsl. 30(3), 1995;
  Boldo & Melquiond, IEEE TC 57(4), 2008) -- every format here except float64, whose own addition
  is used directly;
- ``fma(s, t)``: ``RN_F(s + t)`` for ``s`` in F and an exact float64 term ``t`` (a product that
  need not be in F), rounded once as by a fused multiply-add.  When ``t`` may lie outside F the
  sum goes through TwoSum (Knuth, TAOCP vol. 2, §4.2.2) and *round to odd* at 53 bits, which makes
  the second rounding exact for any ``p <= 51`` (Boldo & Melquiond 2008, Thm. 3);
- ``sum_exact(terms, k0, k1)``: ``RN_F(sum of terms k0..k1-1)``, the exact sum rounded once.

fp32 values are held in float32 arrays (float32 + float32 in numpy *is* ``RN_32``); other formats
in float64 arrays of values of the format.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.formats import Format, round_to
from ._terms import Terms

__all__ = ["Accumulator"]


def _round_to_odd(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``RO_53(hi + lo)`` for a TwoSum pair (``hi = RN_64(hi + lo)``, ``lo`` its exact error).

    Round to odd (Boldo & Melquiond 2008): the exact value when representable (``lo == 0``),
    otherwise the float64 neighbour of the exact value whose last significand bit is 1.  It is
    computed as round-toward-zero with the last bit set: ``RZ = hi`` when ``lo`` has the sign of
    ``hi`` (the exact value is farther from zero) and the next pattern toward zero otherwise
    (float64 bit patterns are ordered like magnitudes), then ``RZ | 1``.
    """
    inexact = lo != 0
    towards_zero = inexact & (np.signbit(lo) != np.signbit(hi))
    bits = hi.view(np.int64) - towards_zero
    bits |= inexact
    return np.where(np.isfinite(hi), bits.view(np.float64), hi)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: ``s = RN_64(a + b)`` and the exact error ``e = (a + b) - s``."""
    s = a + b
    bp = s - a
    e = (a - (s - bp)) + (b - bp)
    return s, e


class Accumulator:
    """Round-once arithmetic in the format ``fmt`` (see the module docstring).

    Parameters
    ----------
    fmt : Format
        The accumulation format.
    terms_in_format : bool
        True when every term passed to :meth:`fma` is known to be a value of ``fmt``; then
        ``fma`` takes the fast path ``RN_F(RN_64(s + t))`` (exact by the double-rounding theorem).
    """

    def __init__(self, fmt: Format, terms_in_format: bool = False) -> None:
        if fmt.name != "float64" and 2 * fmt.p + 2 > 53:  # pragma: no cover - no such format yet
            raise ValueError(f"accumulation format {fmt.name} is too wide for float64 emulation")
        self.fmt = fmt
        self.native = fmt.name in ("float64", "float32")
        self.dtype = np.float32 if fmt.name == "float32" else np.float64
        self.fast_terms = terms_in_format or fmt.name == "float64"

    def round(self, x: np.ndarray) -> np.ndarray:
        """``RN_F(x)`` of float64 (or float32) values."""
        if self.fmt.name == "float64":
            return np.asarray(x, dtype=np.float64)
        if self.fmt.name == "float32":
            with np.errstate(over="ignore"):
                return np.asarray(x, dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            return round_to(np.asarray(x, dtype=np.float64), self.fmt).astype(np.float64)

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``RN_F(x + y)`` for values ``x, y`` of the format."""
        with np.errstate(over="ignore", invalid="ignore"):
            if self.native:
                return x + y  # float32 + float32 or float64 + float64: IEEE round to nearest
            return self.round(x + y)

    def fma(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``RN_F(s + t)`` for ``s`` in the format and an exact float64 term ``t``."""
        with np.errstate(over="ignore", invalid="ignore"):
            if self.fast_terms:
                return self.round(np.add(s, t, dtype=np.float64))
            hi, lo = two_sum(np.asarray(s, dtype=np.float64), t)
            return self.round(_round_to_odd(hi, lo))

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        """An accumulator of zeros."""
        return np.zeros(shape, dtype=self.dtype)

    def sum_exact(self, terms: Terms, k0: int, k1: int) -> np.ndarray:
        """``RN_F(t_k0 + ... + t_{k1-1})``: the exact sum of the terms rounded once (RNE).

        Vectorised path: a TwoSum cascade gives ``hi`` (the float64 running sum) and the exact
        errors ``e_k`` with ``sum t = hi + sum e_k`` exactly.  If every ``e_k`` is zero, ``hi`` is
        the exact sum.  Otherwise ``v = RN_64(hi + RN_64(sum e_k))`` is within
        ``D = (n + 2) * 2**-51 * sum|e_k| + 2**-50 * |v|`` of the exact sum (Higham, *Accuracy and
        Stability*, §4.2, with a factor 2 of slack), and ``RN_F(v - D) == RN_F(v + D)`` proves the
        rounding.  The remaining elements (within ``D`` of a rounding boundary of F, e.g. exact
        ties) are decided exactly: ``f = fsum(terms)`` is ``RN_64`` of the exact sum (Shewchuk's
        algorithm, Python's ``math.fsum``) and, when ``f`` is a midpoint of F, the sign of
        ``fsum(terms + [-f])`` says on which side of it the exact sum lies.
        """
        n = k1 - k0
        if n <= 0:
            return self.zeros(terms.shape)
        hi = np.zeros(terms.shape)
        err = np.zeros(terms.shape)
        abs_err = np.zeros(terms.shape)
        step = terms.chunk_size()
        with np.errstate(over="ignore", invalid="ignore"):
            for c0 in range(k0, k1, step):
                for t in terms.terms(c0, min(c0 + step, k1)):
                    hi, e = two_sum(hi, t)
                    err += e
                    abs_err += np.abs(e)
            exact = (abs_err == 0) | ~np.isfinite(hi)
            result = self.round(hi)
            if exact.all():
                return result
            v = hi + err
            d = (n + 2) * np.ldexp(abs_err, -51) + np.ldexp(np.abs(v), -50)
            low, high = self.round(v - d), self.round(v + d)
            proven = ~exact & (low == high)
            result = np.where(proven, low, result)
            undecided = np.flatnonzero(~exact & ~proven)
        if undecided.size:
            flat = result.reshape(-1)
            for i in undecided:
                flat[i] = self._round_exact_sum(terms.element_terms(int(i), k0, k1))
        return result

    def _round_exact_sum(self, values: np.ndarray) -> float:
        """``RN_F`` of the exact sum of a 1-D array of float64 values (scalar, exact)."""
        vals = [float(v) for v in values]
        try:
            f = math.fsum(vals)
        except (OverflowError, ValueError):  # partials beyond float64 or inf - inf
            with np.errstate(over="ignore", invalid="ignore"):
                return float(self.round(np.array(sum(vals))))
        r = float(self.round(np.array(f)))
        if r == f or not math.isfinite(f):
            return r
        fmt = self.fmt
        _, e = math.frexp(abs(f))
        quantum_exp = max(e - 1, fmt.emin) - fmt.p + 1
        scaled = math.ldexp(abs(f), -quantum_exp)
        if scaled - math.floor(scaled) != 0.5:  # f is not a midpoint of F: no double rounding
            return r
        side = math.fsum(vals + [-f])  # exact sign of (exact sum - f)
        if side == 0:
            return r  # a true tie: RN_F(f) already chose the even neighbour
        away = (side > 0) == (f > 0)  # exact sum beyond the midpoint, away from zero
        mag = math.ldexp(math.floor(scaled) + (1 if away else 0), quantum_exp)
        return float(self.round(np.array(math.copysign(mag, f))))
