"""The ``numpy`` backend: what a plain numpy user writes, on the CPU.

Every op is computed in the *working precision* ``w`` — float64 for float64 inputs, float32 for
every other format (float32, float16, bfloat16, float8: numpy's float16 math and ml_dtypes' bf16
math are not what a numpy user relies on) — with numpy's own kernels (``np.matmul``, ``np.sum``'s
pairwise summation, ``np.exp`` …) and ``scipy.special.erf``, then rounded once to the first input's
format with :func:`numstd.formats.round_to` (round to nearest even, non-saturating like an
``astype``).  Formulas (``x`` in ``w``; reductions over ``axis``):

=============  ===================================================================================
matmul         ``np.matmul(A, B)``
linear         ``x @ W.T + b``
conv           im2col per group (:func:`numstd.ops.conv.im2col`), ``np.matmul(cols, W_g.T) + b``
conv_transpose the same on the zero-dilated input and flipped weight (:func:`numstd.ops.conv.transposed`)
sum, mean      ``np.sum`` / ``np.mean`` (pairwise summation)
cumsum         ``np.cumsum`` (sequential)
amax, amin     ``np.max`` / ``np.min`` (exact; NaN propagates)
softmax        ``e = exp(x - max x); e / sum e``
log_softmax    ``(x - max x) - log(sum exp(x - max x))``
layer_norm     ``d = x - mean x; d / sqrt(mean(d²) + eps) * weight + bias`` (two-pass variance)
rms_norm       ``x / sqrt(mean(x²) + eps) * weight``
group_norm,    layer_norm's two-pass formula over each normalised group (rows of the rearranged
instance_norm, input), then ``* weight[c] + bias[c]``; batch_norm eval:
batch_norm     ``(x - running_mean) / sqrt(running_var + eps) * weight + bias``
max_pool{d}d   ``np.max`` over each window (``numstd.ops.pooling.windows``, ``-inf`` padding)
avg_pool{d}d   ``np.sum`` over each window (zero padding) ``/`` the divisor
sigmoid, silu  ``1 / (1 + exp(-x))``, ``x / (1 + exp(-x))``
gelu           ``x/2 (1 + erf(x/√2))``; tanh form ``x/2 (1 + tanh(√(2/π)(x + 0.044715 x³)))``
rsqrt          ``1 / sqrt(x)``
attention      ``softmax(q kᵀ · scale + causal mask) v``
cross_entropy  ``(max + log sum exp(x - max)) - x[target]``, then mean / sum / none
mse_loss       ``d = input - target; np.mean(d * d)`` / ``np.sum`` / ``d * d``
huber_loss     ``z = |input - target|; where(z < delta, 0.5 z z, delta (z - 0.5 delta))``, reduced
smooth_l1_loss ``where(z < beta, 0.5 z z / beta, z - 0.5 beta)`` (``z`` for beta = 0), reduced
kl_div         ``xlogy(t, t) - t x`` (log_target: ``exp(t) (t - x)``), reduced (batchmean: sum / N)
nll_loss       ``-take_along_axis(x, target)``, 0 for ignored rows; sum / rows kept for the mean
hinge_embedding_loss ``where(target == 1, x, maximum(margin - x, 0))``, reduced
=============  ===================================================================================
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .base import Backend, channel_norm, framework_call, framework_ops, huber_terms, hinge_terms, kl_div_loss, nll_loss_of, reduce_loss, version_string

__all__ = ["NumpyBackend"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def _layer_norm(x: np.ndarray, w: Any, b: Any, eps: float) -> np.ndarray:
    d = x - np.mean(x, axis=-1, keepdims=True)
    y = d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + x.dtype.type(eps))
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def _rms_norm(x: np.ndarray, w: Any, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + x.dtype.type(eps))
    return y * w if w is not None else y


def _channel_norm(op: str, x: np.ndarray, w: list, p: dict) -> np.ndarray:
    eps = x.dtype.type(p["eps"])
    return channel_norm(np, op, x, w, dict(p, eps=eps), lambda d, v: d / np.sqrt(v))


def _pool(op: str, x: np.ndarray, p: dict) -> np.ndarray:
    from ..ops.pooling import divisor, windows

    d = int(op[-2])
    axes = tuple(range(-d, 0))
    if op.startswith("max"):
        return np.max(windows(x, op, p, -np.inf), axis=axes)
    return np.sum(windows(x, op, p, 0.0), axis=axes) / divisor(op, x.shape[x.ndim - d:], p).astype(x.dtype)


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    half = x.dtype.type(0.5)
    if approximate == "tanh":
        c = x.dtype.type(_SQRT_2_OVER_PI)
        return half * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x * x * x)))
    from scipy.special import erf

    return half * x * (1 + erf(x / x.dtype.type(math.sqrt(2.0))))


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * q.dtype.type(scale)
    if causal:
        L, S = s.shape[-2], s.shape[-1]
        s = np.where(np.arange(S)[None, :] > np.arange(L)[:, None], -np.inf, s).astype(q.dtype)
    return np.matmul(_softmax(s, -1), v)


def _cross_entropy(x: np.ndarray, target: np.ndarray, reduction: str) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    lse = (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[:, 0]
    loss = lse - x[np.arange(x.shape[0]), target]
    return reduce_loss(np, loss, reduction)


def _mse_loss(x: np.ndarray, target: np.ndarray, reduction: str) -> np.ndarray:
    d = x - target
    return reduce_loss(np, d * d, reduction)



def _conv(x: np.ndarray, w: np.ndarray, b: Any, p: dict, transpose: bool = False) -> np.ndarray:
    from ..ops.conv import geometry, group_weight, im2col, pad_input, transposed_problem

    if transpose:
        x, w, g, _ = transposed_problem(x, w, p)
    else:
        g = geometry(x.shape, w.shape, p)
    xp = pad_input(x, g)
    rows = np.arange(x.shape[0] * g.positions)
    y = np.concatenate([np.matmul(im2col(xp, g, grp, rows), group_weight(w, g, grp)) for grp in range(g.groups)],
                       axis=1)
    if b is not None:
        y = y + b
    return np.moveaxis(y.reshape((x.shape[0],) + g.out_size + (g.c_out,)), -1, 1)


def _cumsum(x: np.ndarray, mask: np.ndarray | None, p: dict) -> np.ndarray:
    from .scans import numpy_cumsum

    return numpy_cumsum(x, mask, axis=p["axis"], reverse=p.get("reverse", False), exclusive=p.get("exclusive", False))


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


_OPS: dict[str, Callable[..., np.ndarray]] = {
    "matmul": lambda a, p: np.matmul(a[0], a[1]),
    "linear": lambda a, p: np.matmul(a[0], a[1].T) + (a[2] if a[2] is not None else 0),
    "conv": lambda a, p: _conv(a[0], a[1], a[2], p),
    "conv_transpose": lambda a, p: _conv(a[0], a[1], a[2], p, transpose=True),
    "sum": lambda a, p: np.sum(a[0], axis=p["axis"], keepdims=p["keepdims"]),
    "mean": lambda a, p: np.mean(a[0], axis=p["axis"], keepdims=p["keepdims"]),
    "cumsum": lambda a, p: _cumsum(a[0], a[1] if len(a) > 1 else None, p),
    "amax": lambda a, p: np.max(a[0], axis=p["axis"], keepdims=p["keepdims"]),
    "amin": lambda a, p: np.min(a[0], axis=p["axis"], keepdims=p["keepdims"]),
    "softmax": lambda a, p: _softmax(a[0], p["axis"]),
    "log_softmax": lambda a, p: _log_softmax(a[0], p["axis"]),
    "layer_norm": lambda a, p: _layer_norm(a[0], a[1], a[2], p["eps"]),
    "rms_norm": lambda a, p: _rms_norm(a[0], a[1], p["eps"]),
    "group_norm": lambda a, p: _channel_norm("group_norm", a[0], a[1:], p),
    "instance_norm": lambda a, p: _channel_norm("instance_norm", a[0], a[1:], p),
    "batch_norm": lambda a, p: _channel_norm("batch_norm", a[0], a[1:] if not p["training"] else a[3:], p),
    **{f"{kind}_pool{d}d": (lambda name: lambda a, p: _pool(name, a[0], p))(f"{kind}_pool{d}d")
       for kind in ("max", "avg") for d in (1, 2, 3)},
    "exp": lambda a, p: np.exp(a[0]),
    "log": lambda a, p: np.log(a[0]),
    "tanh": lambda a, p: np.tanh(a[0]),
    "sigmoid": lambda a, p: 1 / (1 + np.exp(-a[0])),
    "erf": lambda a, p: _erf(a[0]),
    "gelu": lambda a, p: _gelu(a[0], p["approximate"]),
    "silu": lambda a, p: a[0] / (1 + np.exp(-a[0])),
    "relu": lambda a, p: np.maximum(a[0], a[0].dtype.type(0)),
    "rsqrt": lambda a, p: 1 / np.sqrt(a[0]),
    "sqrt": lambda a, p: np.sqrt(a[0]),
    "attention": lambda a, p: _attention(a[0], a[1], a[2], p["scale"], p["causal"]),
    "cross_entropy": lambda a, p: _cross_entropy(a[0], a[1], p["reduction"]),
    "mse_loss": lambda a, p: _mse_loss(a[0], a[1], p["reduction"]),
    "huber_loss": lambda a, p: reduce_loss(np, huber_terms(np, a[0], a[1], p["delta"], False), p["reduction"]),
    "smooth_l1_loss": lambda a, p: reduce_loss(np, huber_terms(np, a[0], a[1], p["beta"], True), p["reduction"]),
    "kl_div": lambda a, p: kl_div_loss(np, a[0], a[1], p["reduction"], p["log_target"]),
    "hinge_embedding_loss": lambda a, p: reduce_loss(np, hinge_terms(np, a[0], a[1], p["margin"]), p["reduction"]),
    "nll_loss": lambda a, p: nll_loss_of(np, a[0], np.asarray(a[1]).astype(np.int64), p["reduction"], p["ignore_index"]),
}


class NumpyBackend(Backend):
    """numpy on the CPU, float32 working precision (float64 for float64 inputs); module docstring."""

    name = "numpy"

    def _probe(self) -> tuple[bool, str]:
        return True, ""

    def ops(self) -> frozenset[str]:
        return frozenset(_OPS) | framework_ops("numpy")  # (+ the entries' numpy calls: numstd.backends.similarity)

    def input_formats(self) -> frozenset[str]:
        from ..core.formats import FORMATS

        return frozenset(n for n in FORMATS if n != "tf32")

    def version(self) -> str:
        import ml_dtypes
        import scipy

        return version_string([("numpy", np.__version__), ("scipy", scipy.__version__),
                               ("ml_dtypes", ml_dtypes.__version__)])

    def device(self) -> str:
        import platform

        return f"cpu ({platform.machine() or 'unknown'})"

    def flags(self) -> dict:
        return {"working_precision": "float32 (float64 for float64 inputs)"}

    def _compute(self, op: str, arrays: list, params: dict, flags: dict) -> np.ndarray:
        from ..core.formats import round_to

        out_dtype = arrays[0].dtype
        work = np.float64 if out_dtype == np.float64 else np.float32
        args = [a if a is None or a.dtype.kind in "iu" else a.astype(work) for a in arrays]
        fn = _OPS.get(op) or framework_call(op, "numpy")
        y = np.asarray(fn(args, params))
        if y.dtype.kind in "iu":  # argmax/argmin: the indices are the output, as numpy returns them
            return y
        y = y.astype(work, copy=False)
        if out_dtype == work:
            return y
        return round_to(y, out_dtype.name)
