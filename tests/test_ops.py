"""Tests of numstd.ops: the op catalog, validation of calls, defaults and output shapes.

Independent truths: numpy's own shape rules (``np.matmul``, ``np.sum``), torch.nn.functional in
float64 for the semantics the catalog claims (layer_norm's biased variance, rms_norm's default
eps, scaled_dot_product_attention's causal mask, cross_entropy's reductions, gelu's two forms),
and hand-written error cases whose messages must name the fix.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numstd.errors import DtypeError, NumstdError, ParameterError, ShapeError, UnknownOpError
from numstd.ops import KINDS, OPS, REQUIRED, OpSpec, get_op, output_shape, validate

ELEMENTWISE = ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt", "softplus",
               "leaky_relu", "elu", "selu", "celu", "hardsigmoid", "hardswish", "softsign", "mish", "new_gelu", "swish", "hardtanh")


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------------------
# the catalog
# ------------------------------------------------------------------------------------------


def test_catalog_has_the_designed_ops():
    expected = {"matmul", "linear", "conv", "conv_transpose", "sum", "mean", "cumsum", "softmax", "log_softmax", "layer_norm",
                "rms_norm", "attention", "cross_entropy", "mse_loss", "module", "huber_loss", "smooth_l1_loss", "kl_div", "nll_loss", "hinge_embedding_loss", "clamp", "cumprod", "amax", "amin", "argmax", "argmin", *ELEMENTWISE,
                "group_norm", "instance_norm", "batch_norm", *(f"{k}_pool{d}d" for k in ("max", "avg") for d in (1, 2, 3)),
                "normalize", "cosine_similarity", "cosine_embedding_loss", "triplet_margin_loss", "cast", "scaled_matmul"}
    assert set(OPS) == expected


def test_module_is_graded_not_checked():
    import numstd

    with pytest.raises(ParameterError, match="numstd.grade"):
        numstd.check(np.ones(3, np.float32), op="module", inputs=[np.ones(3, np.float32)])


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_spec_is_well_formed(name):
    spec = OPS[name]
    assert isinstance(spec, OpSpec) and spec.name == name
    assert spec.kind in KINDS
    assert 0 <= spec.optional_inputs < len(spec.inputs)
    assert spec.n_required == len(spec.inputs) - spec.optional_inputs
    assert "=" in spec.doc  # every doc states the formula
    # the parameters torch itself requires: group_norm's num_groups, pooling's kernel_size
    required = {k for k, v in spec.params.items() if v is REQUIRED}
    # and cast's target format, scaled_matmul's scale layout
    assert required == ({"num_groups"} if name == "group_norm" else {"kernel_size"} if "_pool" in name else
                        {"to"} if name == "cast" else {"scaling"} if name == "scaled_matmul" else set())
    with pytest.raises(TypeError):
        spec.params["new"] = 1  # type: ignore[index]


def test_kinds():
    assert {OPS[n].kind for n in ELEMENTWISE} == {"elementwise"}
    assert OPS["matmul"].kind == OPS["linear"].kind == "contraction"
    assert OPS["sum"].kind == OPS["mean"].kind == "reduction"
    assert OPS["cumsum"].kind == "scan"
    assert OPS["layer_norm"].optional_inputs == 2 and OPS["rms_norm"].optional_inputs == 1


def test_unknown_op_lists_catalog_and_close_matches():
    with pytest.raises(UnknownOpError) as exc:
        get_op("softmx")
    msg = str(exc.value)
    assert "'softmax'" in msg and "did you mean" in msg and "cross_entropy" in msg
    assert isinstance(exc.value, KeyError) and isinstance(exc.value, NumstdError)
    with pytest.raises(UnknownOpError, match="catalog has"):
        get_op("conv3d_transpose")
    assert get_op(" MatMul ") is OPS["matmul"]
    assert get_op(OPS["relu"]) is OPS["relu"]


# ------------------------------------------------------------------------------------------
# inputs: count, None, dtypes
# ------------------------------------------------------------------------------------------


def test_validate_returns_arrays_without_copy_and_pads_optional_inputs():
    x = f32(2, 3)
    spec, arrays, params = validate("layer_norm", [x], {})
    assert spec is OPS["layer_norm"] and arrays[0] is x and arrays[1:] == [None, None]
    assert params == {"eps": 1e-5}
    _, arrays, _ = validate("layer_norm", (x, None, np.zeros(3, np.float32)), None)
    assert arrays[1] is None and arrays[2].shape == (3,)


def test_input_count_errors_name_the_inputs():
    with pytest.raises(ParameterError, match=r"takes 2 input\(s\) \(A, B\), got 1"):
        validate("matmul", [f32(2, 2)], {})
    with pytest.raises(ParameterError, match="2 to 3"):
        validate("linear", [f32(2, 2)] * 4, {})
    with pytest.raises(ParameterError, match=r"inputs\[1\] \(B\) is required"):
        validate("matmul", [f32(2, 2), None], {})
    with pytest.raises(ParameterError, match=r"list of arrays.*inputs=\[x\]"):
        validate("softmax", f32(3), {})


@pytest.mark.parametrize("bad", [np.arange(6).reshape(2, 3), np.ones((2, 3), dtype=bool),
                                 np.ones((2, 3), dtype=np.uint8)])
def test_integer_and_boolean_inputs_are_dtype_errors_with_the_fix(bad):
    with pytest.raises(DtypeError) as exc:
        validate("softmax", [bad], {})
    assert "astype(np.float32)" in str(exc.value) and "inputs[0] (x)" in str(exc.value)
    assert isinstance(exc.value, TypeError)


def test_other_non_float_inputs():
    with pytest.raises(DtypeError):
        validate("exp", [np.ones(3, dtype=np.complex64)], {})
    if np.dtype(np.longdouble).itemsize > 8:  # x87 extended precision: not a numstd format
        with pytest.raises(DtypeError, match="float8_e4m3fn"):  # the message lists the formats
            validate("exp", [np.ones(3, dtype=np.longdouble)], {})
    with pytest.raises(DtypeError):
        validate("exp", [["a", "b"]], {})


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16,
                                   ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz])
def test_every_format_is_accepted(dtype):
    x = np.ones((2, 3), dtype=dtype)
    _, arrays, _ = validate("matmul", [x, x.T], {})
    assert arrays[0].dtype == np.dtype(dtype)


def test_cross_entropy_target_must_be_integer():
    logits = f32(4, 5)
    with pytest.raises(DtypeError, match=r"target.astype\(np.int64\)"):
        validate("cross_entropy", [logits, np.zeros(4, np.float32)], {})
    with pytest.raises(DtypeError, match="floating-point"):
        validate("cross_entropy", [np.zeros((4, 5), np.int64), np.zeros(4, np.int64)], {})
    validate("cross_entropy", [logits, np.zeros(4, np.int32)], {})
    validate("cross_entropy", [logits, np.zeros(4, np.uint8)], {})


def test_python_lists_and_scalars_are_converted():
    _, arrays, _ = validate("exp", [[1.0, 2.0]], {})
    assert arrays[0].dtype == np.float64
    assert output_shape("exp", [3.0]) == ()


# ------------------------------------------------------------------------------------------
# parameters
# ------------------------------------------------------------------------------------------


def test_unknown_parameter_suggests_the_right_name():
    with pytest.raises(ParameterError) as exc:
        validate("softmax", [f32(3)], {"dim": -1})
    assert "'dim' (numstd uses numpy's name 'axis')" in str(exc.value) and "accepts: axis" in str(exc.value)
    with pytest.raises(ParameterError, match="numpy's name 'causal'"):
        validate("attention", [f32(2, 4)] * 3, {"is_causal": True})
    with pytest.raises(ParameterError, match=r"did you mean 'axis'"):
        validate("sum", [f32(3)], {"axes": 0})
    with pytest.raises(ParameterError, match="accepts: none"):
        validate("matmul", [f32(2, 2), f32(2, 2)], {"transpose": True})


def test_defaults_are_filled():
    assert validate("softmax", [f32(2, 3, 4)], {})[2] == {"axis": 2}
    assert validate("log_softmax", [f32(2, 3, 4)], {"axis": -2})[2] == {"axis": 1}
    assert validate("cumsum", [f32(5)], {})[2] == {"axis": 0, "reverse": False, "exclusive": False}
    assert validate("sum", [f32(5)], {})[2] == {"axis": None, "keepdims": False}
    assert validate("gelu", [f32(5)], {})[2] == {"approximate": "none"}
    assert validate("cross_entropy", [f32(2, 3), np.array([0, 2])], {})[2] == {"reduction": "mean"}
    p = validate("attention", [f32(2, 5, 16)] * 3, {})[2]
    assert p == {"scale": 0.25, "causal": False}
    p = validate("attention", [f32(3, 6), f32(4, 6), f32(4, 2)], {"scale": 2})[2]
    assert p["scale"] == 2.0 and isinstance(p["scale"], float)
    assert validate("attention", [f32(3, 6), f32(4, 6), f32(4, 2)], {})[2]["scale"] == 1 / math.sqrt(6)


@pytest.mark.parametrize("dtype,eps", [(np.float64, 2.0**-52), (np.float32, 2.0**-23), (np.float16, 2.0**-23),
                                       (ml_dtypes.bfloat16, 2.0**-23), (ml_dtypes.float8_e4m3fn, 2.0**-23)])
def test_rms_norm_default_eps(dtype, eps):
    assert validate("rms_norm", [np.ones((2, 3), dtype)], {})[2]["eps"] == eps
    assert validate("rms_norm", [np.ones((2, 3), dtype)], {"eps": 1e-6})[2]["eps"] == 1e-6


def test_sum_axes_are_normalised():
    x = f32(2, 3, 4)
    assert validate("sum", [x], {"axis": -1})[2]["axis"] == 2
    assert validate("mean", [x], {"axis": (-1, 0)})[2]["axis"] == (0, 2)
    assert validate("mean", [x], {"axis": [1]})[2]["axis"] == (1,)
    with pytest.raises(ParameterError, match="twice"):
        validate("sum", [x], {"axis": (0, -3)})


@pytest.mark.parametrize("op,params,match", [
    ("softmax", {"axis": 1.0}, "axis must be an int"),
    ("softmax", {"axis": True}, "axis must be an int"),
    ("softmax", {"axis": 2}, r"out of range .* \[-2, 1\]"),
    ("cumsum", {"axis": None}, "axis must be an int"),
    ("sum", {"keepdims": 1}, "True or False"),
    ("layer_norm", {"eps": -1.0}, ">= 0"),
    ("layer_norm", {"eps": float("nan")}, ">= 0"),
    ("rms_norm", {"eps": "small"}, "must be a number"),
    ("gelu", {"approximate": "erf"}, "'none', 'tanh'"),
    ("gelu", {"approximate": True}, "'none', 'tanh'"),
])
def test_invalid_parameter_values(op, params, match):
    with pytest.raises(ParameterError, match=match):
        validate(op, [f32(2, 3)], params)


def test_invalid_attention_and_loss_parameters():
    qkv = [f32(2, 4)] * 3
    with pytest.raises(ParameterError, match="True or False"):
        validate("attention", qkv, {"causal": "yes"})
    with pytest.raises(ParameterError, match="finite number or None"):
        validate("attention", qkv, {"scale": float("inf")})
    with pytest.raises(ParameterError, match="'mean', 'sum', 'none'"):
        validate("cross_entropy", [f32(2, 3), np.array([0, 1])], {"reduction": "avg"})
    with pytest.raises(ParameterError, match="0-d input has no axis"):
        validate("softmax", [np.float32(1.0)], {})


# ------------------------------------------------------------------------------------------
# shapes
# ------------------------------------------------------------------------------------------

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((2, 3), (5, 3, 4)), ((6, 1, 2, 3), (5, 3, 4)), ((1, 2, 3), (7, 3, 1)), ((0, 3), (3, 2)),
                 ((2, 0), (0, 4))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_output_shape_is_numpys(sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    assert output_shape("matmul", [a, b]) == np.matmul(a, b).shape


@pytest.mark.parametrize("sa,sb,match", [
    ((2, 3), (4, 5), r"A \(2, 3\) has K=3 columns but B \(4, 5\) has K=4 rows"),
    ((3,), (4,), "inner dimensions differ"),
    ((2, 2, 3), (3, 3, 4), "do not broadcast"),
    ((), (3,), "0-d"),
])
def test_matmul_shape_errors(sa, sb, match):
    with pytest.raises(ShapeError, match=match):
        validate("matmul", [np.ones(sa, np.float32), np.ones(sb, np.float32)], {})
    with pytest.raises(ValueError):  # ShapeError is a ValueError too
        validate("matmul", [np.ones(sa, np.float32), np.ones(sb, np.float32)], {})


def test_linear_shapes_and_errors():
    x, W, b = f32(2, 5, 3), f32(4, 3), f32(4)
    assert output_shape("linear", [x, W, b]) == (2, 5, 4)
    assert output_shape("linear", [f32(3), W]) == (4,)
    with pytest.raises(ShapeError, match=r"pass W.T"):
        validate("linear", [x, W.T], {})
    with pytest.raises(ShapeError, match="2-D"):
        validate("linear", [x, f32(3)], {})
    with pytest.raises(ShapeError, match=r"must be \(4,\)"):
        validate("linear", [x, W, f32(3)], {})


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (1,), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_shapes_are_numpys(axis, keepdims):
    x = f32(2, 3, 4)
    for op, fn in (("sum", np.sum), ("mean", np.mean)):
        assert output_shape(op, [x], {"axis": axis, "keepdims": keepdims}) == fn(x, axis=axis, keepdims=keepdims).shape


def test_reduction_shape_errors():
    with pytest.raises(ShapeError, match="mean of nothing"):
        validate("mean", [np.ones((3, 0), np.float32)], {"axis": 1})
    assert output_shape("sum", [np.ones((3, 0), np.float32)], {"axis": 1}) == (3,)


def test_normalization_shapes():
    x = f32(2, 3, 8)
    assert output_shape("layer_norm", [x, f32(8), f32(8)]) == x.shape
    assert output_shape("rms_norm", [x, f32(8)]) == x.shape
    with pytest.raises(ShapeError, match=r"must be \(8,\).*last axis"):
        validate("layer_norm", [x, f32(3, 8)], {})
    with pytest.raises(ShapeError, match=r"must be \(8,\)"):
        validate("rms_norm", [x, f32(7)], {})
    with pytest.raises(ShapeError, match="at least 1 dimension"):
        validate("layer_norm", [np.float32(1)], {})


def test_attention_shapes_and_errors():
    q, k, v = f32(2, 1, 5, 8), f32(3, 7, 8), f32(3, 7, 6)
    assert output_shape("attention", [q, k, v]) == (2, 3, 5, 6)
    with pytest.raises(ShapeError, match="same last axis E"):
        validate("attention", [q, f32(3, 7, 4), v], {})
    with pytest.raises(ShapeError, match="same number of keys S"):
        validate("attention", [q, k, f32(3, 6, 6)], {})
    with pytest.raises(ShapeError, match="no keys"):
        validate("attention", [q, f32(3, 0, 8), f32(3, 0, 6)], {})
    with pytest.raises(ShapeError, match="do not broadcast"):
        validate("attention", [f32(2, 5, 8), f32(3, 7, 8), f32(3, 7, 6)], {})
    with pytest.raises(ShapeError, match="at least 2"):
        validate("attention", [f32(8), k, v], {})


def test_cross_entropy_shapes_and_errors():
    logits = f32(4, 5)
    t = np.array([0, 4, 2, 1])
    assert output_shape("cross_entropy", [logits, t]) == ()
    assert output_shape("cross_entropy", [logits, t], {"reduction": "none"}) == (4,)
    with pytest.raises(ShapeError, match=r"\(N, C\)"):
        validate("cross_entropy", [f32(5), t], {})
    with pytest.raises(ShapeError, match=r"must be \(4,\)"):
        validate("cross_entropy", [logits, t[:3]], {})
    with pytest.raises(ShapeError, match=r"class index 5, outside \[0, 5\)"):
        validate("cross_entropy", [logits, np.array([0, 5, 1, 1])], {})
    with pytest.raises(ShapeError, match="ignore_index is not supported"):
        validate("cross_entropy", [logits, np.array([0, -100, 1, 1])], {})


def test_mse_loss_shapes_and_errors():
    a, b = f32(4, 5), f32(4, 5, seed=1)
    assert output_shape("mse_loss", [a, b]) == ()
    assert output_shape("mse_loss", [a, b], {"reduction": "sum"}) == ()
    assert output_shape("mse_loss", [a, b], {"reduction": "none"}) == (4, 5)
    assert validate("mse_loss", [a, b], {})[2] == {"reduction": "mean"}
    with pytest.raises(ShapeError, match="must be equal"):
        validate("mse_loss", [a, f32(5)], {})
    with pytest.raises(ShapeError, match="empty input"):
        validate("mse_loss", [f32(0, 3), f32(0, 3)], {})
    assert output_shape("mse_loss", [f32(0, 3), f32(0, 3)], {"reduction": "sum"}) == ()
    with pytest.raises(ParameterError, match="reduction='avg' is not allowed"):
        validate("mse_loss", [a, b], {"reduction": "avg"})
    with pytest.raises(DtypeError, match="target"):
        validate("mse_loss", [a, np.zeros((4, 5), np.int64)], {})


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_shapes(op):
    for shape in [(), (3,), (2, 0, 4)]:
        assert output_shape(op, [np.ones(shape, np.float32)]) == shape


def test_scan_and_softmax_need_an_axis():
    assert output_shape("cumsum", [f32(3, 4)], {"axis": 0}) == (3, 4)
    with pytest.raises(ParameterError):
        validate("cumsum", [np.float32(2.0)], {})


# ------------------------------------------------------------------------------------------
# semantics against torch (float64)
# ------------------------------------------------------------------------------------------


def _close(ref, expected, rtol=1e-13):
    expected = np.asarray(expected, dtype=np.float64)
    assert ref.values.shape == expected.shape
    scale = np.max(np.abs(expected)) if expected.size else 1.0
    np.testing.assert_allclose(ref.values, expected, rtol=rtol, atol=rtol * scale)


def test_semantics_match_torch_functional():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    from numstd.reference import reference

    g = np.random.default_rng(1)
    x = g.standard_normal((3, 4, 10))
    w, b = g.standard_normal(10), g.standard_normal(10)
    t = torch.from_numpy
    _close(reference("layer_norm", [x, w, b], eps=1e-3), F.layer_norm(t(x), (10,), t(w), t(b), eps=1e-3))
    _close(reference("layer_norm", [x]), F.layer_norm(t(x), (10,)))
    _close(reference("rms_norm", [x, w]), F.rms_norm(t(x), (10,), t(w)))
    W = g.standard_normal((6, 10))
    _close(reference("linear", [x, W, w[:6]]), F.linear(t(x), t(W), t(w[:6])))
    for axis in (0, 1, 2):
        _close(reference("softmax", [x], axis=axis), F.softmax(t(x), dim=axis))
        _close(reference("log_softmax", [x], axis=axis), F.log_softmax(t(x), dim=axis))
    _close(reference("cumsum", [x], axis=1), torch.cumsum(t(x), 1))
    y = 4 * x
    _close(reference("gelu", [y]), F.gelu(t(y)))
    _close(reference("gelu", [y], approximate="tanh"), F.gelu(t(y), approximate="tanh"))
    _close(reference("silu", [y]), F.silu(t(y)))
    _close(reference("sigmoid", [y]), torch.sigmoid(t(y)))
    _close(reference("rsqrt", [np.abs(y)]), torch.rsqrt(t(np.abs(y))))
    logits, target = g.standard_normal((7, 5)), g.integers(0, 5, 7)
    for red in ("mean", "sum", "none"):
        _close(reference("cross_entropy", [logits, target], reduction=red),
               F.cross_entropy(t(logits), t(target), reduction=red))
        _close(reference("mse_loss", [x, 2 * x[::-1]], reduction=red), F.mse_loss(t(x), t(2 * x[::-1]), reduction=red))


@pytest.mark.parametrize("L,S", [(5, 5), (3, 7), (7, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_semantics_match_torch_sdpa(L, S, causal):
    torch = pytest.importorskip("torch")
    from numstd.reference import reference

    g = np.random.default_rng(2)
    q, k, v = g.standard_normal((2, L, 4)), g.standard_normal((2, S, 4)), g.standard_normal((2, S, 3))
    t = torch.from_numpy
    expected = torch.nn.functional.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=causal)
    _close(reference("attention", [q, k, v], causal=causal), expected, rtol=1e-12)
    expected = torch.nn.functional.scaled_dot_product_attention(t(q), t(k), t(v), scale=0.7)
    _close(reference("attention", [q, k, v], scale=0.7), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_rms_norm_default_eps_is_torchs(dtype):
    """Tiny inputs make eps dominate: torch's result pins down the eps it uses by default."""
    torch = pytest.importorskip("torch")
    from numstd.reference import reference

    x = torch.full((1, 4), 1e-4, dtype=getattr(torch, dtype))
    got = torch.nn.functional.rms_norm(x, (4,)).double().numpy()
    # the same values as a numpy array of the same format (x.numpy() has no bfloat16)
    ref = reference("rms_norm", [x.double().numpy().astype(getattr(ml_dtypes, dtype, None) or dtype)])
    tol = {"float64": 1e-14, "float32": 1e-6, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(ref.values, got, rtol=tol)


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 4, dtype=torch.float32)
    spec, arrays, params = validate("softmax", [x], {"axis": torch.tensor(0).item()})
    assert isinstance(arrays[0], np.ndarray) and arrays[0].shape == (3, 4) and params["axis"] == 0
    assert output_shape("matmul", [x, x.T]) == (3, 3)


