"""arith16 standards of the contractions XLA CPU computes with 16-bit steps (docs/methodology.md §2.1):
conv and conv_transpose (bf16, fp16).

Independent truth: jax 0.10.2's own CPU kernels (the corpus' ``xla-arith16`` models must equal them bit
for bit, up to a measured fp32 summation-order residue in fp16; their outputs on fresh suite seeds must pass
``check(..., accumulate=<16-bit>)``), and planted bugs (a shifted window, zeros) that must fail.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd import registry
from numstd.corpus import variants_for
from numstd.suites import cases_for

DT = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
TAG = {"bfloat16": "BF16", "float16": "FP16"}
FMTS = ("bfloat16", "float16")
STD_TAG = {"conv": "CONV", "conv_transpose": "CONVTRANSPOSE"}
#: seed offset of the fresh cases (the calibration used the suites' seeds 0 and 1)
FRESH = 7_000

#: (op, x shape, weight shape, params): conv1d, strided/dilated conv2d, grouped conv2d, depthwise, conv3d,
#: conv_transpose2d strided with output padding, grouped conv_transpose1d
GEOMETRIES = [
    ("conv", (2, 8, 40), (16, 8, 5), dict(stride=1, padding=2, dilation=1, groups=1)),
    ("conv", (2, 16, 13, 13), (8, 16, 3, 3), dict(stride=2, padding=1, dilation=2, groups=1)),
    ("conv", (2, 16, 9, 9), (32, 4, 3, 3), dict(stride=1, padding=1, dilation=1, groups=4)),
    ("conv", (1, 8, 10, 10), (8, 1, 3, 3), dict(stride=1, padding=0, dilation=1, groups=8)),
    ("conv", (1, 4, 5, 6, 6), (6, 4, 3, 3, 3), dict(stride=1, padding=1, dilation=1, groups=1)),
    ("conv_transpose", (2, 16, 7, 7), (16, 8, 3, 3), dict(stride=2, padding=1, output_padding=1, dilation=1, groups=1)),
    ("conv_transpose", (2, 8, 20), (8, 4, 4), dict(stride=2, padding=1, output_padding=0, dilation=1, groups=2)),
]


def _backend():
    pytest.importorskip("jax")
    from numstd.backends import get

    return get("jax:cpu")


def _xla_variant(op):
    return next(v for v in variants_for(op) if v.name == "xla-arith16")


def _inputs(op, fmt, xs, ws, params, seed):
    g = np.random.default_rng(seed)
    x = (2 * g.standard_normal(xs) + 0.5).astype(np.float32).astype(DT[fmt])
    w = (g.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32).astype(DT[fmt])
    c_out = ws[0] if op == "conv" else ws[1] * params["groups"]
    b = (2 * g.standard_normal(c_out)).astype(np.float32).astype(DT[fmt])
    return [x, w, b]


@pytest.mark.parametrize("fmt", FMTS)
def test_xla_conv_model_equals_jax(fmt):
    # XLA CPU: RN16(RN16(conv) + b), the convolution in fp32 (YNNPACK or XLA's own f32 convolution). bf16: bit for bit. fp16: the fp32
    # convolution's summation order may differ from numpy's sgemm; measured on the suites (seed 5): 23 of
    # 149,472 conv and 7 of 129,888 conv_transpose elements differ, each with the fp32 sum within 2^-6 fp16
    # ulp of a rounding midpoint (a tie the order decides)
    be = _backend()
    differ = total = once_differ = 0
    for i, (op, xs, ws, params) in enumerate(GEOMETRIES):
        inputs = _inputs(op, fmt, xs, ws, params, 100 + i)
        want = np.asarray(be.run(op, inputs, **params)).astype(np.float64)
        got = np.asarray(_xla_variant(op)(inputs, params, out=fmt, acc=fmt)).astype(np.float64)
        assert got.shape == want.shape
        d = int((got != want).sum())
        if fmt == "bfloat16":
            assert d == 0, (op, xs, d)
        differ += d
        total += want.size
        seq = next(v for v in variants_for(op) if v.name == "im2col-blas-fp32")
        once = np.asarray(seq(inputs, params, out=fmt, acc="float32")).astype(np.float64)
        once_differ += int((once != want).sum())
    assert differ <= 0.001 * total, (differ, total)
    assert once_differ > 0.1 * total  # the two roundings are real: one rounding is not XLA's result


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", ["conv", "conv_transpose"])
def test_truncation_is_a_no_op_with_a_16bit_accumulator(op, fmt):
    # the exclusion of the truncation bug (standards/_templates/conv*.toml): measured, not assumed
    vs = {v.name: v for v in variants_for(op)}
    _, xs, ws, params = next(gm for gm in GEOMETRIES if gm[0] == op)
    inputs = _inputs(op, fmt, xs, ws, params, 7)
    t = np.asarray(vs["truncation"](inputs, params, out=fmt, acc=fmt)).astype(np.float64)
    b = np.asarray(vs["im2col-blocked32"](inputs, params, out=fmt, acc=fmt)).astype(np.float64)
    assert np.array_equal(t, b)


def _standard(op, fmt):
    return registry.get_standard(f"NS-{STD_TAG[op]}-{TAG[fmt]}-ARITH16")


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", ["conv", "conv_transpose"])
def test_jax_passes_arith16_on_fresh_seeds_and_fails_fp32(op, fmt):
    be = _backend()
    std = _standard(op, fmt)
    assert std.policy == "arith16" and std.accumulate.name == fmt
    cases = cases_for(std, seeds=[FRESH])
    assert cases
    rejected_fp32 = 0
    for case in cases:
        out = np.asarray(be.run(op, case.inputs, **case.params))
        v = numstd.check(out, op=op, inputs=case.inputs, accumulate=fmt, **case.params)
        assert v.standard_id.startswith(std.id + "@") and v.formats["policy"] == "arith16"
        assert v.passed, (case.id, v.message)
        rejected_fp32 += not numstd.check(out, op=op, inputs=case.inputs, policy="fp32", **case.params).passed
    # the fp32 policy's one-rounding bound does not contain the rounding before the bias (measured: every
    # suite case, seeds 0-1)
    assert rejected_fp32 >= len(cases) // 2


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", ["conv", "conv_transpose"])
@pytest.mark.parametrize("bug", ["window-shift", "zeros", "flipped-kernel"])
def test_bugs_fail_arith16(op, fmt, bug):
    std = _standard(op, fmt)
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.split("/")[2] == "normal")
    v = next(v for v in variants_for(op) if v.name == bug)
    y = v(case.inputs, case.params, out=fmt, acc=fmt)
    verdict = numstd.check(y, op=op, inputs=case.inputs, accumulate=fmt, **case.params)
    assert verdict.formats["policy"] == "arith16" and not verdict.passed, (case.id, verdict.message)


@pytest.mark.parametrize("fmt", FMTS)
def test_16bit_accumulated_conv_declared_fp32_fails_the_default(fmt):
    # a conv2d 5x5 with 64 channels (K = 1600) accumulated in the 16-bit format: within arith16, rejected by
    # the fp32-accumulation default
    std = _standard("conv", fmt)
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.startswith("conv/1x64x16x1x1x0x1x5x5"))
    acc16 = next(v for v in variants_for("conv") if v.name == "acc-output-format")
    y = acc16(case.inputs, case.params, out=fmt, acc="float32")
    assert not numstd.check(y, op="conv", inputs=case.inputs, **case.params).passed
    assert numstd.check(y, op="conv", inputs=case.inputs, accumulate=fmt, **case.params).passed


# --------------------------------------------------------------------------------------------------
# matmul: XLA's 16-bit dot is fp32-accumulate-round-once; the arith16 standard is for 16-bit accumulation
# --------------------------------------------------------------------------------------------------


def _mm_standard(fmt):
    return registry.get_standard(f"NS-MATMUL-{TAG[fmt]}-ARITH16")


@pytest.mark.parametrize("fmt", FMTS)
def test_xla_matmul_is_fp32_accumulate_round_once(fmt):
    # jax's 16-bit matmul: operands converted to f32, one f32 dot, one convert (compiled HLO); only the f32
    # summation order may differ from numpy's sgemm (measured on the suite, seed 5: 2 (bf16) and 6 (fp16) of
    # 12,800 elements)
    be = _backend()
    v = _xla_variant("matmul")
    g = np.random.default_rng(31)
    differ = total = once_differ = 0
    for ash, bsh in (((3, 40, 64), (3, 64, 24)), ((24, 200), (200, 300)), ((16, 2048), (2048, 8))):
        a = g.standard_normal(ash).astype(np.float32).astype(DT[fmt])
        b = g.standard_normal(bsh).astype(np.float32).astype(DT[fmt])
        want = np.asarray(be.run("matmul", [a, b])).astype(np.float64)
        got = np.asarray(v([a, b], {}, out=fmt, acc=fmt)).astype(np.float64)
        differ += int((got != want).sum())
        total += want.size
        once = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(DT[fmt]).astype(np.float64)
        once_differ += int((once != want).sum())
    assert differ <= 0.002 * total, (differ, total)
    assert once_differ <= 0.002 * total, (once_differ, total)  # one rounding of the dot: no 16-bit step


@pytest.mark.parametrize("fmt", FMTS)
def test_jax_matmul_passes_arith16_and_the_default(fmt):
    be = _backend()
    std = _mm_standard(fmt)
    for case in cases_for(std, seeds=[FRESH]):
        out = np.asarray(be.run("matmul", case.inputs, **case.params))
        v = numstd.check(out, op="matmul", inputs=case.inputs, accumulate=fmt)
        assert v.standard_id.startswith(std.id + "@") and v.passed, (case.id, v.message)
        assert numstd.check(out, op="matmul", inputs=case.inputs).passed, case.id


@pytest.mark.parametrize("fmt", FMTS)
def test_16bit_accumulated_matmul_passes_arith16_fails_the_default(fmt):
    # a sequential 16-bit FMA chain over K = 4096 (the legitimate arithmetic of this policy)
    std = _mm_standard(fmt)
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.startswith("matmul/8x4096x16/normal"))
    seq = next(v for v in variants_for("matmul") if v.name == "sequential")
    y = seq(case.inputs, case.params, out=fmt, acc=fmt)
    assert numstd.check(y, op="matmul", inputs=case.inputs, accumulate=fmt).passed
    assert not numstd.check(y, op="matmul", inputs=case.inputs).passed


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("bug", ["dropped-last-tile", "transposed-b", "zeros"])
def test_matmul_bugs_fail_arith16(fmt, bug):
    std = _mm_standard(fmt)
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.startswith("matmul/16x512x32/normal"))
    v = next(v for v in variants_for("matmul") if v.name == bug)
    y = v(case.inputs, case.params, out=fmt, acc=fmt)
    verdict = numstd.check(y, op="matmul", inputs=case.inputs, accumulate=fmt)
    assert not verdict.passed, (case.id, verdict.message)


def test_matmul_zeros_not_discriminating_at_large_k():
    # hand-derived: ones @ ones, K = 4096, bf16: |c| = K = absdot, bound lam·2^-8·sqrt(K)·K + 2^-8·K exceeds |c|
    # exactly when lam·2^-8·64 + 2^-8 >= 1 (lam >= 3.98); at K = 64 it is lam·2^-8·8 + 2^-8 < 1: zeros fail there
    lam = float(_mm_standard("bfloat16").model.constants["lam"])
    for k, discriminating in ((64, True), (4096, lam * 2.0**-8 * 64 + 2.0**-8 < 1)):
        a = np.ones((2, k), dtype=ml_dtypes.bfloat16)
        b = np.ones((k, 3), dtype=ml_dtypes.bfloat16)
        v = numstd.check(np.zeros((2, 3), ml_dtypes.bfloat16), op="matmul", inputs=[a, b], accumulate="bfloat16")
        assert v.passed is (not discriminating)
        assert ("not discriminating at this size" in v.message) is (not discriminating)


def test_fp16_accumulation_may_overflow_where_the_exact_product_is_finite():
    # the suite's wide data at K = 4096: a sequential fp16 chain overflows on elements whose exact result is
    # finite; intermediate_overflow allows those non-finite outputs (spillmag >= 65520), zeros still fail
    std = _mm_standard("float16")
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.startswith("matmul/8x4096x16/wide"))
    seq = next(v for v in variants_for("matmul") if v.name == "sequential")
    y = seq(case.inputs, case.params, out="float16", acc="float16")
    exact = np.asarray(case.inputs[0], np.float64) @ np.asarray(case.inputs[1], np.float64)
    assert (~np.isfinite(np.asarray(y, np.float64)) & (np.abs(exact) < 65504)).any()
    v = numstd.check(y, op="matmul", inputs=case.inputs, accumulate="float16")
    specials = next(c for c in v.criteria if c.name == "specials")
    assert v.passed and "intermediate_overflow" in specials.message, (v.message, specials.message)
    z = np.zeros_like(np.asarray(y))
    assert not numstd.check(z, op="matmul", inputs=case.inputs, accumulate="float16").passed


@pytest.mark.parametrize("fmt", FMTS)
def test_matmul_truncation_is_a_no_op_with_a_16bit_accumulator(fmt):
    vs = {v.name: v for v in variants_for("matmul")}
    g = np.random.default_rng(8)
    a, b = (g.standard_normal(s).astype(np.float32).astype(DT[fmt]) for s in ((12, 300), (300, 10)))
    t = np.asarray(vs["truncation"]([a, b], {}, out=fmt, acc=fmt), np.float64)
    assert np.array_equal(t, np.asarray(vs["blocked32"]([a, b], {}, out=fmt, acc=fmt), np.float64))


# --------------------------------------------------------------------------------------------------
# attention (bf16): XLA is fp32 with P rounded to bf16; the arith16 standard is for 16-bit arithmetic
# --------------------------------------------------------------------------------------------------


def test_xla_attention_model_equals_jax():
    # measured on the suite (seed 5): 10 of 22,528 elements differ (fp32 exp / row-sum order ties)
    be = _backend()
    v = _xla_variant("attention")
    g = np.random.default_rng(41)
    differ = total = 0
    for shape, params in (((2, 16, 32), dict(causal=False)), ((3, 40, 64), dict(causal=True)),
                          ((1, 8, 200, 16), dict(causal=False, scale=0.3))):
        q, k, v_ = (g.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16) for _ in range(3))
        want = np.asarray(be.run("attention", [q, k, v_], **params)).astype(np.float64)
        got = np.asarray(v([q, k, v_], params, out="bfloat16", acc="bfloat16")).astype(np.float64)
        differ += int((got != want).sum())
        total += want.size
    assert differ <= 0.002 * total, (differ, total)


def test_jax_attention_passes_arith16_and_the_default():
    be = _backend()
    std = registry.get_standard("NS-ATTENTION-BF16-ARITH16")
    for case in cases_for(std, seeds=[FRESH]):
        out = np.asarray(be.run("attention", case.inputs, **case.params))
        v = numstd.check(out, op="attention", inputs=case.inputs, accumulate="bfloat16", **case.params)
        assert v.standard_id.startswith(std.id + "@") and v.passed, (case.id, v.message)
        assert numstd.check(out, op="attention", inputs=case.inputs, **case.params).passed, case.id


def test_16bit_attention_passes_arith16_fails_the_default():
    std = registry.get_standard("NS-ATTENTION-BF16-ARITH16")
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.startswith("attention/2x32x300x64/normal"))
    acc16 = next(v for v in variants_for("attention") if v.name == "two-gemm-acc16")
    y = acc16(case.inputs, case.params, out="bfloat16", acc="bfloat16")
    assert numstd.check(y, op="attention", inputs=case.inputs, accumulate="bfloat16", **case.params).passed
    assert not numstd.check(y, op="attention", inputs=case.inputs, **case.params).passed


@pytest.mark.parametrize("bug", ["softmax-wrong-axis", "missing-scale", "zeros"])
def test_attention_bugs_fail_arith16(bug):
    # (the bf16-arithmetic bound is loose: zeros fail on 6 of 36 fresh suite cases, the others say 'not
    # discriminating at this size'; N(0,1) data at L = 16, S = 64 is one where they fail)
    std = registry.get_standard("NS-ATTENTION-BF16-ARITH16")
    case = next(c for c in cases_for(std, seeds=[FRESH]) if c.id.startswith("attention/2x16x64x32/normal"))
    v = next(v for v in variants_for("attention") if v.name == bug)
    y = v(case.inputs, case.params, out="bfloat16", acc="bfloat16")
    assert not numstd.check(y, op="attention", inputs=case.inputs, accumulate="bfloat16", **case.params).passed


def test_attention_truncation_is_a_no_op_with_a_16bit_working_format():
    vs = {v.name: v for v in variants_for("attention")}
    g = np.random.default_rng(9)
    q, k, v_ = (g.standard_normal((2, 20, 16)).astype(np.float32).astype(ml_dtypes.bfloat16) for _ in range(3))
    t = np.asarray(vs["truncation"]([q, k, v_], {}, out="bfloat16", acc="bfloat16"), np.float64)
    assert np.array_equal(t, np.asarray(vs["two-gemm"]([q, k, v_], {}, out="bfloat16", acc="bfloat16"), np.float64))


def test_fp16_attention_has_no_arith16_standard():
    from numstd.errors import StandardNotFound

    q = np.random.default_rng(3).standard_normal((2, 8, 16)).astype(np.float16)
    with pytest.raises(StandardNotFound):
        numstd.check(q, op="attention", inputs=[q, q, q], accumulate="float16")
