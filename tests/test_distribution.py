"""The ULP-error distribution: exact statistics, chunk-size independence, conservative quantiles."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from numstd.distribution import BINS_PER_OCTAVE, DistributionAccumulator, QUANTILES


def _feed(err, ref, sizes):
    acc = DistributionAccumulator()
    i = 0
    for s in sizes:
        acc.add(err[i:i + s], ref[i:i + s])
        i += s
    acc.add(err[i:], ref[i:])
    return acc.result()


def test_statistics_match_exact_rational_arithmetic():
    rng = np.random.default_rng(1)
    err = rng.standard_normal(5000) * 10.0 ** rng.uniform(-3, 3, 5000)
    ref = rng.standard_normal(5000)
    ref[::7] = 0.0
    d = _feed(err, ref, [5000])
    assert d.count == 5000
    assert d.max == np.abs(err).max()
    exact_mean = sum(Fraction(abs(x)) for x in err) / 5000
    assert abs(Fraction(d.mean) - exact_mean) <= abs(exact_mean) * Fraction(1, 2**50)
    s = [x if r > 0 else -x for x, r in zip(err, ref) if r != 0]
    exact_ms = sum(Fraction(x) for x in s) / len(s)
    assert d.signed_count == len(s)
    assert abs(Fraction(d.mean_signed) - exact_ms) <= abs(Fraction(d.std_signed)) * Fraction(1, 2**40)
    assert d.std_signed == pytest.approx(np.std(s), rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=6), st.integers(0, 2**31))
def test_result_is_identical_for_any_chunking(sizes, seed):
    rng = np.random.default_rng(seed)
    err = rng.standard_normal(4000) * 10.0 ** rng.uniform(-5, 5, 4000)
    ref = rng.standard_normal(4000)
    a = _feed(err, ref, [4000])
    b = _feed(err, ref, sizes)
    assert a == b  # every field, bit for bit


def test_quantiles_are_upper_bounds_within_one_bin():
    rng = np.random.default_rng(2)
    err = np.abs(rng.standard_normal(100_001)) * 3
    d = _feed(err, np.ones_like(err), [100_001])
    srt = np.sort(err)
    for q in QUANTILES:
        true = srt[math.ceil(q * err.size) - 1]
        assert true <= d.quantiles[q] <= true * 2 ** (1 / BINS_PER_OCTAVE) * (1 + 1e-12)


def test_histogram_counts_everything_in_power_of_two_bins():
    err = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 3.0, 1e6])
    d = _feed(err, np.ones_like(err), [8])
    h = d.histogram
    assert sum(h["counts"]) == 8
    assert h["edges"][:4] == [0.0, 0.5, 1.0, 2.0]
    assert h["counts"][:3] == [3, 2, 1]  # [0, .5], (.5, 1], (1, 2]


def test_truncation_is_negative_signed_mean():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal(10_000)
    err = -rng.uniform(0, 1, 10_000) * np.sign(ref)  # toward zero
    d = _feed(err, ref, [10_000])
    assert d.mean_signed == pytest.approx(-0.5, abs=0.02)
