"""Tests of numstd.core.scaled: block-scaled formats (OCP MX, NVFP4, fp8 with fp32 scales).

Independent truths: per-block loops in plain Python (``math.frexp`` for the MX exponent, Python
floats and ``fractions.Fraction`` for quotients), nearest values found by search in the exhaustive
sorted table of every element value (ties: the even code), numpy float32 division (correctly
rounded) for the fp32 scales, hand-derived cases from the OCP MX v1.0 rule.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from numstd.core import scaled as sc
from numstd.errors import FormatError, ShapeError
from numstd.formats import FORMATS, round_to
from numstd.ulp import ulp, ulp_error

MX = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4")
EMAX = {"float8_e4m3fn": 8, "float8_e5m2": 15, "float6_e3m2fn": 4, "float6_e2m3fn": 2, "float4_e2m1fn": 2}


def table(elem: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted non-negative finite values of an element format and their codes (exhaustive)."""
    f = FORMATS[elem]
    codes = np.arange(2 ** (f.bits - 1), dtype=np.uint8)  # sign bit clear
    with np.errstate(invalid="ignore"):
        v = codes.view(f.dtype).astype(np.float64)
    keep = np.isfinite(v)
    order = np.argsort(v[keep], kind="stable")
    return v[keep][order], codes[keep][order]


def nearest(t: float, elem: str) -> float:
    """RN_sat(t) into ``elem`` by exact comparison with every value (ties: even code)."""
    vals, codes = table(elem)
    a = Fraction(abs(t))
    best = min(range(len(vals)), key=lambda i: (abs(Fraction(vals[i]) - a), int(codes[i]) & 1))
    return math.copysign(float(vals[best]), t)


def sample(rng: np.random.Generator, shape: tuple, spread: float = 3.0) -> np.ndarray:
    rows = shape[:-1] + (1,)
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-spread, spread, rows)).astype(np.float32)


# ------------------------------------------------------------------------------------------ MX
@pytest.mark.parametrize("name", MX)
def test_mx_scales_and_codes_against_a_per_block_loop(name: str) -> None:
    f = sc.get_scaled_format(name)
    rng = np.random.default_rng(MX.index(name))
    x = sample(rng, (6, 70))  # 70 = 32 + 32 + 6: a partial last block
    x[0, :32] = 0.0  # an all-zero block
    x[1, 3] = 2.0**-130  # fp32 subnormal
    x[2, 5] = 512.0  # amax a power of two
    q = sc.quantize(x, name)
    assert q.scales.shape == (6, 3) and q.scales.dtype == ml_dtypes.float8_e8m0fnu
    assert q.codes.shape == x.shape and q.codes.dtype == f.element.dtype
    for i in range(6):
        for b in range(3):
            blk = [float(v) for v in x[i, 32 * b:32 * b + 32]]
            amax = max(abs(v) for v in blk)
            e = math.frexp(amax)[1] - 1 if amax > 0 else -127  # floor(log2 amax)
            X = 2.0 ** max(e - EMAX[f.element.name], -127)
            assert float(q.scales[i, b]) == X
            assert int(q.scales[i, b:b + 1].view(np.uint8)[0]) == round(math.log2(X)) + 127  # E8M0 code
            want = [nearest(v / X, f.element.name) for v in blk]
            got = q.codes[i, 32 * b:32 * b + 32].astype(np.float64).tolist()
            assert got == want, (i, b)
    y = sc.dequantize(q)
    assert y.dtype == np.float32
    assert np.array_equal(y.astype(np.float64), q.codes.astype(np.float64) * np.repeat(
        q.scales.astype(np.float64), 32, axis=1)[:, :70])


def test_mx_hand_cases() -> None:
    # e4m3 (emax 8): amax 500 -> floor(log2 500) = 8 -> X = 1; 500 saturates to 448, 3.3 -> 3.25
    x = np.zeros(32, np.float32)
    x[:3] = [500.0, 3.3, -0.01]
    q = sc.quantize(x, "mxfp8_e4m3")
    assert float(q.scales[0]) == 1.0
    assert q.codes[:3].astype(np.float64).tolist() == [448.0, 3.25, -0.009765625]
    # fp4 (emax 2): amax 6 -> floor(log2 6) = 2 -> X = 1; 5 is a tie 4|6 -> 4 (even code)
    x = np.array([6.0, 5.0, 2.5, 0.25] + [0.0] * 28, np.float32)
    q = sc.quantize(x, "mxfp4")
    assert float(q.scales[0]) == 1.0 and q.codes[:4].astype(np.float64).tolist() == [6.0, 4.0, 2.0, 0.0]
    # amax 0: X = 2**-127, codes 0; NaN or inf in a block: the NaN scale 0xFF and a NaN block
    x = np.zeros((3, 32), np.float32)
    x[1, 7], x[2, 0] = np.nan, -np.inf
    x[1, 0] = x[2, 1] = 1.0
    q = sc.quantize(x, "mxfp4")
    assert float(q.scales[0, 0]) == 2.0**-127
    assert q.scales[1:].view(np.uint8).ravel().tolist() == [255, 255]
    y = sc.dequantize(q)
    assert (y[0] == 0).all() and np.isnan(y[1:]).all()


