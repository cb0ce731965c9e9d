"""Tests of the ``cast`` op (quantize into a block-scaled format, dequantize) and its standards.

Independent truths: round trips computed here per block with numpy float32 arithmetic and
ml_dtypes casts (clipped: saturation) — the planted bugs are written here too; ``math.frexp`` for
MX exponents; the verdicts of the published NS-CAST-* standards.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core import scaled as sc
from numstd.core.errors import ParameterError

E = {"mxfp8_e4m3": ml_dtypes.float8_e4m3fn, "mxfp4": ml_dtypes.float4_e2m1fn, "mxfp6_e3m2": ml_dtypes.float6_e3m2fn}
EMAX = {"mxfp8_e4m3": 8, "mxfp4": 2, "mxfp6_e3m2": 4}
MAX = {"mxfp8_e4m3": 448.0, "mxfp4": 6.0, "mxfp6_e3m2": 28.0}


def inputs(seed: int = 0, shape: tuple = (16, 256)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 2, shape[:-1] + (1,))).astype(np.float32)


def mx_here(x: np.ndarray, name: str, block: int = 32, exp=lambda a: math.frexp(a)[1] - 1, mode: str = "rne",
            saturate: bool = True, pow2: bool = True) -> np.ndarray:
    """An MX round trip written here, block by block (float32 in, float32 out)."""
    y = np.empty_like(x)
    rows, K = x.reshape(-1, x.shape[-1]).shape
    flat, out = x.reshape(rows, K), y.reshape(rows, K)
    for i in range(rows):
        for k0 in range(0, K, block):
            b = flat[i, k0:k0 + block].astype(np.float64)
            amax = float(np.abs(b).max())
            if pow2:
                X = 2.0 ** max((exp(amax) if amax > 0 else -127) - EMAX[name], -127)
            else:
                X = float(np.float32(amax) / np.float32(MAX[name])) if amax > 0 else 1.0
            t = (b / X).astype(np.float32)
            if mode == "rtz":
                t = np.trunc(t * 64) / 64  # (a coarse truncation of the fraction: enough to show)
            if saturate:
                t = np.clip(t, -MAX[name], MAX[name])
            with np.errstate(invalid="ignore", over="ignore"):
                q = t.astype(E[name]).astype(np.float64)
            out[i, k0:k0 + block] = q * X
    return y


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp4", "mxfp6_e3m2"])
def test_mx_round_trip_written_here_passes_and_one_ulp_fails(name: str) -> None:
    x = inputs(1)
    y = mx_here(x, name)
    v = numstd.check(y, op="cast", inputs=[x], to=name)
    assert v.passed, v.message
    assert v.standard_id.startswith("NS-CAST-FP32-TO-MX")
    bad = y.copy()
    i = int(np.flatnonzero(np.abs(y.ravel()) > 0)[3])
    bad.view(np.uint32).flat[i] += 1  # one fp32 ulp: the MX standards are bit-exact
    assert not numstd.check(bad, op="cast", inputs=[x], to=name).passed


@pytest.mark.parametrize("bug", ["ceil", "block16", "no-pow2", "truncation"])
def test_mx_planted_bugs_fail(bug: str) -> None:
    x = inputs(2)
    y = {"ceil": lambda: mx_here(x, "mxfp8_e4m3", exp=lambda a: math.ceil(math.log2(a))),
         "block16": lambda: mx_here(x, "mxfp8_e4m3", block=16),
         "no-pow2": lambda: mx_here(x, "mxfp8_e4m3", pow2=False),
         "truncation": lambda: mx_here(x, "mxfp8_e4m3", mode="rtz")}[bug]()
    assert not numstd.check(y, op="cast", inputs=[x], to="mxfp8_e4m3").passed


def test_no_saturation_fails_where_elements_overflow() -> None:
    x = inputs(3)
    x[:, 0] = 500.0 * np.sign(x[:, 0])  # amax 500: X = 1, and 500 > 448 must saturate
    y = mx_here(x, "mxfp8_e4m3", saturate=False)
    assert np.isnan(y[:, 0]).all()
    v = numstd.check(y, op="cast", inputs=[x], to="mxfp8_e4m3")
    assert not v.passed and numstd.check(mx_here(x, "mxfp8_e4m3"), op="cast", inputs=[x], to="mxfp8_e4m3").passed


def fp8_block_here(x: np.ndarray, block: int, recip: bool = False, per_tensor: bool = False) -> np.ndarray:
    """fp8 e4m3 with fp32 scales per 1 x block (or per tensor), in numpy float32."""
    rows = x.reshape(-1, x.shape[-1])
    y = np.empty_like(rows)
    m = np.float32(448.0)
    for i in range(rows.shape[0]):
        for k0 in range(0, rows.shape[1], block):
            b = rows[i, k0:k0 + block]
            amax = np.abs(x).max() if per_tensor else np.abs(b).max()
            s = amax * (np.float32(1) / m) if recip else amax / m
            q = np.clip(b / s, -m, m).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
            y[i, k0:k0 + block] = q * s
    return y.reshape(x.shape)


def test_fp8_block_scales_reciprocal_kernel_passes_and_bugs_fail() -> None:
    x = inputs(4, (32, 512))
    to = "fp8_e4m3_block128"
    for recip in (False, True):  # amax / 448 and amax * fl(1/448): both legitimate
        v = numstd.check(fp8_block_here(x, 128, recip), op="cast", inputs=[x], to=to)
        assert v.passed, v.message
    assert not numstd.check(fp8_block_here(x, 64), op="cast", inputs=[x], to=to).passed  # wrong block size
    assert not numstd.check(fp8_block_here(x, 128, per_tensor=True), op="cast", inputs=[x], to=to).passed
    y = fp8_block_here(x, 128)
    bad = y.copy()
    i = int(np.argmax(np.abs(y)))
    bad.flat[i] = np.float32(y.flat[i] * (1 + 1 / 16))  # one e4m3 step: far outside the fp32 range
    assert not numstd.check(bad, op="cast", inputs=[x], to=to).passed


def test_selection_aliases_and_errors() -> None:
    x = inputs(5)
    y = mx_here(x, "mxfp4")
    assert numstd.check(y, op="cast", inputs=[x], to="MXFP4_E2M1").standard_id == "NS-CAST-FP32-TO-MXFP4@1"
    xb = x.astype(ml_dtypes.bfloat16)
    yb = sc.dequantize(sc.quantize(xb, "nvfp4"), "bfloat16")
    v = numstd.check(yb, op="cast", inputs=[xb], to="nvfp4")
    assert v.passed and v.standard_id == "NS-CAST-BF16-TO-NVFP4@1"
    with pytest.raises(ParameterError, match="mxfp4"):
        numstd.check(y, op="cast", inputs=[x], to="mxfp5")
    with pytest.raises(ParameterError):
        numstd.check(y, op="cast", inputs=[x])
    nan = y.copy()
    nan[0, 0] = np.nan
    assert not numstd.check(nan, op="cast", inputs=[x], to="mxfp4").passed
    assert not numstd.check(y.astype(np.float16), op="cast", inputs=[x], to="mxfp4").passed
    assert not numstd.check(y[:, :128], op="cast", inputs=[x], to="mxfp4").passed


def test_nan_blocks() -> None:
    x = inputs(6)
    x[3, 40] = np.nan
    y = mx_here(np.nan_to_num(x), "mxfp8_e4m3")
    y[3, 32:64] = np.nan  # the whole block of the NaN
    assert numstd.check(y, op="cast", inputs=[x], to="mxfp8_e4m3").passed
    y[3, 33] = 0.0  # one element of a NaN block not NaN
    assert not numstd.check(y, op="cast", inputs=[x], to="mxfp8_e4m3").passed


@pytest.mark.parametrize("std_id", ["NS-CAST-FP32-TO-MXFP4@1", "NS-CAST-FP32-TO-NVFP4@1",
                                    "NS-CAST-BF16-TO-FP8E4M3-BLOCK128@1"])
def test_corpus_bugs_fail_where_observable_and_legit_variants_pass(std_id: str) -> None:
    from numstd.catalog.registry import get_standard
    from numstd.catalog.suites import cases_for
    from numstd.core.formats import get_format
    from numstd.corpus import variants_for
    from numstd.ops import validate

    std = get_standard(std_id)
    out = std.output
    caught, observable = set(), set()
    for case in cases_for(std, seeds=[9])[::3]:
        _, arr, full = validate("cast", case.inputs, case.params)
        for v in variants_for("cast"):
            if v.name in ("torch-cpu", "jax-cpu") or not v.applicable(arr, full, out):
                continue
            y = v.fn(arr, full, out, get_format("float32"), 0)
            passed = numstd.check(y, op="cast", inputs=arr, standard=std.key, **case.params).passed
            if v.legit:
                assert passed, f"{v.name} on {case.id}"
            else:
                observable.add(v.name)
                assert not passed, f"{v.name} on {case.id}"
                caught.add(v.name)
    assert caught == observable and len(caught) >= 5
