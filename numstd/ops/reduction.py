"""Reductions and scans: ``sum``, ``mean``, ``cumsum``, the exact extrema ``amax``, ``amin`` and
their indices ``argmax``, ``argmin``.

``cumsum`` has three variants (issue 18 item 5): ``reverse=True`` (suffix sums), ``exclusive=True``
(``x[i]`` itself left out, ``y[0] = 0``) and an optional boolean ``mask`` input (the scan of
``x * mask``).  They are :attr:`~numstd.ops.entry.OpInfo.variant_params`: only a standard whose
selector names a variant judges it (NS-CUMSUM-REVERSE/EXCLUSIVE/MASKED-*), so the NS-CUMSUM-*@1
published for the plain scan keep their meaning (docs/methodology.md §7).

Reference: :mod:`numstd.reference.reduction` (double-double pairwise sums and blocked scans);
variants: :mod:`numstd.corpus.reductions`.

``amax``/``amin`` (numpy.max/min, torch.amax/amin) are judged bit-exact: the result is one of the
inputs, so a correct kernel returns exactly ``max(x)`` in the input format whatever its order of
comparisons (:mod:`numstd.reference.exact`, bound 0; variants: :mod:`numstd.corpus.extrema`).
NaN propagates (a reduced slice holding a NaN gives NaN, as torch.amax and numpy.max do).  Signed
zeros: the reference is IEEE 754-2019 ``maximum``/``minimum`` (``-0 < +0``), but the standards do
not judge the sign of a zero result (no ``signed_zero`` criterion): torch CPU returns the first of
tied zeros, numpy.max the last, jax.numpy.max ``+0``, and torch documents no order, so
``max(-0, +0)`` may be either zero.  A reduced slice with no elements is a ShapeError (the maximum
of nothing is undefined; numpy and torch raise too).

``argmax``/``argmin`` (numpy.argmax, torch.argmax) return integer indices (int64, or int32 as
jax.numpy returns them: :data:`INDEX_DTYPES`); ``check`` judges ``x`` at the indices as the
amax/amin output and the tie rule ``ties`` (:data:`TIES`; :mod:`numstd.judge.indices`).  ``max``/``min``
with an int ``axis`` are ops with two outputs, ``(values, indices)`` like ``torch.max(x, dim)``
(:data:`MULTI_OUTPUT`; :mod:`numstd.judge.multi`).  docs/methodology.md, "Index outputs".
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ..core.errors import ParameterError, ShapeError
from ._shapes import at_least_1d
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES", "MULTI_OUTPUT", "INDEX_DTYPES", "TIES"]

#: index dtypes an argmax/argmin output may have: int64 (torch, numpy's intp on 64-bit machines) and
#: int32 (jax.numpy.argmax without ``jax_enable_x64``); anything else is a failing ``dtype`` criterion
INDEX_DTYPES: tuple[str, ...] = ("int64", "int32")

#: argmax/argmin tie rules: ``"first"`` (the default: torch, numpy and jax return the first index of
#: the extremum, NaN counting as the extremum) or ``"any"`` (any index of an extremal value passes;
#: the verdict still counts the indices that are not the first)
TIES: tuple[str, ...] = ("first", "any")

#: ops with several outputs (``check`` takes a tuple): op -> ((output name, the op that judges it), ...).
#: ``max``/``min`` with an int ``axis`` are ``torch.max(x, dim)``/``torch.min(x, dim)``: (values, indices);
#: the values are judged as amax/amin, the indices as argmax/argmin, and each index must point to the
#: returned value (numstd.judge.multi).
MULTI_OUTPUT: Mapping[str, tuple[tuple[str, str], ...]] = {
    "max": (("values", "amax"), ("indices", "argmax")),
    "min": (("values", "amin"), ("indices", "argmin")),
}


#: reductions that need at least one element per reduced slice (what they are "of nothing")
_NONEMPTY = {"mean": "mean", "amax": "maximum", "amin": "minimum", "argmax": "maximum", "argmin": "minimum"}


def _reduced_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x = a[0]
    axis = p["axis"]
    axes = tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    if spec.name in _NONEMPTY and math.prod(x.shape[i] for i in axes) == 0:
        raise ShapeError(f"{spec.name}: the reduced axes of x {x.shape} hold no elements; the {_NONEMPTY[spec.name]} "
                         "of nothing is undefined — reduce over non-empty axes")
    if p["keepdims"]:
        return tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in axes)


def _extremum(name: str, np_name: str, what: str) -> OpInfo:
    """The entry of ``amax`` or ``amin`` (exact reductions; module docstring)."""
    return entry(name, "reduction", ("x",), 0, {"axis": None, "keepdims": False}, (
        f"y = {np_name}(x) over axis, {what} (numpy.{np_name}, torch.{name}): axis None (all axes), an int or a "
        f"tuple of ints, keepdims as numpy. Exact: the result is one of the inputs, returned in the input "
        f"format; NaN propagates (a reduced slice holding a NaN gives NaN); the sign of a zero result is not "
        f"judged ({np_name}(-0, +0) may be either zero); empty reduced axes are an error."
    ),
        shape=_reduced_shape, reference="exact:extremum", corpus="extrema", exact=True,
        calls={"torch": Call(f"torch.{name}", {"dim": "axis", "keepdim": "keepdims"}),
               "jax": Call(f"jax.numpy.{np_name}", {"axis": "axis", "keepdims": "keepdims"}),
               "numpy": Call(f"numpy.{np_name}", {"axis": "axis", "keepdims": "keepdims"})})


def _index_axis(op: str, value: Any) -> Any:
    """argmax/argmin: ``axis`` is None (the flattened input, as numpy and torch) or one int."""
    if isinstance(value, tuple):
        raise ParameterError(f"{op}: axis must be an int or None (the flattened input), got {value!r}; numpy.{op} and "
                             f"torch.{op} reduce one axis")
    return value


def _ties(op: str, value: Any) -> str:
    if not isinstance(value, str) or value not in TIES:
        raise ParameterError(f"{op}: ties={value!r} is not allowed; use 'first' (torch's first-index rule, the default) "
                             "or 'any' (any index of an extremal value)")
    return value


def _arg_extremum(name: str, np_name: str, what: str) -> OpInfo:
    """The entry of ``argmax`` or ``argmin`` (index outputs; docs/methodology.md, argmax/argmin)."""
    return entry(name, "reduction", ("x",), 0, {"axis": None, "keepdims": False, "ties": "first"}, (
        f"i = {name}(x) over axis (numpy.{name}, torch.{name}): the index along axis (axis None: into the "
        f"flattened x) of the {what}, an int64 or int32 array of the reduced shape (keepdims as numpy). Ties: the "
        f"first index of the {what} (ties='first', as torch, numpy and jax return it); ties='any' accepts any "
        f"index of an element equal to it. NaN counts as the {what} (the first NaN's index). -0 and +0 are equal. "
        f"Judged: x at the returned index must be the exact {what} (bit-exact, as a{name[3:]}), and the tie rule."
    ),
        shape=_reduced_shape, reference="exact:extremum", corpus="extrema", exact=True,
        param_checks={"axis": _index_axis, "ties": _ties}, index_of="a" + name[3:],
        calls={"torch": Call(f"torch.{name}", {"dim": "axis", "keepdim": "keepdims"}),
               "jax": Call(f"jax.numpy.{name}", {"axis": "axis", "keepdims": "keepdims"}),
               "numpy": Call(f"numpy.{name}", {"axis": "axis", "keepdims": "keepdims"})})


def _VARIANT_ARGS(axis_name: str) -> dict:
    """The keyword arguments of numstd.backends.scans' cumsum functions (framework name -> numstd's)."""
    return {axis_name: "axis", "reverse": "reverse", "exclusive": "exclusive"}


def _flag(op: str, value: Any) -> bool:
    """``reverse``/``exclusive``: True or False (not 1, not "yes")."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{op}: reverse and exclusive must be True or False, got {value!r}")
    return bool(value)


