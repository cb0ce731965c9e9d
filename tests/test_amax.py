"""The exact reductions amax and amin (numstd.ops.reduction, numstd.reference.exact, numstd.corpus.extrema).

Truth here is independent of numstd's reference: Python's ``max``/``min`` on the float values of
each row, with NaN handled explicitly (a row holding a NaN has the extremum NaN), on every bfloat16
bit pattern (each one in a row with random partners, in both orders) and on large samples of fp32
and fp16 rows with specials; torch's own amax/amin judged by the published standards; planted bugs
written here (not the corpus's) failing them.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core.errors import ParameterError, ShapeError
from numstd.ops import output_shape, validate
from numstd.reference import reference

OPS = ("amax", "amin")
FORMATS = ("float32", "bfloat16", "float16")
_DT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def _truth(rows: np.ndarray, op: str) -> np.ndarray:
    """Python's max/min of each row's float values; NaN when the row holds a NaN."""
    pick = max if op == "amax" else min
    out = []
    with np.errstate(invalid="ignore"):  # (bfloat16 NaN patterns widen with a warning)
        values = np.asarray(rows, dtype=np.float64).tolist()
    for row in values:
        out.append(math.nan if any(math.isnan(v) for v in row) else pick(row))
    return np.array(out)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal values, NaN equal to NaN (the sign of a zero is not compared: it is not judged)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return got.shape == want.shape and bool(((got == want) | (np.isnan(got) & np.isnan(want))).all())


def _all_bf16_rows(width: int = 8, seed: int = 0) -> np.ndarray:
    """Every bfloat16 bit pattern, each in a row of ``width`` with random patterns (column 0, and the
    same rows reversed so that each pattern is also compared last)."""
    g = np.random.default_rng(seed)
    bits = np.empty((1 << 16, width), dtype=np.uint16)
    bits[:, 0] = np.arange(1 << 16, dtype=np.uint16)
    bits[:, 1:] = g.integers(0, 1 << 16, (1 << 16, width - 1), dtype=np.uint16)
    both = np.concatenate([bits, bits[:, ::-1]])
    return both.view(ml_dtypes.bfloat16)


def _rows(fmt: str, n: int = 4000, k: int = 33, seed: int = 1, rate: float = 0.05) -> np.ndarray:
    """Rows of mixed sign and scale with ties, zeros of both signs, infinities and NaN."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, k)) * 10.0 ** g.uniform(-3, 3, (n, 1))
    x[: n // 4] = -np.abs(x[: n // 4])  # all-negative rows
    x[n // 4: n // 2] = np.abs(x[n // 4: n // 2])  # all-positive rows
    pick = g.random((n, k))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
    x = np.where(pick < rate, specials[g.integers(0, specials.size, (n, k))], x)
    lim = float(np.finfo(np.float16).max) if fmt == "float16" else 3e38
    x = np.where(np.isinf(x), x, np.clip(x, -lim, lim))
    return x.astype(_DT[fmt])


# ------------------------------------------------------------------------------ the reference
@pytest.mark.parametrize("op", OPS)
def test_reference_is_python_max_on_every_bfloat16_pattern(op):
    x = _all_bf16_rows()
    r = reference(op, [x], axis=-1)
    assert _same(r.values, _truth(x, op))
    assert not np.any(r.error_bound)  # exact: bound 0


@pytest.mark.parametrize("fmt", ("float32", "float16"))
@pytest.mark.parametrize("op", OPS)
def test_reference_is_python_max_on_sampled_rows(op, fmt):
    x = _rows(fmt)
    assert _same(reference(op, [x], axis=1).values, _truth(x, op))
    assert _same(reference(op, [x], axis=0).values, _truth(x.T, op))
    assert _same(reference(op, [x], axis=None).values, _truth(x.reshape(1, -1), op)[0])


def test_nan_propagates_and_infinities_are_values():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, np.nan, 1.0], [-np.inf, -np.inf, -np.inf],
                  [np.inf, 2.0, -np.inf], [np.nan, np.nan, np.nan]], dtype=np.float32)
    mx = reference("amax", [x], axis=1).values
    mn = reference("amin", [x], axis=1).values
    assert np.isnan(mx[[0, 1, 4]]).all() and np.isnan(mn[[0, 1, 4]]).all()
    assert mx[2] == -np.inf and mn[2] == -np.inf and mx[3] == np.inf and mn[3] == -np.inf


