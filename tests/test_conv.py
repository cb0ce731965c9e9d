"""The ``conv`` op: reference against independent truth, parameter and shape errors, chunking, standards.

Truth: a direct loop over the output and the kernel with exact rational sums (``fractions``) on
tiny shapes, and ``torch.nn.functional.conv{1,2,3}d`` in float64 on larger ones.  torch is also the
truth for which parameters are rejected.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from numstd.core.errors import ParameterError, ShapeError
from numstd.ops import validate
from numstd.ops.catalog import output_shape
from numstd.reference import reference

torch = pytest.importorskip("torch")
F = torch.nn.functional


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _torch_conv(x, w, b, **p):
    fn = (F.conv1d, F.conv2d, F.conv3d)[x.ndim - 3]
    t = lambda a: None if a is None else torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    return fn(t(x), t(w), t(b), **p).numpy()


def _exact_conv(x, w, b, stride, padding, dilation, groups):
    """Direct loops, exact rational sums (independent of im2col and of numstd.ops.conv)."""
    nd = x.ndim - 2
    per = lambda v: (v,) * nd if isinstance(v, int) else tuple(v)  # noqa: E731
    s, d, pad = per(stride), per(dilation), per(padding)
    N, C = x.shape[:2]
    O, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = tuple((n + 2 * p - dd * (k - 1) - 1) // ss + 1 for n, p, dd, k, ss in zip(x.shape[2:], pad, d, ks, s))
    y = np.empty((N, O) + outs, dtype=object)
    og = O // groups
    for n, o in itertools.product(range(N), range(O)):
        grp = o // og
        for pos in itertools.product(*(range(m) for m in outs)):
            acc = Fraction(0) if b is None else Fraction(float(b[o]))
            for c in range(cg):
                for j in itertools.product(*(range(k) for k in ks)):
                    idx = [pos[i] * s[i] + j[i] * d[i] - pad[i] for i in range(nd)]
                    if all(0 <= idx[i] < x.shape[2 + i] for i in range(nd)):
                        acc += Fraction(float(x[(n, grp * cg + c) + tuple(idx)])) * Fraction(float(w[(o, c) + j]))
            y[(n, o) + pos] = acc
    return y


def _assert_within_bound(r, exact):
    err = np.vectorize(lambda v, e: abs(Fraction(float(v)) - e))(r.values, exact)
    assert np.all(err <= np.vectorize(Fraction)(r.error_bound)), "reference outside its bound"


EXACT_CASES = [
    ((2, 4, 7), (6, 2, 3), dict(stride=2, padding=1, dilation=1, groups=2)),
    ((1, 3, 5, 6), (2, 3, 2, 3), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=1)),
    ((1, 2, 3, 4, 3), (2, 1, 2, 2, 1), dict(stride=1, padding=1, dilation=1, groups=2)),
    ((2, 3, 6, 5), (3, 1, 3, 3), dict(stride=1, padding=2, dilation=2, groups=3)),  # depthwise
]


@pytest.mark.parametrize("xs, ws, p", EXACT_CASES)
def test_reference_within_its_bound_of_the_exact_sum(xs, ws, p):
    g = rng(1)
    x = g.standard_normal(xs).astype(np.float32)
    w = g.standard_normal(ws).astype(np.float32)
    b = g.standard_normal(ws[0]).astype(np.float32)
    r = reference("conv", [x, w, b], **p)
    exact = _exact_conv(x, w, b, **p)
    assert r.values.shape == exact.shape
    _assert_within_bound(r, exact)
    K = ws[1] * math.prod(ws[2:])
    assert float(r.aux["K"]) == K


def test_cancellation_is_resolved_exactly():
    # a window whose products cancel to a tiny result: the float64 GEMM alone is not enough
    x = np.array([[[1.0, 2.0**-30, -1.0, 3.0]]], dtype=np.float32)
    w = np.array([[[1.0, 1.0, 1.0]]], dtype=np.float32)
    r = reference("conv", [x, w])
    exact = _exact_conv(x, w, None, 1, 0, 1, 1)
    _assert_within_bound(r, exact)
    assert r.values[0, 0, 0] == 2.0**-30


SHAPES = [
    ((3, 8, 40), (16, 8, 5), dict(stride=3, padding=2, dilation=2, groups=1)),
    ((2, 12, 11, 13), (8, 3, 3, 3), dict(stride=(2, 1), padding=(1, 2), dilation=1, groups=4)),
    ((2, 16, 9, 9), (16, 1, 3, 3), dict(stride=1, padding="same", dilation=2, groups=16)),
    ((2, 32, 6, 6), (8, 32, 1, 1), dict(stride=1, padding="valid", dilation=1, groups=1)),
    ((1, 4, 5, 6, 7), (6, 2, 3, 2, 3), dict(stride=(1, 2, 1), padding=1, dilation=(1, 1, 2), groups=2)),
]


@pytest.mark.parametrize("xs, ws, p", SHAPES)
def test_reference_matches_torch_float64(xs, ws, p):
    g = rng(2)
    x = g.standard_normal(xs).astype(np.float32)
    w = g.standard_normal(ws).astype(np.float32)
    b = g.standard_normal(ws[0]).astype(np.float32)
    r = reference("conv", [x, w, b], **p)
    t = _torch_conv(x, w, b, **p)
    assert r.values.shape == t.shape
    K = ws[1] * math.prod(ws[2:]) + 1
    # torch's float64 sum is within gamma_K |cols||w| of the exact one (Higham eq. 3.5)
    assert np.all(np.abs(r.values - t) <= r.error_bound + 1.01 * K * 2.0**-53 * r.aux["absdot"])
    assert output_shape("conv", [x, w, b], p) == t.shape


def test_bf16_and_no_bias():
    import ml_dtypes

    g = rng(3)
    x = g.standard_normal((2, 4, 10)).astype(ml_dtypes.bfloat16)
    w = g.standard_normal((4, 4, 3)).astype(ml_dtypes.bfloat16)
    r = reference("conv", [x, w], padding=1)
    t = _torch_conv(x.astype(np.float32), w.astype(np.float32), None, padding=1)
    np.testing.assert_allclose(r.values, t, rtol=0, atol=1e-12)


def _torch_rejects(x, w, **p) -> bool:
    try:
        _torch_conv(x, w, None, **p)
    except (RuntimeError, ValueError, TypeError):
        return True
    return False


BAD = [
    (dict(padding=-1), "padding"),
    (dict(padding=(1, -2)), "padding"),
    (dict(stride=0), "stride"),
    (dict(stride=(1, 0)), "stride"),
    (dict(dilation=0), "dilation"),
    (dict(groups=3), "groups"),  # C_in = 4
    (dict(groups=0), "groups"),
    (dict(padding="same", stride=2), "padding"),
    (dict(padding="full"), "padding"),
    (dict(stride=(1, 1, 1)), "stride"),
]


@pytest.mark.parametrize("p, name", BAD)
def test_bad_parameters_raise_parameter_error_naming_them(p, name):
    g = rng(4)
    x = g.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = g.standard_normal((6, 4 // p.get("groups", 1) if p.get("groups", 1) in (1, 2, 4) else 1, 3, 3)
                          ).astype(np.float32)
    assert _torch_rejects(x, w, **p)
    with pytest.raises(ParameterError) as e:
        validate("conv", [x, w], p)
    msg = str(e.value)
    assert name in msg and ("allowed" in msg or "must" in msg or "needs" in msg or "use" in msg), msg


def test_output_size_below_one_is_a_parameter_error():
    x = np.zeros((1, 2, 4), np.float32)
    w = np.zeros((3, 2, 3), np.float32)
    for p in (dict(dilation=2), dict(padding=0, dilation=3)):
        assert _torch_rejects(x, w, **p)
        with pytest.raises(ParameterError, match="output would have size"):
            validate("conv", [x, w], p)
    validate("conv", [x, w], dict(dilation=2, padding=1))  # 4 + 2 >= 5: allowed


def test_groups_must_divide_out_channels():
    x = np.zeros((1, 4, 5), np.float32)
    w = np.zeros((3, 2, 3), np.float32)  # C_out = 3, groups = 2
    assert _torch_rejects(x, w, groups=2)
    with pytest.raises(ParameterError, match="groups"):
        validate("conv", [x, w], dict(groups=2))


@pytest.mark.parametrize("xs, ws, bs", [((4, 5), (3, 4, 3), None), ((1, 4, 5), (3, 4, 3, 3), None),
                                         ((1, 4, 5), (3, 2, 3), None), ((1, 4, 5), (3, 4, 3), (4,))])
def test_shape_errors(xs, ws, bs):
    arrs = [np.zeros(xs, np.float32), np.zeros(ws, np.float32)] + ([np.zeros(bs, np.float32)] if bs else [])
    with pytest.raises(ShapeError):
        validate("conv", arrs, {})


def test_parameters_normalise_and_same_padding_matches_torch():
    x = rng(5).standard_normal((1, 2, 7, 6)).astype(np.float32)
    w = rng(6).standard_normal((2, 2, 4, 3)).astype(np.float32)
    _, _, full = validate("conv", [x, w], dict(stride=[1, 1], padding="same", dilation=(1, 2)))
    assert full == {"stride": (1, 1), "padding": "same", "dilation": (1, 2), "groups": 1}
    r = reference("conv", [x, w], **full)
    np.testing.assert_allclose(r.values, _torch_conv(x, w, None, padding="same", dilation=(1, 2)), atol=1e-12)


def test_reference_does_not_depend_on_the_batch_chunking():
    g = rng(7)
    x = g.standard_normal((7, 6, 12, 12)).astype(np.float32)
    w = g.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = g.standard_normal(8).astype(np.float32)
    p = dict(stride=1, padding=1, dilation=1, groups=2)
    whole = reference("conv", [x, w, b], **p)
    P = 144
    for size in (1, 2, 3):
        for s in range(0, 7, size):
            part = reference("conv", [x[s:s + size], w, b], row_offset=s * P, **p)
            np.testing.assert_array_equal(part.values, whole.values[s:s + size])
            np.testing.assert_array_equal(part.error_bound, whole.error_bound[s:s + size])
            np.testing.assert_array_equal(part.aux["absdot"], whole.aux["absdot"][s:s + size])


def test_verdicts_do_not_depend_on_the_chunk_size():
    from numstd import check

    g = rng(8)
    x = g.standard_normal((6, 8, 10, 10)).astype(np.float32)
    w = (g.standard_normal((8, 8, 3, 3)) / 8).astype(np.float32)
    b = g.standard_normal(8).astype(np.float32)
    y = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1).numpy()
    bad = y.copy()
    bad[3, 2, 4, 4] *= 1.0 + 2.0**-10
    for out, ok in ((y, True), (bad, False)):
        vs = [check(out, op="conv", inputs=[x, w, b], padding=1, chunk_size=c) for c in (100, 800, 1 << 19)]
        assert [v.passed for v in vs] == [ok] * 3
        assert len({v.normalized_max for v in vs}) == 1
        assert len({tuple(o.index for o in v.worst) for v in vs}) == 1


def test_suite_case_encoding():
    from numstd.catalog.suites import make_case

    c = make_case("conv", [2, 16, 32, 4, 2, 1, 3, 3, 3, 10, 11], "normal", 0, ["float32"])
    assert c.params == {"groups": 4, "stride": 2, "padding": 1, "dilation": 3}
    assert [a.shape for a in c.inputs] == [(2, 16, 10, 11), (32, 4, 3, 3), (32,)]
    assert output_shape("conv", c.inputs, c.params) == (2, 32, 3, 4)


@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "float16"])
def test_published_standards_pass_torch_and_fail_bugs(fmt):
    from numstd import check
    from numstd.catalog.suites import make_case
    from numstd.corpus import variants_for

    c = make_case("conv", [2, 16, 16, 2, 2, 1, 1, 3, 3, 12, 12], "normal", 3, [fmt])
    by = {v.name: v for v in variants_for("conv")}
    y = by["torch-cpu"](c.inputs, c.params, out=fmt)
    std = {"float32": "NS-CONV-FP32", "bfloat16": "NS-CONV-BF16", "float16": "NS-CONV-FP16"}[fmt]
    v = check(y, op="conv", inputs=c.inputs, standard=std, **c.params)
    assert v.passed, v
    for bug in ("flipped-kernel", "window-shift", "stride-off-by-one", "groups-ignored", "missing-bias",
                "acc-bf16" if fmt != "bfloat16" else "acc-output-format"):
        yb = by[bug](c.inputs, c.params, out=fmt)
        assert not check(yb, op="conv", inputs=c.inputs, standard=std, **c.params).passed, bug


@pytest.mark.parametrize("name", ["numpy", "torch:cpu", "jax:cpu"])
def test_backends_compute_conv(name):
    from numstd.backends import get

    be = get(name)
    if not be.available()[0]:
        pytest.skip(be.available()[1])
    g = rng(9)
    x = g.standard_normal((2, 6, 9, 8)).astype(np.float32)
    w = g.standard_normal((4, 3, 3, 2)).astype(np.float32)
    b = g.standard_normal(4).astype(np.float32)
    p = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    y = np.asarray(be.run("conv", [x, w, b], **p), dtype=np.float64)
    t = _torch_conv(x, w, b, **p)
    assert y.shape == t.shape
    np.testing.assert_allclose(y, t, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.Conv1d(6, 4, 3, stride=2, padding=1), (2, 6, 20)),
    (lambda: torch.nn.Conv2d(4, 8, 3, padding="same", dilation=2, groups=2), (2, 4, 9, 9)),
    (lambda: torch.nn.Conv3d(2, 4, 2, bias=False), (1, 2, 5, 5, 5)),
])
def test_grade_judges_conv_modules_by_the_op_standard(make, shape):
    from numstd import grade

    torch.manual_seed(0)
    ref = make()
    r = grade(ref, ref, lambda: [torch.randn(*shape)], trials=1, dtype="float32")
    ops = {c.verdict.standard_id for c in r.cases if c.kind == "op"}
    assert r.passed and ops == {"NS-CONV-FP32@2"}, r.message


class _Functional(torch.nn.Module):
    """A forward that is one F.conv2d call (flip: the kernel flipped first, a true convolution)."""

    def __init__(self, flip: bool = False) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3, 3, 3))
        self.flip = flip

    def forward(self, x):
        w = torch.flip(self.weight, dims=(2, 3)) if self.flip else self.weight
        return F.conv2d(x, w, None, 1, 1)


def test_grade_recognises_functional_conv2d_and_fails_a_flipped_kernel():
    from numstd import grade

    torch.manual_seed(1)
    ref = _Functional()
    r = grade(ref, ref, lambda: [torch.randn(2, 3, 8, 8)], trials=1, dtype="float32")
    assert r.passed and {c.verdict.standard_id for c in r.cases if c.kind == "op"} == {"NS-CONV-FP32@2"}
    r = grade(ref, _Functional(flip=True), lambda: [torch.randn(2, 3, 8, 8)], trials=1, dtype="float32")
    assert not r.passed
    assert any(c.kind == "op" and c.verdict.standard_id == "NS-CONV-FP32@2" and not c.verdict.passed for c in r.cases)


# ------------------------------------------------------------------------------------------
# conv_transpose
# ------------------------------------------------------------------------------------------


def _torch_conv_transpose(x, w, b, **p):
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[x.ndim - 3]
    t = lambda a: None if a is None else torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    return fn(t(x), t(w), t(b), **p).numpy()


def _exact_conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation):
    """Scatter form with exact rational sums: every input element adds x·w to the outputs it reaches
    (the definition of the adjoint; independent of the zero-dilation in numstd.ops.conv)."""
    nd = x.ndim - 2
    per = lambda v: (v,) * nd if isinstance(v, int) else tuple(v)  # noqa: E731
    s, p, op_, d = per(stride), per(padding), per(output_padding), per(dilation)
    N, C = x.shape[:2]
    co = w.shape[1]
    ks = w.shape[2:]
    outs = tuple((n - 1) * ss - 2 * pp + dd * (k - 1) + o + 1 for n, ss, pp, dd, k, o in zip(x.shape[2:], s, p, d, ks, op_))
    y = np.empty((N, co * groups) + outs, dtype=object)
    for idx in np.ndindex(*y.shape):
        y[idx] = Fraction(0) if b is None else Fraction(float(b[idx[1]]))
    ci = C // groups
    for n, c in itertools.product(range(N), range(C)):
        grp = c // ci
        for pos in itertools.product(*(range(m) for m in x.shape[2:])):
            for o in range(co):
                for j in itertools.product(*(range(k) for k in ks)):
                    q = tuple(pos[i] * s[i] - p[i] + j[i] * d[i] for i in range(nd))
                    if all(0 <= q[i] < outs[i] for i in range(nd)):
                        y[(n, grp * co + o) + q] += Fraction(float(x[(n, c) + pos])) * Fraction(float(w[(c, o) + j]))
    return y


TRANSPOSE_CASES = [
    ((2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=1, dilation=1)),
    ((1, 4, 3, 4), (4, 1, 2, 3), dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 0), groups=2,
                                      dilation=(1, 2))),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 2), dict(stride=2, padding=0, output_padding=0, groups=1, dilation=1)),
]


@pytest.mark.parametrize("xs, ws, p", TRANSPOSE_CASES)
def test_conv_transpose_reference_within_its_bound_of_the_exact_sum(xs, ws, p):
    g = rng(11)
    x = g.standard_normal(xs).astype(np.float32)
    w = g.standard_normal(ws).astype(np.float32)
    b = g.standard_normal(ws[1] * p["groups"]).astype(np.float32)
    r = reference("conv_transpose", [x, w, b], **p)
    exact = _exact_conv_transpose(x, w, b, **p)
    assert r.values.shape == exact.shape
    _assert_within_bound(r, exact)
    np.testing.assert_allclose(r.values, _torch_conv_transpose(x, w, b, **p), rtol=0, atol=1e-12)


def test_conv_transpose_K_counts_the_nonzero_products():
    x = np.ones((1, 3, 6), np.float32)
    w = np.ones((3, 2, 5), np.float32)
    for p, K in ((dict(stride=2), 3 * 3), (dict(stride=1), 3 * 5), (dict(stride=4, dilation=2), 3 * 3),
                 (dict(stride=3), 3 * 2)):
        r = reference("conv_transpose", [x, w], **p)
        assert float(r.aux["K"]) == K
        # all-ones inputs: the largest output is the number of products reaching it
        assert float(r.values.max()) == K


@pytest.mark.parametrize("p, name", [(dict(output_padding=2, stride=2), "output_padding"),
                                     (dict(padding=-1), "padding"), (dict(stride=0), "stride"),
                                     (dict(groups=3), "groups"), (dict(padding=5), "output would have size"),
                                     (dict(dilation=0), "dilation")])
def test_conv_transpose_bad_parameters(p, name):
    x = np.zeros((1, 4, 5, 5), np.float32)
    w = np.zeros((4, 2, 3, 3), np.float32)
    with pytest.raises((RuntimeError, ValueError)):
        _torch_conv_transpose(x, w, None, **p)
    with pytest.raises(ParameterError, match=name):
        validate("conv_transpose", [x, w], p)


def test_conv_transpose_does_not_depend_on_the_batch_chunking():
    from numstd import check

    g = rng(12)
    x = g.standard_normal((5, 6, 7, 7)).astype(np.float32)
    w = (g.standard_normal((6, 4, 3, 3)) / 6).astype(np.float32)
    b = g.standard_normal(8).astype(np.float32)
    p = dict(stride=2, padding=1, output_padding=1, groups=2)
    y = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **p).numpy()
    whole = reference("conv_transpose", [x, w, b], **p)
    P = 14 * 14
    for s in range(5):
        part = reference("conv_transpose", [x[s:s + 1], w, b], row_offset=s * P, **p)
        np.testing.assert_array_equal(part.values, whole.values[s:s + 1])
        np.testing.assert_array_equal(part.error_bound, whole.error_bound[s:s + 1])
    vs = [check(y, op="conv_transpose", inputs=[x, w, b], chunk_size=c, **p) for c in (50, 3000, 1 << 19)]
    assert all(v.passed for v in vs) and len({v.normalized_max for v in vs}) == 1


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
def test_conv_transpose_standards_pass_torch_and_fail_bugs(fmt):
    from numstd import check
    from numstd.catalog.suites import make_case
    from numstd.corpus import variants_for

    c = make_case("conv_transpose", [2, 8, 8, 2, 2, 1, 1, 1, 3, 3, 6, 6], "normal", 4, [fmt])
    by = {v.name: v for v in variants_for("conv_transpose")}
    std = {"float32": "NS-CONVTRANSPOSE-FP32", "bfloat16": "NS-CONVTRANSPOSE-BF16"}[fmt]
    from numstd.corpus.conv import torch_conv_transpose_col2im16

    col2im16 = fmt == "bfloat16" and torch_conv_transpose_col2im16(fmt)  # (no oneDNN bf16 on this CPU)
    for legit in ("col2im-fp32", "im2col-blocked32") + (() if col2im16 else ("torch-cpu",)):
        y = by[legit](c.inputs, c.params, out=fmt)
        assert check(y, op="conv_transpose", inputs=c.inputs, standard=std, **c.params).passed, legit
    if col2im16:  # bf16 scatter-adds fail the fp32-accumulation standard and pass the default (stored16)
        y = by["torch-cpu-col2im16"](c.inputs, c.params, out=fmt)
        assert not check(y, op="conv_transpose", inputs=c.inputs, standard=std, **c.params).passed
        assert check(y, op="conv_transpose", inputs=c.inputs, **c.params).passed
    for bug in ("flipped-kernel", "window-shift", "groups-ignored", "missing-bias", "zeros"):
        yb = by[bug](c.inputs, c.params, out=fmt)
        assert not check(yb, op="conv_transpose", inputs=c.inputs, standard=std, **c.params).passed, bug


def test_torch_cpu_fp16_conv_transpose_is_a_float16_col2im():
    """Why torch CPU fails the fp32-policy NS-CONVTRANSPOSE-FP16 where oneDNN has no fp16 kernel (and
    passes the default NS-CONVTRANSPOSE-FP16-STORED16, docs/methodology.md §12): its fp16
    conv_transpose2d equals, bit for bit, per-tap channel sums rounded to fp16 and scatter-added in
    fp16 (col2im in the storage format), then the bias added in fp16."""
    from numstd.corpus.conv import torch_conv_transpose_col2im16

    if not torch_conv_transpose_col2im16("float16"):
        pytest.skip("this CPU has oneDNN fp16 kernels: torch's fp16 conv_transpose accumulates in fp32 here")
    g = rng(13)
    x = g.standard_normal((2, 8, 5, 5)).astype(np.float16)
    w = (g.standard_normal((8, 4, 3, 3)) / 5).astype(np.float16)
    b = g.standard_normal(4).astype(np.float16)
    yt = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=2, padding=1,
                            output_padding=1).numpy()
    y = np.zeros((2, 4, 12, 12), np.float16)
    for i, j in itertools.product(range(3), range(3)):
        part = np.einsum("nchw,co->nohw", x.astype(np.float32), w[:, :, i, j].astype(np.float32)).astype(np.float16)
        y[:, :, i:i + 9:2, j:j + 9:2] += part
    model = y[:, :, 1:11, 1:11] + b[None, :, None, None]
    np.testing.assert_array_equal(yt, model)


@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1), (2, 4, 9)),
    (lambda: torch.nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1, groups=2), (2, 4, 5, 5)),
    (lambda: torch.nn.ConvTranspose3d(2, 2, 2, stride=2, bias=False), (1, 2, 3, 3, 3)),
])
def test_grade_judges_conv_transpose_modules_by_the_op_standard(make, shape):
    from numstd import grade

    torch.manual_seed(2)
    ref = make()
    r = grade(ref, ref, lambda: [torch.randn(*shape)], trials=1, dtype="float32")
    assert r.passed and {c.verdict.standard_id for c in r.cases if c.kind == "op"} == {"NS-CONVTRANSPOSE-FP32@2"}
