"""The channel norms group_norm, instance_norm and batch_norm against independent truth.

Truth: mpmath at 50 digits on tiny shapes (loops over the normalised groups written out here, not
the reference's rearrangement), torch.nn.functional in float64 on larger ones, torch's own bad
parameter errors, and the published standards judging torch CPU and a one-pass variance.
"""

from __future__ import annotations

import itertools
import os
import zlib

import numpy as np
import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from numstd.core.errors import ParameterError, ShapeError  # noqa: E402
from numstd.ops import validate  # noqa: E402
from numstd.reference import reference  # noqa: E402

torch = pytest.importorskip("torch")
F = torch.nn.functional
mpmath = pytest.importorskip("mpmath")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _groups_of(op: str, shape: tuple, num_groups: int | None) -> list[list[tuple]]:
    """The index tuples of each normalised group, by the ops' definitions (docs of numstd.ops)."""
    n, c = shape[:2]
    spatial = list(itertools.product(*(range(s) for s in shape[2:])))
    if op == "batch_norm":
        return [[(i, ch, *sp) for i in range(n) for sp in spatial] for ch in range(c)]
    if op == "instance_norm":
        return [[(i, ch, *sp) for sp in spatial] for i in range(n) for ch in range(c)]
    per = c // num_groups
    return [[(i, ch, *sp) for ch in range(g * per, (g + 1) * per) for sp in spatial]
            for i in range(n) for g in range(num_groups)]


def _exact(op: str, x: np.ndarray, w, b, eps: float, num_groups=None, running=None) -> np.ndarray:
    """mpmath (50 digits) normalisation of every group, then the per-channel affine."""
    mpmath.mp.dps = 50
    out = np.empty(x.shape)
    wt = [mpmath.mpf(1)] * x.shape[1] if w is None else [mpmath.mpf(float(v)) for v in w]
    bs = [mpmath.mpf(0)] * x.shape[1] if b is None else [mpmath.mpf(float(v)) for v in b]
    if running is not None:
        for idx in np.ndindex(x.shape):
            c = idx[1]
            m, v = mpmath.mpf(float(running[0][c])), mpmath.mpf(float(running[1][c]))
            out[idx] = float((mpmath.mpf(float(x[idx])) - m) / mpmath.sqrt(v + mpmath.mpf(eps)) * wt[c] + bs[c])
        return out
    for grp in _groups_of(op, x.shape, num_groups):
        vals = [mpmath.mpf(float(x[i])) for i in grp]
        mu = mpmath.fsum(vals) / len(vals)
        var = mpmath.fsum((v - mu) ** 2 for v in vals) / len(vals)
        r = mpmath.sqrt(var + mpmath.mpf(eps))
        for i, v in zip(grp, vals):
            out[i] = float((v - mu) / r * wt[i[1]] + bs[i[1]])
    return out


def _half_ulp(t: np.ndarray) -> np.ndarray:
    """The rounding error of the float64 truth itself (the mpmath value converted with float())."""
    return 0.5 * np.spacing(np.abs(t))


TINY = [
    ("group_norm", (2, 4, 3), {"num_groups": 2}),
    ("group_norm", (1, 6, 2, 2), {"num_groups": 3}),
    ("group_norm", (3, 4), {"num_groups": 1}),
    ("instance_norm", (2, 3, 4), {}),
    ("instance_norm", (1, 2, 2, 3), {}),
    ("batch_norm", (4, 3), {"training": True}),
    ("batch_norm", (2, 3, 2, 2), {"training": True}),
]


@pytest.mark.parametrize("op,shape,params", TINY)
@pytest.mark.parametrize("dist", ["normal", "offset"])
def test_reference_within_its_bound_of_mpmath(op, shape, params, dist):
    g = _rng(zlib.crc32(f"{op}{shape}{dist}".encode()))
    x = g.standard_normal(shape) + (1e3 if dist == "offset" else 0.0)
    x = x.astype(np.float32)
    c = shape[1]
    w, b = (1 + 0.5 * g.standard_normal(c)).astype(np.float32), g.standard_normal(c).astype(np.float32)
    inputs = [x, None, None, w, b] if op == "batch_norm" else [x, w, b]
    r = reference(op, inputs, **params)
    truth = _exact(op, x, w, b, 1e-5, params.get("num_groups"))
    err = np.abs(r.values - truth)
    assert np.all(err <= r.error_bound + _half_ulp(truth)), (err.max(), r.error_bound.max())
    assert np.all(r.error_bound <= 1e-12 * (1 + np.abs(truth)))  # proven and tight (float64 ≈ 1e-16)


