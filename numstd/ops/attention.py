"""``attention``: softmax(q k^T scale + mask) v (two contractions around a softmax).

Reference: :mod:`numstd.reference.attention`; variants: :mod:`numstd.corpus.attention`.  The
framework calls are not mechanical (masks, scale): the backends keep them.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.errors import ShapeError
from ._shapes import broadcast, need_ndim
from .entry import OpInfo, entry

__all__ = ["ENTRIES"]


def _attention_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    q, k, v = a
    for pos, arr in enumerate(a):
        need_ndim(spec, pos, arr, 2, "(..., length, features)")
    if k.shape[-1] != q.shape[-1]:
        raise ShapeError(f"attention: q {q.shape} and k {k.shape} must have the same last axis E "
                         "(q is (..., L, E), k is (..., S, E))")
    if k.shape[-2] == 0:
        raise ShapeError(f"attention: k {k.shape} has no keys (S = 0); the softmax over no keys is "
                         "undefined — pass at least one key")
    if v.shape[-2] != k.shape[-2]:
        raise ShapeError(f"attention: k {k.shape} and v {v.shape} must have the same number of keys S "
                         "(k is (..., S, E), v is (..., S, Ev))")
    batch = broadcast("attention", "q, k and v", q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return batch + (q.shape[-2], v.shape[-1])


ENTRIES: tuple[OpInfo, ...] = (
    entry("attention", "attention", ("q", "k", "v"), 0, {"scale": None, "causal": False}, (
        'out = softmax(q @ k^T * scale + mask) @ v '
        '(torch.nn.functional.scaled_dot_product_attention): q (..., L, E), k (..., S, E), v '
        '(..., S, Ev), leading axes broadcast. scale=None means 1/sqrt(E), filled in by '
        'validate() as the nearest float64 number, which the reference then takes as the '
        'exact scale. causal=True masks key j for query i when j > i (is_causal: the lower '
        'triangle aligned to the top-left corner).'
    ),
          shape=_attention_shape, reference="attention:attention", corpus="attention",
          terms=("absout", "scoremag", "K", "E", "vmax", "spillmag")),
)
