"""The row-level bias criterion (``row_bias``, issue 17 item 3): a systematic error that a whole group
of outputs shares is rejected where the element-level bias test cannot run (fp32 reductions, where
every allowance exceeds ``bias_kappa`` ulp), while every legitimate order passes.

Independent truth: the reproductions scale the float64 reference by an exact factor (an error no
rounding explains), the legitimate orders are the corpus's implementations written against the op's
definition, and the hand-derived case computes ``t_row`` from the model's formula with exact powers
of two.
"""

import math

import numpy as np
import pytest

import numstd
from numstd.corpus import variants_for
from numstd.judge.criteria import Judge, RowBias, row_bias_limit, row_groups
from numstd.ops import validate
from numstd.registry import get_standard


def _softmax64(x):
    s = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return s / s.sum(-1, keepdims=True)


def _crit(verdict, name):
    return next(c for c in verdict.criteria if c.name == name)


@pytest.fixture(scope="module")
def softmax_case():
    x = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
    return x, _softmax64(x)


@pytest.fixture(scope="module")
def matmul_case():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 256)).astype(np.float32)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


# --- the gap closed: @1 passes these scale errors, @2 rejects them (and only through row_bias)

def test_softmax_scale_error_passes_at_1_and_fails_row_bias_at_2(softmax_case):
    x, s = softmax_case
    out = (s * (1 + 3e-5)).astype(np.float32)
    v1 = numstd.check(out, op="softmax", inputs=[x], standard="NS-SOFTMAX-FP32@1")
    assert v1.passed and "not tested" in _crit(v1, "bias").message
    v2 = numstd.check(out, op="softmax", inputs=[x], standard="NS-SOFTMAX-FP32@2")
    assert not v2.passed and not _crit(v2, "row_bias").passed


