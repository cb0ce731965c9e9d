"""The bias criterion with rounded constants (criteria.rounded_constants, numstd.judge.criteria).

Independent truth: IEEE float32 arithmetic in numpy (``x * np.float32(c)`` is exactly
``RN(x · fl(c))``, so its mean signed error must equal the predicted shift to the last bit of the
integer sum), torch's own kernels, and hand-derived relative errors of the constants.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import numstd
from numstd.core.formats import round_to
from numstd.judge.criteria import bias_excess
from numstd.ops import get_op

U32 = 2.0**-24


def _x(kind: str, n: int = 16384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = {"normal": rng.standard_normal(n), "uniform": rng.uniform(-1, 1, n),
         "offset": rng.standard_normal(n) - 1.5, "wide": rng.standard_normal(n) * 4}[kind]
    return x.astype(np.float32)


def _bias(v):
    return next(c for c in v.criteria if c.name == "bias")


def test_constant_relative_errors_are_the_hand_derived_ones():
    """fl32(0.01) = 0.00999999977648258209228515625 exactly: (fl − c)/c = −0.375 u to 1e-6."""
    for c, want in [(Fraction(1, 100), -0.375), (Fraction(1, 6), 0.5)]:
        got = (Fraction(float(np.float32(float(c)))) - c) / c / Fraction(U32)
        assert abs(float(got) - want) < 1e-6


@pytest.mark.parametrize("kind", ["normal", "uniform", "offset", "wide"])
def test_ieee_product_with_the_rounded_slope_has_exactly_the_predicted_mean(kind):
    """x * fl(0.01) in IEEE float32 is RN(x fl(0.01)): its mean signed error is the shift plus the mean
    error of the correctly rounded result (the baseline), so its distance from the rounded-slope
    hypothesis is 0 up to the float sums, as is the correctly rounded output's from exact constants."""
    x = _x(kind)
    y = np.where(x > 0, x, x * np.float32(0.01))
    v = numstd.check(y, op="leaky_relu", inputs=[x], standard="NS-LEAKYRELU-FP32@2")
    b = _bias(v)
    assert v.passed, v.message
    assert "negative_slope" in b.message
    cr = np.where(x > 0, x, round_to(x.astype(np.float64) * 0.01, "float32").astype(np.float32))
    b_cr = _bias(numstd.check(cr, op="leaky_relu", inputs=[x], standard="NS-LEAKYRELU-FP32@2"))
    assert abs(b.value) < 1e-9 and abs(b_cr.value) < 1e-9, (b.message, b_cr.message)


@pytest.mark.parametrize("kind", ["normal", "offset"])
def test_truncation_fails_whether_the_constant_is_exact_or_rounded(kind):
    """Between the two hypotheses is not allowed: RTZ of the exact product fails as RTZ of the rounded one."""
    x = _x(kind)
    x64 = x.astype(np.float64)
    for slope in (0.01, float(np.float32(0.01))):
        y = np.where(x > 0, x, round_to(x64 * slope, "float32", mode="rtz").astype(np.float32))
        v = numstd.check(y, op="leaky_relu", inputs=[x], standard="NS-LEAKYRELU-FP32@2")
        assert not v.passed and _bias(v).passed is False, v.message


@pytest.mark.parametrize("kind", ["normal", "wide"])
def test_hardsigmoid_division_and_product_by_rounded_sixth_both_pass(kind):
    """clip(x+3, 0, 6)/6 (exact constant) and clip(x+3, 0, 6)*fl(1/6) (XLA's kernel) are both legitimate;
    the saturated 6·fl(1/6) rounds back to 1, which the shift (rounded to the output) knows."""
    x = _x(kind)
    t = np.clip(x + np.float32(3), np.float32(0), np.float32(6))
    for y in (t / np.float32(6), t * np.float32(1 / 6)):
        v = numstd.check(y.astype(np.float32), op="hardsigmoid", inputs=[x])
        assert v.standard_id == "NS-HARDSIGMOID-FP32@1"
        assert v.passed, v.message


