"""Tests of numstd.formats: the format table, lookup, and round_to.

Independent truths used here:
- ``ml_dtypes.finfo`` / ``np.finfo`` for the constants (tf32: derived by hand);
- numpy's float64 -> float32/float16 casts and ml_dtypes' float32 -> bf16/fp8 casts, which round to
  nearest-even directly.  ml_dtypes' casts *from float64* round twice (through float32; see
  ``test_ml_dtypes_casts_from_float64_round_twice``), so float64 inputs reach ml_dtypes through a
  float32 rounded **to odd**, which makes the second rounding correct (Boldo & Melquiond, "When
  double rounding is odd", 2005: exact when the intermediate format has >= p + 2 bits);
- exhaustive sorted tables of every value of the 8- and 16-bit formats (floor/ceiling by search);
- a bit-manipulation formula for tf32.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numstd.errors import DtypeError, FormatError
from numstd.formats import FORMATS, Format, format_of, get_format, round_to

NAMES = tuple(FORMATS)
MX_NAMES = ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu")  # OCP MX v1.0
ML_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz") + MX_NAMES
SMALL = ("float16",) + ML_NAMES  # formats small enough to enumerate
SIGNED_SMALL = tuple(n for n in SMALL if n != "float8_e8m0fnu")  # tables of |x| (E8M0 has no sign, no 0)
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# ----------------------------------------------------------------------------- independent oracles
def all_values(name: str) -> np.ndarray:
    """Every bit pattern of an 8/16-bit format as float64 (NaNs included)."""
    f = FORMATS[name]
    with np.errstate(invalid="ignore"):
        codes = np.arange(2**f.bits, dtype=np.uint64).astype(UINT[8 * f.dtype.itemsize])
        return codes.view(f.dtype).astype(np.float64)  # fp6/fp4: the low 6/4 bits of a byte


def finite_sorted(name: str) -> np.ndarray:
    """Sorted distinct finite values of a format (+0 and -0 counted once)."""
    v = all_values(name)
    return np.unique(v[np.isfinite(v)])


def f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: truncate, then set the last bit if anything was lost."""
    with np.errstate(over="ignore"):
        y = x.astype(np.float32)
    back = y.astype(np.float64)
    inexact = np.isfinite(x) & (back != x)
    toward_zero = inexact & (np.abs(back) > np.abs(x))
    y[toward_zero] = np.nextafter(y[toward_zero], np.float32(0))
    y.view(np.uint32)[inexact] |= np.uint32(1)
    return y


def tf32_by_bits(x32: np.ndarray) -> np.ndarray:
    """RNE of float32 into 10 stored mantissa bits: add 0xFFF + lsb, clear the low 13 bits."""
    b = x32.view(np.uint32).astype(np.uint64)
    lsb = (b >> np.uint64(13)) & np.uint64(1)
    r = ((b + np.uint64(0xFFF) + lsb) & np.uint64(0xFFFFE000)).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x32), np.float32(np.nan), r)


def rne_truth(x64: np.ndarray, name: str) -> np.ndarray:
    """Correct RNE of float64 values into ``name`` from numpy / ml_dtypes casts."""
    f = FORMATS[name]
    with np.errstate(over="ignore"):
        if name in ("float64", "float32", "float16"):
            return x64.astype(f.dtype)  # numpy rounds float64 directly
        if name == "tf32":
            return tf32_by_bits(f32_round_to_odd(x64))
        return f32_round_to_odd(x64).astype(f.dtype)


