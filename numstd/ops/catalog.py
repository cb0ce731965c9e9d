"""The op catalog: every op numstd knows (the entries of the family modules) and validation of a call.

One place decides whether a call is well formed: :func:`validate` converts the inputs to numpy
(keeping their formats), checks their number, dtypes and shapes, checks the parameters and fills
their defaults.  Everything downstream (references, error models, chunking, standards) receives
validated arrays and a complete parameter dict and never re-checks.

Semantics follow ``torch.nn.functional`` for the same name; parameter names follow numpy
(``axis``, ``keepdims``, ``eps``, ``approximate``).  Each op's entry (:class:`~numstd.ops.entry.OpInfo`)
lives in its family's module (:mod:`numstd.ops.elementwise`, ``.contraction``, ``.reduction``,
``.softmax``, ``.normalization``, ``.attention``, ``.loss``, ``.module``); its formula is in
:attr:`OpInfo.doc` and :mod:`numstd.reference` computes exactly these formulas.

Kinds (what the error analysis of the op looks like):

==============  =====================================================================
kind            ops
==============  =====================================================================
contraction     matmul, linear, conv, conv_transpose, scaled_matmul  (dot products of length K)
reduction       sum, mean, amax, amin (amax/amin exact: reference ``exact:extremum``), argmax, argmin
                (integer indices judged through the values they point to), and the
                pooling windows max_pool1d/2d/3d (exact) and avg_pool1d/2d/3d
scan            cumsum
softmax         softmax, log_softmax
normalization   layer_norm, rms_norm, group_norm, instance_norm, batch_norm
elementwise     exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt, softplus
attention       attention  (two contractions around a softmax)
loss            cross_entropy, mse_loss, huber_loss, smooth_l1_loss, kl_div, nll_loss,
                hinge_embedding_loss
exact           (reserved; the exact ops hardtanh, clamp, relu, amax, amin keep their family's kind
                and are exact through a zero-bound reference)
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

from ..core.arrays import to_numpy
from ..core.errors import DtypeError, ParameterError, UnknownOpError
from .entry import KINDS, REQUIRED, OpInfo

__all__ = [
    "OpInfo",
    "OpSpec",
    "OPS",
    "FAMILIES",
    "KINDS",
    "REQUIRED",
    "get_op",
    "validate",
    "output_shape",
    "default_rms_eps",
]

#: the modules of :mod:`numstd.ops` that hold the entries, one per op family
FAMILIES: tuple[str, ...] = (
    "contraction", "conv", "reduction", "scan", "softmax", "normalization", "elementwise", "activation", "attention", "loss",
    "pooling", "module",
    "similarity",  # normalize, cosine_similarity, cosine_embedding_loss, triplet_margin_loss
    "cast",  # quantize-dequantize into block-scaled formats (numstd.core.scaled)
    "scaled",  # scaled_matmul: fp8 / MX GEMMs with dequantization scales
)

OpSpec = OpInfo  # the entry's name before the entries held more than the signature


def _collect() -> Mapping[str, OpInfo]:
    import importlib

    out: dict[str, OpInfo] = {}
    for family in FAMILIES:
        for e in importlib.import_module(f"{__package__}.{family}").ENTRIES:
            if e.name in out:  # pragma: no cover - caught by tests/test_ops.py
                raise AssertionError(f"op {e.name!r} has two entries")
            out[e.name] = e
    return types.MappingProxyType(out)


OPS: Mapping[str, OpInfo] = _collect()
"""Read-only mapping op name -> :class:`~numstd.ops.entry.OpInfo`."""


def get_op(name: Any) -> OpInfo:
    """Return the catalog entry for ``name``.

    Raises
    ------
    UnknownOpError
        Listing the catalog and the closest names (``difflib``).
    """
    if isinstance(name, OpInfo):
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
    from ..core.formats import FORMATS

    return FORMATS


def _is_float(dtype: np.dtype) -> bool:
    return dtype.name in _float_formats() and dtype.name != "tf32"


def _as_array(x: Any, name: str) -> np.ndarray:
    # numpy arrays of a supported float format are used as they are (to_numpy would only return
    # them unchanged); everything else goes through numstd.arrays.to_numpy.
    if isinstance(x, np.ndarray) and _is_float(x.dtype):
        return x
    return to_numpy(x, name=name)


def _check_dtype(spec: OpInfo, pos: int, arr: np.ndarray) -> None:
    label = f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]})"
    if pos in spec.integer_inputs:
        if spec.name == "cumsum":  # (its mask: booleans, or 0/1 integers)
            if arr.dtype.kind not in "biu":
                raise DtypeError(f"{label} has dtype {arr.dtype}; cumsum's mask is boolean (or integers 0 and 1): "
                                 "pass mask.astype(bool)")
            return
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
    from ..core.formats import get_format

    name = np.dtype(dtype).name
    return get_format("float64" if name == "float64" else "float32").eps


# torch.nn.functional parameter names -> the numpy-style names of the catalog
_TORCH_NAMES: Mapping[str, str] = types.MappingProxyType({
    "dim": "axis", "keepdim": "keepdims", "is_causal": "causal",
})


def _check_params(spec: OpInfo, arrays: list, params: Mapping[str, Any]) -> dict:
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
        full["reduction"] = _choice(op, "reduction", full["reduction"],
                                    ("mean", "sum", "none") + (("batchmean",) if op == "kl_div" else ()))
    for name, rule in spec.param_checks.items():
        full[name] = rule(op, full[name])
    if spec.check_params is not None:
        spec.check_params(op, full)
    return full


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------


def _shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    """Check the input shapes against each other and return the output shape (the entry's rule)."""
    return spec.shape(spec, a, p)


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------


def validate(op: Any, inputs: Sequence[Any], params: Mapping[str, Any] | None = None
             ) -> tuple[OpInfo, list[np.ndarray | None], dict]:
    """Check a call of ``op`` and return it in normal form.

    Parameters
    ----------
    op : str or OpInfo
        Op name from :data:`OPS`.
    inputs : list or tuple of array-likes
        In the order of :attr:`OpInfo.inputs`; trailing optional inputs may be left out, any
        optional input may be ``None``.  numpy (incl. ml_dtypes), torch and jax arrays.
    params : mapping, optional
        Op parameters; missing ones get their defaults.

    Returns
    -------
    spec : OpInfo
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