def test_signed_zeros_reference_is_ieee_2019_and_the_sign_is_not_judged():
    # decision (numstd.ops.reduction): the reference is IEEE 754-2019 maximum/minimum (-0 < +0);
    # the standards compare no zero signs, since torch, numpy and jax return different zeros
    x = np.array([[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0], [0.0, 0.0], [-1.0, -0.0]], dtype=np.float32)
    mx = reference("amax", [x], axis=1).values
    mn = reference("amin", [x], axis=1).values
    assert list(np.signbit(mx)) == [False, False, True, False, True]
    assert list(np.signbit(mn)) == [True, True, True, False, True]  # (the last: -1)
    for op, r in (("amax", mx), ("amin", mn)):
        flipped = np.where(r == 0, np.copysign(0.0, -np.copysign(1.0, r)), r).astype(np.float32)
        assert np.signbit(flipped[0]) != np.signbit(r[0])
        v = numstd.check(flipped, op=op, inputs=[x], axis=1)
        assert v.passed, v.message


# --------------------------------------------------------------------------- shapes, parameters
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2, (0, 2), (2, 0), (0, 1, 2), (-1, 0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_output_shapes_are_numpys(axis, keepdims):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    want = np.max(x, axis=axis, keepdims=keepdims)
    for op in OPS:
        p = {"axis": axis, "keepdims": keepdims}
        assert output_shape(op, [x], p) == want.shape
        assert _same(reference(op, [x], **p).values, (np.max if op == "amax" else np.min)(x, **p))


def test_defaults_reduce_every_axis_and_a_scalar_is_its_own_maximum():
    x = np.array([[1.0, -2.0], [5.0, 3.0]], dtype=np.float32)
    assert float(reference("amax", [x]).values) == 5.0 and float(reference("amin", [x]).values) == -2.0
    assert float(reference("amax", [np.float32(7.0)]).values) == 7.0
    assert validate("amax", [x])[2] == {"axis": None, "keepdims": False}
    assert validate("amin", [x], {"axis": [1, 0]})[2]["axis"] == (0, 1)


@pytest.mark.parametrize("params,match", [
    ({"axis": 2}, r"axis 2 is out of range .* use an axis in \[-2, 1\]"),
    ({"axis": (0, 0)}, "names an axis twice; list each axis once"),
    ({"axis": 1.5}, "axis must be an int"),
    ({"keepdims": "yes"}, "keepdims must be True or False"),
    ({"dim": 1}, "numpy's name 'axis'"),
    ({"keepdim": True}, "numpy's name 'keepdims'"),
])
def test_parameter_errors_name_the_fix(params, match):
    for op in OPS:
        with pytest.raises(ParameterError, match=match):
            validate(op, [np.zeros((2, 3), np.float32)], params)


def test_empty_reduced_axes_are_a_shape_error():
    x = np.zeros((0, 3), np.float32)
    assert output_shape("amax", [x], {"axis": 1}) == (0,)  # no reduced slice is empty
    for op, what in (("amax", "maximum"), ("amin", "minimum")):
        with pytest.raises(ShapeError, match=f"the {what} of nothing is undefined"):
            validate(op, [x], {"axis": 0})


def test_integer_inputs_are_a_dtype_error():
    with pytest.raises(numstd.DtypeError, match="astype"):
        validate("amax", [np.arange(4)], {})


# ------------------------------------------------------------------------ published standards
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", OPS)
def test_exact_result_passes_and_one_ulp_fails(op, fmt):
    x = _rows(fmt, n=512, k=64, seed=3)
    want = np.asarray(reference(op, [x], axis=-1).values).astype(_DT[fmt])
    v = numstd.check(want, op=op, inputs=[x], axis=-1)
    assert v.passed, v.message
    assert v.standard_id == f"NS-{op.upper()}-{ {'float32': 'FP32', 'bfloat16': 'BF16', 'float16': 'FP16'}[fmt]}@1"
    bad = want.copy()
    f = np.asarray(want, dtype=np.float64)
    i = int(np.flatnonzero(np.isfinite(f) & (np.abs(f) > 0.5))[0])
    bits = bad.view(np.uint16 if bad.dtype.itemsize == 2 else np.uint32)
    bits[i] += 1
    v = numstd.check(bad, op=op, inputs=[x], axis=-1)
    assert not v.passed
    assert str(i) in v.message or any(o.index == (i,) for o in getattr(v, "offenders", ())), v.message


def _bugs(op: str) -> dict:
    """Planted bugs, written here: each returns row results of ``t`` (float64 rows x K)."""
    big = np.max if op == "amax" else np.min
    nan_big = np.nanmax if op == "amax" else np.nanmin
    init = np.maximum if op == "amax" else np.minimum

    def wrong_axis(t):
        r, k = t.shape
        return big(t.reshape(k, r), axis=0)

    def bf16(t):
        return big(t, axis=1).astype(ml_dtypes.bfloat16).astype(np.float64)

    return {
        "init-zero": lambda t: init(big(t, axis=1), 0.0),
        "nan-ignored": lambda t: nan_big(t, axis=1),
        "wrong-axis": wrong_axis,
        "abs": lambda t: big(np.abs(t), axis=1),
        "bf16-rounded": bf16,
        "zeros": lambda t: np.zeros(t.shape[0]),
    }


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", OPS)
def test_planted_bugs_fail(op, fmt):
    x = _rows(fmt, n=256, k=256, seed=7, rate=0.002)
    t = np.asarray(x, dtype=np.float64)
    for name, fn in _bugs(op).items():
        if name == "bf16-rounded" and fmt == "bfloat16":
            continue  # rounding a bf16 result to bf16 changes nothing
        with np.errstate(all="ignore"):
            y = fn(t).astype(_DT[fmt])
        assert not _same(y, _truth(x, op)), name  # the bug shows on these rows
        v = numstd.check(y, op=op, inputs=[x], axis=-1)
        assert not v.passed, f"{name}: {v.message}"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", OPS)
def test_corpus_bugs_fail_where_observable_and_legit_variants_pass(op, fmt):
    from numstd.catalog.registry import find_standard
    from numstd.catalog.suites import cases_for
    from numstd.corpus import variants_for
    from numstd.core.formats import get_format

    std = find_standard(op, inputs=[fmt], output=fmt)
    out = get_format(fmt)
    caught: dict = {}
    for case in cases_for(std, seeds=[9]):
        _, arr, full = validate(op, case.inputs, case.params)
        for v in variants_for(op):
            if v.name == "torch-cpu" or not v.applicable(arr, full, out):
                continue
            y = v.fn(arr, full, out, get_format("float32"), 0)
            passed = numstd.check(y, op=op, inputs=arr, standard=std.key, **case.params).passed
            if v.legit:
                assert passed, f"{v.name} on {case.id}"
            else:
                assert not passed, f"{v.name} on {case.id}"
                caught[v.name] = True
    bugs = {v.name for v in variants_for(op, legit=False) if v.applies is None or v.applies(out, [out], {})}
    assert set(caught) == bugs


def test_verdict_does_not_depend_on_the_chunk_size():
    x = _rows("float32", n=300, k=50, seed=4)
    y = np.asarray(reference("amax", [x], axis=0).values).astype(np.float32)
    y[3] = 0.0
    a = numstd.check(y, op="amax", inputs=[x], axis=0)
    b = numstd.check(y, op="amax", inputs=[x], axis=0, chunk_size=7)
    assert not a.passed and a.to_dict()["criteria"] == b.to_dict()["criteria"]


def test_numpy_backend_passes():
    from numstd import backends as B

    be = B.get("numpy")
    for fmt in FORMATS:
        x = _rows(fmt, n=64, k=300, seed=2)
        for op in OPS:
            for p in ({"axis": -1}, {"axis": (0, 1), "keepdims": True}, {"axis": 0}):
                v = numstd.check(be.run(op, [x], **p), op=op, inputs=[x], **p)
                assert v.passed, (op, fmt, p, v.message)


# ----------------------------------------------------------------------------------- torch
def _torch_tensor(torch, x):
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.uint16).astype(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


@pytest.mark.torch
def test_torch_equals_python_max_on_every_bfloat16_pattern():
    torch = pytest.importorskip("torch")
    x = _all_bf16_rows()
    t = _torch_tensor(torch, x)
    for op, fn in (("amax", torch.amax), ("amin", torch.amin)):
        got = fn(t, dim=-1).float().numpy()
        assert _same(got, _truth(x, op)), op


@pytest.mark.torch
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", OPS)
def test_torch_amax_amin_pass_their_standards(op, fmt):
    torch = pytest.importorskip("torch")
    from numstd.catalog.suites import make_case

    fn = torch.amax if op == "amax" else torch.amin
    for dist in ("normal", "offset", "ties", "nonfinite", "specials"):
        x = make_case(op, (16, 64, 64), dist, 5, [fmt]).inputs[0]
        t = _torch_tensor(torch, x)
        for p in ({"axis": -1}, {"axis": 1, "keepdims": True}, {"axis": (0, 2)}, {"axis": None}):
            dim = p["axis"] if p["axis"] is not None else ()
            y = fn(t, dim=dim, keepdim=p.get("keepdims", False))
            v = numstd.check(y, op=op, inputs=[x], **p)
            assert v.passed, (dist, p, v.message)
        values = (torch.max if op == "amax" else torch.min)(t, dim=2).values  # the (values, indices) form
        assert numstd.check(values, op=op, inputs=[x], axis=2).passed


@pytest.mark.torch
def test_grade_detects_amax_and_max_with_dim():
    torch = pytest.importorskip("torch")

    class Amax(torch.nn.Module):
        def forward(self, x):
            return torch.amax(x, dim=1)

    class MaxDim(torch.nn.Module):
        def forward(self, x):
            return torch.max(x, 1)[0]

    class MinKeep(torch.nn.Module):
        def forward(self, x):
            return x.min(dim=-1, keepdim=True).values

    class InitZero(torch.nn.Module):  # a running maximum started at 0: wrong on all-negative rows
        def forward(self, x):
            return torch.clamp(torch.amax(x, dim=1), min=0.0)

    def inputs():
        return [torch.randn(64, 256) - 3.0]

    good = numstd.grade(Amax, Amax, inputs, trials=1)
    assert good.op == ("amax", {"axis": 1, "keepdims": False})
    assert good.passed and any(s.startswith("NS-AMAX-FP32@") for s in good.standards)
    assert numstd.grade(MaxDim, Amax, inputs, trials=1).op == ("amax", {"axis": 1, "keepdims": False})
    assert numstd.grade(MinKeep, MinKeep, inputs, trials=1).op == ("amin", {"axis": -1, "keepdims": True})
    assert not numstd.grade(Amax, InitZero, inputs, trials=1).passed


def test_grade_does_not_take_the_elementwise_maximum_for_amax():
    from numstd.grade.grading import _as_op

    x, y = np.zeros(3), np.ones(3)
    assert _as_op("max", (x, y), {}) is None
    assert _as_op("max", (x,), {"other": y}) is None
    assert _as_op("max", (x,), {}) == ("amax", [x], {"axis": None, "keepdims": False})
    assert _as_op("amin", (x, (0, 1), True), {}) == ("amin", [x], {"axis": (0, 1), "keepdims": True})
