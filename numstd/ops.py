"""The op catalog: every op numstd knows, its inputs and parameters, and validation of a call.

One place decides whether a call is well formed: :func:`validate` converts the inputs to numpy
(keeping their formats), checks their number, dtypes and shapes, checks the parameters and fills
their defaults.  Everything downstream (references, error models, chunking, standards) receives
validated arrays and a complete parameter dict and never re-checks.

Semantics follow ``torch.nn.functional`` for the same name; parameter names follow numpy
(``axis``, ``keepdims``, ``eps``, ``approximate``).  Each op's formula is in its
:attr:`OpSpec.doc`; :mod:`numstd.reference` computes exactly these formulas.

Kinds (what the error analysis of the op looks like):

==============  =====================================================================
kind            ops
==============  =====================================================================
contraction     matmul, linear  (dot products of length K)
reduction       sum, mean
scan            cumsum
softmax         softmax, log_softmax
normalization   layer_norm, rms_norm
elementwise     exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt
attention       attention  (two contractions around a softmax)
loss            cross_entropy
exact           (reserved for ops whose correct result is exactly representable)
==============  =====================================================================
"""

from __future__ import annotations

import difflib
import math
import numbers
import types
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .arrays import to_numpy
from .errors import DtypeError, ParameterError, ShapeError, UnknownOpError

__all__ = [
    "OpSpec",
    "OPS",
    "KINDS",
    "REQUIRED",
    "get_op",
    "validate",
    "output_shape",
    "default_rms_eps",
]

KINDS: tuple[str, ...] = (
    "contraction", "reduction", "scan", "softmax", "normalization", "elementwise", "attention",
    "loss", "exact", "module",
)


class _Required:
    """Sentinel default of a parameter that has to be given."""

    _instance: "_Required | None" = None

    def __new__(cls) -> "_Required":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class OpSpec:
    """One entry of the op catalog.

    Attributes
    ----------
    name : str
        The op name used in ``check(op=...)`` and in standard files.
    kind : str
        One of :data:`KINDS`.
    inputs : tuple of str
        Input names in call order, e.g. ``("x", "weight", "bias")``.
    optional_inputs : int
        How many trailing inputs may be omitted or ``None``.
    params : mapping of str to object
        Parameter names and their defaults (:data:`REQUIRED` where a value must be given).
    doc : str
        The op's formula and conventions.
    """

    name: str
    kind: str
    inputs: tuple[str, ...]
    optional_inputs: int
    params: Mapping[str, object]
    doc: str

    @property
    def n_required(self) -> int:
        """Number of inputs that must be given."""
        return len(self.inputs) - self.optional_inputs


def _spec(name: str, kind: str, inputs: tuple[str, ...], optional: int, params: dict, doc: str) -> OpSpec:
    return OpSpec(name, kind, inputs, optional, types.MappingProxyType(dict(params)), doc)


_ELEMENTWISE_DOCS = {
    "exp": "y = exp(x)",
    "log": "y = log(x)  (natural logarithm; -inf at 0, NaN below 0)",
    "tanh": "y = tanh(x)",
    "sigmoid": "y = 1 / (1 + exp(-x))",
    "erf": "y = erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt",
    "gelu": ('approximate="none": y = x/2 * (1 + erf(x/sqrt(2))) = x/2 * erfc(-x/sqrt(2)); '
             'approximate="tanh": y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))  '
             "(torch.nn.functional.gelu)"),
    "silu": "y = x * sigmoid(x) = x / (1 + exp(-x))",
    "relu": "y = max(x, 0)",
    "rsqrt": "y = 1 / sqrt(x)",
    "sqrt": "y = sqrt(x)",
}

