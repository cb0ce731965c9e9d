"""Mixed input and output formats (torch.autocast): every combination autocast produces finds its
standard, legitimate autocast arithmetic passes, and the bugs of the corpus still fail.

Independent truth: torch.autocast itself on CPU (torch 2.13: cross_entropy of bf16 logits returns
fp32; matmul and linear of fp32 operands return bf16), and numpy's IEEE float32 arithmetic on
the exactly widened 16-bit inputs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core.formats import round_to

BF16 = ml_dtypes.bfloat16
#: torch.autocast's fp32 list (the ops of numstd's catalog on it; cumprod is on it too, but its
#: mixed-format standards were withdrawn before publication: standards/_templates/cumprod.toml)
FP32_LIST = ("softmax", "log_softmax", "layer_norm", "cross_entropy", "sum", "cumsum", "exp", "log",
             "rsqrt", "softplus")


def _softmax32(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float32)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", FP32_LIST)
def test_every_fp32_list_op_has_a_standard_for_16bit_inputs_and_fp32_output(op, fmt):
    from numstd.registry import list_standards

    latest = {}
    for s in list_standards(op, status="active"):  # (the newest version of each ID: a call resolves to it)
        if s.id not in latest or s.version > latest[s.id].version:
            latest[s.id] = s
    found = [s for s in latest.values()
             if [f.name for f in s.inputs][:1] == [fmt] and s.output.name == "float32" and s.default]
    assert len(found) == 1, (op, fmt, [s.key for s in found])
    assert found[0].accumulate.name == "float32" and found[0].policy == "fp32"


@pytest.mark.parametrize("dt", [BF16, np.float16])
def test_fp32_softmax_of_16bit_logits_passes_and_records_the_real_formats(dt):
    x = (np.random.default_rng(0).standard_normal((8, 1000)) * 3).astype(dt)
    v = numstd.check(_softmax32(x), op="softmax", inputs=[x])
    assert v.passed, v.message
    assert v.standard_id.endswith("-TO-FP32@1")
    assert v.formats["inputs"] == [np.dtype(dt).name if dt is np.float16 else "bfloat16"]
    assert v.formats["actual"] == "float32" and v.formats["output"] == "float32"


def test_softmax_summed_in_bf16_then_widened_fails():
    x = (np.random.default_rng(1).standard_normal((8, 1000)) * 3).astype(BF16)
    z = x.astype(np.float32)
    e = np.exp(z - z.max(axis=-1, keepdims=True)).astype(BF16).astype(np.float32)
    s = np.zeros((8, 1), dtype=np.float32)
    for j in range(e.shape[1]):  # a sequential bf16 accumulator
        s = (s + e[:, j:j + 1]).astype(BF16).astype(np.float32)
    assert not numstd.check((e / s).astype(np.float32), op="softmax", inputs=[x]).passed


def test_fp32_output_of_a_bf16_exp_rounded_to_bf16_fails():
    """Computing in bf16 and widening the result is not autocast's fp32 policy: 16-bit rounding of an
    fp32 output is hundreds of fp32 ulps off."""
    x = np.random.default_rng(2).standard_normal(4096).astype(BF16)
    y = np.exp(x.astype(np.float32)).astype(BF16).astype(np.float32)
    assert not numstd.check(y, op="exp", inputs=[x]).passed
    assert numstd.check(np.exp(x.astype(np.float32)), op="exp", inputs=[x]).passed


def test_fp32_matmul_operands_rounded_to_bf16_pass_the_autocast_standard_and_fail_the_fp32_one():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((32, 256)).astype(np.float32), rng.standard_normal((256, 24)).astype(np.float32)
    ab = round_to(a, "bfloat16").astype(np.float64) @ round_to(b, "bfloat16").astype(np.float64)
    y = ab.astype(np.float32).astype(BF16)
    v = numstd.check(y, op="matmul", inputs=[a, b])
    assert v.passed and v.standard_id == "NS-MATMUL-FP32-TO-BF16@2", v.message
    assert not numstd.check(ab.astype(np.float32), op="matmul", inputs=[a, b]).passed  # under the fp32 standard
    zeros = np.zeros_like(y)
    assert not numstd.check(zeros, op="matmul", inputs=[a, b]).passed


@pytest.mark.torch
def test_torch_cpu_autocast_cross_entropy_and_matmul_pass():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((64, 100)).astype(BF16)
    target = rng.integers(0, 100, 64)
    a, b = rng.standard_normal((32, 256)).astype(np.float32), rng.standard_normal((256, 24)).astype(np.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(torch.from_numpy(logits.astype(np.float32)).bfloat16(),
                                                 torch.from_numpy(target))
        mm = torch.matmul(torch.from_numpy(a), torch.from_numpy(b))
    assert loss.dtype == torch.float32 and mm.dtype == torch.bfloat16
    v = numstd.check(loss.numpy(), op="cross_entropy", inputs=[logits, target])
    assert v.passed and "BF16-TO-FP32" in v.standard_id, v.message
    v = numstd.check(mm.float().numpy().astype(BF16), op="matmul", inputs=[a, b])
    assert v.passed and v.standard_id == "NS-MATMUL-FP32-TO-BF16@2", v.message
