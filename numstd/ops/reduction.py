"""Reductions and scans: ``sum``, ``mean`` and ``cumsum``.

Reference: :mod:`numstd.reference.reduction` (double-double pairwise sums and blocked scans);
variants: :mod:`numstd.corpus.reductions`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..core.errors import ShapeError
from ._shapes import at_least_1d
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES"]


def _reduced_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x = a[0]
    axis = p["axis"]
    axes = tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    if spec.name == "mean" and math.prod(x.shape[i] for i in axes) == 0:
        raise ShapeError(f"mean: the reduced axes of x {x.shape} hold no elements; the mean of nothing "
                         "is undefined — reduce over non-empty axes")
    if p["keepdims"]:
        return tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in axes)


ENTRIES: tuple[OpInfo, ...] = (
    entry("sum", "reduction", ("x",), 0, {"axis": None, "keepdims": False}, (
        's = sum of x over axis (numpy.sum): axis None (all axes), an int or a tuple of ints.'
    ),
          shape=_reduced_shape, reference="reduction:sum_", corpus="reductions", terms=("abssum", "K")),
    entry("mean", "reduction", ("x",), 0, {"axis": None, "keepdims": False}, (
        'm = sum(x, axis) / K with K the number of reduced elements (numpy.mean).'
    ),
          shape=_reduced_shape, reference="reduction:mean", corpus="reductions", terms=("abssum", "K")),
    entry("cumsum", "scan", ("x",), 0, {"axis": -1}, (
        'inclusive prefix sums along axis: y[..., i] = sum_{j <= i} x[..., j]. Unlike numpy '
        '(which flattens when axis is None) the default is the last axis, as in torch.cumsum '
        'with dim=-1; axis must be an int.'
    ),
          shape=at_least_1d, reference="reduction:cumsum", corpus="reductions", terms=("abssum", "K"),
          calls={"torch": Call("torch.cumsum", {"dim": "axis"}), "jax": Call("jax.numpy.cumsum", {"axis": "axis"})}),
)
