"""References of the pooling ops: ``max_pool{1,2,3}d`` (exact, bound 0) and ``avg_pool{1,2,3}d``.

Windows (:mod:`numstd.ops.pooling` for the output size): the input is padded in float64 with
``-inf`` (max) or ``0`` (avg) by ``padding`` on the left and as much as the last window needs on
the right, and a strided, dilated window view is taken over the last ``d`` axes.

max pooling: ``max`` over each window of the input widened to float64, exact (the result is one
of the inputs); NaN propagates (``numpy.max``, as torch's kernel does).  aux: none.

avg pooling: ``S`` = the float64 sum of the ``K = prod(kernel_size)`` window values (padding zeros
add exactly) and ``y = fl(S / D)`` with ``D`` the divisor (``count_include_pad``: the window
clipped to ``[-p, L + p)`` per axis, else its in-bounds elements).  Any summation order errs by at
most ``(K - 1) u sum |x|`` (Higham 2002 eq. 4.4) and the division by ``u |y|``:
``bound = (K - 1) u A / D + u |y|`` with ``A`` the window sum of ``|x|``.  aux: ``absmean = A / D``
(the mean magnitude the average is formed from) and ``K``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core.summation import U
from ..ops.pooling import output_size, spatial_params

__all__ = ["max_pool", "avg_pool", "windows", "divisor"]


def windows(x: np.ndarray, op: str, params: dict, fill: float) -> np.ndarray:
    """The windows of ``x``: shape ``x.shape[:-d] + out + kernel_size`` (a view of a padded copy)."""
    d = int(op[-2])
    k, s, p, dil = spatial_params(op, params)
    lead = x.ndim - d
    spatial = x.shape[lead:]
    out = [output_size(spatial[i], k[i], s[i], p[i], dil[i], params["ceil_mode"]) for i in range(d)]
    pads = [(0, 0)] * lead
    for i in range(d):
        need = (out[i] - 1) * s[i] + dil[i] * (k[i] - 1) + 1
        pads.append((p[i], max(0, need - p[i] - spatial[i])))
    w = np.pad(x, pads, constant_values=fill)
    for i in range(d):
        ax = lead + i
        w = sliding_window_view(w, dil[i] * (k[i] - 1) + 1, axis=ax)[..., ::dil[i]]
        w = w[(slice(None),) * ax + (slice(0, (out[i] - 1) * s[i] + 1, s[i]),)]
    return w


def divisor(op: str, spatial: tuple, params: dict) -> np.ndarray:
    """The divisor of each output window of avg pooling (broadcastable over the spatial output axes)."""
    d = int(op[-2])
    k, s, p, dil = spatial_params(op, params)
    div = np.ones(())
    for i in range(d):
        n = output_size(spatial[i], k[i], s[i], p[i], dil[i], params["ceil_mode"])
        start = np.arange(n) * s[i] - p[i]
        end = np.minimum(start + k[i], spatial[i] + p[i])
        size = end - start if params["count_include_pad"] else np.minimum(end, spatial[i]) - np.maximum(start, 0)
        div = np.multiply.outer(div, size.astype(np.float64))
    return div


def max_pool(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``max_pool{d}d``: ``(values, 0, {})``, exact (module docstring)."""
    d = int(op[-2])
    x = np.asarray(arrays[0], dtype=np.float64)
    w = windows(x, op, params, -np.inf)
    v = np.max(w, axis=tuple(range(-d, 0))) if w.size else np.zeros(w.shape[:-d])
    return v, np.zeros(v.shape), {}


def avg_pool(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``avg_pool{d}d`` with its bound (module docstring)."""
    d = int(op[-2])
    x = np.asarray(arrays[0], dtype=np.float64)
    K = math.prod(params["kernel_size"])
    w = windows(x, op, params, 0.0)
    axes = tuple(range(-d, 0))
    S = np.sum(w, axis=axes)
    A = np.sum(np.abs(w), axis=axes)
    D = divisor(op, x.shape[x.ndim - d:], params)
    y = S / D
    bound = (K - 1) * U * A / D + U * np.abs(y)
    return y, bound, {"absmean": A / D, "K": np.asarray(float(K))}
