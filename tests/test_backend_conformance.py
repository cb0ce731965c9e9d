"""End to end on every available CPU backend: run each standard's suite cases on the backend and judge
the output with ``numstd.check``.

numpy (float32 math, one rounding) must conform everywhere. torch 2.13 and jax on CPU conform except
where they do not compute what the 16-bit standards declare (fp32 internal math) or flush subnormal
inputs; those are listed below with the measured reason, and the test fails if a backend fails a
standard that is not on its list (a regression) — improvements are allowed.
"""

import warnings

import numpy as np
import pytest

import numstd
from numstd import backends as B
from numstd.formats import format_of
from numstd.registry import list_standards
from numstd.suites import cases_for

#: standard ID -> why the backend does not conform (measured; see docs/backends.md)
KNOWN = {
    "torch:cpu": {
        "NS-ERF-BF16": "torch CPU bf16 erf returns 0 for |x| ≤ 1.8e-7 (255 ulp)",
        "NS-ERF-FP16": "torch CPU fp16 erf is 4.7 ulp off",
        **{f"NS-ERF-{t}-ARITH16": "torch CPU's 16-bit erf (the 5.1-ulp library budget of NS-ERF-*@2) is not the f32 "
                                  "erf rounded once that XLA computes and the arith16 standard models" for t in ("BF16", "FP16")},
        "NS-LOGSOFTMAX-BF16": "the row sum is rounded to bf16 before the log",
        "NS-LOGSOFTMAX-FP16": "the row sum is rounded to fp16 before the log",
        "NS-CROSSENTROPY-BF16": "log-sum-exp in bf16 (up to 2.7 ulp on the mean loss)",
        "NS-CONVTRANSPOSE-FP16": "fp16 conv_transpose is a col2im scatter-add in fp16 (known_library_defects.toml, "
                                 "torch-cpu-conv-transpose-fp16-col2im)",
        **{f"NS-{op}-{t}": "torch CPU stores the batch statistics of 16-bit tensors in 16 bits: it conforms to the "
                           "stored16 standards (benchmarks/torch_norm16.py), not to the one-rounding fp32 policy"
           for op in ("BATCHNORM", "INSTANCENORM") for t in ("BF16", "FP16")},
        **{f"NS-{op}-{t}": "torch CPU stores the 16-bit norm (and cosine_similarity its normalised vectors and "
                           "products): it conforms to the stored16 standards, not to the one-rounding fp32 policy"
           for op in ("NORMALIZE", "COSINESIMILARITY") for t in ("BF16", "FP16")},
        # issue 18 (docs/methodology.md §11, tests/test_loss16.py): 16-bit kl_div stores every primitive of its
        # term, nll_loss (and so cross_entropy) sums in a cascade of 16-bit partial sums: torch conforms to
        # the -STORED16 standards, not to the one-rounding fp32 policy (calibration: needs lam 7.55, 1.21e4, 1.51e3)
        "NS-KLDIV-BF16": "stores every primitive of the bf16 term (conforms to NS-KLDIV-BF16-STORED16)",
        **{f"NS-NLLLOSS-{t}": "sums in a cascade of 16-bit partial sums (conforms to NS-NLLLOSS-*-STORED16)"
           for t in ("BF16", "FP16")},
        **{f"NS-NLLLOSS-{t}-ARITH16": "sums in a cascade of 16-bit partial sums (conforms to NS-NLLLOSS-*-STORED16), "
                                      "not XLA's fp32 reduce that the arith16 standard models (needs c = 1.64)"
           for t in ("BF16", "FP16")},
        "NS-CROSSENTROPY-FP16": "fp16 log_softmax and nll_loss's fp16 cascade (conforms to NS-CROSSENTROPY-FP16-STORED16)",
        "NS-NLLLOSS-FP16-STORED16": "an fp16 partial sum above 65504 is inf (known_library_defects.toml, "
                                    "torch-cpu-nll-loss-fp16-overflow)",
        **{f"NS-COSINEEMBEDDINGLOSS-{t}": "stores every intermediate of the 16-bit loss (conforms to "
                                          "NS-COSINEEMBEDDINGLOSS-*-STORED16, not to the one-rounding fp32 policy)"
           for t in ("BF16", "FP16")},
        "NS-COSINEEMBEDDINGLOSS-FP16-STORED16": "the fp16 product of the squared norms is inf once ||x1||·||x2|| > 256: "
                                                "cos = 0 (known_library_defects.toml, torch-cpu-fp16-cosine-embedding-loss-overflow)",
    },
    "jax:cpu": {
        **{f"NS-{op}-{t}": "XLA CPU computes 16-bit ops in 16-bit arithmetic"
           for op in ("CUMSUM", "GELU", "LINEAR", "LOGSOFTMAX", "SIGMOID", "SILU", "SOFTMAX", "SUM", "MEAN",
                      "EXP", "TANH", "ERF", "LOG", "RSQRT", "SQRT", "MATMUL", "LAYERNORM", "RMSNORM",
                      "ATTENTION", "CROSSENTROPY", "CELU", "CUMPROD", "ELU", "HARDSIGMOID", "HARDSWISH", "LEAKYRELU",
                      "MISH", "NEWGELU", "SELU", "SWISH", "SOFTPLUS", "NORMALIZE", "COSINESIMILARITY", "TRIPLETMARGINLOSS")
           for t in ("BF16", "FP16", "BF16-STORED16", "FP16-STORED16")},
        "NS-SMOOTHL1LOSS-BF16": "XLA CPU computes bf16 smooth_l1_loss in bf16 arithmetic (the calibration: needs lam = 163)",
        **{f"NS-COSINEEMBEDDINGLOSS-{t}": "XLA CPU computes the 16-bit loss in 16-bit arithmetic (the calibration: "
                                          "needs lam = 130 in bf16; in fp16 the squared norms' product overflows, as torch's)"
           for t in ("BF16", "FP16", "FP16-STORED16")},
        "NS-MSELOSS-FP16-STORED16": "XLA CPU's fp16 squares overflow like torch's (a stored d² > 65504 is inf)",
        # (calibration evidence of issue 18: XLA CPU's 16-bit kl_div and nll_loss need lam 209 and 5.54e3 under
        # the fp32 policy; its fp16 nll_loss overflows on the wide suite cases)
        **{f"NS-{k}": "XLA CPU's 16-bit kl_div / nll_loss is not once rounded (calibration evidence above)"
           for k in ("KLDIV-BF16", "NLLLOSS-BF16", "NLLLOSS-FP16", "NLLLOSS-FP16-STORED16")},
        "NS-LOG-FP32": "XLA CPU flushes subnormal inputs: log(−tiny) = −inf instead of NaN",
        "NS-SQRT-FP32": "XLA CPU flushes subnormal inputs: sqrt(−tiny) = −0 instead of NaN",
        "NS-SILU-FP32": "XLA's silu overflows differently for x < −88 (results lost above the allowance)",
        **{f"NS-{op}-FP32": "XLA CPU's fp32 expm1 is biased toward zero (−0.503 ulp mean on (−1, 0)): a documented "
                            "library defect (known_library_defects.toml, xla-cpu-expm1-f32-bias)" for op in ("ELU", "CELU")},
        **{f"NS-{op}-{t}": "XLA CPU's 16-bit convolution rounds the fp32 convolution to 16 bits before the bias add "
                           "(239-763x the bound): a documented library defect under the fp32 policy "
                           "(known_library_defects.toml, xla-cpu-conv-16bit-accumulation); it conforms to "
                           "NS-CONV*-ARITH16 (tests/test_arith16_contr.py)"
           for op in ("CONV", "CONVTRANSPOSE") for t in ("BF16", "FP16")},
    },
}


