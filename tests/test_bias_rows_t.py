"""bias_rows_t: the row-clustered bias test with few rows (NS-NORMALIZE-*@2).

Truth: the normalized vector by float64 with an exact rounding (numpy's float64 division and sqrt
are correctly rounded, and the fp32 result of a float64 value is one rounding), and the Student-t
critical value on 1 degree of freedom in closed form (the Cauchy quantile).
"""

import math

import numpy as np
import pytest

import numstd
from numstd.judge.criteria import bias_rows_z
from numstd.registry import get_standard


def _bias(v):
    return next(c for c in v.criteria if c.name == "bias")


def test_the_critical_value_is_students_t_on_r_minus_one_dof():
    c = get_standard("NS-NORMALIZE-FP32@2").criteria
    assert c.bias_rows and c.bias_rows_t and c.bias_z == 6.0
    p = math.erfc(6.0 / math.sqrt(2.0))  # two-sided tail of 6 standard deviations
    assert bias_rows_z(c, 2) == pytest.approx(1.0 / math.tan(math.pi * p / 2.0), rel=1e-9)  # Cauchy
    assert bias_rows_z(c, 10**7) == pytest.approx(6.0, rel=1e-5)  # the normal value in the limit
    assert bias_rows_z(c, 8) > bias_rows_z(c, 30) > bias_rows_z(c, 1000) > 6.0
    assert bias_rows_z(get_standard("NS-NORMALIZE-FP32@1").criteria, 2) == 6.0  # @1: no correction


def _normalized(x: np.ndarray, norm_scale: float = 1.0) -> np.ndarray:
    n = np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=1, keepdims=True)) * norm_scale
    return (x.astype(np.float64) / n).astype(np.float32)


def test_one_vector_sharing_its_norms_rounding_fails_at_1_and_is_not_bias_tested_at_2():
    """A norm 2 ulps (fp32) too large scales the whole vector: a legitimate fp32 norm's error, well
    inside the bound, but a mean signed error of about -2 ulp over 128 elements of one row."""
    x = np.random.default_rng(3).standard_normal((1, 128)).astype(np.float32)
    y = _normalized(x, 1 + 2**-22)
    v1 = numstd.check(y, op="normalize", inputs=[x], standard="NS-NORMALIZE-FP32@1", p=2.0, dim=1)
    v2 = numstd.check(y, op="normalize", inputs=[x], standard="NS-NORMALIZE-FP32@2", p=2.0, dim=1)
    assert not _bias(v1).passed and next(c for c in v1.criteria if c.name == "bound").passed
    assert v2.passed and "not tested" in _bias(v2).message and "1 row" in _bias(v2).message


def test_truncation_on_many_rows_still_fails_the_bias_test():
    x = np.random.default_rng(5).standard_normal((256, 64)).astype(np.float32)
    exact = _normalized(x).astype(np.float64)
    t = x.astype(np.float64) / np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=1, keepdims=True))
    rtz = np.where(np.abs(exact) > np.abs(t), np.nextafter(exact.astype(np.float32), np.float32(0)),
                   exact.astype(np.float32))  # round toward zero: one ulp down wherever RN went up
    v = numstd.check(rtz, op="normalize", inputs=[x], standard="NS-NORMALIZE-FP32@2", p=2.0, dim=1)
    assert not _bias(v).passed, _bias(v).message
    ok = numstd.check(exact.astype(np.float32), op="normalize", inputs=[x], p=2.0, dim=1)
    assert ok.passed and ok.standard_id.startswith("NS-NORMALIZE-FP32@")  # (@3 since 2026-12-06)
