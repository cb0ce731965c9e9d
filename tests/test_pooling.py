"""Pooling (max_pool{1,2,3}d, avg_pool{1,2,3}d) against independent truth.

Truth: plain Python loops over every output position with torch's documented window rules
(output size, padding, dilation, ceil_mode, count_include_pad) and exact Fraction sums on tiny
shapes; torch.nn.functional in float64 over a grid of parameters; torch's own rejections of bad
parameters; the published standards judging torch CPU bit for bit (max) and within bound (avg).
"""

from __future__ import annotations

import itertools
import math
import os
from fractions import Fraction

import numpy as np
import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from numstd.core.errors import ParameterError, ShapeError  # noqa: E402
from numstd.ops import validate  # noqa: E402
from numstd.reference import reference  # noqa: E402

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _out_len(L, k, s, p, d, ceil_mode):
    """torch's documented output size: floor/ceil((L + 2p - d(k-1) - 1)/s) + 1, the last window
    starting inside the input or its left padding."""
    num = L + 2 * p - d * (k - 1) - 1
    n = (math.ceil(num / s) if ceil_mode else num // s) + 1
    if ceil_mode and (n - 1) * s >= L + p:
        n -= 1
    return n


def _loops(kind, x, k, s, p, d, ceil_mode, count_include_pad=True):
    """Max / average pooling of ``x`` (float64, leading axes then the spatial ones) by loops."""
    nd = len(k)
    lead, spatial = x.shape[:-nd], x.shape[-nd:]
    outs = [_out_len(spatial[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(nd)]
    y = np.empty(lead + tuple(outs))
    for li in itertools.product(*(range(n) for n in lead)):
        for oi in itertools.product(*(range(n) for n in outs)):
            starts = [oi[i] * s[i] - p[i] for i in range(nd)]
            taps = [[starts[i] + j * d[i] for j in range(k[i])] for i in range(nd)]
            vals = [x[li + pos] for pos in itertools.product(*taps)
                    if all(0 <= pos[i] < spatial[i] for i in range(nd))]
            if kind == "max":
                y[li + oi] = math.nan if any(math.isnan(v) for v in vals) else max(vals)
            else:
                if count_include_pad:  # the window clipped to the padded input [-p, L + p)
                    div = math.prod(min(starts[i] + k[i], spatial[i] + p[i]) - starts[i] for i in range(nd))
                else:
                    div = len(vals)
                y[li + oi] = float(sum((Fraction(float(v)) for v in vals), Fraction(0)) / div)
    return y


GRID = [(k, s, p, dil, cm) for k in (1, 2, 3) for s in (1, 2, 3) for p in (0, 1) for dil in (1, 2)
        for cm in (False, True) if 2 * p <= k]


@pytest.mark.parametrize("d", [1, 2, 3])
def test_max_pool_reference_is_the_window_maximum(d):
    g = np.random.default_rng(d)
    shape = (2, 2) + (7, 5, 4)[:d]
    x = g.standard_normal(shape).astype(np.float32)
    x[0, 0] = -np.abs(x[0, 0])  # all-negative windows: padding must not contribute
    n = 0
    for k, s, p, dil, cm in GRID:
        if _out_len(min(shape[2:]), k, s, p, dil, cm) < 1:
            continue
        r = reference(f"max_pool{d}d", [x], kernel_size=k, stride=s, padding=p, dilation=dil, ceil_mode=cm)
        want = _loops("max", x.astype(np.float64), (k,) * d, (s,) * d, (p,) * d, (dil,) * d, cm)
        assert r.values.shape == want.shape and np.array_equal(r.values, want), (k, s, p, dil, cm)
        assert not r.error_bound.any()
        n += 1
    assert n > 40


@pytest.mark.parametrize("d", [1, 2, 3])
def test_avg_pool_reference_within_its_bound_of_exact_sums(d):
    g = np.random.default_rng(10 + d)
    shape = (2, 2) + (7, 5, 4)[:d]
    x = (g.standard_normal(shape) * 10 ** g.uniform(-3, 3, shape)).astype(np.float32)
    for (k, s, p, dil, cm), cip in itertools.product(GRID, (False, True)):
        if dil != 1 or _out_len(min(shape[2:]), k, s, p, 1, cm) < 1:
            continue
        r = reference(f"avg_pool{d}d", [x], kernel_size=k, stride=s, padding=p, ceil_mode=cm, count_include_pad=cip)
        want = _loops("avg", x.astype(np.float64), (k,) * d, (s,) * d, (p,) * d, (1,) * d, cm, cip)
        assert r.values.shape == want.shape
        # (the Fraction mean converted with float() is itself within half an ulp of the exact mean)
        assert np.all(np.abs(r.values - want) <= r.error_bound + 0.5 * np.spacing(np.abs(want))), (k, s, p, cm, cip)
        assert np.all(r.error_bound <= 1e-14 * r.aux["absmean"] + 1e-300)


def test_nan_propagates_and_infinities_are_values():
    x = np.array([[[1.0, np.nan, 3.0, -np.inf, -np.inf, 2.0]]], np.float32)
    r = reference("max_pool1d", [x], kernel_size=2)
    np.testing.assert_array_equal(r.values, [[[np.nan, 3.0, 2.0]]])
    a = reference("avg_pool1d", [x], kernel_size=2)
    np.testing.assert_array_equal(a.values, [[[np.nan, -np.inf, -np.inf]]])


@pytest.mark.parametrize("d", [1, 2, 3])
def test_references_match_torch_float64(d):
    g = np.random.default_rng(20 + d)
    shape = (2, 3) + (9, 8, 7)[:d]
    x = g.standard_normal(shape)
    tx = torch.tensor(x)
    for k, s, p, dil, cm in GRID:
        kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=cm)
        try:
            tm = getattr(F, f"max_pool{d}d")(tx, dilation=dil, **kw).numpy()
        except RuntimeError:
            with pytest.raises(ParameterError):
                validate(f"max_pool{d}d", [x.astype(np.float32)], dict(kw, dilation=dil))
            continue
        np.testing.assert_array_equal(reference(f"max_pool{d}d", [x], dilation=dil, **kw).values, tm)
        if dil == 1:
            for cip in (False, True):
                ta = getattr(F, f"avg_pool{d}d")(tx, count_include_pad=cip, **kw).numpy()
                ra = reference(f"avg_pool{d}d", [x], count_include_pad=cip, **kw).values
                np.testing.assert_allclose(ra, ta, rtol=1e-14, atol=1e-15)


def test_tuple_parameters_and_unbatched_inputs():
    g = np.random.default_rng(5)
    x = g.standard_normal((3, 9, 8))  # (C, H, W): no batch axis
    kw = dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), ceil_mode=True)
    t = F.max_pool2d(torch.tensor(x), **kw).numpy()
    np.testing.assert_array_equal(reference("max_pool2d", [x], **kw).values, t)
    _, _, full = validate("max_pool2d", [x], {"kernel_size": 3})
    assert full["stride"] == (3, 3) and full["padding"] == (0, 0) and full["dilation"] == (1, 1)