def test_round_to_and_ulp_of_mx() -> None:
    rng = np.random.default_rng(5)
    x = sample(rng, (8, 64))
    r = round_to(x, "mxfp8_e4m3")
    assert r.dtype == np.float64 and np.array_equal(r, sc.dequantize(sc.quantize(x, "mxfp8_e4m3"), "float64"))
    # RNE of every element in its block's units: at most half an ULP, except saturated elements
    e = ulp_error(r, x.astype(np.float64), "mxfp8_e4m3")
    sat = np.abs(r) == 448.0 * sc.element_scales(sc.compute_scales(x, "mxfp8_e4m3")[0], "mxfp8_e4m3", x.shape)
    assert np.abs(e[~sat]).max() <= 0.5 and np.abs(e[~sat]).max() > 0.45
    # ulp = X * ulp_e4m3(r / X): a block with amax 448 has X = 1, so ulp(1.0) = 0.125, ulp(300) = 32
    blk = np.zeros(32)
    blk[:3] = [448.0, 1.0, 300.0]
    assert ulp(blk[:3].reshape(1, 3), "mxfp8_e4m3").tolist() == [[32.0, 0.125, 32.0]]
    s = np.array([2.0**-3])
    assert ulp(np.array([0.5]), "mxfp4", scales=s).tolist() == [0.25]  # 2**-3 * ulp_e2m1(4) = 2**-3 * 2
    with pytest.raises(FormatError, match="rne"):
        round_to(x, "mxfp4", "rtz")
    with pytest.raises(FormatError, match="scales"):
        round_to(x, "bf16", scales=s)


def test_explicit_scales() -> None:
    x = np.arange(64, dtype=np.float32).reshape(1, 64) / 8
    s = np.array([[1.0, 2.0]])
    r = round_to(x, "mxfp4", scales=s)
    assert r[0, 32] == 4.0 and r[0, 33] == 4.0  # 4.125 / 2 = 2.06 -> 2 -> 4
    assert r[0, 31] == 4.0  # 3.875 -> 4
    with pytest.raises(ShapeError, match="scales"):
        sc.quantize(x, "mxfp4", scales=np.ones(3))
    with pytest.raises(FormatError, match="tensor_scale"):
        sc.quantize(x, "nvfp4", scales=np.ones((1, 4)))


# ---------------------------------------------------------------------------------------- NVFP4
def test_nvfp4_against_fractions() -> None:
    rng = np.random.default_rng(2)
    x = sample(rng, (4, 48), spread=1.5)  # 48 = 3 blocks of 16
    q = sc.quantize(x, "nvfp4")
    at = float(np.abs(x).max())
    t = float(np.float32(at) / np.float32(2688.0))  # numpy float32 division: correctly rounded
    assert float(q.tensor_scale) == t and q.scales.shape == (4, 3)
    for i in range(4):
        for b in range(3):
            blk = [float(v) for v in x[i, 16 * b:16 * b + 16]]
            v = Fraction(max(abs(u) for u in blk)) / 6 / Fraction(t)
            sb = nearest(float(v), "float8_e4m3fn")  # (float(v): 53 bits, far from an e4m3 tie here)
            assert float(q.scales[i, b]) == sb
            S = sb * t
            assert q.codes[i, 16 * b:16 * b + 16].astype(np.float64).tolist() == [nearest(u / S, "float4_e2m1fn") for u in blk]


def test_nvfp4_hand_cases() -> None:
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 16] = 2688.0, 3.0  # tensor scale 1; block scales 448 and RN_e4m3(0.5) = 0.5
    q = sc.quantize(x, "nvfp4")
    assert float(q.tensor_scale) == 1.0 and q.scales.astype(np.float64).tolist() == [[448.0, 0.5]]
    assert float(q.codes[0, 0]) == 6.0 and float(q.codes[0, 16]) == 6.0
    x[0, 17] = 1e-30  # a block scale far below E4M3's range rounds to 0: codes 0
    x[0, 16] = 1e-30
    q = sc.quantize(x, "nvfp4")
    assert float(q.scales[0, 1]) == 0.0 and (sc.dequantize(q)[0, 16:] == 0).all()
    x[0, 5] = np.inf  # an inf anywhere: the tensor scale is not finite, every element NaN
    assert np.isnan(sc.dequantize(sc.quantize(x, "nvfp4"))).all()


