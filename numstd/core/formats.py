"""Floating-point formats: one declarative table, lookup, and rounding real values into a format.

A :class:`Format` is a binary floating-point format described by its precision ``p`` (significand
bits *including* the implicit bit), the exponent ``emin`` of its smallest normal binade, the
exponent ``emax`` of its largest finite binade, its largest finite value and which special values
it has.  Every representable finite value is ``m * 2**(e - p + 1)`` with an integer
``0 <= m < 2**p`` and ``emin <= e <= emax`` (IEEE 754-2019 §3.3), capped at ``max_finite`` (the
fp8 formats of the OCP 8-bit specification and the AMD/Graphcore ``fnuz`` variants reserve the top
mantissa pattern(s) of the top binade for NaN, so their ``max_finite`` is below
``(2 - 2**(1-p)) * 2**emax``).

:func:`round_to` is an implementation of rounding *independent of* numpy/ml_dtypes casts, generic
in ``(p, emin, max_finite)``: for each finite real ``x`` (held exactly in float64)

    E = max(floor(log2|x|), emin)          (floor(log2) from ``np.frexp``, exact)
    q = 2**(E - p + 1)                     (the quantum of x's binade; constant below 2**emin)
    round_to(x) = sign(x) * R(|x| / q) * q (scaling by q with ``np.ldexp``: exact)

where ``R`` is ``rint`` (ties to even), ``trunc`` or stochastic rounding of a real in
``[0, 2**p]``.  Results above ``max_finite`` overflow as described in :func:`round_to`.
References: IEEE 754-2019 §4.3 (rounding-direction attributes), §7.4 (overflow);
OCP 8-bit Floating Point Specification (OFP8) rev. 1.0 (2023); Micikevicius et al., "FP8 formats
for deep learning" (2022); NVIDIA PTX ISA, ``cvt`` with ``.satfinite``; Croci et al.,
"Stochastic rounding: implementation, error analysis and applications", R. Soc. Open Sci. (2022).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .arrays import to_numpy
from .errors import DtypeError, FormatError

__all__ = ["Format", "FORMATS", "ROUNDING_MODES", "get_format", "format_of", "round_to"]

ROUNDING_MODES: tuple[str, ...] = ("rne", "rtz", "stochastic")

# Elements per step in round_to.  The float64 temporaries of a chunk (64 KiB each) stay in cache and
# below glibc's 128 KiB mmap threshold, so they are reused from the heap instead of being mapped
# and page-faulted per chunk (measured: 2**13 is ~5x faster than 2**16 on 2**24 elements).
_CHUNK = 1 << 13


@dataclass(frozen=True)
class Format:
    """A binary floating-point format (one row of :data:`FORMATS`).

    Attributes
    ----------
    name : str
        Canonical name (``"bfloat16"``), equal to the ml_dtypes/numpy dtype name except ``tf32``.
    aliases : tuple of str
        Other accepted names, matched case-insensitively by :func:`get_format`.
    bits : int
        Logical bits of one value (tf32: 19, although it is stored in a float32).
    p : int
        Precision in bits, including the implicit leading bit (float32: 24, bfloat16: 8).
    emin, emax : int
        Exponents of the smallest normal binade and of the largest finite binade.
    max_finite : float
        Largest finite value (exact in float64).
    has_inf, has_nan, has_negative_zero : bool
        Which special values exist.  ``fnuz`` formats have neither infinities nor ``-0``; their
        single NaN is the bit pattern ``0x80``.  ``float8_e4m3fn`` has no infinities.
    numpy_dtype : str
        Name of the numpy / ml_dtypes dtype that holds values of the format (tf32: ``"float32"``).
    signed, has_zero : bool
        ``False`` only for the OCP MX scale type ``float8_e8m0fnu``: eight exponent bits and nothing
        else, the values ``2**-127 .. 2**127`` (no sign, no zero, no subnormals) and NaN ``0xFF``.
    """

    name: str
    aliases: tuple[str, ...]
    bits: int
    p: int
    emin: int
    emax: int
    max_finite: float
    has_inf: bool
    has_nan: bool
    has_negative_zero: bool
    numpy_dtype: str
    signed: bool = True
    has_zero: bool = True

    @property
    def u(self) -> float:
        """Unit roundoff ``u = 2**-p`` (round to nearest; Higham, *Accuracy and Stability*, 2.1)."""
        return math.ldexp(1.0, -self.p)

    @property
    def eps(self) -> float:
        """Machine epsilon ``2**(1-p)``: the spacing of the format just above 1."""
        return math.ldexp(1.0, 1 - self.p)

    @property
    def smallest_normal(self) -> float:
        """Smallest positive normal value ``2**emin``."""
        return math.ldexp(1.0, self.emin)

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive subnormal value ``2**(emin - p + 1)``."""
        return math.ldexp(1.0, self.emin - self.p + 1)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype holding this format's values (ml_dtypes types resolved on first use)."""
        if self.numpy_dtype in ("float64", "float32", "float16"):
            return np.dtype(self.numpy_dtype)
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, self.numpy_dtype))

    def __str__(self) -> str:
        return self.name