# ------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("op,params,match,torch_rejects", [
    ("max_pool2d", {"kernel_size": 3, "stride": 0}, "stride=\\(0, 0\\) is not allowed", True),
    ("avg_pool1d", {"kernel_size": 3, "stride": 0}, "stride=0 is not allowed", True),
    ("max_pool1d", {"kernel_size": 0}, "kernel_size=0 is not allowed", True),
    ("max_pool1d", {"kernel_size": 3, "padding": -1}, "padding=-1 is not allowed", True),
    ("max_pool2d", {"kernel_size": 3, "padding": 2}, "padding=2 is more than half of kernel_size=3", True),
    ("avg_pool3d", {"kernel_size": (2, 2, 3), "padding": (0, 2, 0)}, "padding=2 is more than half of kernel_size=2",
     True),
    ("max_pool1d", {"kernel_size": 3, "dilation": 0}, "dilation=0 is not allowed", True),
    ("max_pool1d", {"kernel_size": 9}, "output size of \\(0,\\)", True),
    ("avg_pool2d", {"kernel_size": 9}, "output size of \\(0, 0\\)", True),
    ("avg_pool2d", {"kernel_size": (2, 3, 4)}, "kernel_size must be an int or a tuple of 2 ints", False),
    ("avg_pool2d", {"kernel_size": 2.0}, "kernel_size must be an int", False),
    ("max_pool2d", {"kernel_size": 2, "ceil_mode": 1}, "ceil_mode must be True or False", False),
    ("avg_pool2d", {"kernel_size": 2, "dilation": 2}, "unknown parameter", False),
    ("max_pool2d", {}, "missing required parameter", False),
])
def test_bad_parameters_raise_parameter_errors_naming_them(op, params, match, torch_rejects):
    d = int(op[-2])
    x = np.ones((1, 2) + (7,) * d, np.float32)
    with pytest.raises(ParameterError, match=match):
        validate(op, [x], params)
    if torch_rejects:  # torch rejects the same call
        with pytest.raises((RuntimeError, ValueError)):
            getattr(F, op)(torch.ones(x.shape), **params)