_CATALOG: tuple[OpSpec, ...] = (
    _spec("matmul", "contraction", ("A", "B"), 0, {},
          "C = A @ B with numpy.matmul semantics: batched over leading axes with broadcasting; a 1-D "
          "A is a row vector, a 1-D B a column vector, and the added axis is removed. "
          "K = A.shape[-1] = B.shape[-2]."),
    _spec("linear", "contraction", ("x", "weight", "bias"), 1, {},
          "y = x @ weight.T + bias (torch.nn.functional.linear): weight is (out_features, "
          "in_features), bias (out_features,) or omitted. K = in_features."),
    _spec("sum", "reduction", ("x",), 0, {"axis": None, "keepdims": False},
          "s = sum of x over axis (numpy.sum): axis None (all axes), an int or a tuple of ints."),
    _spec("mean", "reduction", ("x",), 0, {"axis": None, "keepdims": False},
          "m = sum(x, axis) / K with K the number of reduced elements (numpy.mean)."),
    _spec("cumsum", "scan", ("x",), 0, {"axis": -1},
          "inclusive prefix sums along axis: y[..., i] = sum_{j <= i} x[..., j]. Unlike numpy "
          "(which flattens when axis is None) the default is the last axis, as in torch.cumsum "
          "with dim=-1; axis must be an int."),
    _spec("softmax", "softmax", ("x",), 0, {"axis": -1},
          "y_j = exp(x_j - max x) / sum_k exp(x_k - max x) along axis "
          "(torch.nn.functional.softmax with dim=axis)."),
    _spec("log_softmax", "softmax", ("x",), 0, {"axis": -1},
          "y_j = (x_j - max x) - log sum_k exp(x_k - max x) along axis "
          "(torch.nn.functional.log_softmax with dim=axis)."),
    _spec("layer_norm", "normalization", ("x", "weight", "bias"), 2, {"eps": 1e-5},
          "y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis, var the biased "
          "variance mean((x - mean)^2) (torch.nn.functional.layer_norm with normalized_shape = "
          "x.shape[-1:]); weight and bias have shape (x.shape[-1],) and default to 1 and 0."),
    _spec("rms_norm", "normalization", ("x", "weight"), 1, {"eps": None},
          "y = x / sqrt(mean(x^2) + eps) * weight over the last axis (torch.nn.functional.rms_norm "
          "with normalized_shape = x.shape[-1:]). eps=None is what torch uses: the machine epsilon "
          "of the computation type, 2^-52 for float64 inputs and float32's 2^-23 for all narrower "
          "formats (torch computes 16-bit inputs in float32); validate() fills in the number."),
    *(_spec(name, "elementwise", ("x",), 0, {"approximate": "none"} if name == "gelu" else {}, doc)
      for name, doc in _ELEMENTWISE_DOCS.items()),
    _spec("attention", "attention", ("q", "k", "v"), 0, {"scale": None, "causal": False},
          "out = softmax(q @ k^T * scale + mask) @ v (torch.nn.functional."
          "scaled_dot_product_attention): q (..., L, E), k (..., S, E), v (..., S, Ev), leading "
          "axes broadcast. scale=None means 1/sqrt(E), filled in by validate() as the nearest "
          "float64 number, which the reference then takes as the exact scale. causal=True masks "
          "key j for query i when j > i (is_causal: the lower triangle aligned to the top-left "
          "corner)."),
    _spec("cross_entropy", "loss", ("logits", "target"), 0, {"reduction": "mean"},
          "loss_n = logsumexp(logits[n]) - logits[n, target[n]] (torch.nn.functional."
          "cross_entropy with class-index targets, no weights, no ignore_index, no label "
          "smoothing): logits (N, C), target (N,) integers in [0, C); reduction 'mean' (sum / N), "
          "'sum' or 'none' (the N losses)."),
    _spec("module", "module", ("inputs",), 0, {},
          "y = model(*inputs): a whole model (a KernelBench-style nn.Module or callable) graded by numstd.grade against "
          "its own float64 run: the NS-MODULE standards. Not an op of numstd.check or "
          "numstd.reference."),
)

OPS: Mapping[str, OpSpec] = types.MappingProxyType({s.name: s for s in _CATALOG})
"""Read-only mapping op name -> :class:`OpSpec`."""