def _ieee(name: str, aliases: tuple[str, ...], bits: int, p: int, emax: int, dtype: str) -> Format:
    """An IEEE 754 interchange-style format: emin = 1 - emax, max = (2 - 2**(1-p)) * 2**emax."""
    max_finite = float(np.ldexp(2.0 - np.ldexp(1.0, 1 - p), emax))
    return Format(name, aliases, bits, p, 1 - emax, emax, max_finite, True, True, True, dtype)


_TABLE: tuple[Format, ...] = (
    _ieee("float64", ("fp64", "f64", "double"), 64, 53, 1023, "float64"),
    _ieee("float32", ("fp32", "f32", "float", "single"), 32, 24, 127, "float32"),
    _ieee("tf32", ("tensorfloat32", "tensorfloat-32", "tf-32"), 19, 11, 127, "float32"),
    _ieee("float16", ("fp16", "f16", "half"), 16, 11, 15, "float16"),
    _ieee("bfloat16", ("bf16",), 16, 8, 127, "bfloat16"),
    # OCP OFP8 E4M3: no infinities; S.1111.111 is NaN, so the top binade stops at 1.75 * 2**8.
    Format("float8_e4m3fn", ("e4m3", "fp8_e4m3", "e4m3fn", "fp8_e4m3fn", "f8e4m3fn"),
           8, 4, -6, 8, 448.0, False, True, True, "float8_e4m3fn"),
    # OCP OFP8 E5M2: IEEE-like (infinities, several NaNs).
    _ieee("float8_e5m2", ("e5m2", "fp8_e5m2", "f8e5m2"), 8, 3, 15, "float8_e5m2"),
    # fnuz (AMD MI300 / Graphcore): exponent bias one larger, no inf, no -0, NaN = 0x80.
    Format("float8_e4m3fnuz", ("e4m3fnuz", "fp8_e4m3fnuz", "f8e4m3fnuz"),
           8, 4, -7, 7, 240.0, False, True, False, "float8_e4m3fnuz"),
    Format("float8_e5m2fnuz", ("e5m2fnuz", "fp8_e5m2fnuz", "f8e5m2fnuz"),
           8, 3, -15, 15, 57344.0, False, True, False, "float8_e5m2fnuz"),
    # OCP MX v1.0 element types (§5.3.2-5.3.3): no infinities and no NaN (every pattern is a number);
    # one per byte in ml_dtypes (the low 6 or 4 bits).  Block-scaled formats: numstd.core.scaled.
    Format("float6_e2m3fn", ("e2m3", "fp6_e2m3", "e2m3fn", "fp6_e2m3fn", "f6e2m3fn"),
           6, 4, 0, 2, 7.5, False, False, True, "float6_e2m3fn"),
    Format("float6_e3m2fn", ("e3m2", "fp6_e3m2", "e3m2fn", "fp6_e3m2fn", "f6e3m2fn"),
           6, 3, -2, 4, 28.0, False, False, True, "float6_e3m2fn"),
    Format("float4_e2m1fn", ("e2m1", "fp4_e2m1", "e2m1fn", "fp4_e2m1fn", "f4e2m1fn", "fp4"),
           4, 2, 0, 2, 6.0, False, False, True, "float4_e2m1fn"),
    # OCP MX v1.0 scale type E8M0 (§5.4.1): 2**(code - 127) for code 0..254, NaN = 0xFF.
    Format("float8_e8m0fnu", ("e8m0", "fp8_e8m0", "e8m0fnu", "fp8_e8m0fnu", "f8e8m0fnu"),
           8, 1, -127, 127, 2.0**127, False, True, False, "float8_e8m0fnu", signed=False, has_zero=False),
)

