"""The frameworks' own cumsum with numstd's variants (``reverse``, ``exclusive``, ``mask``).

Neither torch.cumsum nor jax.numpy.cumsum has these flags; KernelBench's reverse, exclusive and
masked cumsum problems compose them from the framework's ops, and so do these functions: the mask
multiplies (``x * mask``, exact for a 0/1 mask), reverse flips before and after the scan, exclusive
shifts the input right by one along the axis (a zero in front, the last element dropped) before an
inclusive scan.  Each is the framework's kernel on the framework's tensors, in the input's dtype.
"""

from __future__ import annotations

from typing import Any

__all__ = ["torch_cumsum", "jax_cumsum", "numpy_cumsum"]


def torch_cumsum(x: Any, mask: Any = None, *, dim: int = -1, reverse: bool = False, exclusive: bool = False) -> Any:
    """``torch.cumsum`` of ``x * mask`` along ``dim``, reversed and/or exclusive as asked."""
    import torch

    if mask is not None:
        x = x * mask.to(x.dtype)
    if reverse:
        x = torch.flip(x, [dim])
    if exclusive:
        zero = torch.zeros_like(x.narrow(dim, 0, 1))
        x = torch.cat([zero, x.narrow(dim, 0, x.shape[dim] - 1)], dim=dim)
    y = torch.cumsum(x, dim=dim)
    return torch.flip(y, [dim]) if reverse else y


def jax_cumsum(x: Any, mask: Any = None, *, axis: int = -1, reverse: bool = False, exclusive: bool = False) -> Any:
    """``jax.numpy.cumsum`` of ``x * mask`` along ``axis``, reversed and/or exclusive as asked."""
    import jax.numpy as jnp

    if mask is not None:
        x = x * jnp.asarray(mask).astype(x.dtype)
    if reverse:
        x = jnp.flip(x, axis)
    if exclusive:
        n = x.shape[axis]
        zero = jnp.zeros_like(jnp.take(x, jnp.arange(0, 1), axis=axis))
        x = jnp.concatenate([zero, jnp.take(x, jnp.arange(0, n - 1), axis=axis)], axis=axis)
    y = jnp.cumsum(x, axis=axis)
    return jnp.flip(y, axis) if reverse else y


def numpy_cumsum(x: Any, mask: Any = None, *, axis: int = -1, reverse: bool = False, exclusive: bool = False) -> Any:
    """``numpy.cumsum`` (sequential) of ``x * mask`` along ``axis``, reversed and/or exclusive as asked."""
    import numpy as np

    if mask is not None:
        x = x * np.asarray(mask).astype(x.dtype)
    if reverse:
        x = np.flip(x, axis)
    if exclusive:
        x = np.moveaxis(x, axis, -1)
        x = np.moveaxis(np.concatenate([np.zeros_like(x[..., :1]), x[..., :-1]], axis=-1), -1, axis)
    y = np.cumsum(x, axis=axis)
    return np.flip(y, axis) if reverse else y