def get_op(name: Any) -> OpSpec:
    """Return the catalog entry for ``name``.

    Raises
    ------
    UnknownOpError
        Listing the catalog and the closest names (``difflib``).
    """
    if isinstance(name, OpSpec):
        return name
    if isinstance(name, str) and name in OPS:
        return OPS[name]
    key = str(name).strip().lower() if isinstance(name, str) else None
    if key in OPS:
        return OPS[key]
    close = difflib.get_close_matches(key or "", list(OPS), n=3, cutoff=0.6) if key else []
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownOpError(f"unknown op {name!r}{hint} The catalog has: {', '.join(OPS)}")


# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------


def _float_formats() -> Mapping[str, Any]:
    from .formats import FORMATS

    return FORMATS


def _is_float(dtype: np.dtype) -> bool:
    return dtype.name in _float_formats() and dtype.name != "tf32"


def _as_array(x: Any, name: str) -> np.ndarray:
    # numpy arrays of a supported float format are used as they are (to_numpy would only return
    # them unchanged); everything else goes through numstd.arrays.to_numpy.
    if isinstance(x, np.ndarray) and _is_float(x.dtype):
        return x
    return to_numpy(x, name=name)


def _check_dtype(spec: OpSpec, pos: int, arr: np.ndarray) -> None:
    label = f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]})"
    if spec.name == "cross_entropy" and pos == 1:
        if arr.dtype.kind not in "iu":
            raise DtypeError(
                f"{label} has dtype {arr.dtype}; cross_entropy takes integer class indices "
                f"(class-probability targets are not supported): pass target.astype(np.int64)"
            )
        return
    if not _is_float(arr.dtype):
        kind = {"i": "an integer ", "u": "an integer ", "b": "a boolean "}.get(arr.dtype.kind, "an ")
        raise DtypeError(
            f"{label} is {kind}array of dtype {arr.dtype}; {spec.name} needs one of the floating-point "
            f"formats ({', '.join(n for n in _float_formats() if n != 'tf32')}): convert it, e.g. "
            f"{spec.inputs[pos]}.astype(np.float32)"
        )


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _axis(op: str, value: Any, ndim: int) -> int:
    if not _is_int(value):
        raise ParameterError(f"{op}: axis must be an int, got {value!r}; e.g. axis=-1 for the last axis")
    v = int(value)
    if not -ndim <= v < ndim:
        raise ParameterError(
            f"{op}: axis {v} is out of range for an input with {ndim} dimension(s); "
            f"use an axis in [{-ndim}, {ndim - 1}]" if ndim else
            f"{op}: a 0-d input has no axis {v}; pass an array with at least one dimension"
        )
    return v % ndim


def _axes(op: str, value: Any, ndim: int) -> int | tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        axes = tuple(_axis(op, a, ndim) for a in value)
        if len(set(axes)) != len(axes):
            raise ParameterError(f"{op}: axis {tuple(value)} names an axis twice; list each axis once")
        return tuple(sorted(axes))
    return _axis(op, value, ndim)


