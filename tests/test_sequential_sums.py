"""Sequential fp32 sums of one-signed terms: the tail that a probabilistic ``lam·u·sqrt(K)`` must cover.

A sequential sum's partial sums of K non-negative terms grow like ``i·mean``, so its relative error
``sum_i delta_i s_i / S`` has a standard deviation of about ``u·sqrt(K)/4`` (benchmarks/seq_sum_tail.py;
docs/methodology.md §2.4).  The standards re-versioned on 2026-12-06 floor ``lam`` at 2.0 (7.5 standard
deviations).  Truth here is the float64 sum of the same float32 terms (exact to far below u), and the
kernels are plain float32 loops, not numstd code.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd

U = 2.0 ** -24


def _seq(x: np.ndarray) -> np.ndarray:
    """A one-thread kernel's row sums: left to right, every partial sum rounded to float32."""
    acc = np.zeros(x.shape[:-1], np.float32)
    for j in range(x.shape[-1]):
        acc = (acc + x[..., j].astype(np.float32)).astype(np.float32)
    return acc


@pytest.mark.parametrize("dist", ["abs-normal", "uniform01", "offset"])
def test_sequential_sum_of_one_signed_terms_spreads_like_a_quarter_u_sqrt_k(dist):
    rng = np.random.default_rng(1)
    k = 256
    base = rng.standard_normal((20000, k)) if dist != "uniform01" else rng.random((20000, k))
    x = (np.abs(base) if dist == "abs-normal" else base + 100 if dist == "offset" else base).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=1)
    z = (_seq(x).astype(np.float64) - exact) / exact / (U * np.sqrt(k))
    assert 0.2 < z.std() < 0.3 and abs(z.mean()) < 0.01
    assert np.abs(z).max() < 2.0  # the floor (7.5 sd) is above every row of 20,000


def test_a_sequential_fp32_mean_of_one_signed_rows_passes_the_default_and_bugs_fail():
    # NS-MEAN-FP32@2's lam = 0.97 (about 3.9 sd) rejected this plain loop on offset rows
    rejected_by_v2 = 0
    for seed in range(5, 9):
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal((2048, 1024)) + 100).astype(np.float32)
        y = (_seq(x) / np.float32(1024)).astype(np.float32)
        v = numstd.check(y, op="mean", inputs=[x], axis=-1)
        assert v.passed and v.standard_id == "NS-MEAN-FP32@3", v.snippet()
        rejected_by_v2 += not numstd.check(y, op="mean", inputs=[x], axis=-1, standard="NS-MEAN-FP32@2").passed
        dropped = (_seq(x[:, :-1]) / np.float32(1024)).astype(np.float32)  # the last term dropped
        assert not numstd.check(dropped, op="mean", inputs=[x], axis=-1).passed
        acc16 = np.zeros(2048, ml_dtypes.bfloat16)  # a bf16 running sum declared fp32
        for j in range(1024):
            acc16 = (acc16.astype(np.float32) + x[:, j]).astype(ml_dtypes.bfloat16)
        assert not numstd.check((acc16.astype(np.float32) / 1024).astype(np.float32), op="mean", inputs=[x],
                                axis=-1).passed
    assert rejected_by_v2 >= 1


def test_a_sequential_fp32_mean_of_fp32_losses_of_fp16_logits_passes_the_to_fp32_standard():
    # autocast: fp16 logits, cross_entropy in fp32, an fp32 output; the per-row losses are full fp32 values,
    # so their sequential mean has the one-signed tail (@1's lam = 0.26, one standard deviation, rejected 1 of
    # these 8 draws).  Sums of 16-bit *values* in fp32 are a different matter: their terms have at most 11
    # significant bits, so a sequential fp32 sum of them spreads about 7 times less, and NS-SUM/CUMSUM/NLLLOSS-*-TO-FP32@1
    # keep their lam (docs/methodology.md §2.4).
    torch = pytest.importorskip("torch")
    rejected_by_v1 = 0
    for seed in range(500, 508):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((4096, 10)).astype(np.float16)
        t = rng.integers(0, 10, 4096)
        loss = torch.nn.functional.cross_entropy(torch.from_numpy(x.astype(np.float32)), torch.from_numpy(t),
                                                 reduction="none").numpy()
        out = np.asarray(_seq(loss[None, :])[0] / np.float32(4096), np.float32)
        v = numstd.check(out, op="cross_entropy", inputs=[x, t], reduction="mean")
        assert v.passed and v.standard_id == "NS-CROSSENTROPY-FP16-TO-FP32@2", v.snippet()
        rejected_by_v1 += not numstd.check(out, op="cross_entropy", inputs=[x, t], reduction="mean",
                                           standard="NS-CROSSENTROPY-FP16-TO-FP32@1").passed
    assert rejected_by_v1 >= 1


