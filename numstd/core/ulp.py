"""Units in the last place: the spacing ``ulp``, signed ``ulp_error`` and ``ulp_distance``.

Definitions (DESIGN.md, "ULP error"), for a format with precision ``p`` and minimum normal
exponent ``emin``:

- ``ulp(r) = 2**(max(floor(log2|r|), emin) - p + 1)`` — Goldberg's spacing at the *exact* value
  ``r`` (Goldberg, "What every computer scientist should know about floating-point arithmetic",
  ACM Comput. Surv. 23(1), 1991, §1.2; Muller, "On the definition of ulp(x)", INRIA RR-5504,
  2005): the distance between consecutive values of the format in the binade of ``r``, constant
  below the smallest normal.  A correctly rounded (RNE) result has ``|ulp_error| <= 0.5``.
- ``ulp_error(actual, reference) = (actual - reference) / ulp(reference)``, signed.
- ``ulp_distance(a, b)``: how many representable values of the format one steps over from ``b``
  to ``a`` (ordered-integer distance of the bit patterns, as ``numpy.testing.assert_array_max_ulp``
  and B. Dawson, "Comparing floating point numbers, 2012 edition"), signed like ``a - b``.

Everything is exact: ``2**floor(log2|r|)`` is read from the exponent bits of the float64 ``r``
and scaled by powers of two; no logarithm is evaluated.  float64 arrays of up to 2**20 elements are
done in one vectorized pass; anything else in cache-sized chunks (``np.nditer`` buffering), so
memory stays a few times the output's size whatever the input dtypes and broadcasting.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .arrays import to_numpy
from .errors import ShapeError
from .formats import Format, get_format, round_to

__all__ = ["ulp", "ulp_error", "ulp_distance"]

_BUFFER = 1 << 13  # elements per chunk (64 KiB of float64 per operand)


def _array(x: Any, name: str) -> np.ndarray:
    """``x`` as a numpy array of real numbers (numpy, ml_dtypes, torch, jax or scalars)."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "V":  # ml_dtypes arrays pass as they are
        return x
    return to_numpy(x, name=name)


def _chunked(
    fn: Callable[..., np.ndarray], arrays: list[np.ndarray], in_dtypes: list[np.dtype]
) -> np.ndarray:
    """``fn(*chunks)`` over the broadcast of ``arrays`` (cast to ``in_dtypes``), into float64."""
    try:
        it = np.nditer(
            [*arrays, None],
            flags=["external_loop", "buffered", "zerosize_ok"],
            op_flags=[["readonly"]] * len(arrays) + [["writeonly", "allocate"]],
            op_dtypes=[*in_dtypes, np.dtype(np.float64)],
            buffersize=_BUFFER,
            casting="unsafe",
        )
    except ValueError as exc:  # shapes that do not broadcast
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ShapeError(
            f"arrays of shapes {shapes} do not broadcast together; pass arrays of one shape "
            f"(or numpy-broadcastable shapes) ({exc})"
        ) from None
    with it, np.errstate(invalid="ignore", over="ignore"):
        for *chunks, out in it:
            out[...] = fn(*chunks)
        return it.operands[-1]


_EXPONENT_BITS = np.uint64(0x7FF0000000000000)
_WHOLE = 1 << 20  # float64 arrays up to this size are done in one vectorized pass (no nditer)


def _spacing_params(f: Format) -> tuple[float, float]:
    """``(2**(1 - p), 2**(emin - p + 1))`` of format ``f``: ``ulp(r) = max(2**floor(log2|r|) *
    first, second)`` (:func:`_spacing`; the compiled judge computes it the same way)."""
    return 2.0 ** (1 - f.p), 2.0 ** (f.emin - f.p + 1)


def _spacing(r: np.ndarray, f: Format) -> np.ndarray:
    """``ulp(r)`` of float64 ``r`` from its exponent bits (exact; NaN for non-finite ``r``).

    Masking everything but the exponent field of ``|r|`` gives ``2**floor(log2|r|)`` for a normal
    float64, 0 for zero and float64 subnormals (below every format's ``2**emin``) and +inf for
    non-finite ``r``; multiplying by ``2**(1 - p)`` is exact (a power of two at least ``2**-1074``),
    and the maximum with ``2**(emin - p + 1)`` is the ``max(., emin)`` of the definition.
    """
    from .native import compiled

    nat = compiled()
    if nat is not None and r.dtype == np.float64 and r.flags.c_contiguous:
        out = np.empty(r.shape)
        nat.spacing(r, out, *_spacing_params(f))  # the same operations, in C
        return out
    scale, floor = _spacing_params(f)
    out = np.bitwise_and(r.view(np.uint64), _EXPONENT_BITS, out=np.empty(r.shape, np.uint64)).view(np.float64)
    out *= scale
    np.maximum(out, floor, out=out)
    np.copyto(out, np.nan, where=np.isinf(out))
    return out


