"""Intermediate overflow (criterion `intermediate_overflow`): attention @3 rows whose scores overflow, hardswish x·6.

Where ``max(1, |scale|)·max_j Σ_e |q_e||k_je|`` (``spillmag``) reaches fp32's overflow threshold,
a kernel that forms ``q·kᵀ`` in fp32 gets ±inf/NaN scores and a NaN row: ``NS-ATTENTION-*@3``
(``intermediate_overflow = true``) accepts non-finite outputs there and only there, and judges
finite outputs there by the bound as before.  ``@2`` is unchanged (published files are immutable).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.reference import reference

FP32_MAX = float(np.finfo(np.float32).max)
# RNE overflows at the midpoint between max_finite and 2^128 (hand-derived: max = (2 - 2^-23)·2^127)
FP32_OVERFLOW = (2.0 - 2.0**-24) * 2.0**127


def _inputs(big_q: float, big_k: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, 2, 8, 16)).astype(np.float32) for _ in range(3))
    q[0, 1, 2] *= np.float32(big_q)
    k[0, 1, :] *= np.float32(big_k)
    return q, k, v


def _exact(q, k, v) -> np.ndarray:
    """softmax(q kᵀ / 4) v in float64 (E = 16); the scores here are far inside float64's range."""
    s = np.einsum("bhle,bhse->bhls", q.astype(np.float64), k.astype(np.float64)) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


def test_spillmag_is_the_largest_partial_score_computed_by_hand():
    q, k, v = _inputs(1e25, 1e25)
    r = reference("attention", [q, k, v], scale=0.25, causal=False)
    for h in range(2):
        for i in range(8):
            by_hand = max(math.fsum(abs(float(a)) * abs(float(b)) for a, b in zip(q[0, h, i], k[0, h, j]))
                          for j in range(8))  # max(1, 0.25) = 1: the unscaled product is the larger
            assert r.aux["spillmag"][0, h, i, 0] == pytest.approx(by_hand, rel=1e-12)
    assert r.aux["spillmag"][0, 1, 2, 0] >= FP32_OVERFLOW  # the row planted to overflow
    assert (np.delete(r.aux["spillmag"].reshape(-1), 8 + 2) < 1e27).all()  # k·1e25 times normal q: finite


def _nan_row(q, k, v) -> np.ndarray:
    out = _exact(q, k, v).astype(np.float32)
    out[0, 1, 2] = np.nan  # what a kernel forming q·kᵀ in fp32 returns there
    return out


def test_nan_on_an_overflowing_row_passes_at_3_and_failed_at_2():
    q, k, v = _inputs(1e25, 1e25)
    out = _nan_row(q, k, v)
    new = numstd.check(out, op="attention", inputs=[q, k, v])
    assert new.standard_id == "NS-ATTENTION-FP32@3" and new.passed, new.snippet()
    specials = next(c for c in new.criteria if c.name == "specials")
    assert "16 non-finite output(s) where the float32 intermediates overflow" in specials.message
    old = numstd.check(out, op="attention", inputs=[q, k, v], standard="NS-ATTENTION-FP32@2")
    assert not old.passed and not next(c for c in old.criteria if c.name == "specials").passed


def test_nan_below_the_overflow_threshold_still_fails():
    # |q|·|k| products of about 1e36 per term: the scores are large but finite in fp32
    q, k, v = _inputs(1e18, 1e18)
    r = reference("attention", [q, k, v], scale=0.25, causal=False)
    assert r.aux["spillmag"].max() < FP32_OVERFLOW
    v3 = numstd.check(_nan_row(q, k, v), op="attention", inputs=[q, k, v])
    assert not v3.passed and not next(c for c in v3.criteria if c.name == "specials").passed


def test_nan_on_another_row_fails_even_when_one_row_overflows():
    q, k, v = _inputs(1e25, 1e25)
    out = _nan_row(q, k, v)
    out[0, 0, 5, 3] = np.nan  # head 0 has no overflowing score
    v3 = numstd.check(out, op="attention", inputs=[q, k, v])
    assert not v3.passed
    assert "1 non-finite mismatch(es) (1 NaN where the reference is finite)" in next(
        c for c in v3.criteria if c.name == "specials").message