def test_a_sequential_fp32_sum_of_16bit_values_spreads_far_less():
    # why the -TO-FP32 sums were not re-versioned: bf16 terms carry 8 significant bits, so an fp32 running
    # sum of them in [0, 1) rounds only their low tail: a standard deviation of about 0.03·u·sqrt(K)
    # against 0.22 for fp32 terms, and @1's lam = 0.25 is about 8 of them.  Truth: float64 sums.
    rng = np.random.default_rng(2)
    for dt, lo, hi in ((ml_dtypes.bfloat16, 0.0, 0.05), (np.float32, 0.2, 0.3)):
        x = rng.random((1024, 4096)).astype(dt)
        exact = x.astype(np.float64).sum(axis=1)
        z = (_seq(x).astype(np.float64) - exact) / exact / (U * np.sqrt(4096))
        assert lo < z.std() < hi
        if dt is ml_dtypes.bfloat16:
            assert np.abs(z).max() < 0.25


def test_a_sequential_k_loop_matmul_of_one_signed_operands_passes_and_a_scale_error_fails():
    # a naive kernel's K loop (one accumulator per output, products rounded, then the add) on torch.rand-like
    # operands drifts negative (benchmarks/seq_sum_drift.py): NS-MATMUL-FP32@3's row-bias test, with no
    # legitimate drift, rejected it (-0.0036 against ±0.0024 here); @4 allows 0.6·(K/4096)^1.5 u_acc of shared
    # relative error, and a 1e-5 scale error (168 u) still fails
    rng = np.random.default_rng(0)
    m = n = 256
    k = 16384
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    for j in range(k):
        c += np.outer(a[:, j], b[j, :]).astype(np.float32)
    old = numstd.check(c, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@3")
    assert not old.passed and old.criterion("row_bias").passed is False
    new = numstd.check(c, op="matmul", inputs=[a, b])
    assert new.passed and new.standard_id == "NS-MATMUL-FP32@4", new.snippet()
    scaled = (c.astype(np.float64) * (1 + 1e-5)).astype(np.float32)
    assert not numstd.check(scaled, op="matmul", inputs=[a, b]).passed


def test_row_bias_drift_must_be_a_formula_in_k(tmp_path):
    from numstd import registry
    from numstd.errors import SchemaError
    from tests.test_registry import GOOD, _root

    ok = GOOD.replace("[criteria]\n", '[criteria]\nrow_bias = true\nrow_bias_drift = "0.6 * (K / 4096) ** 1.5"\n', 1)
    assert registry.get_standard("NS-MATMUL-TEST@1", root=_root(tmp_path / "ok", {"matmul/NS-MATMUL-TEST@1.toml": ok})
                                 ).criteria.row_bias_drift == "0.6 * (K / 4096) ** 1.5"
    bad = GOOD.replace("[criteria]\n", '[criteria]\nrow_bias = true\nrow_bias_drift = "absdot * K"\n', 1)
    with pytest.raises(SchemaError, match="row_bias_drift"):
        registry.get_standard("NS-MATMUL-TEST@1", root=_root(tmp_path / "bad", {"matmul/NS-MATMUL-TEST@1.toml": bad}))


def test_the_drift_allowance_does_not_depend_on_the_chunk():
    rng = np.random.default_rng(3)
    a = rng.random((96, 4096), dtype=np.float32)
    b = rng.random((4096, 64), dtype=np.float32)
    c = np.zeros((96, 64), np.float32)
    for j in range(4096):
        c += np.outer(a[:, j], b[j, :]).astype(np.float32)
    whole = numstd.check(c, op="matmul", inputs=[a, b])
    for size in (64, 64 * 7, 64 * 40):
        part = numstd.check(c, op="matmul", inputs=[a, b], chunk_size=size)
        assert part.criterion("row_bias").limit == whole.criterion("row_bias").limit
        assert part.criterion("row_bias").value == whole.criterion("row_bias").value


@pytest.mark.parametrize("op,kw,offset", [("normalize", {"p": 1.0, "dim": 1}, 0.0), ("normalize", {"p": 2.0, "dim": 1}, 0.0),
                                          ("mean", {"axis": -1}, 3.0), ("mean", {"axis": -1}, 0.0)])
def test_a_truncated_output_still_fails_the_wider_bounds(op, kw, offset):
    # the wider allowances moved elements out of the element-level bias sample (E_i <= bias_kappa ulp);
    # the published versions raise bias_kappa by the ratio of the allowances, so truncation fails again.
    # Truth: float64 normalisation / mean of the float32 inputs, rounded toward zero by nextafter.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((256, 64) if op == "normalize" else (4096, 64)) + offset).astype(np.float32)
    xd = x.astype(np.float64)
    if op == "normalize":
        r = xd / np.linalg.norm(xd, ord=kw["p"], axis=1, keepdims=True)
    else:
        r = xd.mean(axis=-1)
    rn = r.astype(np.float32)
    rtz = np.where(np.abs(rn.astype(np.float64)) > np.abs(r), np.nextafter(rn, np.float32(0)), rn).astype(np.float32)
    assert numstd.check(rn, op=op, inputs=[x], **kw).passed
    v = numstd.check(rtz, op=op, inputs=[x], **kw)
    assert not v.passed and v.standard_id in ("NS-NORMALIZE-FP32@3", "NS-MEAN-FP32@3"), v.snippet()