def test_batch_norm_eval_is_the_running_statistics_affine():
    g = _rng(3)
    x = g.standard_normal((3, 4, 5)).astype(np.float32)
    rm, rv = g.standard_normal(4).astype(np.float32), (g.random(4) + 0.1).astype(np.float32)
    w, b = g.standard_normal(4).astype(np.float32), g.standard_normal(4).astype(np.float32)
    r = reference("batch_norm", [x, rm, rv, w, b], eps=1e-3)
    truth = _exact("batch_norm", x, w, b, 1e-3, running=(rm, rv))
    assert np.all(np.abs(r.values - truth) <= r.error_bound + _half_ulp(truth))
    assert float(r.aux["K"]) == 1.0
    r2 = reference("batch_norm", [x, rm, rv])  # no affine
    truth2 = _exact("batch_norm", x, None, None, 1e-5, running=(rm, rv))
    assert np.all(np.abs(r2.values - truth2) <= r2.error_bound + _half_ulp(truth2))


def _torch64(op, x, w, b, params, running=None):
    t = lambda a: None if a is None else torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    eps = params.get("eps", 1e-5)
    if op == "group_norm":
        return F.group_norm(t(x), params["num_groups"], t(w), t(b), eps).numpy()
    if op == "instance_norm":
        return F.instance_norm(t(x), weight=t(w), bias=t(b), eps=eps).numpy()
    rm, rv = (None, None) if running is None else (t(running[0]), t(running[1]))
    return F.batch_norm(t(x), rm, rv, t(w), t(b), params.get("training", False), 0.1, eps).numpy()


@pytest.mark.parametrize("op,shape,params", [
    ("group_norm", (4, 32, 8, 8), {"num_groups": 8}), ("group_norm", (2, 6, 5, 3, 2), {"num_groups": 6, "eps": 0.1}),
    ("instance_norm", (4, 8, 17), {}), ("instance_norm", (2, 3, 4, 4, 4), {"eps": 1e-3}),
    ("batch_norm", (16, 8, 5, 5), {"training": True}), ("batch_norm", (64, 10), {"training": True}),
])
def test_reference_matches_torch_float64(op, shape, params):
    g = _rng(11)
    x = (g.standard_normal(shape) * 3 + 2).astype(np.float32)
    w, b = g.standard_normal(shape[1]).astype(np.float32), g.standard_normal(shape[1]).astype(np.float32)
    inputs = [x, None, None, w, b] if op == "batch_norm" else [x, w, b]
    r = reference(op, inputs, **params)
    np.testing.assert_allclose(r.values, _torch64(op, x, w, b, params), rtol=1e-12, atol=1e-12)


def test_batch_norm_eval_matches_torch_float64():
    g = _rng(12)
    x = g.standard_normal((8, 4, 6)).astype(np.float32)
    rm, rv = g.standard_normal(4).astype(np.float32), (g.random(4) + 0.5).astype(np.float32)
    r = reference("batch_norm", [x, rm, rv], training=False)
    np.testing.assert_allclose(r.values, _torch64("batch_norm", x, None, None, {}, (rm, rv)), rtol=1e-13)


# ------------------------------------------------------------------------------- bad input
def _torch_rejects(fn) -> bool:
    try:
        fn()
    except (RuntimeError, ValueError):
        return True
    return False