def test_selu_with_fp32_constants_passes_and_the_rounded_decimals_fail():
    x = _x("normal")
    s, a = np.float32(1.0507009873554805), np.float32(1.6732632423543772)
    y = np.where(x > 0, s * x, (s * a) * np.expm1(x)).astype(np.float32)
    assert numstd.check(y, op="selu", inputs=[x]).passed
    bug = np.where(x > 0, np.float32(1.05) * x, np.float32(1.05 * 1.67) * np.expm1(x)).astype(np.float32)
    assert not numstd.check(bug, op="selu", inputs=[x]).passed


def test_repeated_reference_values_do_not_fail_the_correctly_rounded_output():
    """SELU of x = -100 + N(0, 1) is -scale·alpha on every element: one rounding error repeated. The
    correctly rounded output (and x*fl(scale) on the positive rows) passes; truncation still fails."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((16, 1024)) + 100.0 * np.where(rng.random((16, 1)) < 0.5, -1.0, 1.0)).astype(np.float32)
    e = get_op("selu")
    r = e.ref(x.astype(np.float64), {})[0]
    cr = round_to(r, "float32").astype(np.float32)
    assert numstd.check(cr, op="selu", inputs=[x]).passed
    t = np.where(x > 0, np.float32(1.0507009873554805) * x, cr)
    assert numstd.check(t.astype(np.float32), op="selu", inputs=[x]).passed
    assert not numstd.check(round_to(r, "float32", mode="rtz").astype(np.float32), op="selu", inputs=[x]).passed


@pytest.mark.parametrize("chunk", [1000, 4096, 1 << 20])
def test_the_shift_does_not_depend_on_the_chunking(chunk):
    x = _x("offset", n=10000, seed=3)
    y = np.where(x > 0, x, x * np.float32(0.01))
    ref = numstd.check(y, op="leaky_relu", inputs=[x], standard="NS-LEAKYRELU-FP32@2")
    v = numstd.check(y, op="leaky_relu", inputs=[x], standard="NS-LEAKYRELU-FP32@2", chunk_size=chunk)
    assert _bias(v).value == _bias(ref).value and _bias(v).message == _bias(ref).message


def test_a_published_version_without_the_term_keeps_its_verdict():
    """NS-LEAKYRELU-FP32@1 (no rounded_constants) judges as it was published: no shift in its message."""
    x = _x("offset")
    y = np.where(x > 0, x, x * np.float32(0.01))
    b = _bias(numstd.check(y, op="leaky_relu", inputs=[x], standard="NS-LEAKYRELU-FP32@1"))
    assert "constants" not in b.message and "allowed ±" in b.message


def test_bias_excess_is_the_distance_to_the_nearest_hypothesis():
    assert bias_excess(0.3, None) == 0.3
    assert bias_excess(-0.24, {"a": -0.25}) == pytest.approx(0.01)
    assert bias_excess(-0.12, {"a": -0.25}) == pytest.approx(-0.12)  # 0 is nearer
    assert bias_excess(0.45, {"a": 0.2, "b": 0.3}) == pytest.approx(-0.05)  # both rounded: 0.5
    assert bias_excess(0.1, {"a": 0.2, "b": -0.1}) == pytest.approx(0.0)  # a and b: 0.1


def test_declared_constants_are_the_ops_own_values():
    """Each entry's constant values reproduce its reference exactly when passed unrounded."""
    for name in ("leaky_relu", "elu", "selu", "celu", "hardsigmoid", "hardswish"):
        e = get_op(name)
        full = dict(e.params)
        x = np.linspace(-5, 5, 1001)
        base = e.ref(x, full)[0]
        with_consts = e.ref(x, {**full, **e.constant_values(full)})[0]
        assert np.allclose(with_consts, base, rtol=4 * 2.0**-53, atol=0), name
        assert all(math.isfinite(v) for v in e.constant_values(full).values())


@pytest.mark.torch
@pytest.mark.parametrize("op", ["leaky_relu", "selu", "hardsigmoid", "hardswish", "elu"])
@pytest.mark.parametrize("kind", ["normal", "offset", "wide"])
def test_torch_fp32_kernels_pass(op, kind):
    torch = pytest.importorskip("torch")
    x = _x(kind, seed=11)
    y = getattr(torch.nn.functional, op)(torch.from_numpy(x)).numpy()
    v = numstd.check(y, op=op, inputs=[x])
    assert v.passed, v.message