def _cumsum_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    """x's shape (1-D or more); a mask must have x's shape and hold only 0/1 (or booleans)."""
    shape = at_least_1d(spec, a, p)
    mask = a[1] if len(a) > 1 else None
    if mask is not None:
        if mask.shape != a[0].shape:
            raise ShapeError(f"cumsum: mask has shape {mask.shape}, x has {a[0].shape}; the mask must have x's shape "
                             "(broadcast it first: np.broadcast_to(mask, x.shape))")
        if mask.dtype.kind != "b" and not np.isin(mask, (0, 1)).all():
            raise ParameterError("cumsum: mask must be boolean (or integers 0 and 1); the masked cumsum sums x * mask, "
                                 "pass mask.astype(bool)")
    return shape


ENTRIES: tuple[OpInfo, ...] = (
    entry("sum", "reduction", ("x",), 0, {"axis": None, "keepdims": False}, (
        's = sum of x over axis (numpy.sum): axis None (all axes), an int or a tuple of ints.'
    ),
          shape=_reduced_shape, reference="reduction:sum_", corpus="reductions", terms=("abssum", "K", "g16")),
    entry("mean", "reduction", ("x",), 0, {"axis": None, "keepdims": False}, (
        'm = sum(x, axis) / K with K the number of reduced elements (numpy.mean).'
    ),
          shape=_reduced_shape, reference="reduction:mean", corpus="reductions", terms=("abssum", "K", "spillmag")),
    _extremum("amax", "max", "the maximum"),
    _extremum("amin", "min", "the minimum"),
    _arg_extremum("argmax", "max", "maximum"),
    _arg_extremum("argmin", "min", "minimum"),
    entry("cumsum", "scan", ("x", "mask"), 1, {"axis": -1, "reverse": False, "exclusive": False}, (
        'inclusive prefix sums along axis: y[..., i] = sum_{j <= i} x[..., j]. Unlike numpy '
        '(which flattens when axis is None) the default is the last axis, as in torch.cumsum '
        'with dim=-1; axis must be an int. Variants (numstd.ops.scan): reverse=True sums the '
        'suffix j >= i (torch.flip(torch.cumsum(torch.flip(x, [d]), d), [d])), exclusive=True leaves '
        'out x[i] itself (j < i; y[0] = 0), and an optional boolean mask of x\'s shape sums '
        'x * mask (NaN * False is NaN, as torch.cumsum(x * mask) gives). Only standards that '
        'select a variant judge it.'
    ),
          shape=_cumsum_shape, reference="reduction:cumsum", corpus="reductions", terms=("abssum", "K", "spillmag"),
          integer_inputs=(1,), param_checks={"reverse": _flag, "exclusive": _flag},
          variant_params=("reverse", "exclusive", "mask"),
          calls={"torch": Call("numstd.backends.scans.torch_cumsum", _VARIANT_ARGS("dim")),
                 "jax": Call("numstd.backends.scans.jax_cumsum", _VARIANT_ARGS("axis"))}),
)
