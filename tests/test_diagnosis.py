"""numstd.diagnosis: each cause is named first on outputs built by hand with that cause.

The outputs are computed here with numpy from the definition of each mistake (truncation by
round_to(..., "rtz"), a scale of 1.01, bf16-rounded operands, a dropped tail, exp without the max,
a one-pass variance, flushed subnormals), and the truth is numstd.reference's float64 result, so
the diagnosis is checked against independent constructions, not against the corpus it is
benchmarked on.  Also: corpus labels come from the bug definitions and use the vocabulary.
"""

import numpy as np
import pytest

import numstd
from numstd.diagnosis import CAUSES, FIXES, Diagnosis, combine, diagnose
from numstd.formats import get_format, round_to

REQUIRED = ("truncation", "precision-downgrade", "low-precision-accumulation", "missing-max-subtraction",
            "one-pass-variance", "scale", "dropped-terms", "approximation", "wrong-axis", "mask",
            "constant-output", "flush-to-zero", "specials")


def _rerun(op, **params):
    def rerun(inputs, **over):
        return numstd.reference(op, inputs, **dict(params, **over)).values
    return rerun


def _first(y, t, **kw):
    d = diagnose(y, t, **kw)
    return d[0].cause if d else None


def test_vocabulary_has_every_required_cause_and_a_fix_for_each():
    assert set(REQUIRED) <= set(CAUSES) and set(CAUSES) == set(FIXES)


def test_truncation_of_exact_values():
    t = np.random.default_rng(0).standard_normal(4096)
    y = round_to(t, "bfloat16", "rtz")
    assert _first(y, t, fmt="bfloat16") == "truncation"
    assert _first(round_to(t, "bfloat16"), t, fmt="bfloat16") != "truncation"  # RNE is no truncation


def test_constant_scale_and_zeros():
    t = np.random.default_rng(1).standard_normal((16, 64))
    assert _first(round_to(t * 1.01, "bfloat16"), t, fmt="bfloat16") == "scale"
    assert _first(np.zeros_like(t, dtype=np.float32), t, fmt="float32") == "constant-output"


def test_precision_downgrade_by_rerunning_on_bf16_operands():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((32, 256)).astype(np.float32), rng.standard_normal((256, 16)).astype(np.float32)
    t = numstd.reference("matmul", [a, b]).values
    lo = lambda x: np.asarray(round_to(x, "bfloat16"), dtype=np.float64)  # noqa: E731
    y = (lo(a) @ lo(b)).astype(np.float32)
    d = diagnose(y, t, fmt="float32", op="matmul", inputs=[a, b], params={}, rerun=_rerun("matmul"))
    assert d[0].cause == "precision-downgrade" and "bfloat16" in d[0].evidence


def test_dropped_tail_of_a_sum():
    x = np.random.default_rng(3).uniform(0.5, 1.5, (8, 300)).astype(np.float32)
    t = numstd.reference("sum", [x], axis=-1).values
    y = x[:, : 300 - 300 % 64].astype(np.float64).sum(-1).astype(np.float32)
    d = diagnose(y, t, fmt="float32", op="sum", inputs=[x], params={"axis": -1, "keepdims": False},
                 rerun=_rerun("sum", axis=-1, keepdims=False))
    assert d[0].cause == "dropped-terms"


def test_softmax_without_the_max_on_large_logits():
    x = np.random.default_rng(4).standard_normal((8, 128)).astype(np.float32)
    x[::2] += 100.0
    t = numstd.reference("softmax", [x], axis=-1).values
    with np.errstate(all="ignore"):
        e = np.exp(x)
        y = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    d = diagnose(y, t, fmt="float32", op="softmax", inputs=[x], params={"axis": -1}, rerun=_rerun("softmax", axis=-1))
    assert d[0].cause == "missing-max-subtraction"


def test_one_pass_variance_on_offset_rows():
    x = (np.random.default_rng(5).standard_normal((16, 256)) + 3000.0).astype(np.float32)
    t = numstd.reference("layer_norm", [x, None, None], eps=1e-5).values
    m = x.mean(-1, keepdims=True, dtype=np.float32)
    var = (x * x).mean(-1, keepdims=True, dtype=np.float32) - m * m
    y = ((x - m) / np.sqrt(np.maximum(var, 0) + np.float32(1e-5))).astype(np.float32)
    d = diagnose(y, t, fmt="float32", op="layer_norm", inputs=[x, None, None], params={"eps": 1e-5})
    assert d[0].cause == "one-pass-variance"


def test_flush_to_zero_of_subnormal_results():
    f = get_format("float32")
    t = np.concatenate([np.linspace(1, 2, 100), np.full(20, f.smallest_normal / 8)])
    y = np.where(np.abs(t) < f.smallest_normal, 0.0, t).astype(np.float32)
    assert _first(y, t, fmt="float32") == "flush-to-zero"


def test_wrong_axis_and_mask_by_rerunning():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    t = numstd.reference("softmax", [x], axis=1).values
    y = numstd.reference("softmax", [x], axis=0).values.astype(np.float32)
    d = diagnose(y, t, fmt="float32", op="softmax", inputs=[x], params={"axis": 1}, rerun=_rerun("softmax", axis=1))
    assert d[0].cause == "wrong-axis"
    q, k, v = (rng.standard_normal((2, 32, 16)).astype(np.float32) for _ in range(3))
    t = numstd.reference("attention", [q, k, v], causal=True).values
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / 4.0
    s = np.where(np.arange(32)[None, :] > np.arange(32)[:, None] + 1, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    y = ((p / p.sum(-1, keepdims=True)) @ v).astype(np.float32)
    d = diagnose(y, t, fmt="float32", op="attention", inputs=[q, k, v], params={"causal": True, "scale": None},
                 rerun=_rerun("attention", causal=True))
    assert d[0].cause == "mask"


def test_correct_output_gets_no_confident_cause():
    t = np.random.default_rng(7).standard_normal(4096)
    d = diagnose(round_to(t, "bfloat16"), t, fmt="bfloat16")
    assert all(x.confidence < 0.5 for x in d)


def test_combine_ranks_by_mean_confidence():
    a = (Diagnosis("scale", 0.9, "x"),)
    b = (Diagnosis("truncation", 0.8, "y"), Diagnosis("scale", 0.5, "z"))
    top = combine([a, b])
    assert [d.cause for d in top] == ["scale", "truncation"] and top[0].confidence == pytest.approx(0.7)


def test_corpus_bug_causes_come_from_their_definitions():
    from numstd.corpus import VARIANTS

    named = 0
    for op in VARIANTS:
        for v in VARIANTS[op]:
            if v.legit:
                assert v.cause is None
            elif v.cause is not None:
                named += 1
                assert v.cause in CAUSES
    assert named >= 100