FORMATS: Mapping[str, Format] = types.MappingProxyType({f.name: f for f in _TABLE})
"""Read-only mapping canonical name -> :class:`Format` of every supported format."""

# Lower-cased names and aliases -> Format.  Built from the table above (no I/O, no imports).
_BY_NAME: Mapping[str, Format] = types.MappingProxyType(
    {n.lower(): f for f in _TABLE for n in (f.name, *f.aliases)}
)
# Prefixes of str(dtype) for torch ("torch.bfloat16") and jax/numpy type objects.
_PREFIXES = ("torch.", "jax.numpy.", "jnp.", "numpy.", "np.", "ml_dtypes.")


def _valid_names() -> str:
    return ", ".join(f"{f.name} ({', '.join(f.aliases)})" for f in _TABLE)


def _lookup_name(name: str) -> Format | None:
    key = name.strip().lower()
    if key.startswith("<class '") and key.endswith("'>"):  # str() of a jax/numpy scalar type
        key = key[len("<class '"):-2]
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    return _BY_NAME.get(key)


def get_format(fmt: Any) -> Format:
    """Return the :class:`Format` named or typed by ``fmt``.

    Parameters
    ----------
    fmt : Format, str, numpy dtype, dtype-like type, torch dtype or jax dtype
        A :class:`Format`; a canonical name or alias, case-insensitive (``"bf16"``, ``"FP8_E4M3"``,
        ``"half"``; ``"float"`` means float32 as in C and torch); a numpy or ml_dtypes dtype, scalar
        type or dtype string (``np.float16``, ``ml_dtypes.bfloat16``, ``"<f4"``); a torch dtype
        (recognised by ``str()``, e.g. ``"torch.bfloat16"``; torch is not imported) or a jax dtype.
        A float32 dtype means ``float32``; tf32 has to be asked for by name.

    Returns
    -------
    Format

    Raises
    ------
    FormatError
        For anything that does not name one of the formats; the message lists the valid names.
    """
    if isinstance(fmt, Format):
        return fmt
    found: Format | None = None
    if fmt is None:  # np.dtype(None) would mean float64
        raise FormatError(f"no format given (None); use one of these names: {_valid_names()}")
    if isinstance(fmt, str):
        found = _lookup_name(fmt)
        if found is None:
            try:
                found = _BY_NAME.get(np.dtype(fmt).name)  # "f4", "<f8", "float8_e5m2"
            except TypeError:
                found = None
    elif type(fmt).__module__.startswith("torch"):
        found = _lookup_name(str(fmt))
    else:
        try:
            dt = np.dtype(fmt)  # numpy/ml_dtypes dtypes and scalar types, jax scalar types
        except TypeError:
            dt = None
        if dt is not None and dt.kind != "O":
            found = _BY_NAME.get(dt.name)
        else:
            found = _lookup_name(str(fmt))
    if found is None:
        raise FormatError(
            f"unknown floating-point format {fmt!r}; use a Format, a dtype of one of the formats, "
            f"or one of these names (aliases in parentheses): {_valid_names()}"
        )
    return found


def format_of(array: Any) -> Format:
    """Return the format of an array's dtype (numpy, ml_dtypes, torch or jax array).

    A float32 array is ``float32`` (tf32 values are stored in float32 but are not recognisable).

    Raises
    ------
    DtypeError
        For integer, boolean or other non-floating dtypes.
    """
    dt = _as_numpy(array, "array").dtype
    found = _BY_NAME.get(dt.name)
    if found is None:
        raise DtypeError(
            f"array dtype {dt} is not one of the floating-point formats; "
            f"convert it first (e.g. .astype(np.float32)); formats: {', '.join(FORMATS)}"
        )
    return found


def _as_numpy(x: Any, name: str) -> np.ndarray:
    """``to_numpy``, letting numpy arrays of the table's ml_dtypes dtypes through as they are."""
    if isinstance(x, np.ndarray) and x.dtype.name in _BY_NAME:
        return x
    return to_numpy(x, name=name)