def _bool(op: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{op}: {name} must be True or False, got {value!r}")
    return bool(value)


def _nonneg_float(op: str, name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{op}: {name} must be a number, got {value!r}")
    v = _float_or_inf(value)
    if not (math.isfinite(v) and v >= 0):
        raise ParameterError(f"{op}: {name} must be finite and >= 0, got {v!r}")
    return v


def _float_or_inf(value: numbers.Real) -> float:
    """``float(value)``, or ±inf for an integer beyond float64's range (``float(10**400)`` overflows)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _choice(op: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(
            f"{op}: {name}={value!r} is not allowed; use one of {', '.join(repr(c) for c in choices)}"
        )
    return str(value)


def default_rms_eps(dtype: Any) -> float:
    """The ``eps`` that ``torch.nn.functional.rms_norm`` uses when none is given.

    torch documents ``torch.finfo(x.dtype).eps`` but computes with the epsilon of the *opmath*
    type (``std::numeric_limits<opmath_type<T>>::epsilon()`` in ``aten/src/ATen/native/
    layer_norm.cpp``), float32 for every format narrower than float32 — checked against torch in
    ``tests/test_ops.py``.  So: ``2**-52`` for float64 inputs, ``2**-23`` for all others.
    """
    from .formats import get_format

    name = np.dtype(dtype).name
    return get_format("float64" if name == "float64" else "float32").eps


# torch.nn.functional parameter names -> the numpy-style names of the catalog
_TORCH_NAMES: Mapping[str, str] = types.MappingProxyType({
    "dim": "axis", "keepdim": "keepdims", "is_causal": "causal",
})


def _check_params(spec: OpSpec, arrays: list, params: Mapping[str, Any]) -> dict:
    op = spec.name
    unknown = [k for k in params if k not in spec.params]
    if unknown:
        allowed = ", ".join(spec.params) or "none"
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(str(k), list(spec.params), n=1, cutoff=0.5)
            if _TORCH_NAMES.get(k) in spec.params:
                hints.append(f"{k!r} (numstd uses numpy's name {_TORCH_NAMES[k]!r})")
            else:
                hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ParameterError(f"{op}: unknown parameter(s) {', '.join(hints)}; {op} accepts: {allowed}")
    full = {k: params.get(k, d) for k, d in spec.params.items()}
    missing = [k for k, v in full.items() if v is REQUIRED]
    if missing:
        raise ParameterError(f"{op}: missing required parameter(s) {', '.join(missing)}")
    x = arrays[0]
    if "axis" in full:
        full["axis"] = (_axes(op, full["axis"], x.ndim) if spec.kind == "reduction"
                        else _axis(op, full["axis"], x.ndim))
    if "keepdims" in full:
        full["keepdims"] = _bool(op, "keepdims", full["keepdims"])
    if "eps" in full:
        if full["eps"] is None:
            full["eps"] = default_rms_eps(x.dtype)
        full["eps"] = _nonneg_float(op, "eps", full["eps"])
    if "approximate" in full:
        full["approximate"] = _choice(op, "approximate", full["approximate"], ("none", "tanh"))
    if "causal" in full:
        full["causal"] = _bool(op, "causal", full["causal"])
    if "scale" in full:
        if full["scale"] is None:
            e = x.shape[-1] if x.ndim else 0  # a 0-d q fails the shape check below
            full["scale"] = 1.0 / math.sqrt(e) if e else 1.0
        s = full["scale"]
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Real) or not math.isfinite(_float_or_inf(s)):
            raise ParameterError(f"{op}: scale must be a finite number or None (1/sqrt(E)), got {s!r}")
        full["scale"] = float(s)
    if "reduction" in full:
        full["reduction"] = _choice(op, "reduction", full["reduction"], ("mean", "sum", "none"))
    return full


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------


def _broadcast(op: str, what: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(
            f"{op}: the batch axes of {what} {', '.join(str(s) for s in shapes)} do not broadcast; "
            "make them equal or 1"
        ) from None


def _need_ndim(spec: OpSpec, pos: int, arr: np.ndarray, ndim: int, hint: str) -> None:
    if arr.ndim < ndim:
        raise ShapeError(
            f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) has shape {arr.shape}; it needs at least "
            f"{ndim} dimension(s) {hint}"
        )


def _check_vector(spec: OpSpec, pos: int, arr: np.ndarray | None, n: int, what: str) -> None:
    if arr is not None and arr.shape != (n,):
        raise ShapeError(
            f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) has shape {arr.shape}; it must be ({n},), "
            f"{what}"
        )


def _shape(spec: OpSpec, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    """Check the input shapes against each other and return the output shape."""
    op = spec.name
    x = a[0]
    if op == "matmul":
        A, B = a
        for pos, arr in enumerate(a):
            if arr.ndim == 0:
                raise ShapeError(f"matmul: inputs[{pos}] ({spec.inputs[pos]}) is 0-d; matmul needs arrays "
                                 "with at least 1 dimension (use multiply for scalars)")
        ka = A.shape[-1]
        kb = B.shape[0] if B.ndim == 1 else B.shape[-2]
        if ka != kb:
            raise ShapeError(
                f"matmul: inner dimensions differ: A {A.shape} has K={ka} columns but B {B.shape} has "
                f"K={kb} rows; A.shape[-1] must equal B.shape[-2] (B.shape[0] for a 1-D B)"
            )
        batch = _broadcast(op, "A and B", A.shape[:-2], B.shape[:-2])
        tail = (A.shape[-2],) if A.ndim >= 2 else ()
        tail += (B.shape[-1],) if B.ndim >= 2 else ()
        return batch + tail
    if op == "linear":
        x, W, b = a
        _need_ndim(spec, 0, x, 1, "(..., in_features)")
        if W.ndim != 2:
            raise ShapeError(f"linear: inputs[1] (weight) has shape {W.shape}; it must be 2-D "
                             "(out_features, in_features) as in torch.nn.functional.linear")
        if W.shape[1] != x.shape[-1]:
            raise ShapeError(
                f"linear: x {x.shape} has in_features={x.shape[-1]} but weight {W.shape} has "
                f"in_features={W.shape[1]}; weight must be (out_features, in_features) — pass W.T if "
                "yours is (in, out)"
            )
        _check_vector(spec, 2, b, W.shape[0], "one bias per output feature")
        return x.shape[:-1] + (W.shape[0],)
    if op in ("sum", "mean"):
        axis = p["axis"]
        axes = tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        if op == "mean" and math.prod(x.shape[i] for i in axes) == 0:
            raise ShapeError(f"mean: the reduced axes of x {x.shape} hold no elements; the mean of nothing "
                             "is undefined — reduce over non-empty axes")
        if p["keepdims"]:
            return tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        return tuple(n for i, n in enumerate(x.shape) if i not in axes)
    if spec.kind == "normalization":
        _need_ndim(spec, 0, x, 1, "(the normalised axis is the last one)")
        n = x.shape[-1]
        for pos in range(1, len(a)):
            _check_vector(spec, pos, a[pos], n, f"matching the last axis of x {x.shape}")
        return x.shape
    if op == "attention":
        q, k, v = a
        for pos, arr in enumerate(a):
            _need_ndim(spec, pos, arr, 2, "(..., length, features)")
        if k.shape[-1] != q.shape[-1]:
            raise ShapeError(f"attention: q {q.shape} and k {k.shape} must have the same last axis E "
                             "(q is (..., L, E), k is (..., S, E))")
        if k.shape[-2] == 0:
            raise ShapeError(f"attention: k {k.shape} has no keys (S = 0); the softmax over no keys is "
                             "undefined — pass at least one key")
        if v.shape[-2] != k.shape[-2]:
            raise ShapeError(f"attention: k {k.shape} and v {v.shape} must have the same number of keys S "
                             "(k is (..., S, E), v is (..., S, Ev))")
        batch = _broadcast(op, "q, k and v", q.shape[:-2], k.shape[:-2], v.shape[:-2])
        return batch + (q.shape[-2], v.shape[-1])
    if op == "cross_entropy":
        logits, target = a
        if logits.ndim != 2:
            raise ShapeError(f"cross_entropy: logits has shape {logits.shape}; it must be (N, C) "
                             "(reshape to (-1, C); 1-D logits: logits[None])")
        n, c = logits.shape
        if target.shape != (n,):
            raise ShapeError(f"cross_entropy: target has shape {target.shape}; it must be ({n},), one class "
                             f"index per row of logits {logits.shape}")
        if target.size and (int(target.min()) < 0 or int(target.max()) >= c):
            bad = int(target.min()) if int(target.min()) < 0 else int(target.max())
            raise ShapeError(f"cross_entropy: target holds class index {bad}, outside [0, {c}) for logits "
                             f"with C={c} classes (ignore_index is not supported: drop those rows)")
        if p["reduction"] == "mean" and n == 0:
            raise ShapeError("cross_entropy: reduction='mean' of 0 rows is undefined; pass at least one row "
                             "or use reduction='sum'")
        return (n,) if p["reduction"] == "none" else ()
    if spec.kind in ("scan", "softmax"):
        _need_ndim(spec, 0, x, 1, "(pass x[None] for a single value)")
        return x.shape
    return x.shape  # elementwise


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------


def validate(op: Any, inputs: Sequence[Any], params: Mapping[str, Any] | None = None
             ) -> tuple[OpSpec, list[np.ndarray | None], dict]:
    """Check a call of ``op`` and return it in normal form.

    Parameters
    ----------
    op : str or OpSpec
        Op name from :data:`OPS`.
    inputs : list or tuple of array-likes
        In the order of :attr:`OpSpec.inputs`; trailing optional inputs may be left out, any
        optional input may be ``None``.  numpy (incl. ml_dtypes), torch and jax arrays.
    params : mapping, optional
        Op parameters; missing ones get their defaults.

    Returns
    -------
    spec : OpSpec
    arrays : list of numpy.ndarray or None
        One entry per name in ``spec.inputs`` (omitted optional inputs are ``None``), in their
        original formats (no copy for numpy inputs).
    params : dict
        Every parameter of the op with defaults filled: ``axis`` as a non-negative int (or sorted
        tuple, or None for ``sum``/``mean``), ``eps`` of ``rms_norm`` and ``scale`` of ``attention``
        as float64 numbers.

    Raises
    ------
    UnknownOpError, ParameterError, DtypeError, ShapeError
        With a message that names the input or parameter and how to fix it.
    """
    spec = get_op(op)
    if spec.kind == "module":
        raise ParameterError(
            "op 'module' is a whole model: grade it with numstd.grade(reference, candidate, make_inputs) "
            "or `python -m numstd grade --problem P.py --candidate C.py`, not with check/reference"
        )
    if not isinstance(inputs, (list, tuple)):
        raise ParameterError(
            f"{spec.name}: inputs must be a list of arrays ({', '.join(spec.inputs)}), got "
            f"{type(inputs).__name__}; e.g. inputs=[{spec.inputs[0]}]"
        )
    n, lo, hi = len(inputs), spec.n_required, len(spec.inputs)
    if not lo <= n <= hi:
        want = str(hi) if lo == hi else f"{lo} to {hi}"
        raise ParameterError(
            f"{spec.name}: takes {want} input(s) ({', '.join(spec.inputs)}"
            f"{f'; the last {spec.optional_inputs} optional' if spec.optional_inputs else ''}), got {n}"
        )
    arrays: list[np.ndarray | None] = []
    for pos in range(hi):
        x = inputs[pos] if pos < n else None
        if x is None:
            if pos < lo:
                raise ParameterError(f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) is required, got None")
            arrays.append(None)
            continue
        arr = _as_array(x, f"inputs[{pos}] ({spec.inputs[pos]})")
        _check_dtype(spec, pos, arr)
        arrays.append(arr)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ParameterError(f"{spec.name}: params must be a mapping of parameter names to values")
    full = _check_params(spec, arrays, params)
    _shape(spec, arrays, full)
    return spec, arrays, full


def output_shape(op: Any, inputs: Sequence[Any], params: Mapping[str, Any] | None = None) -> tuple[int, ...]:
    """Shape of the op's output for these inputs (the call is validated first).

    Examples
    --------
    >>> output_shape("matmul", [np.ones((2, 3, 4)), np.ones(4)])
    (2, 3)
    """
    spec, arrays, full = validate(op, inputs, params)
    return _shape(spec, arrays, full)
