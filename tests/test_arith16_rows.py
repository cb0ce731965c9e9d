"""arith16 standards of the row ops XLA CPU computes with 16-bit steps (docs/methodology.md §2.1):
softmax, log_softmax, cumsum, cumprod, linear, and the 16-bit-accumulating sum and mean.

Independent truth: jax 0.10.2's own CPU kernels (the corpus' ``xla-arith16`` models must equal them bit
for bit; their outputs on fresh suite seeds must pass ``check(..., accumulate=<16-bit>)``), planted
bugs (zeros) and hand-derived sums of ones (a sequential bf16 sum of ones stagnates at 256).
"""

from __future__ import annotations

import math

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
ROW_OPS = ("softmax", "log_softmax", "cumsum", "cumprod")
STD_TAG = {"softmax": "SOFTMAX", "log_softmax": "LOGSOFTMAX", "cumsum": "CUMSUM", "cumprod": "CUMPROD",
           "linear": "LINEAR", "sum": "SUM", "mean": "MEAN"}
#: seed offset of the fresh cases (the calibration used the suites' seeds 0 and 1)
FRESH = 7_000


def _jax_fn(op):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    fns = {"softmax": lambda x: jax.nn.softmax(x, axis=-1), "log_softmax": lambda x: jax.nn.log_softmax(x, axis=-1),
           "cumsum": lambda x: jnp.cumsum(x, axis=-1), "cumprod": lambda x: jnp.cumprod(x, axis=-1),
           "sum": lambda x: jnp.sum(x, axis=-1), "mean": lambda x: jnp.mean(x, axis=-1),
           "linear": lambda x, w, b: x @ w.T + b}
    return jax.jit(fns[op])


def _xla_variant(op):
    return next(v for v in variants_for(op) if v.name == "xla-arith16")