# ------------------------------------------------------------------------------------------
# properties: validate agrees with numpy on every shape, and raises only numstd errors
# ------------------------------------------------------------------------------------------

_shapes = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(_shapes, _shapes)
def test_matmul_validation_agrees_with_numpy(sa, sb):
    a, b = np.zeros(sa, np.float32), np.zeros(sb, np.float32)
    try:
        expected = np.matmul(a, b).shape
    except ValueError:
        with pytest.raises(ShapeError):
            validate("matmul", [a, b], {})
    else:
        assert output_shape("matmul", [a, b]) == expected


@settings(max_examples=300, deadline=None)
@given(_shapes, st.one_of(st.none(), st.integers(-5, 5), st.lists(st.integers(-5, 5), max_size=3)),
       st.booleans())
def test_sum_validation_agrees_with_numpy(shape, axis, keepdims):
    x = np.zeros(shape, np.float32)
    ax = tuple(axis) if isinstance(axis, list) else axis
    if shape == () and isinstance(axis, int):  # numpy's legacy quirk: axis 0 / -1 of a 0-d array
        with pytest.raises(ParameterError, match="0-d input has no axis"):
            validate("sum", [x], {"axis": axis})
        return
    try:
        expected = np.sum(x, axis=ax, keepdims=keepdims).shape
    except ValueError:  # numpy's AxisError is a ValueError (and an IndexError)
        with pytest.raises(ParameterError):
            validate("sum", [x], {"axis": axis, "keepdims": keepdims})
    else:
        assert output_shape("sum", [x], {"axis": axis, "keepdims": keepdims}) == expected
