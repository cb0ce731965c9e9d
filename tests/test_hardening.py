"""Regression tests of issue 20: every bad output a failing verdict, every bad call a numstd error.

Each test is named after what it guarantees; the cases are the fuzz campaign's reproducers.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.errors import DtypeError, NumstdError, ParameterError

X = np.linspace(-1, 1, 16, dtype=np.float32)
EXP = np.exp(X.astype(np.float64)).astype(np.float32)


def _dtype_fail(v: numstd.Verdict) -> str:
    assert not v.passed
    crit = v.criterion("dtype")
    assert crit is not None and not crit.passed, v.message
    return crit.message


@pytest.mark.parametrize("actual", [
    EXP.astype(np.float64), EXP.astype(np.float16), EXP.astype(ml_dtypes.bfloat16), 1.0,
    np.zeros(16, np.int32), np.zeros(16, bool), "garbage", None, object(),
], ids=["float64", "float16", "bfloat16", "python-float", "int32", "bool", "str", "None", "object"])
def test_uncovered_output_format_is_a_failing_dtype_verdict_listing_the_covered_combinations(actual):
    v = numstd.check(actual, op="exp", inputs=[X])
    msg = _dtype_fail(v)
    assert v.standard_id == "NS-EXP-FP32@1"  # the inputs' standard
    assert "inputs ['float32'] → float32 (NS-EXP-FP32@1)" in msg


def test_a_covered_output_format_is_judged_normally():
    v = numstd.check(EXP, op="exp", inputs=[X])
    assert v.passed, v.message


@pytest.mark.parametrize("actual", [[[1.0]], "x", np.zeros((4, 4), np.float64)])
def test_non_array_output_of_an_fp8_matmul_is_a_failing_verdict_not_ambiguous(actual):
    a = np.ones((4, 4), ml_dtypes.float8_e4m3fn)
    msg = _dtype_fail(numstd.check(actual, op="matmul", inputs=[a, a]))
    assert "NS-MATMUL-FP8E4M3@1" in msg and "NS-MATMUL-FP8E4M3-FP32OUT@1" in msg


def test_inputs_without_any_standard_still_raise_standard_not_found():
    x = X.astype(np.float64)  # no exp standard takes float64 inputs: the call is malformed
    with pytest.raises(numstd.errors.StandardNotFound):
        numstd.check(np.exp(x), op="exp", inputs=[x])


@pytest.mark.torch
def test_meta_and_negative_bit_torch_outputs_give_verdicts():
    torch = pytest.importorskip("torch")
    _dtype_fail(numstd.check(torch.empty(16, device="meta"), op="exp", inputs=[X]))
    zeros = torch.tensor(EXP).to(torch.complex64).conj().imag  # -0.0 with the negative bit set
    assert zeros.is_neg()
    v = numstd.check(zeros, op="exp", inputs=[X])
    assert not v.passed and not v.criterion("bound").passed
    right = (torch.tensor(EXP) * 1j).conj().imag.neg()  # the right values behind two lazy negations
    assert numstd.check(right, op="exp", inputs=[X]).passed


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["sparse", "quantized", "nested", "meta"])
def test_foreign_torch_tensor_kinds_as_inputs_raise_a_dtype_error_with_the_fix(kind):
    torch = pytest.importorskip("torch")
    t = torch.tensor(X)
    x = {"sparse": lambda: t.to_sparse(),
         "quantized": lambda: torch.quantize_per_tensor(t, 0.1, 0, torch.qint8),
         "nested": lambda: torch.nested.nested_tensor([t[:3], t[:5]]),
         "meta": lambda: t.to("meta")}[kind]()
    with pytest.raises(DtypeError, match="to_dense|dequantize|unbind|meta"):
        numstd.check(EXP, op="exp", inputs=[x])


@pytest.mark.parametrize("bad", ["7", 0, -3, 2.5, True])
def test_chunk_size_that_is_not_a_positive_int_raises_parameter_error(bad):
    with pytest.raises(ParameterError, match="chunk_size"):
        numstd.check(EXP, op="exp", inputs=[X], chunk_size=bad)


def test_huge_chunk_size_is_one_chunk_not_an_overflow():
    a = numstd.check(EXP, op="exp", inputs=[X], chunk_size=2 ** 70)
    b = numstd.check(EXP, op="exp", inputs=[X])
    assert a.passed and a.to_json() == b.to_json()


@pytest.mark.parametrize("op, name, n", [("layer_norm", "eps", 2), ("rms_norm", "eps", 2), ("attention", "scale", 3)])
def test_parameters_beyond_float64_raise_parameter_error(op, name, n):
    y = np.ones((1, 2, 4), np.float32)
    with pytest.raises(ParameterError, match=name):
        numstd.check(y, op=op, inputs=[y] * n if op == "attention" else [y], **{name: 10 ** 400})


@pytest.mark.parametrize("shape, axis, out", [((0, 8), 1, (0,)), ((0, 8), 0, (8,)), ((3, 0), 1, (3,)), ((0,), None, ())])
def test_sum_over_an_empty_batch_or_axis_is_judged(shape, axis, out):
    x = np.ones(shape, np.float32)
    v = numstd.check(np.zeros(out, np.float32), op="sum", inputs=[x], axis=axis)
    assert v.passed, v.message  # the empty sum is 0 (hand-derived)
    bad = numstd.check(np.ones(out, np.float32), op="sum", inputs=[x], axis=axis)
    assert bad.passed == (np.prod(out) == 0)


def test_op_name_in_another_case_is_the_catalog_op():
    v = numstd.check(EXP, op="Exp", inputs=[X])
    assert v.passed and v.op == "exp" and v.standard_id == "NS-EXP-FP32@1"


def test_accumulate_that_is_not_a_float_format_names_the_parameter():
    with pytest.raises(ParameterError, match="accumulate='int8'"):
        numstd.check(EXP, op="exp", inputs=[X], accumulate="int8")


@pytest.mark.parametrize("value", [1, 0, "yes", 1.0])
def test_allow_tf32_must_be_a_bool(value):
    m = np.ones((4, 4), np.float32)
    with pytest.raises(ParameterError, match="allow_tf32 must be True or False"):
        numstd.check(m @ m, op="matmul", inputs=[m, m], allow_tf32=value)


def test_explicit_standard_for_other_input_formats_raises_dtype_error():
    m = np.ones((4, 4), np.float32)
    out = (m @ m).astype(ml_dtypes.bfloat16)
    with pytest.raises(DtypeError, match=r"NS-MATMUL-BF16@1 is for inputs \['bfloat16', 'bfloat16'\].*float32"):
        numstd.check(out, op="matmul", inputs=[m, m], standard="NS-MATMUL-BF16@1")
    mb = m.astype(ml_dtypes.bfloat16)
    v = numstd.check(out, op="matmul", inputs=[mb, mb], standard="NS-MATMUL-BF16@1")
    assert v.passed and v.formats["inputs"] == ["bfloat16", "bfloat16"]


def test_every_malformed_call_error_is_a_numstd_error():
    for call in (lambda: numstd.check(EXP, op="exp", inputs=[X], chunk_size="7"),
                 lambda: numstd.check(EXP, op="exp", inputs=[X], accumulate="int8"),
                 lambda: numstd.check(EXP, op="nope", inputs=[X])):
        with pytest.raises(NumstdError):
            call()


def test_cross_entropy_verdict_does_not_depend_on_chunk_size():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((300, 10)).astype(np.float32)
    target = rng.integers(0, 10, 300)
    x = logits.astype(np.float64)
    exact = np.log(np.sum(np.exp(x - x.max(1, keepdims=True)), 1)) + x.max(1) - x[np.arange(300), target]
    out = (exact * (1 + 3e-7 * rng.standard_normal(300))).astype(np.float32)  # errors of a few ulp
    verdicts = {numstd.check(out, op="cross_entropy", inputs=[logits, target], reduction="none", chunk_size=c).to_json()
                for c in (7, 64, 1 << 16)}
    assert len(verdicts) == 1
