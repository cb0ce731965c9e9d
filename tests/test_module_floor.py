"""NS-MODULE-*@3: the accumulation floor for outputs with fewer than ``quantile_min_n`` elements.

Independent truth: scalar losses whose exact value is ``math.fsum`` of the terms (exact, then
rounded once), summed by a legitimate fp32 order other than numpy's pairwise one (left to right,
``np.cumsum``), and the sqrt(L) bound itself checked on repeated draws; hand-built errors of known
size in ULPs for what must still fail.
"""

import math

import numpy as np
import pytest

import numstd
from numstd.grade.module_standard import accumulation_floor, judge_module, reduction_length

L = 65536


def _loss(seed, n=L):
    """(truth, RN(truth) as fp32, the fp32 left-to-right sum / n): a mean of n squared normals."""
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    terms = (x * x).astype(np.float32)
    truth = math.fsum(terms.astype(np.float64)) / n
    seq = np.cumsum(terms, dtype=np.float32)[-1] / np.float32(n)
    return np.float64(truth), np.float32(truth), np.float32(seq)


def _ulps(y, t):
    return abs(float(y) - t) / float(np.spacing(np.float32(t)))


def test_a_left_to_right_sum_fails_version_2_against_an_exact_baseline_and_passes_version_3():
    t, b, seq = _loss(0)
    assert _ulps(seq, t) > 2  # a legitimate order, several ULP from the exact mean
    v2 = judge_module(t, b, seq, numstd.get_standard("NS-MODULE-FP32@2"), reduction_length=L)
    v3 = judge_module(t, b, seq, numstd.get_standard("NS-MODULE-FP32@3"), reduction_length=L)
    assert not v2.passed and v2.failed_criteria[-1].name == "ulp_q1"
    assert v3.passed, v3.message
    assert v3.params["accumulation_floor"] == pytest.approx(math.sqrt(L)) and v3.params["reduction_length"] == L
    assert "accumulation floor" in v3.criterion("ulp_q1").message


def test_sqrt_L_ulp_covers_left_to_right_summation_of_same_sign_terms():
    """The model behind the floor: the error of recursive fp32 summation of L iid same-sign terms
    has a standard deviation near sqrt(L)/3 ULP, so sqrt(L) is about three of them."""
    errs = np.array([_ulps(seq, t) for t, _, seq in (_loss(s, 16384) for s in range(24))])
    assert errs.max() <= math.sqrt(16384)
    assert 0.05 * math.sqrt(16384) / 3 < np.sqrt(np.mean(errs ** 2)) < 1.5 * math.sqrt(16384) / 3


def test_a_scalar_beyond_the_floor_still_fails():
    t, b, _ = _loss(1)
    std = numstd.get_standard("NS-MODULE-FP32@3")
    off = np.float32(t + 2 * math.sqrt(L) * float(np.spacing(np.float32(t))))  # 512 ULP off
    v = judge_module(t, b, off, std, reduction_length=L)
    assert not v.passed and v.failed_criteria[-1].name == "ulp_q1"
    assert not judge_module(t, b, np.float32(t * (1 + 1e-4)), std, reduction_length=L).passed


def test_no_floor_from_32_elements_on_or_for_16_bit_outputs():
    std = numstd.get_standard("NS-MODULE-FP32@3")
    assert accumulation_floor(std, 32, L) == std.model.rho == 1.0
    assert accumulation_floor(std, 31, L) == math.sqrt(L) and accumulation_floor(std, 1, 1.0) == 1.0
    t = np.random.default_rng(2).uniform(1, 2, 32)
    two_ulp = (t + 2 * np.spacing(t.astype(np.float32)).astype(np.float64)).astype(np.float32)
    assert not judge_module(t, t.astype(np.float32), two_ulp, std, reduction_length=L).passed
    for fmt in ("NS-MODULE-BF16@3", "NS-MODULE-FP16@3"):
        s16 = numstd.get_standard(fmt)
        assert accumulation_floor(s16, 1, L) == s16.model.rho  # sqrt(L)·u_acc/u_out < 1


def test_reduction_length_is_the_largest_float_input_per_float_output():
    assert reduction_length(L, [np.zeros(())]) == L
    assert reduction_length(L, [np.zeros(64), np.zeros(64, dtype=np.int64)]) == L / 64
    assert reduction_length(10, [np.zeros(100)]) == 1.0