def test_finite_garbage_on_an_overflowing_row_is_judged_by_the_bound():
    q, k, v = _inputs(1e25, 1e25)
    out = _exact(q, k, v).astype(np.float32)
    out[0, 1, 2] = 1e6  # far outside 2·max|v| and the hull
    assert not numstd.check(out, op="attention", inputs=[q, k, v]).passed


def test_bf16_at_3_allows_the_same_rows():
    q, k, v = (x.astype(ml_dtypes.bfloat16) for x in _inputs(1e25, 1e25))
    out = _exact(q, k, v).astype(q.dtype)
    out[0, 1, 2] = np.nan
    v3 = numstd.check(out, op="attention", inputs=[q, k, v])
    assert v3.standard_id == "NS-ATTENTION-BF16@3" and v3.passed, v3.snippet()


@pytest.mark.parametrize("chunk", [7, 64, 1 << 16])
def test_the_verdict_does_not_depend_on_the_chunk_size(chunk):
    q, k, v = _inputs(1e25, 1e25)
    out = _nan_row(q, k, v)
    base = numstd.check(out, op="attention", inputs=[q, k, v]).to_json()
    assert numstd.check(out, op="attention", inputs=[q, k, v], chunk_size=chunk).to_json() == base


def test_torch_math_sdpa_nan_rows_pass_at_3():
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = _inputs(1e25, 1e25)
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v))).numpy()
    assert np.isnan(out[0, 1, 2]).all() and np.isfinite(np.delete(out.reshape(-1, 16), 8 + 2, 0)).all()
    assert numstd.check(out, op="attention", inputs=[q, k, v]).passed
    assert not numstd.check(out, op="attention", inputs=[q, k, v], standard="NS-ATTENTION-FP32@2").passed


# --- hardswish: x·clamp(x + 3, 0, 6) overflows float32 for x ≥ 5.67e37 (NS-HARDSWISH-FP32@3, -BF16@2) ---

def test_hardswish_spillmag_is_the_largest_intermediate_by_hand():
    x = np.array([-5.0, -3.0, -1.5, 0.0, 2.0, 3.0, 1e38], np.float32)
    r = reference("hardswish", [x])
    by_hand = [0.0, 0.0, 2.25, 0.0, 10.0, 18.0, 6.0 * float(np.float32(1e38))]  # |x (x+3)| inside, 6x above 3
    assert r.aux["spillmag"].tolist() == pytest.approx(by_hand, rel=1e-15)


def test_hardswish_inf_where_x_times_6_overflows_passes_and_elsewhere_fails():
    x = np.array([1.0, -2.0, 5.0e37, 5.7e37, 3.0e38], np.float32)
    exact = x.astype(np.float64) * np.clip(x.astype(np.float64) + 3, 0, 6) / 6
    out = exact.astype(np.float32)
    out[3:] = np.inf  # 6·5.7e37 = 3.42e38 ≥ fp32's overflow threshold; 6·5e37 = 3.0e38 is not
    v = numstd.check(out, op="hardswish", inputs=[x])
    assert v.standard_id == "NS-HARDSWISH-FP32@3" and v.passed, v.snippet()
    assert not numstd.check(out, op="hardswish", inputs=[x], standard="NS-HARDSWISH-FP32@2").passed
    out[2] = np.inf  # 6·5e37 is finite in fp32: no legitimate kernel overflows there
    assert not numstd.check(out, op="hardswish", inputs=[x]).passed


def test_torch_hardswish_overflow_passes_the_new_versions():
    torch = pytest.importorskip("torch")
    x = np.array([5.6e37, 5.7e37, 1e38, -1e38, 2.5, -2.5], np.float32)
    out = torch.nn.functional.hardswish(torch.from_numpy(x)).numpy()
    assert np.isinf(out[1]) and np.isfinite(out[0])  # torch forms x·6 before dividing
    assert numstd.check(out, op="hardswish", inputs=[x]).passed
    xb = x.astype(ml_dtypes.bfloat16)
    outb = torch.nn.functional.hardswish(torch.from_numpy(x).to(torch.bfloat16)).float().numpy().astype(ml_dtypes.bfloat16)
    vb = numstd.check(outb, op="hardswish", inputs=[xb])
    assert vb.standard_id == "NS-HARDSWISH-BF16@2" and vb.passed, vb.snippet()
