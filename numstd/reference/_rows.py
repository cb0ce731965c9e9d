"""Helpers for references whose rows ``check`` may cut into pieces (:class:`numstd.reference.RowPiece`).

A piece's elements are computed from statistics of its whole rows; these compute the statistics in
bounded memory and keep them for the next piece of the same rows.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

__all__ = ["by_row_groups", "cached_stats"]


def by_row_groups(x: np.ndarray, fn: Callable[[np.ndarray], tuple], limit: int) -> tuple:
    """``fn`` of groups of whole rows (last axis) of ``x`` of about ``limit`` elements (at least one
    row), its keepdims results put together in ``x``'s row order (each row is computed alone)."""
    if x.size <= limit or x.ndim == 1:
        return fn(x)
    per = math.prod(x.shape[1:])
    if per <= limit:
        step = max(1, limit // per)
        parts = [fn(x[i:i + step]) for i in range(0, x.shape[0], step)]
        return tuple(np.concatenate(p, axis=0) for p in zip(*parts))
    parts = [by_row_groups(x[i], fn, limit) for i in range(x.shape[0])]
    return tuple(np.stack(p, axis=0) for p in zip(*parts))


def cached_stats(params: dict, name: str, compute: Callable[[], Any]) -> Any:
    """The statistics of the rows of ``params["_piece"]``: from the caller's ``_cache`` when the piece
    before this one was of the same rows (one entry per ``name``: pieces of a row come one after
    another), else ``compute()``, kept there for the next piece."""
    key = (name, params["_piece"].key)
    cache = params.get("_cache")
    hit = cache.get(name) if cache is not None else None
    if hit is not None and hit[0] == key:
        return hit[1]
    stats = compute()
    if cache is not None:
        cache[name] = (key, stats)
    return stats