def test_wrong_input_rank_is_a_shape_error():
    with pytest.raises(ShapeError, match="\\(N, C, \\*spatial\\) or \\(C, \\*spatial\\) with 2 spatial"):
        validate("max_pool2d", [np.ones(5, np.float32)], {"kernel_size": 2})


# --------------------------------------------------------------------- the published standards
def _case(op, shape, fmt, dist, params):
    from numstd.catalog.suites import make_case

    return make_case(op, shape, dist, 0, [fmt], params).inputs


def _torch_pool(op, x, params):
    from numstd.corpus._common import from_torch, to_torch

    return from_torch(getattr(F, op)(to_torch(x), **params))


MAXP = {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}
AVGP = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}


@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_torch_cpu_passes_and_one_wrong_element_fails(d, fmt):
    import numstd
    from numstd.core.formats import round_to

    shape = (2, 3) + (11, 10, 9)[:d]
    for kind, params, dists in (("max", MAXP, ("normal", "nonfinite", "ties")), ("avg", AVGP, ("normal", "offset"))):
        op = f"{kind}_pool{d}d"
        if op == "avg_pool3d" and fmt != "float32":  # torch 2.x CPU has no 16-bit avg_pool3d kernel
            with pytest.raises((NotImplementedError, RuntimeError)):
                _torch_pool(op, _case(op, shape, fmt, "normal", params)[0], params)
            continue
        for dist in dists:
            (x,) = _case(op, shape, fmt, dist, params)
            y = round_to(_torch_pool(op, x, params), fmt)
            v = numstd.check(y, op=op, inputs=[x], **params)
            assert v.passed, (op, dist, v.message)
        bad = np.array(y, dtype=np.float64)
        idx = (1, 2) + (0,) * d
        bad[idx] = bad[idx] * 1.1 + 0.5
        v = numstd.check(round_to(bad, fmt), op=op, inputs=[x], **params)
        assert not v.passed
        if kind == "max":  # exact: a single differing element fails, and the verdict says where
            assert "1 of " in v.message and f"[{', '.join(map(str, idx))}]" in v.message, v.message


