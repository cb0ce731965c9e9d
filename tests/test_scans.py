"""cumprod (numstd.ops.scan): torch's kernel passes its published standard, misplaced factors fail.

Truth: torch.cumprod on CPU (a real library kernel) and hand-built near misses; the reference is
checked against mpmath in tests/test_reference.py::test_cumprod.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core.errors import ParameterError
from numstd.core.formats import round_to
from numstd.ops import validate
from numstd.reference import reference

FORMATS = ("float32", "bfloat16", "float16")


def _x(fmt: str, shape=(6, 700), seed: int = 0) -> np.ndarray:
    x = 1 + 0.02 * np.random.default_rng(seed).standard_normal(shape)
    return x.astype(ml_dtypes.bfloat16 if fmt == "bfloat16" else fmt)


def test_axis_is_checked():
    with pytest.raises(ParameterError, match="axis"):
        validate("cumprod", [np.ones((2, 3), np.float32)], {"axis": 2})


@pytest.mark.parametrize("fmt", FORMATS)
def test_correctly_rounded_passes_and_misplaced_factors_fail(fmt):
    x = _x(fmt)
    r = reference("cumprod", [x], axis=1)
    good = np.asarray(round_to(r.values, fmt))
    assert numstd.check(good, op="cumprod", inputs=[x], axis=1).passed
    exclusive = np.concatenate([np.ones((x.shape[0], 1)), r.values[:, :-1]], axis=1)
    assert not numstd.check(np.asarray(round_to(exclusive, fmt)), op="cumprod", inputs=[x], axis=1).passed
    one = good.copy()
    one[3, 500] = np.asarray(round_to(np.float64(one[3, 500]) * (1 + 2.0**-5), fmt))  # one prefix 3 % off
    v = numstd.check(one, op="cumprod", inputs=[x], axis=1)
    assert not v.passed


@pytest.mark.torch
@pytest.mark.parametrize("fmt", FORMATS)
def test_torch_cumprod_passes(fmt):
    torch = pytest.importorskip("torch")
    x = _x(fmt, seed=1)
    t = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(getattr(torch, {"float32": "float32",
                                                                          "bfloat16": "bfloat16",
                                                                          "float16": "float16"}[fmt]))
    y = torch.cumprod(t, dim=1).float().numpy().astype(x.dtype)
    v = numstd.check(y, op="cumprod", inputs=[x], axis=1)
    assert v.passed, v.message
