"""The similarity ops written with an array module, as the numpy and jax backends compute them.

Each function is torch.nn.functional's formula (:mod:`numstd.ops.similarity`) in ``xp`` (numpy on the
numpy backend's float32 working arrays, ``jax.numpy`` in the inputs' dtype on the jax backend):
norms by ``sqrt(sum(x * x))`` / ``sum(|x|)``, the separate clamps of torch 2.x's cosine_similarity,
``EPSILON = 1e-12`` added to the squared norms of cosine_embedding_loss, and ``eps`` added to the
difference in triplet_margin_loss's pairwise distance.  The entries' ``calls`` name them.
"""

from __future__ import annotations

from typing import Any

from .base import reduce_loss

__all__ = [
    "normalize_np", "normalize_jnp", "cosine_similarity_np", "cosine_similarity_jnp",
    "cosine_embedding_loss_np", "cosine_embedding_loss_jnp", "triplet_margin_loss_np", "triplet_margin_loss_jnp",
]


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _np() -> Any:
    import numpy as np

    return np


def _norm(xp: Any, x: Any, p: float, dim: int) -> Any:
    if p == 1.0:
        return xp.sum(xp.abs(x), axis=dim, keepdims=True)
    if p == 2.0:
        return xp.sqrt(xp.sum(x * x, axis=dim, keepdims=True))
    return xp.sum(xp.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)


def _normalize(xp: Any, x: Any, p: float, dim: int, eps: float) -> Any:
    return x / xp.maximum(_norm(xp, x, p, dim), eps)


def _cosine(xp: Any, x1: Any, x2: Any, dim: int, eps: float) -> Any:
    return xp.sum(_normalize(xp, x1, 2.0, dim, eps) * _normalize(xp, x2, 2.0, dim, eps), axis=dim)


def _cel(xp: Any, x1: Any, x2: Any, t: Any, margin: float, reduction: str) -> Any:
    prod = xp.sum(x1 * x2, axis=-1)
    m1 = xp.sum(x1 * x1, axis=-1) + 1e-12
    m2 = xp.sum(x2 * x2, axis=-1) + 1e-12
    cos = prod / xp.sqrt(m1 * m2)
    loss = xp.where(t == 1, 1 - cos, xp.maximum(cos - margin, 0))
    return reduce_loss(xp, loss, reduction)


def _triplet(xp: Any, a: Any, pos: Any, neg: Any, margin: float, p: float, eps: float, swap: bool,
             reduction: str) -> Any:
    def dist(x: Any, y: Any) -> Any:
        return _norm(xp, x - y + eps, p, -1)[..., 0]

    d_pos, d_neg = dist(a, pos), dist(a, neg)
    if swap:
        d_neg = xp.minimum(d_neg, dist(pos, neg))
    return reduce_loss(xp, xp.maximum(margin + d_pos - d_neg, 0), reduction)


def normalize_np(x: Any, *, p: float, dim: int, eps: float) -> Any:
    """``normalize`` in numpy."""
    return _normalize(_np(), x, p, dim, eps)


def normalize_jnp(x: Any, *, p: float, dim: int, eps: float) -> Any:
    """``normalize`` in jax.numpy."""
    return _normalize(_jnp(), x, p, dim, eps)


def cosine_similarity_np(x1: Any, x2: Any, *, dim: int, eps: float) -> Any:
    """``cosine_similarity`` in numpy."""
    return _cosine(_np(), x1, x2, dim, eps)


def cosine_similarity_jnp(x1: Any, x2: Any, *, dim: int, eps: float) -> Any:
    """``cosine_similarity`` in jax.numpy."""
    return _cosine(_jnp(), x1, x2, dim, eps)


def cosine_embedding_loss_np(x1: Any, x2: Any, t: Any, *, margin: float, reduction: str) -> Any:
    """``cosine_embedding_loss`` in numpy."""
    return _cel(_np(), x1, x2, t, margin, reduction)


def cosine_embedding_loss_jnp(x1: Any, x2: Any, t: Any, *, margin: float, reduction: str) -> Any:
    """``cosine_embedding_loss`` in jax.numpy."""
    return _cel(_jnp(), x1, x2, t, margin, reduction)


def triplet_margin_loss_np(a: Any, pos: Any, neg: Any, *, margin: float, p: float, eps: float, swap: bool,
                           reduction: str) -> Any:
    """``triplet_margin_loss`` in numpy."""
    return _triplet(_np(), a, pos, neg, margin, p, eps, swap, reduction)


def triplet_margin_loss_jnp(a: Any, pos: Any, neg: Any, *, margin: float, p: float, eps: float, swap: bool,
                            reduction: str) -> Any:
    """``triplet_margin_loss`` in jax.numpy."""
    return _triplet(_jnp(), a, pos, neg, margin, p, eps, swap, reduction)
