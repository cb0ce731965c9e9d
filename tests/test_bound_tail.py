"""The tail model of probabilistic bounds (``[criteria] tail_n``, numstd.judge.criteria.tail_factor).

Truth is independent of numstd's reference: the exact products of fp32 inputs summed by
``math.fsum`` (correctly rounded), and the bound ``lam·u·√K·Σ|a||b|`` written out by hand from the
standard's published constants.
"""

import math

import numpy as np
import pytest

import numstd
from numstd.errors import SchemaError
from numstd.judge.criteria import tail_factor
from numstd.registry import get_standard, load_standard


def test_tail_factor_is_one_up_to_tail_n_and_ln_ratio_above():
    assert tail_factor(0, 10**9) == 1.0  # off
    assert tail_factor(1536, 1) == tail_factor(1536, 1536) == 1.0
    assert tail_factor(1536, 1537) > 1.0
    assert tail_factor(1536, 1536**2) == pytest.approx(2.0, rel=1e-15)
    assert tail_factor(16384, 2**28) == pytest.approx(2.0, rel=1e-15)  # ln 2^28 / ln 2^14


@pytest.mark.parametrize("bad", ["true", "-1", "1", "2.5", '"1536"'])
def test_tail_n_must_be_zero_or_an_integer_of_at_least_two(bad):
    text = open(get_standard("NS-MATMUL-FP32@3").path, encoding="utf-8").read()
    text = text.replace("tail_n = 1536", f"tail_n = {bad}").replace('status = "active"', 'status = "draft"')
    with pytest.raises(SchemaError, match="tail_n"):
        load_standard(text.encode(), "NS-MATMUL-FP32@3.toml")


def test_the_new_versions_keep_every_constant_and_the_evidence():
    for old, new in [("NS-MATMUL-FP32@2", "NS-MATMUL-FP32@3"), ("NS-CONV-FP32@1", "NS-CONV-FP32@2"),
                     ("NS-LINEAR-BF16@1", "NS-LINEAR-BF16@2")]:
        a, b = get_standard(old), get_standard(new)
        assert b.supersedes == old and a.criteria.tail_n == 0 and b.criteria.tail_n >= 1536
        assert a.model.error.text == b.model.error.text and dict(a.model.constants) == dict(b.model.constants)
        assert a.model.rho == b.model.rho and a.suite == b.suite
        assert a.provenance["evidence_sha256"] == b.provenance["evidence_sha256"]
        assert get_standard(b.id).key in (new, "NS-MATMUL-FP32@4")  # the unversioned ID: the newest version


def _case(n: int, k: int = 64, seed: int = 0):
    """(a, B, exact a·B by fsum, exact Σ|a||B|): a (1, K) fp32 row against a (K, n) fp32 matrix."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((1, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a64, b64 = a[0].astype(np.float64), b.astype(np.float64)
    prods = a64[:, None] * b64  # exact: a 24-bit by 24-bit product fits a 53-bit significand
    truth = np.array([[math.fsum(prods[:, j]) for j in range(n)]])
    absdot = np.array([[math.fsum(np.abs(prods[:, j])) for j in range(n)]])
    return a, b, truth, absdot


def _bound_result(v):
    return next(c for c in v.criteria if c.name == "bound")


def test_an_error_between_the_two_bounds_fails_the_old_version_and_passes_the_new():
    n, k = 1 << 16, 64
    new = get_standard("NS-MATMUL-FP32@3")
    t = tail_factor(new.criteria.tail_n, n)
    assert 1.45 < t < 1.55  # ln 2^16 / ln 1536
    a, b, truth, absdot = _case(n, k)
    e = new.model.constants["lam"] * 2.0**-24 * math.sqrt(k) * absdot  # the model term E_i by hand
    rho_ulp = new.model.rho * np.spacing(np.abs(truth).astype(np.float32)).astype(np.float64)
    # halfway between B = E + rho·ulp (@2) and B' = t·E + rho·ulp (@3), less the final fp32 rounding
    target = truth + np.sign(truth) * ((1 + t) / 2 * e + rho_ulp)
    cand = target.astype(np.float32)
    assert np.all(np.abs(cand - target) <= 0.5 * np.spacing(np.abs(cand)))
    v_old = numstd.check(cand, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@2")
    v_new = numstd.check(cand, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@3")
    old, now = _bound_result(v_old), _bound_result(v_new)
    assert not old.passed and old.value > 0.9 * n  # nearly every element is outside @2's bound
    assert now.passed, now.message
    assert "ln N / ln tail_n" in now.message and f"{n:,}" in now.message
    # the same verdict whatever the chunk size: t is the whole output's, not a chunk's
    v_chunked = numstd.check(cand, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@3", chunk_size=5000)
    assert v_chunked.to_dict() == v_new.to_dict()
    # beyond t·E the new version fails the bound too
    over = (truth + np.sign(truth) * (1.25 * t * e + 2 * rho_ulp)).astype(np.float32)
    assert not _bound_result(numstd.check(over, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@3")).passed


def test_at_or_below_tail_n_the_new_version_judges_exactly_as_the_old():
    a, b, truth, _ = _case(1536, 64, seed=3)
    rng = np.random.default_rng(7)
    cand = (truth * (1 + rng.normal(0, 2**-22, truth.shape))).astype(np.float32)
    v_old = numstd.check(cand, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@2").to_dict()
    v_new = numstd.check(cand, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@3").to_dict()
    for key in ("standard_id", "standard_sha256", "message"):
        v_old.pop(key), v_new.pop(key)
    assert v_old == v_new


def test_large_legitimate_and_buggy_matmuls_under_the_default():
    """numpy's float32 matmul (a BLAS: blocked, FMA) on 2^18 outputs passes the default; bf16
    inputs (a precision downgrade) still fail it by orders of magnitude."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((512, 64)).astype(np.float32)
    b = rng.standard_normal((64, 512)).astype(np.float32)
    v = numstd.check(a @ b, op="matmul", inputs=[a, b])
    assert v.passed and v.standard_id == "NS-MATMUL-FP32@4", v.message  # (@3 with the sequential drift, 2026-12-06)
    import ml_dtypes

    bf = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    bad = numstd.check(bf(a) @ bf(b), op="matmul", inputs=[a, b])
    assert not bad.passed and bad.normalized_max > 20
