"""softplus: real library kernels pass its standards, the ways it is written wrong fail.

The entry (numstd/ops/elementwise.py) was calibrated on numstd's own models; these kernels are
independent evidence: torch's CPU kernel in each format, jax.nn.softplus (logaddexp, no threshold),
and hand-written bugs of the kind KernelBench candidates contain.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd

FORMATS = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def _inputs(dtype, seed=0):
    g = np.random.default_rng(seed)
    x = np.concatenate([g.standard_normal(4096) * 3, g.uniform(-100, 100, 4096), [0.0, -0.0, 19.9, 20.0, 20.1]])
    return x.astype(dtype)


@pytest.mark.torch
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("beta, threshold", [(1.0, 20.0), (2.0, 5.0), (0.5, 30.0)])
def test_torch_softplus_passes(fmt, beta, threshold):
    torch = pytest.importorskip("torch")
    x = _inputs(FORMATS[fmt])
    t = torch.from_numpy(x.astype(np.float32)).to(getattr(torch, fmt))
    y = torch.nn.functional.softplus(t, beta=beta, threshold=threshold).to(torch.float32).numpy().astype(FORMATS[fmt])
    v = numstd.check(y, op="softplus", inputs=[x], beta=beta, threshold=threshold)
    assert v.passed, v.snippet()
    assert v.standard_id.startswith(f"NS-SOFTPLUS-{ {'float32': 'FP32', 'bfloat16': 'BF16', 'float16': 'FP16'}[fmt]}@")


@pytest.mark.jax
def test_jax_softplus_passes_fp32():
    jax = pytest.importorskip("jax")
    x = _inputs(np.float32)
    y = np.asarray(jax.nn.softplus(x))
    v = numstd.check(y, op="softplus", inputs=[x])
    assert v.passed, v.snippet()


def _f32(x):
    return np.asarray(x, dtype=np.float32)


@pytest.mark.parametrize("name, fn", [
    ("log(1+exp(x))", lambda x: np.log(np.float32(1) + np.exp(x))),
    ("relu", lambda x: np.maximum(x, np.float32(0))),
    ("no threshold", lambda x: np.log1p(np.exp(x))),
    ("zeros", np.zeros_like),
    ("beta ignored", lambda x: np.where(x > 10, x, np.log1p(np.exp(x * 2)) / 2)),
])
def test_bugs_fail_fp32(name, fn):
    x = _inputs(np.float32, seed=1)
    with np.errstate(all="ignore"):
        y = _f32(fn(x))
    v = numstd.check(y, op="softplus", inputs=[x])
    assert not v.passed, name


def test_parameters_torch_would_reject_are_errors():
    x = _inputs(np.float32)[:8]
    for bad in ({"beta": 0}, {"beta": -1.0}, {"beta": float("nan")}, {"threshold": float("inf")}, {"beta": "2"}):
        with pytest.raises(numstd.ParameterError):
            numstd.check(x, op="softplus", inputs=[x], **bad)


@pytest.mark.torch
def test_grade_detects_softplus_and_judges_it_by_its_standard():
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.softplus(x, 2.0, threshold=5.0)

    class Relu(torch.nn.Module):  # the asymptote: off by log(2)/beta at 0
        def forward(self, x):
            return torch.relu(x)

    def inputs():
        return [torch.randn(64, 256) * 4]

    good = numstd.grade(Model, Model, inputs, trials=1)
    assert good.op == ("softplus", {"beta": 2.0, "threshold": 5.0})
    assert good.passed and any(s.startswith("NS-SOFTPLUS-FP32@") for s in good.standards)
    bad = numstd.grade(Model, Relu, inputs, trials=1)
    assert not bad.passed