def test_corpus_bugs_fail_where_observable_and_legit_variants_pass():
    import numstd
    from numstd.core.formats import FORMATS
    from numstd.corpus import variants_for

    for op, params, dists in (("max_pool2d", MAXP, ("normal", "offset", "nonfinite")),
                              ("avg_pool2d", AVGP, ("normal", "offset"))):
        for fmt in ("float32", "bfloat16"):
            out = FORMATS[fmt]
            for dist in dists:
                (x,) = _case(op, (2, 4, 11, 10), fmt, dist, params)
                _, arr, full = validate(op, [x], params)
                for v in variants_for(op):
                    if v.applies is not None and not v.applies(out, [out], full):
                        continue
                    y = v.fn(arr, full, out, FORMATS["float32"], 0)
                    verdict = numstd.check(y, op=op, inputs=[x], **params)
                    if v.legit:
                        assert verdict.passed, (op, fmt, dist, v.name, verdict.message)
                    elif v.observable is None or v.observable(arr, full, out):
                        assert not verdict.passed, (op, fmt, dist, v.name)


@pytest.mark.parametrize("op,params", [("max_pool2d", MAXP), ("avg_pool3d", AVGP)])
def test_verdict_does_not_depend_on_the_chunk_size(op, params):
    import numstd
    from numstd.core.formats import round_to

    d = int(op[-2])
    (x,) = _case(op, (4, 6) + (12,) * d, "float32", "normal", params)
    y = np.array(round_to(_torch_pool(op, x, params), "float32"), dtype=np.float64)
    y[(2, 3) + (1,) * d] *= 1.01
    y = round_to(y, "float32")
    a = numstd.check(y, op=op, inputs=[x], chunk_size=50, **params)
    b = numstd.check(y, op=op, inputs=[x], **params)
    assert not a.passed and not b.passed
    assert a.ulp.count == b.ulp.count and a.ulp.max == b.ulp.max and a.message == b.message


# ------------------------------------------------------------------------------------- grade
@pytest.mark.parametrize("module,x_shape,expected", [
    (lambda: torch.nn.MaxPool2d(2, 2, padding=1, dilation=3), (2, 3, 16, 16),
     ("max_pool2d", {"kernel_size": (2, 2), "stride": (2, 2), "padding": (1, 1), "dilation": (3, 3)})),
    (lambda: torch.nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 16),
     ("avg_pool1d", {"kernel_size": (3,), "stride": (2,), "padding": (1,), "ceil_mode": True,
                     "count_include_pad": False})),
    (lambda: torch.nn.AvgPool3d(2), (1, 2, 4, 4, 4), ("avg_pool3d", {"kernel_size": (2, 2, 2)})),
    (lambda: torch.nn.MaxPool1d(4), (2, 3, 16), ("max_pool1d", {"kernel_size": (4,), "stride": (4,)})),
])
def test_grade_recognises_the_pooling_modules(module, x_shape, expected):
    from numstd.grade.grading import _detected_op, _recorder

    m, x = module(), torch.randn(*x_shape)
    rec = _recorder()
    with torch.no_grad(), rec:
        m(x)
    op, inputs, params, _ = _detected_op(rec.calls)
    _, _, full = validate(op, inputs, params)
    assert op == expected[0]
    assert {k: full[k] for k in expected[1]} == expected[1]


def test_grade_ignores_pooling_with_indices():
    from numstd.grade.grading import _detected_op, _recorder

    m, x = torch.nn.MaxPool2d(2, return_indices=True), torch.randn(1, 1, 4, 4)
    rec = _recorder()
    with torch.no_grad(), rec:
        m(x)
    assert _detected_op(rec.calls) is None


def test_grade_judges_the_maxpool_problem_by_the_op_standard_too():
    from pathlib import Path

    from numstd.grade_cli import grade_files

    here = Path(__file__).parent / "problems" / "maxpool2d"
    ok = grade_files(here / "problem.py", here / "faithful.py", dtype="bfloat16", trials=1, shapes2=False)
    assert ok.passed and "judged by NS-MAXPOOL2D-BF16@1" in ok.op_note
    bad = grade_files(here / "problem.py", here / "zeropad.py", dtype="bfloat16", trials=1, shapes2=False)
    assert not bad.passed and any(c.kind == "op" and not c.verdict.passed for c in bad.cases)
