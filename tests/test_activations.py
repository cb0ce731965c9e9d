"""The activation family (numstd.ops.activation): parameters, mappings, exact clamps, published standards.

Truth here is independent of numstd's references: hand-derived values, every bfloat16 bit pattern
run through torch's own kernels, and torch CPU kernels judged by the published standards.  (The
references themselves are checked against mpmath in tests/test_reference.py.)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core.errors import ParameterError
from numstd.ops import OPS, validate
from numstd.reference import reference

ACTIVATIONS = ("leaky_relu", "elu", "selu", "celu", "hardsigmoid", "hardswish", "softsign", "mish",
               "new_gelu", "swish")
EXACT = ("hardtanh", "clamp")
FORMATS = ("float32", "bfloat16", "float16")
#: KernelBench-like calls: (op, params)
CALLS = [("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {}), ("elu", {"alpha": 0.5}),
         ("selu", {}), ("celu", {}), ("celu", {"alpha": 2.0}), ("hardsigmoid", {}), ("hardswish", {}),
         ("softsign", {}), ("mish", {}), ("new_gelu", {}), ("swish", {}), ("hardtanh", {}),
         ("hardtanh", {"min_val": -0.3, "max_val": 0.7}), ("clamp", {"min": -0.3, "max": 0.7}),
         ("clamp", {"min": 0.1}), ("clamp", {"max": -0.2})]


def _x(fmt: str, n: int = 4096, seed: int = 0) -> np.ndarray:
    g = np.random.default_rng(seed)
    x = np.concatenate([g.standard_normal(n // 2) * 3, g.uniform(-8, 8, n // 2)])
    return x.astype(ml_dtypes.bfloat16 if fmt == "bfloat16" else fmt)


def _all_bf16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)


# ------------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("op,params,match", [
    ("celu", {"alpha": 0}, "alpha must be nonzero"),
    ("hardtanh", {"min_val": 1.0, "max_val": -1.0}, "min_val .* must not be greater than max_val"),
    ("hardtanh", {"min_val": None}, "min_val must be a real number, got None"),
    ("clamp", {}, "give min, max or both"),
    ("clamp", {"min": float("nan")}, "min must not be NaN"),
    ("clamp", {"max": "1"}, "max must be a real number or None"),
    ("leaky_relu", {"negative_slope": float("inf")}, "negative_slope must be finite"),
    ("elu", {"alpha": True}, "alpha must be a real number"),
    ("selu", {"alpha": 1.0}, "unknown parameter"),
    ("hardtanh", {"min": 0.0}, "unknown parameter"),
])
def test_parameters_torch_rejects_raise_parameter_error(op, params, match):
    with pytest.raises(ParameterError, match=match):
        validate(op, [np.zeros(3, np.float32)], params)


def test_parameters_torch_accepts_are_accepted():
    x = [np.zeros(3, np.float32)]
    assert validate("leaky_relu", x, {"negative_slope": -0.5})[2]["negative_slope"] == -0.5
    assert validate("celu", x, {"alpha": -2})[2]["alpha"] == -2.0
    assert validate("clamp", x, {"min": 1.0, "max": 0.0})[2] == {"min": 1.0, "max": 0.0}  # torch: max wins
    assert validate("hardtanh", x, {"min_val": 0.5, "max_val": 0.5})[2]["min_val"] == 0.5


# --------------------------------------------------------------------------------- mappings
def test_swish_is_silu_and_new_gelu_is_tanh_gelu():
    x = _x("float32")
    for a, b, pb in (("swish", "silu", {}), ("new_gelu", "gelu", {"approximate": "tanh"})):
        ra, rb = reference(a, [x]), reference(b, [x], **pb)
        np.testing.assert_array_equal(ra.values, rb.values)
        np.testing.assert_array_equal(ra.error_bound, rb.error_bound)


def test_hand_derived_values():
    x = np.array([-6.0, -3.0, -1.0, 0.0, 1.5, 3.0, 6.0], dtype=np.float32)
    np.testing.assert_array_equal(reference("hardsigmoid", [x]).values, [0, 0, 1 / 3, 0.5, 0.75, 1, 1])
    np.testing.assert_array_equal(reference("hardswish", [x]).values, [0, 0, -1 / 3, 0, 1.125, 3, 6])
    np.testing.assert_array_equal(reference("softsign", [x]).values, x / (1 + np.abs(x.astype(float))))
    np.testing.assert_array_equal(reference("leaky_relu", [x], negative_slope=0.5).values,
                                  [-3, -1.5, -0.5, 0, 1.5, 3, 6])
    np.testing.assert_array_equal(reference("hardtanh", [x]).values, [-1, -1, -1, 0, 1, 1, 1])
    np.testing.assert_array_equal(reference("clamp", [x], min=1.0, max=0.0).values, [0] * 7)  # max wins


def test_clamp_limits_are_rounded_to_the_input_format():
    x = np.array([-5.0, 0.05, 0.3, 2.0], dtype=ml_dtypes.bfloat16)
    r = reference("clamp", [x], min=0.1, max=1.0)
    lo = float(np.float64(0.1).astype(ml_dtypes.bfloat16))
    assert lo != 0.1 and r.values.tolist() == [lo, lo, float(x[2]), 1.0]
    assert not r.error_bound.any()
    assert reference("clamp", [x.astype(np.float32)], min=0.1).values[0] == float(np.float32(0.1))


def test_nan_propagates_through_the_exact_ops():
    x = np.array([np.nan, 0.5, -np.inf, np.inf], dtype=np.float32)
    for op, p in (("hardtanh", {}), ("clamp", {"min": 0.0}), ("clamp", {"max": 0.0})):
        v = reference(op, [x], **p).values
        assert np.isnan(v[0]) and not np.isnan(v[1:]).any(), op


# ----------------------------------------------------------------------- exhaustive vs torch
@pytest.mark.torch
@pytest.mark.parametrize("op,params", [c for c in CALLS if c[0] in EXACT])
def test_exact_ops_equal_torch_on_every_bfloat16_pattern(op, params):
    torch = pytest.importorskip("torch")
    from numstd.backends.base import framework_call

    x = _all_bf16()
    t = torch.from_numpy(x.view(np.uint16).astype(np.int16)).view(torch.bfloat16)
    got = framework_call(op, "torch")([t], validate(op, [x], params)[2]).float().numpy()
    ref = reference(op, [x], **params).values
    nan = np.isnan(ref)
    assert (np.isnan(got) == nan).all()
    np.testing.assert_array_equal(got[~nan], ref[~nan])


# --------------------------------------------------------------------- published standards
#: (op, format) pairs with no standard (none since fp32 selu and hardsigmoid were published with the
#: rounded-constants term, standards/_templates/activation.toml)
WITHDRAWN: set = set()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op,params", CALLS)
def test_correctly_rounded_output_passes_and_a_near_miss_fails(op, params, fmt):
    """The correctly rounded result passes; a one-element error of a few ULPs fails and is named."""
    from numstd.core.formats import round_to

    if (op, fmt) in WITHDRAWN:  # no standard: the call is refused, with what exists
        with pytest.raises(numstd.StandardNotFound):
            x = _x(fmt, seed=3)
            numstd.check(np.asarray(round_to(reference(op, [x], **params).values, fmt)), op=op, inputs=[x], **params)
        return

    x = _x(fmt, seed=3)
    r = reference(op, [x], **params)
    good = np.asarray(round_to(r.values, fmt))
    v = numstd.check(good, op=op, inputs=[x], **params)
    assert v.passed, v.message
    bad = good.copy()
    i = int(np.argmax(np.abs(r.values) * (np.abs(r.values) > 0.5)))  # an element in the normal range
    step = 1 if op in EXACT else 16  # exact ops: one ULP; the others: 16 ULPs
    bits = bad.view(np.uint16 if bad.dtype.itemsize == 2 else np.uint32)
    bits[i] += step
    v = numstd.check(bad, op=op, inputs=[x], **params)
    assert not v.passed
    assert str(i) in v.message or any(o.index == (i,) for o in getattr(v, "offenders", ())), v.message


@pytest.mark.torch
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op,params", CALLS)
def test_torch_cpu_passes_its_published_standard(op, params, fmt):
    if (op, fmt) in WITHDRAWN:
        pytest.skip(f"no {fmt} {op} standard: withdrawn before publication (standards/_templates/activation.toml)")
    torch = pytest.importorskip("torch")
    from numstd.backends.base import framework_call

    x = _x(fmt, seed=5)
    full = validate(op, [x], params)[2]
    t = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(
        {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[fmt])
    y = framework_call(op, "torch")([t], full).float().numpy().astype(x.dtype)
    v = numstd.check(y, op=op, inputs=[x], **params)
    assert v.passed, v.message