def test_matmul_scale_error_passes_at_1_and_fails_row_bias_at_2(matmul_case):
    a, b, c = matmul_case
    out = (c * (1 + 1e-5)).astype(np.float32)
    v1 = numstd.check(out, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@1")
    assert v1.passed
    v2 = numstd.check(out, op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@2")
    assert not v2.passed and not _crit(v2, "row_bias").passed
    assert _crit(v2, "bound").passed  # (the bound alone does not see it)


def test_sum_scale_error_passes_at_1_and_fails_row_bias_at_2():
    x = np.random.default_rng(1).standard_normal((256, 1024)).astype(np.float32)
    out = (x.astype(np.float64).sum(-1) * (1 + 1e-5)).astype(np.float32)
    v1 = numstd.check(out, op="sum", inputs=[x], standard="NS-SUM-FP32@1", axis=-1)
    assert v1.passed
    v2 = numstd.check(out, op="sum", inputs=[x], standard="NS-SUM-FP32@2", axis=-1)
    assert not v2.passed and not _crit(v2, "row_bias").passed


def test_correctly_rounded_outputs_pass_row_bias(softmax_case, matmul_case):
    x, s = softmax_case
    v = numstd.check(s.astype(np.float32), op="softmax", inputs=[x], standard="NS-SOFTMAX-FP32@2")
    assert v.passed, v.message
    a, b, c = matmul_case
    v = numstd.check(c.astype(np.float32), op="matmul", inputs=[a, b], standard="NS-MATMUL-FP32@2")
    assert v.passed, v.message


# --- every legitimate order of the corpus passes @2 at the reproductions' (realistic) sizes

def _legit_passes(std_key, op, inputs, params):
    std = get_standard(std_key)
    _, arrays, full = validate(op, list(inputs), dict(params))
    tried = []
    for v in variants_for(op):
        if not v.legit or not v.applicable(arrays, full, std.output, std.accumulate):
            continue
        y = v.fn([None if a is None else np.array(a) for a in arrays], full, std.output, std.accumulate, 5)
        verdict = numstd.check(y, op=op, inputs=list(inputs), standard=std_key, **dict(params))
        assert verdict.passed, f"legitimate {v.name} rejected by {std_key}: {verdict.message}"
        tried.append(v.name)
    return tried


def test_every_legitimate_softmax_order_passes_at_2(softmax_case):
    x, _ = softmax_case
    assert len(_legit_passes("NS-SOFTMAX-FP32@2", "softmax", [x], {"axis": -1})) >= 5


def test_every_legitimate_matmul_order_passes_at_2(matmul_case):
    a, b, _ = matmul_case
    tried = _legit_passes("NS-MATMUL-FP32@2", "matmul", [a, b], {})
    assert {"sequential", "pairwise", "blocked32", "splitk4", "kahan"} <= set(tried)


def test_every_legitimate_sum_order_passes_at_2():
    x = np.random.default_rng(2).standard_normal((256, 1024)).astype(np.float32)
    assert len(_legit_passes("NS-SUM-FP32@2", "sum", [x], {"axis": -1})) >= 5


# --- verdicts do not depend on the chunking

@pytest.mark.parametrize("key,op,make", [
    ("NS-SOFTMAX-FP32@2", "softmax", lambda r: [r.standard_normal((48, 300)).astype(np.float32)]),
    ("NS-MATMUL-FP32@2", "matmul", lambda r: [r.standard_normal((40, 64)).astype(np.float32),
                                              r.standard_normal((64, 24)).astype(np.float32)]),
    ("NS-SUM-FP32@2", "sum", lambda r: [r.standard_normal((64, 50)).astype(np.float32)]),
])
def test_row_bias_is_identical_for_every_chunk_size(key, op, make):
    inputs = make(np.random.default_rng(3))
    params = {"axis": -1} if op != "matmul" else {}
    _, arrays, full = validate(op, list(inputs), dict(params))
    exact = numstd.reference(op, arrays, **full).values
    out = (exact * (1 + 2e-7)).astype(np.float32)
    got = []
    for chunk in (1, 301, 1 << 16):
        v = numstd.check(out, op=op, inputs=inputs, standard=key, chunk_size=chunk, **params)
        c = _crit(v, "row_bias")
        got.append((v.passed, c.value, c.limit, c.message))
    assert got[0] == got[1] == got[2]


def test_rows_split_across_chunks_give_the_same_totals():
    """Rows cut anywhere (mid-row, several chunks per row) close with the same exact totals."""
    from numstd.core.formats import get_format

    rng = np.random.default_rng(4)
    shape = (6, 1000)
    r = rng.uniform(0.5, 2.0, shape)
    b = np.full(shape, 2.0**-10)
    a = r + b * rng.uniform(-1, 1, shape)

    def totals(cuts):
        j = Judge(get_format("float64"), shape)
        flat_a, flat_r, flat_b = a.reshape(-1), r.reshape(-1), b.reshape(-1)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            # a contiguous run of the flat output, fed as whole pieces of rows or within one row
            for row in range(lo // shape[1], (hi - 1) // shape[1] + 1):
                c0, c1 = max(lo, row * shape[1]), min(hi, (row + 1) * shape[1])
                sl = slice(c0 - row * shape[1], c1 - row * shape[1])
                j.add(flat_a[c0:c1], flat_r[c0:c1], flat_b[c0:c1], (row, sl), row_groups=("softmax", {"axis": 1}))
        return j.result().row_bias

    whole = totals([0, a.size])
    assert whole == totals([0, 17, 999, 1000, 2500, 4001, a.size]) == totals(list(range(0, a.size + 1, 250)))
    assert whole.rows == 6 and whole.length == 1000


# --- hand-derived values

def test_row_means_by_hand():
    """Two rows of 4 with t_i = +1/4 and −1/2 (bounds and errors powers of two: exact): t_rows
    +0.25 and −0.5, mean −0.125, sample sd |0.25 + 0.5|/√2."""
    from numstd.core.formats import get_format

    r = np.array([[1.0, -2.0, 4.0, 0.5], [1.0, 1.0, -1.0, 8.0]])
    b = np.full(r.shape, 2.0**-8)
    t = np.array([[0.25] * 4, [-0.5] * 4])
    a = r + np.sign(r) * t * b
    j = Judge(get_format("float64"), r.shape)
    j.add(a, r, b, (slice(0, 2), slice(None)), row_groups=("layer_norm", {}))
    rb = j.result().row_bias
    assert rb.rows == 2 and rb.length == 4
    assert rb.mean == -0.125
    assert rb.sd == pytest.approx(0.75 / math.sqrt(2), rel=1e-6)


def test_a_uniform_softmax_row_with_relative_error_k_u_by_hand():
    """x constant: every r_i = 1/K = 2^-6 exactly, dev = devmean = 0, so the model gives
    E = u·2^-6·(3 + lam·√K) with u = 2^-24, K = 64, and B = E + rho·ulp(r + E) + 2^-126 (ftz) with
    ulp = 2^-29.  a_i = r_i·(1 + 4u) is an fp32 value, so every t_i = 4u·2^-6/B and t_row = t_i."""
    std = get_standard("NS-SOFTMAX-FP32@2")
    lam, rho = std.model.constants["lam"], std.model.rho
    x = np.zeros((32, 64), dtype=np.float32)
    out = np.full(x.shape, np.float32(2.0**-6 * (1 + 4 * 2.0**-24)), dtype=np.float32)
    assert float(out[0, 0]) == 2.0**-6 + 2.0**-28
    e = 2.0**-24 * 2.0**-6 * (3 + lam * 8)
    bound = e + rho * 2.0**-29 + 2.0**-126
    expected = 2.0**-28 / bound
    v = numstd.check(out, op="softmax", inputs=[x], standard="NS-SOFTMAX-FP32@2")
    c = _crit(v, "row_bias")
    assert c.value == pytest.approx(expected, abs=2.0**-29)
    assert "over 32 rows of 64" in c.message
    # all rows equal: sd 0, so the limit is tau alone and a t_row above it fails
    assert c.limit == pytest.approx(std.criteria.row_bias_tau) and c.passed == (expected <= std.criteria.row_bias_tau)


def test_groups_of_each_op():
    assert row_groups("softmax", {"axis": 1}, (3, 7)) == (7, 1)
    assert row_groups("softmax", {"axis": 0}, (3, 7)) == (3, 7)
    assert row_groups("layer_norm", {}, (2, 3, 5)) == (5, 1)
    assert row_groups("matmul", {}, (4, 5)) == (1, 1)
    assert row_groups("sum", {"axis": (1,)}, (4,)) == (1, 1)


def test_the_limit_is_a_student_t_quantile():
    """z = 6 two-sided (p = erfc(6/√2) ≈ 1.97e-9): with many groups the t quantile tends to 6,
    with few it widens (values from the t distribution's own quantile function, mpmath-free:
    scipy.stats.t.isf is an independent implementation of the same function)."""
    from scipy.stats import t as student

    for rows in (2, 5, 64, 100000):
        lim, zr = row_bias_limit(0.01, 6.0, RowBias(rows, 0.0, 1.0, 1))
        assert zr == pytest.approx(student.isf(math.erfc(6 / math.sqrt(2)) / 2, rows - 1), rel=1e-9)
        assert lim == pytest.approx(0.01 + zr / math.sqrt(rows))
    assert row_bias_limit(0.0, 6.0, RowBias(10**7, 0.0, 1.0, 1))[1] == pytest.approx(6.0, rel=1e-4)


def test_standards_without_the_criterion_have_no_row_bias_result(softmax_case):
    x, s = softmax_case
    v = numstd.check(s.astype(np.float32), op="softmax", inputs=[x], standard="NS-SOFTMAX-FP32@1")
    assert all(c.name != "row_bias" for c in v.criteria)


# --- log_softmax, layer_norm, mean

@pytest.mark.parametrize("op,key,shape,params,perturb", [
    # an lse off by 1e-6 shifts every output of the row (log_softmax outputs are ≤ 0: sign(r) = −1)
    ("log_softmax", "NS-LOGSOFTMAX-FP32", (64, 4096), {"axis": -1}, lambda r: r - 1e-6),
    ("layer_norm", "NS-LAYERNORM-FP32", (64, 4096), {}, lambda r: r * (1 + 1e-5)),
    ("mean", "NS-MEAN-FP32", (256, 1024), {"axis": -1}, lambda r: r * (1 + 1e-5)),
])
def test_row_errors_pass_at_1_and_fail_row_bias_at_2(op, key, shape, params, perturb):
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    _, arrays, full = validate(op, [x], dict(params))
    out = perturb(numstd.reference(op, arrays, **full).values).astype(np.float32)
    v1 = numstd.check(out, op=op, inputs=[x], standard=f"{key}@1", **params)
    assert v1.passed
    v2 = numstd.check(out, op=op, inputs=[x], standard=f"{key}@2", **params)
    assert not v2.passed and not _crit(v2, "row_bias").passed and _crit(v2, "bound").passed


def test_every_legitimate_log_softmax_and_layer_norm_order_passes_at_2(softmax_case):
    x, _ = softmax_case
    assert len(_legit_passes("NS-LOGSOFTMAX-FP32@2", "log_softmax", [x], {"axis": -1})) >= 4
    assert len(_legit_passes("NS-LAYERNORM-FP32@2", "layer_norm", [x], {})) >= 5


def test_a_shared_rounded_reciprocal_is_a_legitimate_drift_of_the_mean():
    """mean as sum·fl(1/n), n = 1000 (1/1000 is inexact in fp32): every output carries the same
    relative error of fl(1/1000), a real systematic drift on rows with a large mean.  It passes
    NS-MEAN-FP32@2 through row_bias_rel = 1 (the shared reciprocal may err by one u_acc), and the
    drift it has is about the one fl(1/1000) predicts."""
    x = (1 + 0.1 * np.random.default_rng(7).standard_normal((2048, 1000))).astype(np.float32)
    recip = next(v for v in variants_for("mean") if v.name == "reciprocal-multiply")
    std = get_standard("NS-MEAN-FP32@2")
    _, arrays, full = validate("mean", [x], {"axis": -1})
    y = recip.fn([x], full, std.output, std.accumulate, 5)
    v = numstd.check(y, op="mean", inputs=[x], standard="NS-MEAN-FP32@2", axis=-1)
    assert v.passed, v.message
    c = _crit(v, "row_bias")
    # the relative error of fl(1/1000), in units of u_acc: exact rational arithmetic
    from fractions import Fraction

    rel = (Fraction(float(np.float32(1 / 1000))) * 1000 - 1) / Fraction(2) ** -24
    assert 0 < float(rel) < 1 and c.value > 0  # (fl(1/1000) is above 1/1000: the drift is positive)


def test_row_groups_come_from_the_whole_output_when_chunks_cut_rows_or_fix_leading_axes():
    # a chunk's reference has local axes (a piece of a long row is 1-D; a chunk of a 3-D softmax that
    # fixes axis 0 is 2-D): the groups must still be the whole output's rows, so the statistic and the
    # verdict do not depend on the chunk size (regression: 70,000 groups of one element at chunk 4096)
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(8).standard_normal((1, 70_000)) * 3).astype(np.float32)
    out = torch.softmax(torch.from_numpy(x), -1).numpy()
    vs = [numstd.check(out, op="softmax", inputs=[x], axis=-1, chunk_size=c) for c in (4096, 1 << 22)]
    assert vs[0].to_json() == vs[1].to_json()
    assert "1 group(s)" in vs[0].criterion("row_bias").message
    x3 = np.random.default_rng(10).standard_normal((2, 100, 1000)).astype(np.float32)
    out3 = (torch.softmax(torch.from_numpy(x3).double(), -1) * (1 + 1e-6)).float().numpy()  # a scale error
    v3 = [numstd.check(out3, op="softmax", inputs=[x3], axis=2, chunk_size=c) for c in (1000, 1 << 22)]
    assert v3[0].to_json() == v3[1].to_json() and not v3[0].criterion("row_bias").passed
