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
        "NS-LOGSOFTMAX-BF16": "the row sum is rounded to bf16 before the log",
        "NS-LOGSOFTMAX-FP16": "the row sum is rounded to fp16 before the log",
        "NS-CROSSENTROPY-BF16": "log-sum-exp in bf16 (up to 2.7 ulp on the mean loss)",
    },
    "jax:cpu": {
        **{f"NS-{op}-{t}": "XLA CPU computes 16-bit ops in 16-bit arithmetic"
           for op in ("CUMSUM", "GELU", "LINEAR", "LOGSOFTMAX", "SIGMOID", "SILU", "SOFTMAX", "SUM", "MEAN",
                      "EXP", "TANH", "ERF", "LOG", "RSQRT", "SQRT", "MATMUL", "LAYERNORM", "RMSNORM",
                      "ATTENTION", "CROSSENTROPY", "CELU", "CUMPROD")
           for t in ("BF16", "FP16", "BF16-STORED16", "FP16-STORED16")},
        "NS-LOG-FP32": "XLA CPU flushes subnormal inputs: log(−tiny) = −inf instead of NaN",
        "NS-SQRT-FP32": "XLA CPU flushes subnormal inputs: sqrt(−tiny) = −0 instead of NaN",
        "NS-SILU-FP32": "XLA's silu overflows differently for x < −88 (results lost above the allowance)",
        "NS-CELU-FP32": "jax.nn.celu fp32: 19 of 8,192 elements up to 3.8x the bound near -0.12 (measured in CI; "
                        "not analysed yet, issue 18)",
    },
}


def _run(backend_name):
    be = B.get(backend_name)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    failing = {}
    for s in list_standards(status="active"):
        if s.op == "module" or s.op not in be.ops() or s.selector:
            continue
        for case in cases_for(s, seeds=[5])[:3]:
            try:
                y = be.run(s.op, list(case.inputs), **dict(case.params))
            except numstd.NumstdError:
                break  # e.g. fp8 inputs the library cannot take: nothing to judge
            if format_of(np.asarray(y)) != s.output:
                break
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
    unexpected = {k: v for k, v in failing.items() if k not in KNOWN[name]}
    assert not unexpected, unexpected