def _float64_source(x: Any) -> np.ndarray:
    """``x`` as a numpy array whose values float64 can hold, or an error saying why not.

    The array keeps its dtype (conversion happens chunk by chunk in :func:`round_to`); int64,
    uint64 and long double arrays are checked chunk by chunk by :func:`_chunk_float64`.
    """
    arr = _as_numpy(x, "x")
    dt = arr.dtype
    if dt.name in _BY_NAME or dt.kind in "biuf":
        return arr
    raise DtypeError(f"x: cannot round values of dtype {dt}; pass real numbers")


def _chunk_float64(chunk: np.ndarray) -> np.ndarray:
    """A chunk converted to float64, checking exactness where float64 could round it."""
    dt = chunk.dtype
    with np.errstate(invalid="ignore"):  # NaN of a narrow format
        out = chunk.astype(np.float64)  # a fresh array
    if dt.kind in "iuf" and dt.itemsize > (4 if dt.kind in "iu" else 8):
        with np.errstate(invalid="ignore", over="ignore"):
            lossless = np.array_equal(out.astype(dt), chunk, equal_nan=dt.kind == "f")
        if not lossless:
            raise DtypeError(
                f"x of dtype {dt} holds values that float64 cannot represent exactly, so rounding "
                "them would round twice; pass values that fit in float64 (|integers| <= 2**53)"
            )
    return out


def _round_chunk(
    x: np.ndarray, fmt: Format, mode: str, saturate: bool, u: np.ndarray | None
) -> np.ndarray:
    """Round a 1-D float64 chunk into ``fmt``; returns float64 values of the format."""
    a = np.abs(x)
    finite = np.isfinite(a)
    all_finite = bool(finite.all())
    if not all_finite:
        a[~finite] = 0.0
    _, e = np.frexp(a)  # a = m * 2**e, 0.5 <= m < 1, so floor(log2 a) = e - 1 (e = 0 for a = 0)
    np.maximum(e, fmt.emin + 1, out=e)  # E = max(e - 1, emin)
    e -= fmt.p  # exponent of the quantum q = 2**(E - p + 1)
    s = np.ldexp(a, -e)  # |x| / q, exact: 0 <= s < 2**p
    if mode == "rne":
        np.rint(s, out=s)
    elif mode == "rtz":
        np.trunc(s, out=s)
    else:  # stochastic: away from zero with probability frac(s) (so E[result] = x)
        floor = np.floor(s)
        s -= floor  # fraction in [0, 1), exact
        s = floor + (u < s)
    with np.errstate(over="ignore"):  # beyond float64 only when rounding up to 2**1024
        r = np.ldexp(s, e)
    over = r > fmt.max_finite
    if over.any():
        if saturate or mode == "rtz" or not fmt.has_nan:
            r[over] = fmt.max_finite
        else:
            r[over] = np.inf if fmt.has_inf else np.nan
    if not all_finite:
        inf = np.isinf(x)
        r[np.isnan(x)] = np.nan
        sat = saturate or not fmt.has_nan
        r[inf] = fmt.max_finite if sat else (np.inf if fmt.has_inf else np.nan)
    if not fmt.has_zero:  # E8M0: no zero, so a tiny magnitude's nearest value is 2**emin
        np.maximum(r, fmt.smallest_normal, out=r)
    np.copysign(r, x, out=r)
    if not fmt.signed:  # E8M0: zero and negative numbers have no encoding
        r[~(x > 0)] = np.nan
    if not fmt.has_negative_zero:
        r += 0.0  # -0 + 0 = +0 under round to nearest: fnuz formats have no -0
    return r


_HW_SOURCES = (np.dtype(np.float64), np.dtype(np.float32))

# float64 values and the float32 values IEEE 754 round-to-nearest-even gives them: ties to even in
# both signs, a non-tie just above a tie, subnormal results (kept, not flushed), a tie at the
# smallest subnormal (to even: 0 and 2**-148)
_PROBE_IN = np.array([1 + 2.0**-24, 1 + 2.0**-23 + 2.0**-24, 1 + 2.0**-24 + 2.0**-40, -(1 + 2.0**-24 + 2.0**-40),
                      -(1 + 2.0**-23 + 2.0**-24), 2.0**-149, 2.0**-150, 3 * 2.0**-150, 2.0**-126 - 2.0**-150])