def test_bad_parameters_raise_errors_that_name_them():
    x = np.ones((2, 6, 4), np.float32)
    with pytest.raises(ShapeError, match="num_groups=4 does not divide the 6 channels"):
        validate("group_norm", [x], {"num_groups": 4})
    assert _torch_rejects(lambda: F.group_norm(torch.ones(2, 6, 4), 4))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ParameterError, match="num_groups must be a positive int"):
            validate("group_norm", [x], {"num_groups": bad})
    with pytest.raises(ParameterError, match="missing required parameter"):
        validate("group_norm", [x], {})
    with pytest.raises(ShapeError, match="weight.*must be \\(6,\\)"):
        validate("group_norm", [x, np.ones(4, np.float32)], {"num_groups": 2})
    with pytest.raises(ParameterError, match="pass running_mean and running_var"):
        validate("batch_norm", [x], {})
    with pytest.raises(ParameterError, match="training must be True or False"):
        validate("batch_norm", [x], {"training": 1})
    one = np.ones((1, 3), np.float32)
    with pytest.raises(ShapeError, match="more than 1 value"):
        validate("batch_norm", [one], {"training": True})
    assert _torch_rejects(lambda: F.batch_norm(torch.ones(1, 3), None, None, training=True))
    with pytest.raises(ShapeError, match="at least 3 dimension"):
        validate("instance_norm", [np.ones((2, 3), np.float32)], {})
    with pytest.raises(ShapeError, match="more than 1 value"):
        validate("instance_norm", [np.ones((2, 3, 1), np.float32)], {})
    assert _torch_rejects(lambda: F.instance_norm(torch.ones(2, 3, 1)))
    with pytest.raises(ParameterError, match="eps must be finite and >= 0"):
        validate("instance_norm", [x], {"eps": -1.0})


# --------------------------------------------------------------------- the published standards
def _check(y, op, inputs, **kw):
    import numstd

    return numstd.check(y, op=op, inputs=inputs, **kw)


def _t(a):
    from numstd.corpus._common import to_torch

    return None if a is None else to_torch(a)


def _torch_out(op, inputs, params):
    from numstd.corpus._common import from_torch

    t = [_t(a) for a in inputs] + [None] * 5
    if op == "group_norm":
        y = F.group_norm(t[0], params["num_groups"], t[1], t[2], 1e-5)
    elif op == "instance_norm":
        y = F.instance_norm(t[0], weight=t[1], bias=t[2], eps=1e-5)
    else:
        tr = params.get("training", False)
        y = F.batch_norm(t[0], None if tr else t[1], None if tr else t[2], t[3], t[4], tr, 0.1, 1e-5)
    return from_torch(y)


def _inputs(op, shape, fmt, dist="normal", seed=0, **params):
    from numstd.catalog.suites import make_case

    return make_case(op, shape, dist, seed, [fmt], params).inputs


@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("op,shape,params", [
    ("group_norm", (4, 16, 8, 8), {"num_groups": 4}), ("instance_norm", (4, 8, 12, 12), {}),
    ("batch_norm", (32, 8, 4, 4), {"training": True}), ("batch_norm", (32, 8, 4, 4), {"training": False}),
])
def test_torch_cpu_passes_the_default_standard(op, shape, params, fmt):
    from numstd.core.formats import round_to

    for dist in ("normal", "offset"):
        inputs = _inputs(op, shape, fmt, dist, **params)
        y = round_to(_torch_out(op, inputs, params), fmt)
        v = _check(y, op, inputs, **params)
        assert v.passed, (dist, v.message)


def test_one_pass_variance_fails_on_offset_groups():
    from numstd.corpus import variants_for
    from numstd.core.formats import FORMATS

    for op, params in (("group_norm", {"num_groups": 4}), ("instance_norm", {}), ("batch_norm", {"training": True})):
        inputs = _inputs(op, (8, 16, 8, 8), "float32", "offset", **params)
        _, arr, full = validate(op, inputs, params)
        bug = next(v for v in variants_for(op) if v.name == "one-pass-variance")
        y = bug.fn(arr, full, FORMATS["float32"], FORMATS["float32"], 0)
        assert not _check(y, op, inputs, **params).passed, op


def test_fp32_policy_rejects_what_torch_stores_in_16_bits():
    """torch's bf16 batch_norm stores its mean and 1/sigma in bf16: the stored16 standard (the
    default) takes it, the one-rounding fp32-policy standard does not."""
    from numstd.core.formats import round_to

    inputs = _inputs("batch_norm", (32, 8, 4, 4), "bfloat16", "offset", training=True)
    y = round_to(_torch_out("batch_norm", inputs, {"training": True}), "bfloat16")
    assert _check(y, "batch_norm", inputs, training=True).passed
    assert not _check(y, "batch_norm", inputs, training=True, policy="fp32").passed