def _rows(op, fmt, shape, seed):
    g = np.random.default_rng(seed)
    if op == "cumprod":
        x = (1 + 0.05 * g.standard_normal(shape)) * np.where(g.random(shape) < 0.2, -1.0, 1.0)
    else:
        x = g.standard_normal(shape) * 4 + 1
    return x.astype(np.float32).astype(DT[fmt])


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", ROW_OPS)
def test_xla_model_equals_jax_bit_for_bit(op, fmt):
    f = _jax_fn(op)
    v = _xla_variant(op)
    for shape, seed in (((3, 5), 11), ((4, 17), 12), ((2, 300), 13), ((2, 1000), 14)):
        x = _rows(op, fmt, shape, seed)
        want = np.asarray(f(x)).astype(np.float64)
        got = np.asarray(v([x], {"axis": -1}, out=fmt, acc=fmt)).astype(np.float64)
        assert np.array_equal(got, want, equal_nan=True), (op, fmt, shape, int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
def test_xla_linear_model_rounds_the_dot_before_the_bias(fmt):
    # XLA CPU: RN16(RN16(x·Wᵀ) + b), the dot in fp32; only the fp32 dot's summation order may differ
    # from numpy's sgemm (an fp32 difference that the 16-bit rounding hides but for rare ties)
    f = _jax_fn("linear")
    v = _xla_variant("linear")
    g = np.random.default_rng(21)
    x = g.standard_normal((8, 200)).astype(DT[fmt])
    w = g.standard_normal((24, 200)).astype(DT[fmt])
    b = (8 * g.standard_normal(24)).astype(DT[fmt])
    want = np.asarray(f(x, w, b)).astype(np.float64)
    got = np.asarray(v([x, w, b], {}, out=fmt, acc=fmt)).astype(np.float64)
    assert (got != want).mean() <= 0.01
    once = (x.astype(np.float64) @ w.astype(np.float64).T + b.astype(np.float64)).astype(DT[fmt]).astype(np.float64)
    assert (once != want).mean() > 0.1  # the two roundings are real: one rounding is not XLA's result


def _standard(op, fmt):
    return registry.get_standard(f"NS-{STD_TAG[op]}-{TAG[fmt]}-ARITH16")


#: the published arith16 standards of these ops (fp16 cumsum and fp16 cumprod are not published:
#: docs/calibration.md, "arith16 row ops")
PUBLISHED = [(op, fmt) for op in ("softmax", "log_softmax", "linear", "sum", "mean") for fmt in FMTS] + \
    [("cumprod", "bfloat16"), ("cumsum", "bfloat16")]


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_unpublished_fp16_scans_have_no_arith16_standard(op):
    from numstd.errors import StandardNotFound

    x = _rows(op, "float16", (2, 40), 51)
    with pytest.raises(StandardNotFound):
        numstd.check(np.asarray(x), op=op, inputs=[x], axis=-1, accumulate="float16")


@pytest.mark.parametrize("op,fmt", PUBLISHED)
def test_jax_passes_arith16_on_fresh_seeds(op, fmt):
    f = _jax_fn(op)
    std = _standard(op, fmt)
    assert std.policy == "arith16"
    cases = cases_for(std, seeds=[FRESH])
    assert cases
    for case in cases:
        out = np.asarray(f(*case.inputs))
        v = numstd.check(out, op=op, inputs=case.inputs, accumulate=fmt, **case.params)
        assert v.standard_id.startswith(std.id) and v.formats["policy"] == "arith16"
        assert v.passed, (case.id, v.message)


@pytest.mark.parametrize("fmt", FMTS)
def test_16bit_cumsum_declared_fp32_fails_the_default(fmt):
    f = _jax_fn("cumsum")
    x = _rows("cumsum", fmt, (8, 1000), 31)
    out = np.asarray(f(x))
    assert not numstd.check(out, op="cumsum", inputs=[x], axis=-1).passed
    if fmt == "bfloat16":  # (no fp16 cumsum arith16 standard: test_unpublished_fp16_cumsum_has_no_arith16_standard)
        assert numstd.check(out, op="cumsum", inputs=[x], axis=-1, accumulate=fmt).passed


@pytest.mark.parametrize("k", [64, 4096])
def test_sum_of_ones_zeros_fail_only_where_the_bound_discriminates(k):
    # hand-derived: k ones summed in bf16 arithmetic; the arith16 bound is 2^-8·(lam·sqrt(k)·k + k), below
    # |r| = k (zeros fail) exactly when 2^-8·(lam·sqrt(k) + 1) < 1
    std = _standard("sum", "bfloat16")
    lam = float(std.model.constants["lam"])
    discriminating = bool(2.0 ** -8 * (lam * math.sqrt(k) + 1) < 1)
    assert discriminating is (k == 64)  # (the fitted lam puts the two sizes on either side)
    x = np.ones((1, k), dtype=ml_dtypes.bfloat16)
    zeros = np.zeros((1,), dtype=ml_dtypes.bfloat16)
    v = numstd.check(zeros, op="sum", inputs=[x], axis=-1, accumulate="bfloat16")
    assert v.formats["policy"] == "arith16"
    assert v.passed is (not discriminating)
    assert ("not discriminating at this size" in v.message) is (not discriminating)
    right = np.full((1,), k, dtype=ml_dtypes.bfloat16)
    assert numstd.check(right, op="sum", inputs=[x], axis=-1, accumulate="bfloat16").passed


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", ("softmax", "log_softmax"))
def test_softmax_zeros_fail_arith16(op, fmt):
    x = _rows(op, fmt, (4, 300), 41)
    zeros = np.zeros(x.shape, dtype=DT[fmt])
    v = numstd.check(zeros, op=op, inputs=[x], axis=-1, accumulate=fmt)
    assert v.formats["policy"] == "arith16" and not v.passed
    assert "not discriminating" not in v.message


def test_16bit_accumulated_sum_declared_fp32_fails_the_default():
    # a sequential bf16 running sum of 4096 values near 1 stagnates near 256 (hand-derived: bf16's ulp at
    # 256 is 2, so addends below 1 are lost): rejected by the fp32-accumulation default, within arith16
    x = (np.random.default_rng(61).random((4, 4096)) * 0.5 + 0.75).astype(ml_dtypes.bfloat16)
    seq = next(v for v in variants_for("sum") if v.name == "sequential")
    out = seq([x], {"axis": -1}, out="bfloat16", acc="bfloat16")
    assert np.all(np.asarray(out, np.float64) < 0.5 * np.asarray(x, np.float64).sum(-1))
    assert not numstd.check(out, op="sum", inputs=[x], axis=-1).passed
    v = numstd.check(out, op="sum", inputs=[x], axis=-1, accumulate="bfloat16")
    assert v.passed and "not discriminating at this size" in v.message
