"""Shape checks the op families share (each raises ShapeError naming the input and the fix)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ShapeError

__all__ = ["broadcast", "need_ndim", "check_vector", "same_shape", "at_least_1d"]


def broadcast(op: str, what: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(
            f"{op}: the batch axes of {what} {', '.join(str(s) for s in shapes)} do not broadcast; "
            "make them equal or 1"
        ) from None


def need_ndim(spec: Any, pos: int, arr: np.ndarray, ndim: int, hint: str) -> None:
    if arr.ndim < ndim:
        raise ShapeError(
            f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) has shape {arr.shape}; it needs at least "
            f"{ndim} dimension(s) {hint}"
        )


def check_vector(spec: Any, pos: int, arr: np.ndarray | None, n: int, what: str) -> None:
    if arr is not None and arr.shape != (n,):
        raise ShapeError(
            f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) has shape {arr.shape}; it must be ({n},), "
            f"{what}"
        )


def same_shape(spec: Any, a: list, p: Any) -> tuple[int, ...]:
    """Elementwise ops: the output has the input's shape."""
    return a[0].shape


def at_least_1d(spec: Any, a: list, p: Any) -> tuple[int, ...]:
    """Ops along an axis (scans, softmax): the output has the input's shape, 1-D or more."""
    need_ndim(spec, 0, a[0], 1, "(pass x[None] for a single value)")
    return a[0].shape
