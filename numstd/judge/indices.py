"""Index outputs (argmax, argmin): checked, gathered into values, and judged by the tie rule.

An argmax kernel returns indices; what makes them right is the value they point to.  ``check``
(and calibration) therefore judge ``x`` at the returned indices, ``x[..., i, ...]`` along the axis
(the flattened ``x`` for ``axis=None``), as the output of the op the entry names in
:attr:`~numstd.ops.entry.OpInfo.index_of` (amax/amin: bit-exact, NaN where the slice holds a NaN),
in the input's format.  Before that, the indices themselves must be an int64 or int32 array
(:data:`numstd.ops.reduction.INDEX_DTYPES`) of the output shape with every value in
``[0, n)``, ``n`` the length of the reduced axis; anything else is a failing verdict whose criterion
(``dtype``, ``shape``, ``range``) says what is wrong, never an exception.

The tie rule is a criterion of its own, ``ties``: its value is the number of indices that are not
the first index of the extremum (:func:`numstd.reference.exact.first_index`).  Under
``ties="first"`` (the default) it must be 0; under ``ties="any"`` it is reported and passes.  An
index that is not even extremal fails the value criteria under both rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .verdict import CriterionResult

__all__ = ["Gathered", "gather", "ties_criterion", "index_dtype_criterion"]


@dataclass(frozen=True)
class Gathered:
    """What :func:`gather` found: the values at the indices, or the problem with the indices.

    ``values`` is ``x`` at the indices in ``x``'s format (None with a problem); ``dtype`` the indices'
    dtype name; ``problem`` a sentence and ``criterion`` the name of the failing criterion
    (``dtype``, ``shape``, ``range``) when the indices cannot be judged; ``indices`` the int64 indices.
    """

    values: np.ndarray | None
    dtype: str
    problem: str | None = None
    criterion: str = ""
    indices: np.ndarray | None = None


def gather(op: str, actual: np.ndarray, x: np.ndarray, params: Mapping[str, Any], shape: tuple) -> Gathered:
    """The values of ``x`` at the indices ``actual`` (an argmax/argmin output), or why there are none."""
    from ..ops.reduction import INDEX_DTYPES

    dt = str(actual.dtype)
    if dt not in INDEX_DTYPES:
        kind = {"f": "floating-point", "b": "boolean", "u": "unsigned", "i": "narrow integer",
                "V": "floating-point", "c": "complex"}.get(actual.dtype.kind, "non-integer")
        return Gathered(None, dt, f"the indices have {kind} dtype {dt}; {op} returns integer indices, "
                                  f"int64 (torch, numpy) or int32 (jax.numpy without x64)", "dtype")
    if actual.shape != tuple(shape):
        return Gathered(None, dt, f"output shape {actual.shape} is not the expected {tuple(shape)}", "shape")
    axis, keepdims = params["axis"], params["keepdims"]
    n = x.size if axis is None else x.shape[axis]
    idx = actual.astype(np.int64)
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        v = int(idx[where])
        side = "negative" if v < 0 else f"beyond the last index {n - 1}"
        return Gathered(None, dt, f"{int(bad.sum()):,} of {idx.size:,} indices are out of range [0, {n}) "
                                  f"(first at {list(where)}: {v}, {side})", "range", idx)
    if axis is None:
        values = x.reshape(-1)[idx]
    else:
        k = idx if keepdims else np.expand_dims(idx, axis)
        values = np.take_along_axis(x, k, axis)
        if not keepdims:
            values = np.squeeze(values, axis)
    return Gathered(np.asarray(values), dt, None, "", idx)


def ties_criterion(op: str, g: Gathered, x: np.ndarray, params: Mapping[str, Any]) -> CriterionResult:
    """The ``ties`` criterion: how many indices are not the first index of the extremum."""
    from ..reference.exact import first_index

    first = first_index(op, x, params["axis"], params["keepdims"])
    off = g.indices != first
    n_off, n = int(np.count_nonzero(off)), int(off.size)
    rule = params.get("ties", "first")
    if n_off:
        where = tuple(int(i) for i in np.argwhere(off)[0]) if off.ndim else ()
        detail = f"first at {list(where)}: index {int(g.indices[where])}, the first extremal index is {int(first[where])}"
    else:
        detail = ""
    if rule == "first":
        msg = (f"{n_off:,} of {n:,} indices are not the first index of the extremum ({detail}; ties='first', "
               "torch's rule)" if n_off else f"every index is the first index of the extremum (ties='first')")
        return CriterionResult("ties", n_off == 0, float(n_off), 0.0, msg)
    msg = (f"{n_off:,} of {n:,} indices are not the first index of the extremum ({detail}); allowed by ties='any' "
           "when they point to an extremal value" if n_off else "every index is the first index of the extremum")
    return CriterionResult("ties", True, float(n_off), float(n), msg)


def index_dtype_criterion(dtype: str, values_format: str) -> CriterionResult:
    """The ``dtype`` criterion of an index output that passed :func:`gather` (int64 or int32)."""
    return CriterionResult("dtype", True, 0.0, 0.0,
                           f"index dtype {dtype} (accepted: int64, int32); judged x at the indices, in {values_format}")