@pytest.mark.parametrize("op,params", [("group_norm", {"num_groups": 4}), ("instance_norm", {}),
                                       ("batch_norm", {"training": False})])
def test_verdict_does_not_depend_on_the_chunk_size(op, params):
    from numstd.core.formats import round_to

    inputs = _inputs(op, (16, 8, 6, 6), "float32", "normal", **params)
    y = round_to(_torch_out(op, inputs, params), "float32")
    y[3, 2, 1, 1] *= 1 + 2.0 ** -10  # one wrong element
    a = _check(y, op, inputs, chunk_size=300, **params)
    b = _check(y, op, inputs, **params)
    assert not a.passed and not b.passed
    assert a.ulp.count == b.ulp.count and a.ulp.max == b.ulp.max and a.message == b.message


# ------------------------------------------------------------------------------------- grade
@pytest.mark.parametrize("module,expected", [
    (lambda: torch.nn.GroupNorm(2, 4), ("group_norm", {"num_groups": 2, "eps": 1e-5})),
    (lambda: torch.nn.InstanceNorm2d(4, affine=True), ("instance_norm", {"eps": 1e-5})),
    (lambda: torch.nn.BatchNorm2d(4), ("batch_norm", {"training": True, "eps": 1e-5})),
    (lambda: torch.nn.BatchNorm2d(4).eval(), ("batch_norm", {"training": False, "eps": 1e-5})),
    (lambda: torch.nn.InstanceNorm2d(4, track_running_stats=True).eval(), ("batch_norm", {"training": False,
                                                                                          "eps": 1e-5})),
])
def test_grade_recognises_the_norm_modules(module, expected):
    from numstd.grade.grading import _detected_op, _recorder

    m, x = module(), torch.randn(3, 4, 5, 5)
    rec = _recorder()
    with torch.no_grad(), rec:
        m(x)
    op, inputs, params, _ = _detected_op(rec.calls)
    assert (op, params) == expected
    assert inputs[0].shape == (3, 4, 5, 5)
    validate(op, inputs, params)


def test_grade_judges_the_groupnorm_problem_by_the_op_standard_too():
    from pathlib import Path

    from numstd.grade_cli import grade_files

    here = Path(__file__).parent / "problems" / "groupnorm"
    ok = grade_files(here / "problem.py", here / "faithful.py", dtype="float32", trials=1, shapes2=False)
    assert ok.passed and "judged by NS-GROUPNORM-FP32@1" in ok.op_note
    assert any(c.kind == "op" for c in ok.cases)
    bad = grade_files(here / "problem.py", here / "perchannel.py", dtype="float32", trials=1, shapes2=False)
    assert not bad.passed and any(c.kind == "op" and not c.verdict.passed for c in bad.cases)


@pytest.mark.parametrize("op,params", [("group_norm", {"num_groups": 4}), ("instance_norm", {}),
                                       ("batch_norm", {"training": True}), ("batch_norm", {"training": False})])
def test_corpus_legit_variants_pass_and_observable_bugs_fail(op, params):
    """Under the fp32 policy (the one-rounding standards): every legitimate variant but the
    stored16 model passes, every bug whose observable predicate holds fails."""
    from numstd.core.formats import FORMATS
    from numstd.corpus import variants_for

    for fmt in ("float32", "bfloat16"):
        out = FORMATS[fmt]
        for dist in ("normal", "offset", "smallvar"):
            inputs = _inputs(op, (16, 8, 6, 6), fmt, dist, **params)
            _, arr, full = validate(op, inputs, params)
            for v in variants_for(op):
                if v.name in ("torch-cpu", "stored16-stats") or (v.applies is not None
                                                                 and not v.applies(out, [out], full)):
                    continue
                y = v.fn(arr, full, out, FORMATS["float32"], 0)
                verdict = _check(y, op, inputs, policy="fp32", **params)
                if v.legit:
                    assert verdict.passed, (op, fmt, dist, v.name, verdict.message)
                elif v.observable is None or v.observable(arr, full, out):
                    assert not verdict.passed, (op, fmt, dist, v.name)