def _f64(x: np.ndarray) -> bool:
    return x.dtype == np.float64 and x.size <= _WHOLE


def ulp(r: Any, fmt: Any, *, scales: Any = None, tensor_scale: Any = None) -> np.ndarray:
    """Spacing of ``fmt`` at the exact real value ``r``.

    ``ulp(r) = 2**(max(floor(log2|r|), emin) - p + 1)``; ``ulp(0)`` is the smallest subnormal
    ``2**(emin - p + 1)``; for ``|r| > max_finite`` the same formula continues the binades above
    the format's range; non-finite ``r`` gives NaN.

    Parameters
    ----------
    r : array-like
        Exact values (converted to float64; pass float64 references).
    fmt : format-like
        Anything :func:`numstd.formats.get_format` accepts.

    Returns
    -------
    numpy.ndarray of float64, same shape as ``r`` (0-d for a scalar).

    Examples
    --------
    >>> float(ulp(1.0, "float32")) == 2.0**-23, float(ulp(1.5, "bf16")) == 2.0**-7
    (True, True)

    A block-scaled ``fmt`` (``"mxfp4"``, ...) gives ``S * ulp_elem(r / S)`` with ``S`` each element's
    scale (``scales=``, or the format's rule applied to ``r``; :func:`numstd.core.scaled.scaled_ulp`).
    """
    from .scaled import is_scaled, scaled_ulp

    if is_scaled(fmt):
        return scaled_ulp(r, fmt, scales=scales, tensor_scale=tensor_scale)
    f = get_format(fmt)
    arr = _array(r, "r")
    if _f64(arr):
        return _spacing(np.asarray(arr), f)
    return _chunked(lambda rr: _spacing(rr, f), [arr], [np.dtype(np.float64)])


def ulp_error(actual: Any, reference: Any, fmt: Any, *, scales: Any = None, tensor_scale: Any = None) -> np.ndarray:
    """Signed error of ``actual`` in units of ``ulp(reference)`` of the output format ``fmt``.

    ``ulp_error = (actual - reference) / ulp(reference, fmt)``: exact except for the single float64
    rounding of the difference, since the ULP is a power of two (if the difference overflows, the
    two scaled operands are subtracted instead).  A correctly rounded result has ``|ulp_error| <= 0.5``.

    Non-finite values: both NaN -> 0; both the same infinity -> 0; every other case where either
    side is NaN or infinite (NaN vs a number, an infinity vs a finite value, +inf vs -inf) -> NaN,
    so that special values are judged by a specials criterion, never by ULP statistics.

    Parameters
    ----------
    actual : array-like
        The result to judge, any real dtype (numpy, ml_dtypes, torch, jax); converted to float64.
    reference : array-like
        The exact value, float64 (other dtypes are converted).  Broadcasts against ``actual``.
    fmt : format-like
        The output format whose ULP is the unit.

    Returns
    -------
    numpy.ndarray of float64 with the broadcast shape.

    A block-scaled ``fmt`` measures in its ULP ``S * ulp_elem(reference / S)`` (:func:`ulp`; ``scales=``
    as there); ``actual`` and ``reference`` must then have one shape.
    """
    from .scaled import is_scaled

    if is_scaled(fmt):
        a64 = np.asarray(_array(actual, "actual"), dtype=np.float64)
        r64 = np.asarray(_array(reference, "reference"), dtype=np.float64)
        if a64.shape != r64.shape:
            raise ShapeError(f"actual {a64.shape} and reference {r64.shape}: a block-scaled format needs one shape")
        return _scaled_error(a64, r64, ulp(r64, fmt, scales=scales, tensor_scale=tensor_scale))
    f = get_format(fmt)

    a_arr, r_arr = _array(actual, "actual"), _array(reference, "reference")
    if _f64(a_arr) and _f64(r_arr) and a_arr.shape == r_arr.shape:
        return _scaled_error(np.asarray(a_arr), np.asarray(r_arr), _spacing(np.asarray(r_arr), f))
    f64 = np.dtype(np.float64)
    return _chunked(lambda a, r: _scaled_error(a, r, _spacing(r, f)), [a_arr, r_arr], [f64, f64])


