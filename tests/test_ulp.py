"""Tests of numstd.ulp: ulp, ulp_error, ulp_distance.

Independent truths: hand-derived values; ``np.spacing`` (float16/32/64); the gaps of the exhaustive
sorted table of every value of the 8- and 16-bit formats (the rank of a value in that table is
its ordered index, so rank differences are ULP distances); numpy.testing's ``assert_array_max_ulp``
(which returns numpy's own nulp distances); numpy/ml_dtypes RNE casts from float32 (correctly
rounded, so their error is at most 0.5 ulp).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numstd.errors import FormatError, ShapeError
from numstd.formats import FORMATS
from numstd.ulp import ulp, ulp_distance, ulp_error

NAMES = tuple(FORMATS)
MX = ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu")  # OCP MX v1.0 types
SMALL = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz") + MX
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def table(name: str) -> np.ndarray:
    """Sorted distinct non-NaN values of an 8/16-bit format (±inf included; ±0 once), float64."""
    f = FORMATS[name]
    with np.errstate(invalid="ignore"):
        v = np.arange(2**f.bits, dtype=np.uint64).astype(UINT[8 * f.dtype.itemsize]).view(f.dtype).astype(np.float64)
    return np.unique(v[~np.isnan(v)])


def values_from_bits(name: str, bits: np.ndarray) -> np.ndarray:
    """Values of format ``name`` (in its dtype) with the given bit patterns (tf32: 19-bit codes)."""
    f = FORMATS[name]
    if name == "tf32":
        return (bits.astype(np.uint32) << np.uint32(13)).view(np.float32)
    return bits.astype(UINT[8 * f.dtype.itemsize]).view(f.dtype)  # fp6/fp4: the low bits of a byte


def f64(x: np.ndarray) -> np.ndarray:
    """float64 copy (ml_dtypes warns when it casts a NaN pattern)."""
    with np.errstate(invalid="ignore"):
        return x.astype(np.float64)


# ------------------------------------------------------------------------------------------ ulp
def test_ulp_hand_cases() -> None:
    assert ulp(1.0, "float32") == 2.0**-23
    assert ulp(1.5, "bf16") == 2.0**-7
    assert ulp(-1.5, "bf16") == 2.0**-7
    assert ulp(2.0, "bf16") == 2.0**-6
    assert ulp(np.nextafter(2.0, 0), "bf16") == 2.0**-7  # the exact value decides the binade
    assert ulp(1.0, "fp16") == 2.0**-10 and ulp(1.0, "tf32") == 2.0**-10
    assert ulp(1.0, "float64") == 2.0**-52
    assert ulp(1.0, "e4m3") == 0.125 and ulp(1.0, "e5m2") == 0.25
    assert ulp(448.0, "e4m3") == 32.0 and ulp(240.0, "e4m3fnuz") == 16.0
    assert ulp(0.0, "float32") == 2.0**-149 and ulp(-0.0, "bf16") == 2.0**-133
    assert ulp(0.0, "e4m3fnuz") == 2.0**-10 and ulp(0.0, "e5m2fnuz") == 2.0**-17
    assert ulp(2.0**17, "fp16") == 2.0**7  # above max_finite: the same formula
    assert ulp(1e6, "e4m3") == 2.0 ** (19 - 3)
    assert ulp(1e300, "float32") == 2.0 ** (996 - 23)
    r = ulp([np.nan, np.inf, -np.inf, 1.0], "bf16")
    assert np.isnan(r[:3]).all() and r[3] == 2.0**-7
    assert isinstance(ulp(1.0, "fp16"), np.ndarray) and ulp(np.ones((2, 3)), "fp16").shape == (2, 3)


@pytest.mark.parametrize("name", NAMES)
def test_ulp_constant_in_subnormal_range(name: str) -> None:
    f = FORMATS[name]
    r = np.linspace(-f.smallest_normal, f.smallest_normal, 1001)
    assert (ulp(r, name) == f.smallest_subnormal).all()
    assert ulp(2 * f.smallest_normal, name) == 2 * f.smallest_subnormal
    assert ulp(np.nextafter(2 * f.smallest_normal, 0), name) == f.smallest_subnormal


@pytest.mark.parametrize("name", SMALL)
def test_ulp_is_the_gap_to_the_next_value(name: str) -> None:
    v = table(name)
    v = v[np.isfinite(v) & (v >= 0)]
    gaps = np.diff(v)
    assert (ulp(v[:-1], name) == gaps).all()
    assert (ulp(-v[:-1], name) == gaps).all()
    # inside each gap the exact value's binade is the lower end's
    assert (ulp(v[:-1] + gaps / 3, name) == gaps).all()


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_ulp_matches_np_spacing(name: str) -> None:
    dt = FORMATS[name].dtype
    if name == "float16":
        x = np.arange(0x7BFF, dtype=np.uint16).view(np.float16)  # every finite x >= 0 below max
    else:
        rng = np.random.default_rng(1)
        bits = 8 * dt.itemsize
        x = rng.integers(0, 2 ** (bits - 1) - 2 ** (bits - 9) - 1, 1 << 18, dtype=np.int64)
        x = x.astype(UINT[bits]).view(dt) if bits == 32 else x.view(dt)
    expected = np.spacing(x).astype(np.float64)
    assert (ulp(x.astype(np.float64), name) == expected).all()
    assert (ulp(-x.astype(np.float64), name) == expected).all()


# ------------------------------------------------------------------------------------ ulp_error
def test_ulp_error_hand_cases() -> None:
    assert ulp_error(np.float32(1) + np.float32(2.0**-23), 1.0, "float32") == 1.0
    assert ulp_error(np.array([1.0078125], ml_dtypes.bfloat16), 1.00390625, "bf16")[0] == 0.5
    assert ulp_error(1.0, 1.00390625, "bf16") == -0.5
    assert ulp_error(0.0, 2.0**-134, "bf16") == -0.5  # subnormal range: ulp 2**-133
    # just below a power of two the reference's own (smaller) ulp 2**-7 is the unit
    assert ulp_error(2.0, 2.0 - 2.0**-52, "bf16") == 2.0**-52 / 2.0**-7
    assert ulp_error(448.0, 460.0, "e4m3") == -12 / 32
    fmax = np.finfo(np.float64).max
    assert ulp_error(fmax, -fmax, "float64") == 2.0**54 - 2  # difference overflows float64


def test_ulp_error_specials() -> None:
    inf, nan = np.inf, np.nan
    a = np.array([nan, inf, -inf, inf, nan, 1.0, inf, 1.0, -inf, 0.0])
    r = np.array([nan, inf, -inf, -inf, 1.0, nan, 1.0, inf, 5.0, -0.0])
    e = ulp_error(a, r, "fp32")
    assert e[:3].tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(e[3:9]).all()
    assert e[9] == 0.0


def test_ulp_error_broadcasts_and_accepts_formats() -> None:
    a = np.array([[1.0], [1.0078125], [0.9921875]], dtype=ml_dtypes.bfloat16)
    r = np.array([1.0, 1.0078125])
    e = ulp_error(a, r, ml_dtypes.bfloat16)
    assert e.shape == (3, 2) and e.dtype == np.float64
    assert e.tolist() == [[0.0, -1.0], [1.0, 0.0], [-1.0, -2.0]]  # 0.9921875 is 1 - 2**-7
    assert ulp_error(np.zeros(0), np.zeros(0), "bf16").shape == (0,)
    assert ulp_distance(np.zeros((0, 2)), np.zeros(2), "bf16").shape == (0, 2)
    with pytest.raises(ShapeError, match="broadcast"):
        ulp_error(np.zeros(3), np.zeros(4), "bf16")


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                                  "float8_e4m3fnuz", "float8_e5m2fnuz", "tf32"])
def test_correctly_rounded_casts_have_at_most_half_an_ulp(name: str) -> None:
    f = FORMATS[name]
    rng = np.random.default_rng(4)
    e = rng.integers(f.emin - f.p, f.emax, 1 << 18)
    r = (np.ldexp(1 + rng.random(1 << 18), e) * rng.choice([-1.0, 1.0], 1 << 18)).astype(np.float32)
    r = r[np.abs(r) < f.max_finite]
    if name == "tf32":  # RNE by bits: add 0xFFF + lsb, clear the low 13 bits
        b = r.view(np.uint32).astype(np.uint64)
        cast = ((b + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    else:
        cast = r.astype(f.dtype)  # numpy / ml_dtypes: RNE directly from float32
    err = ulp_error(cast, r.astype(np.float64), name)
    assert np.abs(err).max() <= 0.5
    assert np.abs(err).max() > 0.49  # not vacuous


def test_ulp_error_exact_for_float64_neighbours() -> None:
    rng = np.random.default_rng(8)
    r = rng.integers(1, 0x7FEF_FFFF_FFFF_FFFF, 1 << 16, dtype=np.int64).view(np.float64)
    r[:100] = np.ldexp(rng.random(100), -1060)  # subnormals
    r[100:110] = np.ldexp(1.0, rng.integers(-1000, 1000, 10))  # powers of two
    up = np.nextafter(r, np.inf)
    assert (ulp_error(up, r, "float64") == 1.0).all()
    assert (ulp_error(r, up, "float64") == -1.0).all()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(NAMES), st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=64))
def test_ulp_error_zero_iff_equal(name: str, raw: list[int]) -> None:
    f = FORMATS[name]
    width = 19 if name == "tf32" else f.bits
    bits = np.array(raw, dtype=np.uint64) & np.uint64(2**width - 1)
    v = f64(values_from_bits(name, bits))
    v = v[np.isfinite(v)]
    a, b = v[:, None], v[None, :]
    e = ulp_error(a, b, name)
    assert np.array_equal(e == 0, a == b)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(NAMES), st.integers(0, 2**64 - 1), st.lists(st.integers(0, 2**64 - 1), max_size=32))
def test_ulp_error_equals_distance_inside_a_binade(name: str, base: int, raw: list[int]) -> None:
    # For b and a in the closed binade [2**E, 2**(E+1)] of b (same sign), counting values and
    # dividing the difference by the spacing agree.
    f = FORMATS[name]
    width = 19 if name == "tf32" else f.bits
    mbits = f.p - 1
    b_bits = np.uint64(base) & np.uint64(2**width - 1)
    exp_field = np.uint64(((1 << (width - 1)) - 1) ^ ((1 << mbits) - 1))
    mant = np.uint64((1 << mbits) - 1)
    a_bits = (b_bits & ~mant) | (np.array(raw, np.uint64) & mant)  # b's sign and exponent
    b = values_from_bits(name, np.array([b_bits]))
    a = values_from_bits(name, a_bits)
    if not np.isfinite(f64(b)).all() or not (b_bits & exp_field):
        return  # NaN/inf/subnormal b: not this property
    a = a[np.isfinite(f64(a))]
    assert np.array_equal(ulp_error(a, b, name), ulp_distance(a, b, name))


def test_ulp_error_torch_jax_inputs() -> None:
    torch = pytest.importorskip("torch")
    a = torch.tensor([1.0078125, 2.0], dtype=torch.bfloat16)
    assert ulp_error(a, np.array([1.0, 2.0]), torch.bfloat16).tolist() == [1.0, 0.0]
    jnp = pytest.importorskip("jax.numpy")
    assert ulp_error(jnp.array([1.0, 2.0], jnp.float16), 1.0, jnp.float16).tolist() == [0.0, 1024.0]


# --------------------------------------------------------------------------------- ulp_distance
@pytest.mark.parametrize("name", SMALL)
def test_distance_is_the_rank_difference_in_the_exhaustive_table(name: str) -> None:
    f = FORMATS[name]
    v = table(name).astype(f.dtype)  # every non-NaN value once, sorted, ±inf included
    assert (ulp_distance(v[1:], v[:-1], name) == 1).all()  # every pair of adjacent values
    assert (ulp_distance(v[:-1], v[1:], name) == -1).all()
    rng = np.random.default_rng(2)
    i, j = rng.integers(0, v.size, (2, 1 << 16))
    assert np.array_equal(ulp_distance(v[j], v[i], name), (j - i).astype(np.float64))


def test_distance_neighbours_float32_float64_tf32() -> None:
    rng = np.random.default_rng(6)
    x32 = rng.integers(0, 0x7F80_0000, 1 << 16, dtype=np.int64).astype(np.uint32).view(np.float32)
    x32 = x32 * rng.choice(np.float32([-1, 1]), x32.size)
    assert (ulp_distance(np.nextafter(x32, np.float32(np.inf)), x32, "float32") == 1).all()
    x64 = rng.integers(0, 0x7FF0_0000_0000_0000, 1 << 16, dtype=np.int64).view(np.float64)
    assert (ulp_distance(np.nextafter(x64, np.inf), x64, "float64") == 1).all()
    assert (ulp_distance(-x64, np.nextafter(-x64, -np.inf), "float64") == 1).all()
    codes = rng.integers(0, 0x3FC00, 1 << 16, dtype=np.int64)  # 18-bit magnitudes below inf
    t0, t1 = values_from_bits("tf32", codes), values_from_bits("tf32", codes + 1)
    assert (ulp_distance(t1, t0, "tf32") == 1).all()
    assert ulp_distance(np.float32(np.inf), np.float32(2.0**128 - 2.0**117), "tf32") == 1
    # float32 inputs with bits below tf32's last place are rounded (RNE) first
    assert ulp_distance(np.float32(1 + 2.0**-12), np.float32(1.0), "tf32") == 0
    assert ulp_distance(np.float32(1 + 3 * 2.0**-12), np.float32(1.0), "tf32") == 1


def test_distance_hand_cases() -> None:
    assert ulp_distance(np.float32(1.0), np.float32(-1.0), "float32") == 2 * 0x3F80_0000
    assert ulp_distance(-1.0, 1.0, "e4m3fnuz") == -128  # 0x40 each side, and one zero
    assert ulp_distance(np.inf, -np.inf, "float64") == 2.0**64 - 2.0**53
    fmax = np.finfo(np.float64).max
    assert ulp_distance(fmax, -fmax, "float64") == 2.0 * 0x7FEF_FFFF_FFFF_FFFF
    assert ulp_distance(np.inf, 65504.0, "fp16") == 1
    assert ulp_distance(np.float16(np.inf), np.float16(-np.inf), "fp16") == 2 * 0x7C00
    # inputs of another dtype are rounded into the format first (RNE)
    assert ulp_distance(1 + 2.0**-9, np.array(1.0, ml_dtypes.bfloat16), "bf16") == 0
    assert ulp_distance(1 + 2.0**-8 + 2.0**-40, 1.0, "bf16") == 1
    d = ulp_distance(np.zeros((2, 1)), np.zeros(3), "bf16")
    assert d.shape == (2, 3) and d.dtype == np.float64


@pytest.mark.parametrize("name", [n for n in NAMES if FORMATS[n].has_nan and FORMATS[n].signed])
def test_distance_zeros_and_nans(name: str) -> None:
    assert ulp_distance(0.0, -0.0, name) == 0
    assert ulp_distance(-0.0, 0.0, name) == 0
    assert not np.signbit(ulp_distance(-0.0, 0.0, name))
    d = ulp_distance([np.nan, np.nan, 1.0, -0.0], [np.nan, 1.0, np.nan, 0.0], name)
    assert d[0] == 0 and np.isnan(d[1]) and np.isnan(d[2]) and d[3] == 0
    f = FORMATS[name]
    assert ulp_distance(f.smallest_subnormal, -f.smallest_subnormal, name) == 2


@pytest.mark.parametrize("name", ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"])
def test_distance_mx_elements_zeros_and_no_nan(name: str) -> None:
    f = FORMATS[name]
    assert ulp_distance(0.0, -0.0, name) == 0 and not np.signbit(ulp_distance(-0.0, 0.0, name))
    assert ulp_distance(f.smallest_subnormal, -f.smallest_subnormal, name) == 2
    # 2**(bits-1) - 1 magnitudes each side of the one zero: max to -max spans all of them
    assert ulp_distance(f.max_finite, -f.max_finite, name) == 2 * (2 ** (f.bits - 1) - 1)
    assert ulp_distance(np.inf, f.max_finite, name) == 0  # infinities saturate on the way in
    with pytest.raises(FormatError, match="NaN"):
        ulp_distance(np.nan, 1.0, name)


def test_distance_e8m0_is_the_exponent_difference() -> None:
    e = np.arange(-127, 128)
    v = np.ldexp(1.0, e)
    assert np.array_equal(ulp_distance(v, np.ones_like(v), "e8m0"), e.astype(np.float64))
    assert ulp_distance(2.0**127, 2.0**-127, "e8m0") == 254
    d = ulp_distance([0.0, -1.0, np.nan, np.nan], [1.0, 1.0, 1.0, 0.0], "e8m0")
    assert np.isnan(d[:3]).all() and d[3] == 0  # 0 and -1 have no encoding (NaN 0xFF)
    assert ulp(3.0, "e8m0") == 2.0 and ulp(2.0**-140, "e8m0") == 2.0**-127


@pytest.mark.parametrize(
    "name, patterns",
    [("float32", [0x7FC0_0000, 0xFFC0_0001, 0x7F80_0001]), ("float16", [0x7E00, 0xFC01, 0x7FFF]),
     ("bfloat16", [0x7FC0, 0xFF81]), ("float8_e4m3fn", [0x7F, 0xFF]), ("float8_e5m2", [0x7D, 0xFE])],
)
def test_distance_between_different_nan_patterns_is_zero(name: str, patterns: list[int]) -> None:
    f = FORMATS[name]
    nans = np.array(patterns, np.uint64).astype(UINT[f.bits]).view(f.dtype)
    assert (ulp_distance(nans[:, None], nans[None, :], name) == 0).all()
    one = np.ones(1, f.dtype)
    assert np.isnan(ulp_distance(nans, one, name)).all() and np.isnan(ulp_distance(one, nans, name)).all()


def test_distance_fnuz_nan_pattern() -> None:
    nan = np.array([0x80], np.uint8).view(ml_dtypes.float8_e4m3fnuz)
    one = np.array([1.0], ml_dtypes.float8_e4m3fnuz)
    assert ulp_distance(nan, nan, "e4m3fnuz")[0] == 0
    assert np.isnan(ulp_distance(nan, one, "e4m3fnuz")[0])


def _same_side_values(name: str, raw: list[int], negative: bool) -> np.ndarray:
    f = FORMATS[name]
    width = 19 if name == "tf32" else f.bits
    bits = np.array(raw, np.uint64) & np.uint64(2 ** (width - 1) - 1)
    if negative:
        bits |= np.uint64(1 << (width - 1))
    v = values_from_bits(name, bits)
    return v[~np.isnan(f64(v))]


SMALL_AND_32 = ("float32", "tf32") + SMALL


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SMALL_AND_32), st.lists(st.integers(0, 2**32), min_size=3, max_size=48), st.booleans())
def test_distance_antisymmetry_triangle_monotone(name: str, raw: list[int], negative: bool) -> None:
    v = _same_side_values(name, raw, negative)
    a, b, c = v[:, None, None], v[None, :, None], v[None, None, :]
    dab, dba = ulp_distance(a, b, name), ulp_distance(b, a, name)
    assert np.array_equal(dab, -dba)
    assert (ulp_distance(a, c, name) == dab + ulp_distance(b, c, name)).all()  # broadcasts
    x = np.sort(v.astype(np.float64))
    d = ulp_distance(x.astype(FORMATS[name].dtype), x[:1].astype(FORMATS[name].dtype), name)
    assert (np.diff(d) >= 0).all()
    assert np.array_equal(np.diff(d) > 0, np.diff(x) > 0)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**63 - 2**52 - 1), st.lists(st.integers(-(2**40), 2**40), min_size=2, max_size=32))
def test_distance_float64_nearby(base: int, offsets: list[int]) -> None:
    bits = np.clip(np.int64(base) + np.array(offsets, np.int64), 0, 0x7FF0_0000_0000_0000)
    v = bits.view(np.float64)
    d = ulp_distance(v[:, None], v[None, :], "float64")
    assert np.array_equal(d, (bits[:, None] - bits[None, :]).astype(np.float64))
    assert np.array_equal(d, -d.T)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_distance_agrees_with_numpy_testing(dtype: type) -> None:
    rng = np.random.default_rng(10)
    finfo = np.finfo(dtype)
    a = (rng.standard_normal(4096) * rng.choice([1e-3, 1.0, 1e3], 4096)).astype(dtype)
    a[:64] = finfo.smallest_subnormal * np.arange(64)  # subnormals and zero
    steps = rng.integers(-300, 300, a.size)
    b = a.copy()
    ib = b.view(UINT[8 * np.dtype(dtype).itemsize])
    ib += np.abs(steps).astype(ib.dtype)  # adding to the magnitude bits moves away from zero
    mine = ulp_distance(a, b, dtype)
    theirs = np.testing.assert_array_max_ulp(a, b, maxulp=1000, dtype=dtype).ravel()
    assert np.array_equal(np.abs(mine), theirs)
    worst = int(np.abs(mine).max())
    np.testing.assert_array_max_ulp(a, b, maxulp=worst, dtype=dtype)
    with pytest.raises(AssertionError):
        np.testing.assert_array_max_ulp(a, b, maxulp=worst - 1, dtype=dtype)


def test_distance_torch_jax_inputs() -> None:
    torch = pytest.importorskip("torch")
    a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    b = torch.tensor([1.0078125, 2.0], dtype=torch.bfloat16)
    assert ulp_distance(a, b, "bf16").tolist() == [-1.0, 0.0]
    jnp = pytest.importorskip("jax.numpy")
    one, nxt = jnp.array([1.0], jnp.float8_e4m3fn), jnp.array([1.125], jnp.float8_e4m3fn)
    assert ulp_distance(one, nxt, "e4m3").tolist() == [-1.0]
