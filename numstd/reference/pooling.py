"""References of the pooling ops: ``max_pool{1,2,3}d`` (exact, bound 0) and ``avg_pool{1,2,3}d``.

Windows (:func:`numstd.ops.pooling.windows`, shared with the backends and the corpus): the input is padded in float64 with
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

from ..core.summation import U
from ..ops.pooling import divisor, windows

__all__ = ["max_pool", "avg_pool"]


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