def _run(backend_name):
    be = B.get(backend_name)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    failing = {}
    latest = {}
    for s in list_standards(status="active"):  # the current version of each ID (an older one stays citable)
        if s.id not in latest or s.version > latest[s.id].version:
            latest[s.id] = s
    for s in latest.values():
        if s.op == "module" or s.op not in be.ops() or s.selector:
            continue
        for case in cases_for(s, seeds=[5])[:3]:
            try:
                y = be.run(s.op, list(case.inputs), **dict(case.params))
            except numstd.NumstdError:
                break  # e.g. fp8 inputs the library cannot take: nothing to judge
            if not numstd.ops.OPS[s.op].index_of and format_of(np.asarray(y)) != s.output:
                break  # (argmax/argmin return integer indices, judged through the values they point to)
            v = numstd.check(y, op=s.op, inputs=list(case.inputs), standard=s.key, **dict(case.params))
            if not v.passed:
                failing[s.id] = f"{case.id}: {v.snippet()}"
                break
    return failing


def test_numpy_backend_conforms_to_every_standard():
    assert _run("numpy") == {}


@pytest.mark.parametrize("name", ["torch:cpu", "jax:cpu"])
def test_library_backends_fail_only_where_known(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failing = _run(name)
    known = dict(KNOWN[name])
    if name == "torch:cpu":
        from numstd.corpus.conv import torch_conv_transpose_col2im16

        if torch_conv_transpose_col2im16("bfloat16"):  # a CPU without oneDNN bf16 kernels (AVX2 only)
            known["NS-CONVTRANSPOSE-BF16"] = ("bf16 conv_transpose is a col2im scatter-add in bf16 on this CPU "
                                              "(known_library_defects.toml, torch-cpu-conv-transpose-bf16-col2im)")
    unexpected = {k: v for k, v in failing.items() if k not in known}
    assert not unexpected, unexpected


@pytest.mark.jax
def test_xla_cpu_16bit_activations_are_16bit_arithmetic():
    """Why the 16-bit activations are on jax's list: XLA CPU's bf16 leaky_relu and hardsigmoid equal
    bf16 arithmetic (every primitive rounded to bf16, the constants too) bit for bit, not the fp32
    computation rounded once that the fp32-policy standards declare."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    x = np.random.default_rng(0).standard_normal(8192).astype(bf)
    xf = x.astype(np.float32)

    def q(v):
        return np.asarray(v, dtype=np.float32).astype(bf).astype(np.float32)

    y = np.asarray(jax.nn.leaky_relu(jnp.asarray(x))).astype(np.float32)
    assert np.array_equal(y, np.where(xf > 0, xf, q(xf * q(np.float32(0.01)))))
    assert not np.array_equal(y, np.where(xf > 0, xf, q(xf * np.float32(0.01))))
    y = np.asarray(jax.nn.hard_sigmoid(jnp.asarray(x))).astype(np.float32)
    assert np.array_equal(y, q(q(np.clip(q(xf + 3), 0, 6)) / 6))
