"""arith16 standards of the losses XLA CPU computes with 16-bit terms (docs/methodology.md §2.1): mse_loss.

Independent truth: jax 0.10.2's own CPU kernels (the corpus' ``xla-arith16`` model must equal them bit for
bit; their outputs on fresh suite seeds must pass ``check(..., accumulate=<16-bit>)``), planted bugs (a 16-bit
running sum, zeros), and hand-derived fp16 overflows (|d| > 256 squares to inf in fp16).
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
REDUCTIONS = ("mean", "sum", "none")
#: fresh suite seeds (the calibration used the suite's seeds 0-2)
FRESH = (90,)


def _jax_loss(op, reduction):
    jax = pytest.importorskip("jax")
    from numstd.backends.jax_backend import _table

    impl = _table(jax)[op]
    return jax.jit(lambda a, b: impl([a, b], {"reduction": reduction}))


def _variant(op, name):
    return next(v for v in variants_for(op) if v.name == name)


def _pair(fmt, shape, seed, dist):
    g = np.random.default_rng(seed)
    if dist == "normal":
        a, b = g.standard_normal(shape), g.standard_normal(shape)
    elif dist == "offset":  # alike inputs: the terms' roundings share a sign
        a, b = 3 + 0.01 * g.standard_normal(shape), 3 + 0.01 * g.standard_normal(shape)
    else:  # wide: magnitudes over five decades
        a, b = g.standard_normal(shape) * 10.0 ** g.uniform(-3, 2, shape), g.standard_normal(shape)
    return a.astype(np.float32).astype(DT[fmt]), b.astype(np.float32).astype(DT[fmt])


CASES = (((3, 5), 1, "normal"), ((4, 17), 2, "offset"), ((32, 100), 3, "normal"), ((8, 1000), 4, "offset"),
         ((64, 10), 6, "offset"), ((16, 2048), 7, "wide"))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_xla_mse_model_equals_jax_bit_for_bit(fmt, reduction):
    f = _jax_loss("mse_loss", reduction)
    v = _variant("mse_loss", "xla-arith16")
    for shape, seed, dist in CASES:
        a, b = _pair(fmt, shape, seed, dist)
        want = np.asarray(f(a, b)).astype(np.float64)
        got = np.asarray(v([a, b], {"reduction": reduction}, out=fmt, acc=fmt)).astype(np.float64)
        assert np.array_equal(got, want, equal_nan=True), (fmt, reduction, shape, int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
def test_xla_mse_terms_are_rounded_to_16_bits(fmt):
    # the model is not a one-rounding fp32 loss: XLA rounds d = a - b to 16 bits before squaring
    f = _jax_loss("mse_loss", "none")
    a, b = _pair(fmt, (64, 10), 6, "normal")
    want = np.asarray(f(a, b)).astype(np.float64)
    d = a.astype(np.float64) - b.astype(np.float64)
    once = (d * d).astype(np.float32).astype(DT[fmt]).astype(np.float64)
    assert (once != want).mean() > 0.05


def _standard(fmt):
    return registry.get_standard(f"NS-MSELOSS-{TAG[fmt]}-ARITH16")


@pytest.mark.parametrize("fmt", FMTS)
def test_jax_mse_passes_arith16_on_fresh_seeds(fmt):
    std = _standard(fmt)
    assert std.policy == "arith16"
    cases = cases_for(std, seeds=FRESH)
    assert cases
    for case in cases:
        for reduction in REDUCTIONS:
            out = np.asarray(_jax_loss("mse_loss", reduction)(*case.inputs))
            v = numstd.check(out, op="mse_loss", inputs=case.inputs, accumulate=fmt, reduction=reduction)
            assert v.standard_id.startswith(std.id) and v.formats["policy"] == "arith16"
            assert v.passed, (case.id, reduction, v.message)


@pytest.mark.parametrize("fmt", FMTS)
def test_mse_16bit_running_sum_and_zeros_fail_arith16(fmt):
    a, b = _pair(fmt, (8, 1000), 4, "normal")
    seq = _variant("mse_loss", "acc-output-format")
    out = seq([a, b], {"reduction": "mean"}, out=fmt, acc=fmt)
    v = numstd.check(np.asarray(out), op="mse_loss", inputs=[a, b], accumulate=fmt)
    assert v.formats["policy"] == "arith16" and not v.passed
    zeros = np.zeros((), dtype=DT[fmt])
    assert not numstd.check(zeros, op="mse_loss", inputs=[a, b], accumulate=fmt).passed


@pytest.mark.parametrize("fmt", FMTS)
def test_mse_16bit_accumulation_declared_fp32_fails_the_default(fmt):
    # a sequential 16-bit running sum of 8000 squares of mean 2 loses the addends' low bits once the partial
    # sum's ulp reaches them (bf16: ulp 8 at 1024; fp16: ulp 4 at 4096): over 10 % below the exact sum
    # (measured: fp16 0.82x), rejected by the default (fp32-accumulating) standard
    a, b = _pair(fmt, (8, 1000), 4, "normal")
    seq = _variant("mse_loss", "sequential")
    out = np.asarray(seq([a, b], {"reduction": "sum"}, out=fmt, acc=fmt), dtype=np.float64)
    exact = float(np.sum((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    assert out < 0.9 * exact
    assert not numstd.check(np.asarray(out).astype(DT[fmt]), op="mse_loss", inputs=[a, b], reduction="sum").passed


def test_fp16_square_overflow_is_allowed_only_where_a_square_overflows():
    # hand-derived: d = 300 squares to 90000 > 65504 (inf in fp16) while the mean over 4096 terms is finite
    a = np.zeros((4, 1024), dtype=np.float16)
    b = np.zeros((4, 1024), dtype=np.float16)
    a[0, 0] = 300.0
    exact = 300.0**2 / a.size
    assert np.isfinite(np.float16(exact))
    out = np.asarray(_jax_loss("mse_loss", "mean")(a, b))
    assert np.isinf(out)  # XLA's fp16 RN16(d²) overflowed
    assert numstd.check(out, op="mse_loss", inputs=[a, b], accumulate="float16").passed
    a[0, 0] = 200.0  # d² = 40000 is finite in fp16: an inf there is a mismatch
    inf = np.asarray(np.inf, dtype=np.float16)
    assert not numstd.check(inf, op="mse_loss", inputs=[a, b], accumulate="float16").passed
    assert numstd.check(np.asarray(_jax_loss("mse_loss", "mean")(a, b)), op="mse_loss", inputs=[a, b],
                        accumulate="float16").passed


# ---------------------------------------------------------------------------------------------
# cross_entropy
# ---------------------------------------------------------------------------------------------

def _logits(fmt, n, c, seed, scale):
    g = np.random.default_rng(seed)
    x = (g.standard_normal((n, c)) * scale + 2).astype(np.float32).astype(DT[fmt])
    return x, g.integers(0, c, n)


CE_CASES = (((3, 5), 1, 1.0), ((4, 17), 2, 8.0), ((32, 100), 3, 3.0), ((64, 1000), 4, 1.0), ((512, 10), 6, 20.0))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_xla_cross_entropy_model_equals_jax_bit_for_bit(fmt, reduction):
    f = _jax_loss("cross_entropy", reduction)
    v = _variant("cross_entropy", "xla-arith16")
    for (n, c), seed, scale in CE_CASES:
        x, t = _logits(fmt, n, c, seed, scale)
        want = np.asarray(f(x, t)).astype(np.float64)
        got = np.asarray(v([x, t], {"reduction": reduction}, out=fmt, acc=fmt)).astype(np.float64)
        assert np.array_equal(got, want, equal_nan=True), (fmt, reduction, (n, c), int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
def test_jax_cross_entropy_passes_arith16_on_fresh_seeds(fmt):
    std = registry.get_standard(f"NS-CROSSENTROPY-{TAG[fmt]}-ARITH16")
    assert std.policy == "arith16"
    cases = cases_for(std, seeds=FRESH)
    assert cases
    for case in cases:
        for reduction in REDUCTIONS:
            out = np.asarray(_jax_loss("cross_entropy", reduction)(*case.inputs))
            v = numstd.check(out, op="cross_entropy", inputs=case.inputs, accumulate=fmt, reduction=reduction)
            assert v.standard_id.startswith(std.id) and v.formats["policy"] == "arith16"
            assert v.passed, (case.id, reduction, v.message)


@pytest.mark.parametrize("fmt", FMTS)
def test_cross_entropy_off_by_one_label_and_zeros_fail_arith16(fmt):
    x, t = _logits(fmt, 64, 1000, 4, 3.0)
    f = _jax_loss("cross_entropy", "mean")
    # jax's own 16-bit arithmetic with the labels read one class off: each row's loss moves by x_t − x_(t+1),
    # O(4) against a bound of u16·(2·loss + devmean + c) ≈ 0.1 (a mean over rows may cancel it: judged per row)
    shifted = np.asarray(_jax_loss("cross_entropy", "none")(x, (t + 1) % 1000))
    v = numstd.check(shifted, op="cross_entropy", inputs=[x, t], accumulate=fmt, reduction="none")
    assert v.formats["policy"] == "arith16" and not v.passed
    assert not numstd.check(np.zeros((), dtype=DT[fmt]), op="cross_entropy", inputs=[x, t], accumulate=fmt).passed
    assert numstd.check(np.asarray(f(x, t)), op="cross_entropy", inputs=[x, t], accumulate=fmt).passed


# ---------------------------------------------------------------------------------------------
# nll_loss
# ---------------------------------------------------------------------------------------------

def _logprobs(fmt, n, c, seed, scale):
    g = np.random.default_rng(seed)
    x = (-np.abs(g.standard_normal((n, c))) * scale).astype(np.float32).astype(DT[fmt])
    t = g.integers(0, c, n)
    t[g.random(n) < 0.1] = -100  # ignored rows
    return x, t


def _jax_nll(reduction):
    jax = pytest.importorskip("jax")
    from numstd.backends.jax_backend import _table

    impl = _table(jax)["nll_loss"]
    return jax.jit(lambda a, b: impl([a, b], {"reduction": reduction, "ignore_index": -100}))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_xla_nll_model_equals_jax_bit_for_bit(fmt, reduction):
    f = _jax_nll(reduction)
    v = _variant("nll_loss", "xla-arith16")
    for (n, c), seed, scale in (((3, 5), 1, 1.0), ((64, 10), 2, 8.0), ((1024, 100), 3, 3.0), ((300, 7), 6, 20.0)):
        x, t = _logprobs(fmt, n, c, seed, scale)
        want = np.asarray(f(x, t)).astype(np.float64)
        got = np.asarray(v([x, t], {"reduction": reduction}, out=fmt, acc=fmt)).astype(np.float64)
        assert np.array_equal(got, want, equal_nan=True), (fmt, reduction, (n, c), int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
def test_jax_nll_passes_arith16_on_fresh_seeds_and_a_missing_negation_fails(fmt):
    std = registry.get_standard(f"NS-NLLLOSS-{TAG[fmt]}-ARITH16")
    assert std.policy == "arith16"
    for case in cases_for(std, seeds=FRESH):
        for reduction in REDUCTIONS:
            out = np.asarray(_jax_nll(reduction)(*case.inputs))
            v = numstd.check(out, op="nll_loss", inputs=case.inputs, accumulate=fmt, reduction=reduction,
                             ignore_index=-100)
            assert v.standard_id.startswith(std.id) and v.passed, (case.id, reduction, v.message)
    x, t = _logprobs(fmt, 1024, 100, 3, 3.0)
    neg = np.asarray(_jax_nll("mean")(-x, t))  # x[n, t_n] without the minus sign, in jax's own arithmetic
    assert not numstd.check(neg, op="nll_loss", inputs=[x, t], accumulate=fmt).passed


def test_fp16_nll_stored_sum_overflow_is_allowed_only_where_the_sum_can_overflow():
    # hand-derived: 8192 rows of loss 10 sum to 81920 > 65504: XLA's stored RN16(S) is inf, the mean (10) finite
    x = np.full((8192, 4), -10.0, dtype=np.float16)
    t = np.zeros(8192, dtype=np.int64)
    out = np.asarray(_jax_nll("mean")(x, t))
    assert np.isinf(out)
    assert numstd.check(out, op="nll_loss", inputs=[x, t], accumulate="float16").passed
    small = x[:4096]  # 40960: no partial sum can overflow; an inf there is a mismatch
    inf = np.asarray(np.inf, dtype=np.float16)
    assert not numstd.check(inf, op="nll_loss", inputs=[small, t[:4096]], accumulate="float16").passed
    assert numstd.check(np.asarray(_jax_nll("mean")(small, t[:4096])), op="nll_loss", inputs=[small, t[:4096]],
                        accumulate="float16").passed


# ---------------------------------------------------------------------------------------------
# huber_loss and smooth_l1_loss
# ---------------------------------------------------------------------------------------------

HUB = {"huber_loss": ("delta", "HUBERLOSS"), "smooth_l1_loss": ("beta", "SMOOTHL1LOSS")}


def _jax_hub(op, reduction, thr):
    jax = pytest.importorskip("jax")
    from numstd.backends.jax_backend import _table

    impl = _table(jax)[op]
    return jax.jit(lambda a, b: impl([a, b], {"reduction": reduction, HUB[op][0]: thr}))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", sorted(HUB))
def test_xla_huber_family_model_equals_jax_bit_for_bit(op, fmt):
    v = _variant(op, "xla-arith16")
    for thr in (1.0, 0.3):
        for reduction in REDUCTIONS:
            f = _jax_hub(op, reduction, thr)
            for shape, seed, sc in (((3, 5), 1, 1.0), ((32, 100), 3, 0.3), ((64, 10), 6, 0.05), ((8, 1000), 4, 2.0)):
                g = np.random.default_rng(seed)
                a = (g.standard_normal(shape) * sc).astype(np.float32).astype(DT[fmt])
                b = (g.standard_normal(shape) * sc).astype(np.float32).astype(DT[fmt])
                p = {"reduction": reduction, HUB[op][0]: thr}
                want = np.asarray(f(a, b)).astype(np.float64)
                got = np.asarray(v([a, b], p, out=fmt, acc=fmt)).astype(np.float64)
                assert np.array_equal(got, want, equal_nan=True), (op, fmt, thr, reduction, shape,
                                                                   int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", sorted(HUB))
def test_jax_huber_family_passes_arith16_on_fresh_seeds_and_zeros_fail(op, fmt):
    key, tag = HUB[op]
    std = registry.get_standard(f"NS-{tag}-{TAG[fmt]}-ARITH16")
    assert std.policy == "arith16"
    for case in cases_for(std, seeds=FRESH):
        thr = case.params[key]
        out = np.asarray(_jax_hub(op, "mean", thr)(*case.inputs))
        v = numstd.check(out, op=op, inputs=case.inputs, accumulate=fmt, **case.params)
        assert v.standard_id.startswith(std.id) and v.passed, (case.id, v.message)
        zeros = np.zeros((), dtype=DT[fmt])
        assert not numstd.check(zeros, op=op, inputs=case.inputs, accumulate=fmt, **case.params).passed


# ---------------------------------------------------------------------------------------------
# hinge_embedding_loss
# ---------------------------------------------------------------------------------------------

def _jax_hinge(reduction, margin):
    jax = pytest.importorskip("jax")
    from numstd.backends.jax_backend import _table

    impl = _table(jax)["hinge_embedding_loss"]
    return jax.jit(lambda a, b: impl([a, b], {"reduction": reduction, "margin": margin}))


def _hinge_pair(fmt, shape, seed, sc):
    g = np.random.default_rng(seed)
    x = (g.standard_normal(shape) * sc + 0.5).astype(np.float32).astype(DT[fmt])
    y = np.where(g.random(shape) < 0.5, 1.0, -1.0).astype(DT[fmt])
    return x, y


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_xla_hinge_model_equals_jax_bit_for_bit(fmt, reduction):
    v = _variant("hinge_embedding_loss", "xla-arith16")
    for margin in (1.0, 0.3):
        f = _jax_hinge(reduction, margin)
        for shape, seed, sc in (((3, 5), 1, 1.0), ((32, 100), 3, 0.3), ((64, 10), 6, 0.05), ((8, 1000), 4, 2.0)):
            x, y = _hinge_pair(fmt, shape, seed, sc)
            want = np.asarray(f(x, y)).astype(np.float64)
            got = np.asarray(v([x, y], {"reduction": reduction, "margin": margin}, out=fmt, acc=fmt)).astype(np.float64)
            assert np.array_equal(got, want, equal_nan=True), (fmt, margin, reduction, shape, int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
def test_jax_hinge_passes_arith16_on_fresh_seeds_and_swapped_labels_fail(fmt):
    std = registry.get_standard(f"NS-HINGEEMBEDDINGLOSS-{TAG[fmt]}-ARITH16")
    assert std.policy == "arith16"
    for case in cases_for(std, seeds=FRESH):
        for reduction in REDUCTIONS:
            p = dict(case.params, reduction=reduction)
            out = np.asarray(_jax_hinge(reduction, p["margin"])(*case.inputs))
            v = numstd.check(out, op="hinge_embedding_loss", inputs=case.inputs, accumulate=fmt, **p)
            assert v.standard_id.startswith(std.id) and v.passed, (case.id, reduction, v.message)
    x, y = _hinge_pair(fmt, (32, 100), 3, 1.0)
    swapped = np.asarray(_jax_hinge("mean", 1.0)(x, -y))  # jax's own arithmetic with the branches swapped
    assert not numstd.check(swapped, op="hinge_embedding_loss", inputs=[x, y], accumulate=fmt).passed