# ------------------------------------------------------------------------------ fp8, fp32 scales
@pytest.mark.parametrize("name, shape, sshape", [
    ("fp8_e4m3_tensor", (5, 300), ()), ("fp8_e4m3_row", (5, 300), (5, 1)),
    ("fp8_e4m3_block128", (5, 300), (5, 3)), ("fp8_e5m2_tile128", (2, 130, 300), (2, 2, 3)),
])
def test_fp32_scales_against_loops(name: str, shape: tuple, sshape: tuple) -> None:
    f = sc.get_scaled_format(name)
    x = sample(np.random.default_rng(11), shape, spread=2.0)
    s, t = sc.compute_scales(x, name)
    assert s.shape == sshape == sc.scale_shape(name, shape) and t is None
    x3 = x.reshape(-1, shape[-2], shape[-1])
    br, bc = f.block
    full = sc.element_scales(s, name, shape).reshape(x3.shape)
    m = np.float32(f.element.max_finite)
    for li in range(x3.shape[0]):
        rows = range(0, x3.shape[1], br) if br > 0 else [0]
        for r0 in rows:
            for c0 in (range(0, x3.shape[2], bc) if bc > 0 else [0]):
                r1 = r0 + br if br > 0 else x3.shape[1]
                c1 = c0 + bc if bc > 0 else x3.shape[2]
                if f.per_tensor:
                    r0, r1, c0, c1 = 0, x3.shape[1], 0, x3.shape[2]
                    blk = x3
                else:
                    blk = x3[li, r0:r1, c0:c1]
                want = np.abs(blk).max() / m  # float32 / float32: correctly rounded
                assert (full[li, r0:r1, c0:c1] == float(want)).all()
    codes = sc.quantize(x, name).codes.astype(np.float64)
    rng = np.random.default_rng(0)
    for i in rng.choice(x.size, 40, replace=False):  # the exact quotient, rounded by table search
        assert codes.flat[i] == nearest(Fraction(float(x.flat[i])) / Fraction(float(full.flat[i])), f.element.name)


def test_legitimate_range_holds_fp32_kernels() -> None:
    # Kernels that compute the fp32 scale and the quotient with other fp32 operations (numpy float32
    # arithmetic is IEEE fp32) land inside [lo, hi]; MX ranges are a single value.
    x = sample(np.random.default_rng(4), (16, 256), spread=2.0)
    one = np.float32(1.0)
    for name in ("fp8_e4m3_row", "fp8_e5m2_block128", "fp8_e4m3_tensor"):
        f = sc.get_scaled_format(name)
        lo, hi = sc.legitimate_range(x, name, out="float64")
        amax = (  # each element's block amax (float32: exact)
            sc.element_scales(sc._amax(x.astype(np.float64), f).reshape(sc.scale_shape(name, x.shape)), name,
                                  x.shape)).astype(np.float32)
        m = np.float32(f.element.max_finite)
        seen = 0
        for s in (amax / m, amax * (one / m), one / (m / amax)):
            for t in (x / s, x * (one / s)):
                q = np.clip(t.astype(np.float32), -m, m).astype(f.element.dtype).astype(np.float64)
                y = q * s.astype(np.float64)
                assert ((y >= lo) & (y <= hi)).all()
                seen += int((y != round_to(x, name)).sum())
        assert seen > 0  # the kernels do differ from the reference somewhere (not vacuous)
        nz = hi != 0
        assert (hi >= lo).all() and np.median((hi - lo)[nz] / np.abs(hi[nz])) < 1e-6
    lo, hi = sc.legitimate_range(x, "mxfp4", out="float64")
    assert np.array_equal(lo, hi) and np.array_equal(lo, round_to(x, "mxfp4"))


def test_table_and_lookup() -> None:
    assert set(MX) < set(sc.SCALED_FORMATS) and "nvfp4" in sc.SCALED_FORMATS
    assert sc.get_scaled_format("MXFP8").name == "mxfp8_e4m3" and sc.is_scaled("mxfp4_e2m1")
    assert not sc.is_scaled("bf16")
    with pytest.raises(FormatError, match="mxfp4"):
        sc.get_scaled_format("mxfp5")
    with pytest.raises(ShapeError, match="scalar"):
        sc.quantize(np.float32(1.0), "mxfp4")