def _scaled_error(a: np.ndarray, r: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``(a - r) / u`` for ``u = ulp(r)`` (see :func:`ulp_error` for spills and specials)."""
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.asarray(a - r)
        err /= u  # u is a power of two: exact
        finite = np.isfinite(a) & np.isfinite(r)
        spill = finite & ~np.isfinite(err)  # |a - r| beyond float64 (float64 format only)
        if spill.any():
            err[spill] = a[spill] / u[spill] - r[spill] / u[spill]
        special = ~finite
        if special.any():
            same = (np.isnan(a) & np.isnan(r)) | (np.isinf(a) & (a == r))
            err[special] = np.where(same[special], 0.0, np.nan)
    return err


def _as_format(x: Any, f: Format, name: str) -> np.ndarray:
    """``x`` as an array of ``f``'s dtype: as is when it has that dtype (not tf32), else RNE."""
    arr = _array(x, name)
    if arr.dtype == f.dtype and f.name != "tf32":
        return arr
    return round_to(arr, f, "rne")


def _pattern_info(f: Format) -> tuple[int, int, int]:
    """(width of a pattern, shift applied to the stored bits, largest magnitude that is not NaN)."""
    storage = 8 * f.dtype.itemsize
    shift = storage - f.bits if f.name == "tf32" else 0  # tf32: the top 19 bits of a float32
    uint = np.dtype(f"uint{storage}")
    max_mag = int(np.array(f.max_finite, dtype=f.dtype).view(uint)) >> shift
    return f.bits, shift, max_mag + (1 if f.has_inf else 0)  # +inf's pattern follows max's


def ulp_distance(a: Any, b: Any, fmt: Any) -> np.ndarray:
    """Signed number of representable values of ``fmt`` between ``b`` and ``a``.

    Each bit pattern maps to an ordered integer: ``+m`` for a pattern with sign bit 0 and magnitude
    bits ``m``, ``-m`` for sign bit 1 (sign-magnitude to two's-complement order), so consecutive
    values differ by 1, ``+0`` and ``-0`` both map to 0, and ``±inf`` sit next to
    ``±max_finite``.  ``ulp_distance(a, b) = ord(a) - ord(b)`` — signed like ``a - b``, and
    ``ulp_distance(a, b) = -ulp_distance(b, a)``.  tf32 uses the float32 pattern shifted right by
    13 bits (its 19 logical bits); the sub-byte formats (fp6, fp4) the low 6 or 4 bits of their
    byte; float8_e8m0fnu (unsigned) its pattern itself.

    Inputs that are not already arrays of ``fmt``'s dtype are first rounded into ``fmt`` with
    :func:`numstd.formats.round_to` (RNE, non-saturating: values beyond the range become ±inf, or
    NaN in formats without infinities); tf32 inputs are always rounded, since a float32 array need
    not hold tf32 values.  Both NaN -> 0; exactly one NaN -> NaN.

    Parameters
    ----------
    a, b : array-like
        numpy (incl. ml_dtypes), torch or jax arrays or scalars; they broadcast.
    fmt : format-like

    Returns
    -------
    numpy.ndarray of float64 with the broadcast shape; exact up to 2**53 (larger float64 distances
    are rounded to float64).
    """
    f = get_format(fmt)
    width, shift, not_nan = _pattern_info(f)
    uint = np.dtype(f"uint{8 * f.dtype.itemsize}")
    sign_shift = np.uint64(width - 1)
    mag_mask = np.uint64((1 << (width - 1)) - 1)
    no_neg_zero = not f.has_negative_zero  # fnuz: the pattern "-0" is the NaN

    def ordered(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = bits.astype(np.uint64) >> np.uint64(shift)
        if not f.signed:  # E8M0: every bit is exponent; the pattern is the order
            return np.zeros(b.shape, bool), b, b > np.uint64(not_nan)
        sign = (b >> sign_shift).astype(bool)
        mag = b & mag_mask
        nan = mag > np.uint64(not_nan)
        if no_neg_zero:
            nan |= sign & (mag == 0)
        return sign, mag, nan

    def chunk(bits_a: np.ndarray, bits_b: np.ndarray) -> np.ndarray:
        sa, ma, na = ordered(bits_a)
        sb, mb, nb = ordered(bits_b)
        # |ord(a) - ord(b)| in uint64 cannot overflow: magnitudes < 2**63, so their sum < 2**64.
        same = sa == sb
        size = np.where(same, np.maximum(ma, mb) - np.minimum(ma, mb), ma + mb).astype(np.float64)
        # sign of ord(a) - ord(b): same signs compare magnitudes (reversed when negative);
        # opposite signs take a's sign (a >= 0 > b gives +, a < 0 <= b gives -).
        negative = np.where(same, np.where(sa, mb < ma, ma < mb), sa)
        dist = np.where(negative, -size, size) + 0.0  # + 0.0: no -0 distances
        dist[na & nb] = 0.0
        dist[na ^ nb] = np.nan
        return dist

    xa = _as_format(a, f, "a").view(uint)  # same itemsize: a view for any strides
    xb = _as_format(b, f, "b").view(uint)
    return _chunked(chunk, [xa, xb], [uint, uint])