_PROBE_OUT = np.array([1.0, 1 + 2.0**-22, 1 + 2.0**-23, -(1 + 2.0**-23), -(1 + 2.0**-22), 2.0**-149, 0.0, 2.0**-148,
                       2.0**-126], dtype=np.float32)


def _hardware_rne32() -> bool:
    """Whether numpy's float64 -> float32 cast rounds to nearest even with gradual underflow right now.

    It does under the IEEE 754 default environment; a changed rounding mode or flush-to-zero (e.g.
    ``torch.set_flush_denormal(True)``, which sets the thread's MXCSR) would make it differ from
    :func:`_round_chunk`, so it is probed on every call (a few values, about a microsecond).
    """
    with np.errstate(all="ignore"):
        return bool(np.array_equal(_PROBE_IN.astype(np.float32).view(np.uint32), _PROBE_OUT.view(np.uint32)))


def _cast_float32(src: np.ndarray) -> np.ndarray:
    """RNE into float32 by the hardware cast (the IEEE conversion: the same values as
    :func:`_round_chunk`, overflow to ±inf included); NaNs are written as :func:`_round_chunk` writes
    them (the default quiet NaN with the input's sign) rather than keeping a truncated payload."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = src.astype(np.float32)
    nan = np.isnan(src)
    if nan.any():
        out[nan] = np.copysign(np.float32(np.nan), src[nan]).astype(np.float32)
    return out


def round_to(
    x: Any,
    fmt: Any,
    mode: str = "rne",
    *,
    saturate: bool = False,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    scales: Any = None,
    tensor_scale: Any = None,
) -> np.ndarray:
    """Round real values into the format ``fmt``.

    ``fmt`` may also name a block-scaled format (``"mxfp8_e4m3"``, ``"mxfp4"``, ``"nvfp4"``,
    ``"fp8_e4m3_block128"``, ...; :mod:`numstd.core.scaled`): the result is then the exact values
    ``q * S`` as float64, with the scales ``S`` computed by the format's rule or given as
    ``scales=`` (and NVFP4's ``tensor_scale=``); only ``mode="rne"`` (elements saturate).

    ``x`` is first converted to float64 without loss (float64 input is rounded *directly*: there
    is no intermediate rounding through float32).  (``"rne"`` into float32 without ``saturate``
    from float64 or float32 is numpy's cast, the IEEE 754 conversion, whenever a probe of a few
    ties and subnormals shows the floating-point environment at its default — round to nearest
    even, no flush to zero: the same bits as the rule below, six times faster.)  For finite ``x`` with
    ``E = max(floor(log2|x|), emin)`` and quantum ``q = 2**(E - p + 1)``:

    - ``"rne"``: ``q * rint(x / q)``, round to nearest, ties to even (IEEE 754 roundTiesToEven);
    - ``"rtz"``: ``q * trunc(x / q)``, round toward zero (IEEE 754 roundTowardZero);
    - ``"stochastic"``: ``q * (floor(|x|/q) + [U < frac(|x|/q)]) * sign(x)`` with ``U ~ U[0, 1)``
      drawn from ``rng`` or ``np.random.default_rng(seed)``: the neighbour away from zero is chosen
      with probability equal to the fractional distance, so ``E[round_to(x)] = x`` (unbiased).
      One draw per element in C order, so the result depends only on the seed and the shape.

    Overflow (a rounded magnitude above ``max_finite``, computed with unbounded exponent range as
    IEEE 754 §7.4 prescribes):

    - ``saturate=False`` (IEEE / ml_dtypes casts): ``"rne"`` and ``"stochastic"`` give ``±inf``, or
      NaN in formats without infinities (float8_e4m3fn, fnuz); ``"rtz"`` gives ``±max_finite``.
    - ``saturate=True`` (the "satfinite" conversion of NVIDIA PTX ``cvt`` and Trainium): the result
      is clamped to ``±max_finite`` in every mode.
    - The OCP MX element types float6_e2m3fn, float6_e3m2fn and float4_e2m1fn have neither
      infinities nor NaN, so they always saturate (``±inf`` too): the OCP MX v1.0 conversion
      (§6.3) clamps to the largest normal, and ml_dtypes' casts do the same.  A NaN input has no
      encoding in them and raises :class:`FormatError` (in an MX block the scale carries NaN).

    Special inputs: NaN -> NaN.  ``±inf`` -> ``±inf`` where the format has infinities and NaN
    where it has none, unless ``saturate=True``: then ``±inf`` -> ``±max_finite`` in every format
    (satfinite: every non-NaN result is finite).  Zeros keep their sign, except in fnuz formats,
    which have no ``-0``: every zero result (including ``-0`` and tiny negatives rounded to zero)
    is ``+0``.  float8_e8m0fnu (unsigned, no zero): ``x <= 0`` (``-0`` too) and NaN give NaN
    (``0xFF``), a positive magnitude below ``2**-127`` gives ``2**-127`` (its nearest value) and
    rounding is the generic rule with ``p = 1``: ``2**k * 1.5`` is a tie, which goes to ``2**(k+1)``
    (mantissa 2 is even) — as ml_dtypes does.

    Parameters
    ----------
    x : array-like
        numpy (incl. ml_dtypes), torch or jax array, or scalar; any real float or integer dtype
        whose values fit float64 exactly.
    fmt : format-like
        Anything :func:`get_format` accepts.
    mode : {"rne", "rtz", "stochastic"}
    saturate : bool
        Clamp overflow (and infinities) to ``±max_finite``.
    seed, rng : int or numpy.random.Generator, optional
        Randomness for ``mode="stochastic"`` (exactly one of them); ignored by the other modes.

    Returns
    -------
    numpy.ndarray
        Same shape as ``x`` (0-d for a scalar), dtype ``fmt.dtype`` (tf32: float32 whose low 13
        mantissa bits are zero).

    Raises
    ------
    FormatError
        Unknown format or mode; stochastic mode without a seed or rng, or with both; NaN into a
        format without NaN.
    DtypeError
        ``x`` is not real numbers, or holds integers/long doubles that float64 cannot hold exactly.
    """
    from .scaled import is_scaled, scaled_round

    if is_scaled(fmt):
        if mode != "rne":
            raise FormatError(f"{fmt}: block-scaled formats round their elements to nearest even only (mode='rne')")
        return scaled_round(x, fmt, scales=scales, tensor_scale=tensor_scale)
    if scales is not None or tensor_scale is not None:
        raise FormatError(f"scales= is for block-scaled formats; {fmt!r} is not one (see numstd.core.scaled)")
    f = get_format(fmt)
    if mode not in ROUNDING_MODES:
        raise FormatError(f"unknown rounding mode {mode!r}; use one of {', '.join(ROUNDING_MODES)}")
    if mode == "stochastic":
        if (seed is None) == (rng is None):
            raise FormatError(
                "stochastic rounding needs exactly one source of randomness: pass seed=<int> "
                "or rng=np.random.default_rng(<int>) (numstd never uses a global RNG)"
            )
        if rng is None:
            rng = np.random.default_rng(seed)
    src = _float64_source(x)
    if not f.has_nan and src.dtype.kind == "f" and np.isnan(src).any():
        raise FormatError(
            f"x holds NaN, which {f.name} cannot encode (OCP MX v1.0 §5.3: FP6 and FP4 have no NaN); "
            "in a block-scaled format the NaN is carried by the block's scale: round into the "
            f"block format instead (numstd.core.scaled, e.g. round_to(x, 'mxfp4')), or drop the NaNs"
        )
    if f.name == "float32" and mode == "rne" and not saturate and src.dtype in _HW_SOURCES and _hardware_rne32():
        return _cast_float32(src)
    out = np.empty(src.shape, dtype=f.dtype)
    flat_in = src.reshape(-1)  # a view unless the input is not contiguous
    flat_out = out.reshape(-1)
    for start in range(0, flat_in.size, _CHUNK):
        chunk = _chunk_float64(flat_in[start:start + _CHUNK])
        if f.name == "float64" and not saturate:  # every float64 is a float64: nothing to round
            flat_out[start:start + _CHUNK] = chunk
            continue
        u = rng.random(chunk.size) if mode == "stochastic" else None
        flat_out[start:start + _CHUNK] = _round_chunk(chunk, f, mode, saturate, u)
    return out