def finite_for(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` without NaNs where the target has no NaN encoding (OCP MX FP6/FP4: round_to raises)."""
    return x if FORMATS[name].has_nan else x[~np.isnan(x)]


def assert_same(actual: np.ndarray, expected: np.ndarray, x: np.ndarray) -> None:
    """Equal dtype, NaN at the same places, identical bit patterns elsewhere (signed zeros too)."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    na = np.isnan(actual.astype(np.float64))
    ne = np.isnan(expected.astype(np.float64))
    bits = UINT[8 * actual.dtype.itemsize]
    bad = (na != ne) | (~na & (actual.view(bits) != expected.view(bits)))
    if bad.any():
        i = np.flatnonzero(bad.reshape(-1))[:5]
        raise AssertionError(
            f"{bad.sum()} mismatches, e.g. x={x.reshape(-1)[i]!r} got {actual.reshape(-1)[i]!r} "
            f"expected {expected.reshape(-1)[i]!r}"
        )


def sweep_inputs(name: str) -> np.ndarray:
    """Every value of a 16/8-bit format, every midpoint of neighbours, and midpoints +- tiny offsets."""
    v = finite_sorted(name)
    mid = (v[:-1] + v[1:]) / 2  # exact in float64
    gap = v[1:] - v[:-1]
    pts = [v, mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf),
           mid - gap * 2.0**-20, mid + gap * 2.0**-20, v + gap.min() * 2.0**-30,
           np.array([np.inf, -np.inf, np.nan, -0.0])]
    return np.concatenate(pts)


def wide_samples(rng: np.random.Generator, n: int, f: Format) -> np.ndarray:
    """float64 samples over every binade of ``f`` (subnormals, overflow edge) plus raw bit patterns.

    A quarter are raw float64 bit patterns (every binade, NaN, inf), half have random 52-bit
    mantissas and exponents from below ``f``'s smallest subnormal to above its max, a quarter lie
    within 8 u of ``±max_finite``.
    """
    k = n // 4
    with np.errstate(over="ignore", invalid="ignore"):  # NaN patterns * -1, ldexp beyond float64
        raw = rng.integers(0, 2**63, k, dtype=np.int64).view(np.float64) * rng.choice([-1.0, 1.0], k)
        mant = 1.0 + rng.random(2 * k)
        exps = rng.integers(f.emin - f.p - 3, f.emax + 2, 2 * k)
        span = np.ldexp(mant, exps) * rng.choice([-1.0, 1.0], 2 * k)
        edge = f.max_finite * (1.0 + rng.uniform(-8.0, 8.0, k) * f.u) * rng.choice([-1.0, 1.0], k)
    return np.concatenate([raw, span, edge])


# ----------------------------------------------------------------------------------- the table
@pytest.mark.parametrize("name", ("float64", "float32", "float16") + ML_NAMES)
def test_constants_match_finfo(name: str) -> None:
    f = FORMATS[name]
    fi = np.finfo(f.dtype) if name in ("float64", "float32", "float16") else ml_dtypes.finfo(f.dtype)
    assert f.p == fi.nmant + 1
    assert f.emin == fi.minexp
    assert f.emax == fi.maxexp - 1
    assert f.max_finite == float(fi.max)
    assert f.smallest_normal == float(fi.tiny)
    assert f.smallest_subnormal == float(fi.smallest_subnormal)
    assert f.eps == float(fi.eps)
    assert f.u == float(fi.eps) / 2
    assert f.bits == fi.bits <= 8 * f.dtype.itemsize
    assert f.dtype.name == f.numpy_dtype == name
    with np.errstate(over="ignore", invalid="ignore"):
        specials = np.array([np.inf, np.nan, -0.0]).astype(f.dtype).astype(np.float64)
    assert f.has_inf == bool(np.isinf(specials[0]))
    assert f.has_nan == bool(np.isnan(specials[1]))
    assert f.has_negative_zero == bool(np.signbit(specials[2]))


def test_tf32_constants_by_hand() -> None:
    f = FORMATS["tf32"]
    # 1 sign, 8 exponent, 10 stored mantissa bits; float32's exponent range.
    assert (f.bits, f.p, f.emin, f.emax) == (19, 11, -126, 127)
    assert f.max_finite == 2.0**128 - 2.0**117  # (2 - 2**-10) * 2**127
    assert f.smallest_normal == 2.0**-126
    assert f.smallest_subnormal == 2.0**-136
    assert f.eps == 2.0**-10 and f.u == 2.0**-11
    assert f.has_inf and f.has_nan and f.has_negative_zero
    assert f.dtype == np.float32 and f.numpy_dtype == "float32"


@pytest.mark.parametrize("name", NAMES)
def test_table_invariants(name: str) -> None:
    f = FORMATS[name]
    assert f.name == name and isinstance(f.aliases, tuple)
    assert f.smallest_subnormal == f.smallest_normal * 2.0 ** (1 - f.p)
    # max_finite lies in the top binade [2**emax, 2**(emax+1)) and is a multiple of its quantum
    assert 2.0**f.emax <= f.max_finite and f.max_finite / 2.0**f.emax < 2.0
    assert (f.max_finite / 2.0 ** (f.emax - f.p + 1)) % 1 == 0
    if f.has_inf and f.has_negative_zero:  # IEEE-style: every pattern of the top binade is finite
        assert f.max_finite == (2 - f.eps) * 2.0**f.emax
    assert not (f.has_inf and not f.has_nan)


def test_formats_mapping_is_read_only_and_formats_frozen() -> None:
    with pytest.raises(TypeError):
        FORMATS["x"] = FORMATS["float32"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        FORMATS["float32"].p = 3  # type: ignore[misc]
    assert NAMES == ("float64", "float32", "tf32", "float16", "bfloat16", "float8_e4m3fn",
                     "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz") + MX_NAMES


# ------------------------------------------------------------------------------------- lookup
@pytest.mark.parametrize(
    "spec, name",
    [("bf16", "bfloat16"), ("BF16", "bfloat16"), ("bfloat16", "bfloat16"), ("fp32", "float32"),
     ("float", "float32"), ("F32", "float32"), ("half", "float16"), ("fp16", "float16"),
     ("double", "float64"), ("e4m3", "float8_e4m3fn"), ("FP8_E4M3", "float8_e4m3fn"),
     ("e5m2", "float8_e5m2"), ("fp8_e5m2", "float8_e5m2"), ("e4m3fnuz", "float8_e4m3fnuz"),
     ("e5m2fnuz", "float8_e5m2fnuz"), ("tf32", "tf32"), ("TF32", "tf32"), ("<f4", "float32"),
     ("f8", "float64"), ("torch.bfloat16", "bfloat16"), ("torch.float8_e4m3fn", "float8_e4m3fn"),
     (np.float16, "float16"), (np.dtype("float32"), "float32"), (float, "float64"),
     (ml_dtypes.bfloat16, "bfloat16"), (np.dtype(ml_dtypes.float8_e5m2fnuz), "float8_e5m2fnuz"),
     (FORMATS["tf32"], "tf32")],
)
def test_get_format_accepts_names_aliases_and_dtypes(spec: object, name: str) -> None:
    assert get_format(spec) is FORMATS[name]


@pytest.mark.parametrize("spec", ["bfloat32", "float8_e4m3", "int8", np.int32, np.dtype("int64"), 3, None])
def test_get_format_unknown_lists_valid_names(spec: object) -> None:
    with pytest.raises(FormatError, match="bfloat16") as info:
        get_format(spec)
    assert "float8_e4m3fnuz" in str(info.value)


def test_get_format_torch_dtypes() -> None:
    torch = pytest.importorskip("torch")
    assert get_format(torch.bfloat16).name == "bfloat16"
    assert get_format(torch.half).name == "float16"
    assert get_format(torch.float).name == "float32"
    assert get_format(torch.float64).name == "float64"
    assert get_format(torch.float8_e5m2).name == "float8_e5m2"
    with pytest.raises(FormatError):
        get_format(torch.int32)


def test_get_format_jax_dtypes() -> None:
    jnp = pytest.importorskip("jax.numpy")
    assert get_format(jnp.bfloat16).name == "bfloat16"
    assert get_format(jnp.float32).name == "float32"
    assert get_format(jnp.dtype("float16")).name == "float16"
    assert get_format(jnp.float8_e4m3fnuz).name == "float8_e4m3fnuz"


@pytest.mark.parametrize("name", NAMES)
def test_format_of_arrays(name: str) -> None:
    f = FORMATS[name]
    expected = "float32" if name == "tf32" else name
    assert format_of(np.zeros(3, f.dtype)).name == expected


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.int64])
def test_format_of_rejects_non_float(dtype: type) -> None:
    with pytest.raises(DtypeError, match="astype"):
        format_of(np.zeros(2, dtype))


def test_format_of_torch_and_jax() -> None:
    torch = pytest.importorskip("torch")
    assert format_of(torch.zeros(2, dtype=torch.bfloat16)).name == "bfloat16"
    assert format_of(torch.zeros(2, dtype=torch.float16)).name == "float16"
    jnp = pytest.importorskip("jax.numpy")
    assert format_of(jnp.zeros(2, jnp.bfloat16)).name == "bfloat16"


# ------------------------------------------------------------------------------- RNE vs casts
def test_round_to_odd_oracle_matches_numpy_direct_float16() -> None:
    # The oracle (float64 -> float32 to odd -> ml_dtypes/numpy RNE) is itself checked against
    # numpy's direct float64 -> float16 cast on the tie-heavy sweep.
    x = np.concatenate([sweep_inputs("float16"), sweep_inputs("bfloat16")])
    with np.errstate(over="ignore"):
        assert_same(f32_round_to_odd(x).astype(np.float16), x.astype(np.float16), x)


def test_ml_dtypes_casts_from_float64_round_twice() -> None:
    # Why the oracle exists: 1 + 2**-8 + 2**-40 is above the bf16 midpoint 1 + 2**-8, so RNE gives
    # 1 + 2**-7; through float32 it becomes the tie 1 + 2**-8 and then 1.0 (ml_dtypes 0.6).
    x = np.array([1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-4 + 2.0**-30])
    assert round_to(x[:1], "bf16").astype(np.float64)[0] == 1 + 2.0**-7
    assert round_to(x[1:], "e4m3").astype(np.float64)[0] == 1.125
    assert rne_truth(x[:1], "bfloat16").astype(np.float64)[0] == 1 + 2.0**-7


@pytest.mark.parametrize("source", SMALL)
def test_rne_exhaustive_sweep_all_targets(source: str) -> None:
    """Every value of ``source``, all midpoints and midpoints +- tiny offsets, into every format."""
    x = sweep_inputs(source)
    for target in NAMES:
        xt = finite_for(x, target)
        assert_same(round_to(xt, target), rne_truth(xt, target), xt)


@pytest.mark.parametrize("target", NAMES)
def test_rne_random_float64_every_binade(target: str) -> None:
    rng = np.random.default_rng(20240 + NAMES.index(target))
    x = finite_for(wide_samples(rng, 1 << 20, FORMATS[target]), target)
    assert_same(round_to(x, target), rne_truth(x, target), x)


@pytest.mark.parametrize("target", NAMES)
def test_rne_random_float32_every_binade(target: str) -> None:
    rng = np.random.default_rng(777 + NAMES.index(target))
    f = FORMATS[target]
    with np.errstate(over="ignore"):
        x = finite_for(wide_samples(rng, 1 << 20, f), target).astype(np.float32)
    with np.errstate(over="ignore"):
        expected = tf32_by_bits(x) if target == "tf32" else x.astype(f.dtype)  # direct from float32
    assert_same(round_to(x, target), expected, x)


def test_rne_overflow_threshold_by_hand() -> None:
    # e4m3fn: 448 = 1.110b * 2**8 (even); the next step 480 is NaN's pattern, so 464 (tie) -> 448.
    r = round_to([463.9, 464.0, 464.1, 479.0, 1e30], "e4m3").astype(np.float64)
    assert r[:2].tolist() == [448.0, 448.0] and np.isnan(r[2:]).all()
    # e4m3fnuz: 240 = 1.111b * 2**7 (odd), so the tie 248 goes up to 256: overflow -> NaN.
    r = round_to([247.9, 248.0], "e4m3fnuz").astype(np.float64)
    assert r[0] == 240.0 and np.isnan(r[1])
    # float16: 65519.99 -> 65504, 65520 (tie with 65536) -> inf.
    assert round_to([65519.99, 65520.0, -65520.0], "fp16").tolist() == [65504.0, np.inf, -np.inf]


# ------------------------------------------------------------------- OCP MX element and scale types
def fraction_values(name: str) -> list:
    """Every non-negative value of an MX type from its definition (OCP MX v1.0 §5.3, §5.4.1), as Fractions.

    Independent of ml_dtypes and of numstd's table: exponent bits ``E``, mantissa bits ``M``, bias;
    normal ``2**(e - bias) * (1 + m / 2**M)``, subnormal (``e = 0``) ``2**(1 - bias) * m / 2**M``;
    E8M0: ``2**(e - 127)`` for ``e = 0 .. 254``.  Returned with each value's code (for ties to even).
    """
    from fractions import Fraction

    if name == "float8_e8m0fnu":
        return [(Fraction(2) ** (e - 127), e) for e in range(255)]
    ebits, mbits, bias = {"float6_e2m3fn": (2, 3, 1), "float6_e3m2fn": (3, 2, 3), "float4_e2m1fn": (2, 1, 1)}[name]
    out = []
    for e in range(2**ebits):
        for m in range(2**mbits):
            frac = Fraction(m, 2**mbits)
            v = Fraction(2) ** (1 - bias) * frac if e == 0 else Fraction(2) ** (e - bias) * (1 + frac)
            out.append((v, (e << mbits) | m))
    return out


def fraction_rne(x: float, name: str) -> float:
    """Nearest value to ``x`` (ties: the even code), saturating at the largest; E8M0: ``x > 0`` only.

    E8M0 has no mantissa bit, so a tie ``1.5 * 2**k`` is between the significands 1 (odd) and 2
    (even, in binade k): IEEE 754's tie-to-even with p = 1 takes the larger power of two.
    """
    from fractions import Fraction

    vals = fraction_values(name)
    a = Fraction(abs(x))
    tie = (lambda vc: -vc[0]) if name == "float8_e8m0fnu" else (lambda vc: vc[1] & 1)
    best = min(vals, key=lambda vc: (abs(vc[0] - a), tie(vc)))
    return math.copysign(float(best[0]), x)


@pytest.mark.parametrize("name", MX_NAMES)
def test_mx_types_against_fractions(name: str) -> None:
    # Every value, every midpoint and the points just around it, by an exact Fraction reference.
    vals = sorted(float(v) for v, _ in fraction_values(name))
    f = FORMATS[name]
    assert vals[-1] == f.max_finite and len(set(vals)) == len(vals)
    assert np.array_equal(finite_sorted(name)[finite_sorted(name) >= 0], np.array(vals))
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    pts = vals + mids + [np.nextafter(m, 0) for m in mids] + [np.nextafter(m, np.inf) for m in mids]
    pts += [f.max_finite * 1.25, f.max_finite * 4, 1e30]  # beyond the top: saturate (FP6/FP4) or NaN (E8M0)
    signs = (1.0,) if name == "float8_e8m0fnu" else (1.0, -1.0)
    x = np.array([s * p for s in signs for p in pts])
    got = round_to(x, name).astype(np.float64)
    if name == "float8_e8m0fnu":
        top = x >= 1.5 * 2.0**127  # the tie 1.5 * 2**127 rounds to 2**128: no encoding, NaN
        assert np.isnan(got[top]).all()
        x, got = x[~top], got[~top]
    want = np.array([fraction_rne(v, name) for v in x])
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


def test_mx_types_hand_cases() -> None:
    # E2M1 {0, .5, 1, 1.5, 2, 3, 4, 6}: ties 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
    r = round_to([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 6.5, 1e9, np.inf, -np.inf, -0.2], "e2m1")
    assert r.astype(np.float64).tolist() == [0, 1, 1, 2, 2, 4, 4, 6, 6, 6, 6, -6, -0.0]
    assert round_to([7.75, 7.76, 100.0], "e2m3").astype(np.float64).tolist() == [7.5, 7.5, 7.5]
    assert round_to([30.0, 26.0, 0.03125, 0.03126], "e3m2").astype(np.float64).tolist() == [28, 24, 0, 0.0625]
    with pytest.raises(FormatError, match="NaN"):
        round_to([1.0, np.nan], "e2m1")
    # E8M0: 2**(code - 127); 3 = 1.5 * 2 is a tie -> 4 (mantissa 2 even); below 2**-127 -> 2**-127.
    r = round_to([1.0, 1.4, 1.5, 3.0, 2.0**-127, 2.0**-140, 0.0, -0.0, -2.0, np.nan, 2.0**127, 1.5 * 2.0**127],
                 "e8m0").astype(np.float64)
    assert r[:6].tolist() == [1, 1, 2, 4, 2.0**-127, 2.0**-127] and r[10] == 2.0**127
    assert np.isnan(r[[6, 7, 8, 9, 11]]).all()
    codes = round_to([2.0**-127, 1.0, 2.0**127], "e8m0").view(np.uint8)
    assert codes.tolist() == [0, 127, 254]


# ------------------------------------------------------------------------------------- tf32
def test_tf32_hand_cases() -> None:
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20, -(1 + 2.0**-11 + 2.0**-40),
                  2.0**-137, 1.5 * 2.0**-137, 2.0**-126 + 2.0**-137, np.float32(3.4028235e38)])
    expected = [1.0, 1 + 2.0**-9, 1 + 2.0**-10, -(1 + 2.0**-10), 0.0, 2.0**-136, 2.0**-126, np.inf]
    r = round_to(x, "tf32")
    assert r.dtype == np.float32
    assert r.astype(np.float64).tolist() == expected
    assert round_to(np.float32(3.4028235e38), "tf32", saturate=True) == np.float32(2.0**128 - 2.0**117)


def test_tf32_low_bits_zero_and_bit_formula() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    r = round_to(x, "tf32")
    assert_same(r, tf32_by_bits(x), x)
    fin = np.isfinite(r)
    assert not (r[fin].view(np.uint32) & np.uint32(0x1FFF)).any()


# ------------------------------------------------------------------------------------- RTZ
def table_floor_ceil(x: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Largest value <= |x| and smallest value >= |x| from the sorted table (max caps the top)."""
    v = finite_sorted(name)
    v = v[v >= 0]
    a = np.abs(x)
    i = np.searchsorted(v, a, side="right") - 1
    lo = v[i]
    hi = v[np.minimum(np.searchsorted(v, a, side="left"), v.size - 1)]
    return lo, hi


@pytest.mark.parametrize("name", SIGNED_SMALL)
def test_rtz_is_the_table_floor_of_the_magnitude(name: str) -> None:
    f = FORMATS[name]
    rng = np.random.default_rng(11)
    x = np.concatenate([sweep_inputs(name), wide_samples(rng, 1 << 16, f)])
    x = x[np.isfinite(x)]
    r = round_to(x, name, "rtz").astype(np.float64)
    lo, _ = table_floor_ceil(x, name)
    assert np.array_equal(np.abs(r), lo)  # includes overflow: finite x beyond max -> max
    assert (np.abs(r) <= np.abs(x)).all()
    nz = r != 0
    assert (np.sign(r[nz]) == np.sign(x[nz])).all()


@pytest.mark.parametrize("name", ["float32", "float16"])
def test_rtz_float32_float16_by_nextafter(name: str) -> None:
    rng = np.random.default_rng(12)
    f = FORMATS[name]
    x = wide_samples(rng, 1 << 18, f)
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore"):
        near = x.astype(f.dtype)  # numpy: RNE
    back = near.astype(np.float64)
    fix = np.abs(back) > np.abs(x)
    near[fix] = np.nextafter(near[fix], f.dtype.type(0))  # one step toward zero
    assert_same(round_to(x, name, "rtz"), near, x)


def test_rtz_hand_cases_and_specials() -> None:
    r = round_to([1.99, -1.99, 1e6, -1e6], "bf16", "rtz").astype(np.float64)
    assert r.tolist() == [1.984375, -1.984375, 999424.0, -999424.0]
    assert round_to([479.0, 1e9, -1e9], "e4m3", "rtz").tolist() == [448.0, 448.0, -448.0]
    r = round_to([np.inf, -np.inf, np.nan], "fp16", "rtz").astype(np.float64)
    assert r[0] == np.inf and r[1] == -np.inf and np.isnan(r[2])
    assert np.isnan(round_to([np.inf], "e4m3", "rtz").astype(np.float64)).all()
    assert round_to([70000.0], "fp16", "rtz").tolist() == [65504.0]


# ------------------------------------------------------------------------------- stochastic
@pytest.mark.parametrize(
    "name, x",
    [("bfloat16", 1 + 0.3 * 2.0**-7), ("bfloat16", -(3 + 0.71 * 2.0**-6)), ("float16", 2.0**-20 * 1.37),
     ("float8_e4m3fn", 0.1), ("float8_e5m2fnuz", -3.3e-6), ("tf32", 1 / 3), ("float32", np.pi)],
)
def test_stochastic_is_unbiased(name: str, x: float) -> None:
    n = 200_000
    r = round_to(np.full(n, x), name, "stochastic", seed=123).astype(np.float64)
    vals = np.unique(r)
    assert vals.size == 2, vals  # x is not representable: both neighbours occur
    lo, hi = vals
    assert lo < x < hi
    frac = (x - lo) / (hi - lo)
    stderr = (hi - lo) * np.sqrt(frac * (1 - frac) / n)
    assert abs(r.mean() - x) < 5 * stderr


@pytest.mark.parametrize("name", SIGNED_SMALL)
def test_stochastic_result_is_a_neighbour(name: str) -> None:
    f = FORMATS[name]
    rng = np.random.default_rng(3)
    x = np.concatenate([wide_samples(rng, 1 << 16, f), finite_sorted(name)])
    x = x[np.isfinite(x) & (np.abs(x) <= f.max_finite)]
    r = round_to(x, name, "stochastic", rng=np.random.default_rng(9)).astype(np.float64)
    lo, hi = table_floor_ceil(x, name)
    assert ((np.abs(r) == lo) | (np.abs(r) == hi)).all()
    exact = lo == np.abs(x)
    assert exact.any() and np.array_equal(r[exact], x[exact])  # representable values stay


def test_stochastic_seeding() -> None:
    x = np.random.default_rng(0).standard_normal(50_000)
    a = round_to(x, "bf16", "stochastic", seed=1)
    b = round_to(x, "bf16", "stochastic", seed=1)
    c = round_to(x, "bf16", "stochastic", seed=2)
    d = round_to(x, "bf16", "stochastic", rng=np.random.default_rng(1))
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    assert np.array_equal(a.view(np.uint16), d.view(np.uint16))
    assert (a.view(np.uint16) != c.view(np.uint16)).mean() > 0.3
    # one uniform per element in C order: a prefix rounds like the whole (chunking does not matter)
    e = round_to(x[:20_001], "bf16", "stochastic", seed=1)
    assert np.array_equal(e.view(np.uint16), a[:20_001].view(np.uint16))


def test_stochastic_requires_exactly_one_seed_source() -> None:
    with pytest.raises(FormatError, match="seed"):
        round_to([1.0], "bf16", "stochastic")
    with pytest.raises(FormatError, match="seed"):
        round_to([1.0], "bf16", "stochastic", seed=1, rng=np.random.default_rng(1))


def test_stochastic_overflow() -> None:
    x = np.full(1000, 460.0)  # between 448 and the NaN slot 480
    r = round_to(x, "e4m3", "stochastic", seed=0).astype(np.float64)
    assert set(np.unique(r[~np.isnan(r)])) == {448.0} and np.isnan(r).any()
    rs = round_to(x, "e4m3", "stochastic", seed=0, saturate=True).astype(np.float64)
    assert (rs == 448.0).all()


# ------------------------------------------------------------------------- saturation, specials
def test_saturation_fp8_by_hand() -> None:
    x = [449.0, 480.0, 1e6, -1e6, np.inf, -np.inf, np.nan, 0.5]
    r = round_to(x, "e4m3", saturate=True).astype(np.float64)
    assert r[:6].tolist() == [448.0, 448.0, 448.0, -448.0, 448.0, -448.0] and np.isnan(r[6]) and r[7] == 0.5
    r = round_to(x, "e4m3").astype(np.float64)
    assert r[0] == 448.0 and np.isnan(r[1:7]).all()
    r = round_to([61440.0, 60000.0, 1e9, np.inf, -np.inf], "e5m2", saturate=True).astype(np.float64)
    assert r.tolist() == [57344.0, 57344.0, 57344.0, 57344.0, -57344.0]
    r = round_to([61440.0, np.inf, -np.inf], "e5m2").astype(np.float64)
    assert r.tolist() == [np.inf, np.inf, -np.inf]  # 61440 is the tie 57344 | 65536: even is 65536
    r = round_to([248.0, -1e5, np.inf], "e4m3fnuz", saturate=True).astype(np.float64)
    assert r.tolist() == [240.0, -240.0, 240.0]
    r = round_to([1e6, -np.inf], "e5m2fnuz", saturate=True).astype(np.float64)
    assert r.tolist() == [57344.0, -57344.0]
    assert np.isnan(round_to([np.inf, 1e6], "e5m2fnuz").astype(np.float64)).all()
    assert round_to([1e39, np.inf], "bf16", saturate=True).astype(np.float64).tolist() == [
        FORMATS["bfloat16"].max_finite] * 2


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", ["rne", "rtz", "stochastic"])
def test_specials_in_every_mode(name: str, mode: str) -> None:
    f = FORMATS[name]
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, -f.smallest_subnormal * 2.0**-60])
    if not f.has_nan:  # OCP MX FP6/FP4: no NaN to round into; infinities saturate
        with pytest.raises(FormatError, match="NaN"):
            round_to(x, name, mode, seed=0)
        r = round_to(x[1:], name, mode, seed=0).astype(np.float64)
        assert r[:2].tolist() == [f.max_finite, -f.max_finite] and (r[2:] == 0).all()
        assert np.signbit(r[[2, 3, 4]]).tolist() == [True, False, True]
        return
    r = round_to(x, name, mode, seed=0).astype(np.float64)
    assert np.isnan(r[0])
    if not f.has_zero:  # E8M0: no zero and no sign, so zeros and negatives are NaN
        assert np.isnan(r[1:]).all()  # +inf too: E8M0 has no infinity
        rs = round_to(x, name, mode, saturate=True, seed=0).astype(np.float64)
        assert rs[1] == f.max_finite and np.isnan(rs[[0, 2, 3, 4, 5]]).all()
        return
    if f.has_inf:
        assert r[1] == np.inf and r[2] == -np.inf
    else:
        assert np.isnan(r[1:3]).all()
    assert (r[3:] == 0).all()
    assert np.signbit(r[[3, 5]]).tolist() == [f.has_negative_zero] * 2  # fnuz: no -0
    assert not np.signbit(r[4])
    rs = round_to(x, name, mode, saturate=True, seed=0).astype(np.float64)
    assert np.isnan(rs[0]) and rs[1] == f.max_finite and rs[2] == -f.max_finite


# --------------------------------------------------------------------------------- API details
def test_shapes_dtypes_and_inputs() -> None:
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(2, 0, 1) * 1.01
    r = round_to(x, "bf16")
    assert r.shape == (4, 2, 3) and r.dtype == ml_dtypes.bfloat16
    assert_same(r, rne_truth(np.ascontiguousarray(x), "bfloat16"), x)
    s = round_to(1.3, "fp16")
    assert isinstance(s, np.ndarray) and s.shape == () and s == np.float16(1.3)
    assert round_to(np.arange(5, dtype=np.int16), "e4m3").astype(np.float64).tolist() == [0, 1, 2, 3, 4]
    assert round_to(np.array([True, False]), "bf16").tolist() == [1.0, 0.0]
    assert round_to(np.array([2**53], dtype=np.int64), "fp32").tolist() == [2.0**53]
    with pytest.raises(DtypeError, match="2\\*\\*53"):
        round_to(np.array([2**53 + 1], dtype=np.int64), "bf16")
    with pytest.raises(FormatError, match="rne"):
        round_to([1.0], "bf16", mode="nearest")
    x64 = np.array([np.pi, 5e-324, -0.0])
    assert_same(round_to(x64, "float64"), x64, x64)
    xb = np.array([1.5, 3.0], dtype=ml_dtypes.bfloat16)
    assert round_to(xb, "e4m3").astype(np.float64).tolist() == [1.5, 3.0]
    assert round_to(np.zeros((0, 3)), "bf16").shape == (0, 3)
    with pytest.raises(DtypeError):
        round_to(np.array(["1.0"]), "bf16")


def test_round_to_torch_and_jax_inputs() -> None:
    torch = pytest.importorskip("torch")
    t = torch.tensor([1 + 2.0**-8 + 2.0**-40, -3.0], dtype=torch.float64)
    assert round_to(t, torch.bfloat16).astype(np.float64).tolist() == [1 + 2.0**-7, -3.0]
    tb = torch.tensor([1.0, 2.5], dtype=torch.bfloat16)
    assert round_to(tb, "e5m2").astype(np.float64).tolist() == [1.0, 2.5]
    jnp = pytest.importorskip("jax.numpy")
    r = round_to(jnp.array([1.0, 0.1], jnp.float32), "bf16").astype(np.float64)
    assert r.tolist() == [1.0, 0.10009765625]  # 205 * 2**-11


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, width=64), min_size=2, max_size=40),
       st.sampled_from(NAMES), st.sampled_from(["rne", "rtz"]), st.booleans())
def test_rounding_is_monotone(xs: list[float], name: str, mode: str, saturate: bool) -> None:
    x = np.sort(np.array(xs))
    r = round_to(x, name, mode, saturate=saturate).astype(np.float64)
    r = r[~np.isnan(r)]
    assert (r[1:] >= r[:-1]).all()


def test_float32_rne_by_the_hardware_cast_gives_the_generic_rounding_bit_for_bit(monkeypatch):
    # round_to(x, "float32") takes numpy's IEEE cast where a probe shows it rounds to nearest even
    # with gradual underflow; the generic quantum rounding (_round_chunk) is the independent truth
    from numstd.core import formats as F

    g = np.random.default_rng(11)
    f32 = g.standard_normal(20000).astype(np.float32).astype(np.float64)
    half = np.spacing(f32.astype(np.float32)).astype(np.float64) / 2
    big = float(np.finfo(np.float32).max)
    cases = [g.integers(0, 2**64, 50000, dtype=np.uint64).view(np.float64),  # every exponent, NaN payloads
             np.ldexp(g.random(50000) + 1, g.integers(-160, 130, 50000)) * np.where(g.random(50000) < 0.5, -1, 1),
             np.concatenate([f32 + half, f32 - half, f32 + half * (1 + 2.0**-30),  # ties and near-ties
                             np.ldexp(g.integers(0, 8, 500).astype(float), -151),  # subnormal ties, zero
                             [big * (1 + 2.0**-25), big * (1 + 2.0**-25 - 2.0**-50), np.inf, -np.inf, np.nan,
                              -np.nan, 0.0, -0.0, 2.0**128, -(2.0**1000)]])]
    assert F._hardware_rne32()
    with np.errstate(over="ignore"):
        f32_cases = cases[2].astype(np.float32)  # (past max_finite: inf)
    fast = [F.round_to(x, "float32") for x in cases] + [F.round_to(f32_cases, "float32")]
    monkeypatch.setattr(F, "_hardware_rne32", lambda: False)
    with np.errstate(over="ignore"):
        slow = [F.round_to(x, "float32") for x in cases] + [F.round_to(f32_cases, "float32")]
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    # hand-derived: ties to even (1 + 2^-24 -> 1, 1 + 3·2^-24 -> 1 + 2^-22), max_finite + half its ulp
    # (2^103) is a tie that goes to 2^128, i.e. inf, a quarter ulp stays max_finite; the smallest
    # subnormal is kept, half of it goes to 0 (even)
    got = F.round_to(np.array([1 + 2.0**-24, 1 + 3 * 2.0**-24, big + 2.0**103, big + 2.0**102, 2.0**-149, 2.0**-150]),
                     "float32")
    np.testing.assert_array_equal(got, np.array([1.0, 1 + 2.0**-22, np.inf, big, 2.0**-149, 0.0], dtype=np.float32))


def test_float32_rounding_probe_sees_flush_to_zero():
    torch = pytest.importorskip("torch")
    from numstd.core import formats as F

    assert F._hardware_rne32()
    try:
        if not torch.set_flush_denormal(True):
            pytest.skip("this CPU has no flush-to-zero mode")
        assert not F._hardware_rne32()
    finally:
        torch.set_flush_denormal(False)
    assert F._hardware_rne32()
