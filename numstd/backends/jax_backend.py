"""The ``jax:cpu``, ``jax:gpu`` and ``jax:neuron`` backends: JAX/XLA on one platform.

Each op is what a JAX user writes with ``jax.numpy`` and ``jax.nn`` on arrays of the input's dtype
(bfloat16 and float8 arrays are ml_dtypes arrays, shared with numpy bit for bit), placed on the
first device of the platform (``jax.devices("cpu" | "gpu" | "neuron")[0]``; Trainium is reached
through the Neuron PJRT plugin, ``pip install jax-neuronx``):

=============  ===============================================================================
matmul         ``jnp.matmul(A, B)``
linear         ``x @ W.T + b``
conv           ``lax.conv_general_dilated(x, W, stride, padding, rhs_dilation=dilation,
               feature_group_count=groups)`` (NC..., OI... layouts) ``+ b``
conv_transpose the same with ``lhs_dilation=stride`` and the flipped, channel-swapped weight
sum, mean      ``jnp.sum`` / ``jnp.mean`` (XLA upcasts 16-bit inputs to float32 internally)
cumsum         ``jnp.cumsum(x, axis)``
amax, amin     ``jnp.max`` / ``jnp.min`` (``axis``, ``keepdims``)
argmax, argmin ``jnp.argmax`` / ``jnp.argmin`` (``axis``, ``keepdims``; int32 indices without x64)
softmax        ``jax.nn.softmax``, ``jax.nn.log_softmax``
layer_norm     two-pass in float32 (``x`` upcast when narrower): ``d = x - mean x``,
               ``d * rsqrt(mean(d²) + eps) * weight + bias``, cast to the input dtype
rms_norm       in float32: ``x * rsqrt(mean(x²) + eps) * weight``, cast to the input dtype
group_norm,    layer_norm's float32 two-pass formula over each normalised group (rows of the
instance_norm, rearranged input), ``* weight[c] + bias[c]``, cast to the input dtype (batch_norm
batch_norm     eval: ``(x - running_mean) * rsqrt(running_var + eps) * weight + bias`` in float32)
max_pool{d}d   ``lax.reduce_window(x, -inf, lax.max, ...)`` (window dilation, padding as torch's)
avg_pool{d}d   ``lax.reduce_window`` sum in float32 (zero padding) / the divisor, cast back
elementwise    ``jnp.exp``, ``log``, ``tanh``, ``jax.nn.sigmoid``, ``jax.scipy.special.erf``,
               ``jax.nn.gelu(x, approximate=...)``, ``jax.nn.silu``, ``jax.nn.relu``,
               ``jax.lax.rsqrt``, ``jnp.sqrt``; softplus ``where(beta x > threshold, x,
               jax.nn.softplus(beta x) / beta)`` (torch's beta and threshold)
attention      ``jax.nn.dot_product_attention`` (leading axes flattened to one batch axis, one
               head); the explicit ``softmax(q kᵀ · scale + mask) v`` when v's feature size differs
cross_entropy  ``-take_along_axis(jax.nn.log_softmax(logits), target)``, then mean / sum / none
mse_loss       ``d = input - target; jnp.mean(d * d)`` / ``jnp.sum`` / ``d * d`` (JAX has no mse_loss;
               optax's ``squared_error`` is the ``"none"`` form)
huber_loss     ``z = |input - target|; where(z < delta, 0.5 z z, delta (z - 0.5 delta))`` with jnp, then
               mean / sum / none (optax's ``huber_loss`` is the ``"none"`` form; JAX has none)
smooth_l1_loss ``where(z < beta, 0.5 z z / beta, z - 0.5 beta)`` with jnp (``z`` for beta = 0), reduced
kl_div         ``xlogy(t, t) - t x`` (log_target: ``exp(t) (t - x)``) with jnp, reduced (batchmean: sum / N)
nll_loss       ``-take_along_axis(x, target)`` with jnp, 0 for ignored rows; sum / rows kept for the mean
hinge_embedding_loss ``where(target == 1, x, maximum(margin - x, 0))`` with jnp, reduced
=============  ===============================================================================

Each op runs as one ``jax.jit``-compiled function (compiled once per op, parameters, shape and
dtype), as JAX code is run in practice; XLA may fuse and keep 16-bit intermediates in float32.

Flags: matrix products run under ``jax.default_matmul_precision("highest")`` (full float32 on GPUs
and TPUs, where the default is bf16 or TF32 passes) unless ``allow_tf32=True`` (then
``"tensorfloat32"``) or ``precision=...`` names another setting.  float64 inputs run under
``jax.enable_x64(True)`` (JAX silently computes in float32 otherwise).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .base import (Backend, channel_norm, env_flags, framework_call, framework_ops, hinge_terms, huber_terms, kl_div_loss, missing_module_reason, nll_loss_of, reduce_loss,
                   version_string)

__all__ = ["JaxBackend"]

_PLATFORM_HELP = {
    "cpu": "",
    "gpu": "install a CUDA build of jaxlib: pip install -U 'jax[cuda12]'",
    "neuron": "install the Neuron PJRT plugin on a Trn1/Trn2 instance: pip install jax-neuronx "
              "(see docs/trainium.md)",
}
_PRECISIONS = ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
               "bfloat16_3x", "tensorfloat32_3x")


def _attention(jax: Any, jnp: Any, q: Any, k: Any, v: Any, p: dict) -> Any:
    batch = jnp.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (jnp.broadcast_to(t, (*batch, *t.shape[-2:])) for t in (q, k, v))
    if v.shape[-1] != q.shape[-1]:  # dot_product_attention needs equal feature sizes
        s = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * jnp.asarray(p["scale"], q.dtype)
        if p["causal"]:
            L, S = s.shape[-2:]
            s = jnp.where(jnp.arange(S)[None, :] > jnp.arange(L)[:, None], -jnp.inf, s)
        return jnp.matmul(jax.nn.softmax(s, axis=-1), v)
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    flat = (-1, L, 1, E)
    out = jax.nn.dot_product_attention(q.reshape(flat), k.reshape((-1, S, 1, E)), v.reshape((-1, S, 1, E)),
                                       scale=p["scale"], is_causal=p["causal"])
    return out.reshape((*batch, L, v.shape[-1]))


def _norm(jnp: Any, lax: Any, x: Any, w: Any, b: Any, eps: float, centred: bool) -> Any:
    work = x.astype(jnp.float32) if jnp.finfo(x.dtype).bits < 32 else x
    if centred:
        work = work - jnp.mean(work, axis=-1, keepdims=True)
    y = work * lax.rsqrt(jnp.mean(work * work, axis=-1, keepdims=True) + jnp.asarray(eps, work.dtype))
    if w is not None:
        y = y * w.astype(y.dtype)
    if b is not None:
        y = y + b.astype(y.dtype)
    return y.astype(x.dtype)


def _conv(lax: Any, x: Any, w: Any, b: Any, p: dict) -> Any:
    from ..ops.conv import geometry

    g = geometry(x.shape, w.shape, p)
    y = lax.conv_general_dilated(x, w, window_strides=g.stride, padding=list(zip(g.pad_lo, g.pad_hi)),
                                 rhs_dilation=g.dilation, feature_group_count=g.groups)
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * g.nd)
    return y


def _conv_transpose(jnp: Any, lax: Any, x: Any, w: Any, b: Any, p: dict) -> Any:
    from ..ops.conv import transposed

    g, _ = transposed(x.shape, w.shape, p)
    nd, G = g.nd, g.groups
    ci, co = w.shape[0] // G, w.shape[1]
    wt = jnp.swapaxes(w.reshape((G, ci, co) + w.shape[2:]), 1, 2).reshape((G * co, ci) + w.shape[2:])
    wt = jnp.flip(wt, axis=tuple(range(2, 2 + nd)))
    stride = (p["stride"],) * nd if isinstance(p["stride"], int) else tuple(p["stride"])
    if len(stride) == 1:
        stride = stride * nd
    y = lax.conv_general_dilated(x, wt, window_strides=(1,) * nd, padding=list(zip(g.pad_lo, g.pad_hi)),
                                 lhs_dilation=stride, rhs_dilation=g.dilation, feature_group_count=G)
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * nd)
    return y


def _channel_norm(jnp: Any, lax: Any, op: str, x: Any, w: list, p: dict) -> Any:
    work = x.astype(jnp.float32) if jnp.finfo(x.dtype).bits < 32 else x
    y = channel_norm(jnp, op, work, w, dict(p, eps=jnp.asarray(p["eps"], work.dtype)), lambda d, v: d * lax.rsqrt(v),
                     cast=lambda a: a.astype(work.dtype))
    return y.astype(x.dtype)


def _pool(jnp: Any, lax: Any, op: str, x: Any, p: dict) -> Any:
    import numpy as np

    from ..ops.pooling import divisor, output_size, spatial_params

    d = int(op[-2])
    lead = x.ndim - d
    k, s, pad, dil = spatial_params(op, p)
    spatial = x.shape[lead:]
    pads = [(0, 0)] * lead
    for i in range(d):
        out = output_size(spatial[i], k[i], s[i], pad[i], dil[i], p["ceil_mode"])
        need = (out - 1) * s[i] + dil[i] * (k[i] - 1) + 1
        pads.append((pad[i], max(0, need - pad[i] - spatial[i])))
    dims, strides, wdil = (1,) * lead + tuple(k), (1,) * lead + tuple(s), (1,) * lead + tuple(dil)
    if op.startswith("max"):
        return lax.reduce_window(x, jnp.asarray(-jnp.inf, x.dtype), lax.max, dims, strides, pads, window_dilation=wdil)
    work = x.astype(jnp.float32) if jnp.finfo(x.dtype).bits < 32 else x
    tot = lax.reduce_window(work, jnp.asarray(0, work.dtype), lax.add, dims, strides, pads)
    return (tot / jnp.asarray(np.asarray(divisor(op, spatial, p)), work.dtype)).astype(x.dtype)


def _cross_entropy(jax: Any, jnp: Any, x: Any, t: Any, reduction: str) -> Any:
    loss = -jnp.take_along_axis(jax.nn.log_softmax(x, axis=-1), t[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return reduce_loss(jnp, loss, reduction)


def _softplus(jax: Any, jnp: Any, x: Any, beta: float, threshold: float) -> Any:
    """torch's softplus semantics with ``jax.nn.softplus`` (``logaddexp(z, 0)``): ``x`` where
    ``z = beta x > threshold``, else ``softplus(z) / beta`` (Python scalars: weak-typed, the input's dtype)."""
    z = x * beta
    return jnp.where(z > threshold, x, jax.nn.softplus(z) / beta)


def _mse_loss(jnp: Any, x: Any, t: Any, reduction: str) -> Any:
    d = x - t
    return reduce_loss(jnp, d * d, reduction)


#: the ops :func:`_table` implements (their calls are not mechanical)
_SPECIAL: frozenset[str] = frozenset({"conv", "conv_transpose", "linear", "sum", "mean", "layer_norm", "rms_norm", "gelu",
                                      "attention", "cross_entropy", "mse_loss", "huber_loss", "smooth_l1_loss", "kl_div", "softplus",
                                      "nll_loss", "hinge_embedding_loss", "group_norm", "instance_norm", "batch_norm",
                                      *(f"{kind}_pool{d}d" for kind in ("max", "avg") for d in (1, 2, 3))})


def _table(jax: Any) -> dict[str, Callable[[list, dict], Any]]:
    """The calls that are not mechanical; the others come from the ops' entries (framework_call)."""
    import jax.numpy as jnp
    from jax import lax

    def red(fn: Callable) -> Callable:
        return lambda a, p: fn(a[0], axis=p["axis"], keepdims=p["keepdims"])

    return {
        "linear": lambda a, p: jnp.matmul(a[0], a[1].T) + (a[2] if a[2] is not None else 0),
        "conv": lambda a, p: _conv(lax, a[0], a[1], a[2], p),
        "conv_transpose": lambda a, p: _conv_transpose(jnp, lax, a[0], a[1], a[2], p),
        "sum": red(jnp.sum),
        "mean": red(jnp.mean),
        "layer_norm": lambda a, p: _norm(jnp, lax, a[0], a[1], a[2], p["eps"], True),
        "rms_norm": lambda a, p: _norm(jnp, lax, a[0], a[1], None, p["eps"], False),
        "group_norm": lambda a, p: _channel_norm(jnp, lax, "group_norm", a[0], a[1:], p),
        "instance_norm": lambda a, p: _channel_norm(jnp, lax, "instance_norm", a[0], a[1:], p),
        "batch_norm": lambda a, p: _channel_norm(jnp, lax, "batch_norm", a[0], a[1:] if not p["training"] else a[3:], p),
        **{f"{kind}_pool{d}d": (lambda name: lambda a, p: _pool(jnp, lax, name, a[0], p))(f"{kind}_pool{d}d")
           for kind in ("max", "avg") for d in (1, 2, 3)},
        "gelu": lambda a, p: jax.nn.gelu(a[0], approximate=p["approximate"] == "tanh"),
        "softplus": lambda a, p: _softplus(jax, jnp, a[0], p["beta"], p["threshold"]),
        "attention": lambda a, p: _attention(jax, jnp, a[0], a[1], a[2], p),
        "cross_entropy": lambda a, p: _cross_entropy(jax, jnp, a[0], a[1], p["reduction"]),
        "mse_loss": lambda a, p: _mse_loss(jnp, a[0], a[1], p["reduction"]),
        "huber_loss": lambda a, p: reduce_loss(jnp, huber_terms(jnp, a[0], a[1], p["delta"], False), p["reduction"]),
        "smooth_l1_loss": lambda a, p: reduce_loss(jnp, huber_terms(jnp, a[0], a[1], p["beta"], True),
                                                   p["reduction"]),
        "kl_div": lambda a, p: kl_div_loss(jnp, a[0], a[1], p["reduction"], p["log_target"]),
        "hinge_embedding_loss": lambda a, p: reduce_loss(jnp, hinge_terms(jnp, a[0], a[1], p["margin"]), p["reduction"]),
        "nll_loss": lambda a, p: nll_loss_of(jnp, a[0], a[1], p["reduction"], p["ignore_index"]),
    }


class JaxBackend(Backend):
    """JAX on the first device of ``platform`` (``"cpu"``, ``"gpu"`` or ``"neuron"``).

    Flag parameters: ``allow_tf32`` (bool) and ``precision`` (a ``jax.default_matmul_precision``
    name; default ``"highest"``).
    """

    flag_params = ("allow_tf32", "precision")

    def __init__(self, platform: str = "cpu") -> None:
        super().__init__()
        self._platform = platform
        self.name = f"jax:{platform}"
        self._jitted: dict[tuple, Callable] = {}

    def _probe(self) -> tuple[bool, str]:
        try:
            import jax
        except Exception as exc:
            return False, missing_module_reason("jax", "numstd[jax]", exc)
        try:
            devices = jax.devices(self._platform)
        except Exception as exc:
            found = ", ".join(sorted({d.platform for d in jax.devices()}))
            hint = _PLATFORM_HELP[self._platform]
            return False, (f"jax {jax.__version__} has no {self._platform!r} platform (found: {found}; "
                           f"{type(exc).__name__})" + (f"; {hint}" if hint else ""))
        if not devices:
            return False, f"jax {jax.__version__}: no {self._platform} device"
        return True, ""

    def _jax_device(self) -> Any:
        import jax

        return jax.devices(self._platform)[0]

    def ops(self) -> frozenset[str]:
        return framework_ops("jax", _SPECIAL)

    def input_formats(self) -> frozenset[str]:
        return frozenset({"float64", "float32", "float16", "bfloat16"})

    def version(self) -> str:
        try:
            import jax
            import jaxlib
        except Exception:
            return ""
        pairs = [("jax", jax.__version__), ("jaxlib", jaxlib.__version__)]
        if self.available()[0]:
            try:
                pairs.append(("pjrt", str(self._jax_device().client.platform_version)))
            except Exception:  # not every plugin exposes its version
                pass
        return version_string(pairs)

    def device(self) -> str:
        import platform

        d = self._jax_device()
        if d.platform == "cpu":
            return f"cpu ({platform.machine() or 'unknown'})"
        return str(getattr(d, "device_kind", "") or d)

    def flags(self) -> dict:
        import jax

        out = {"default_matmul_precision": "highest (numstd default; allow_tf32=True → tensorfloat32)",
               "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
               "jax_enable_x64": bool(jax.config.jax_enable_x64)}
        out.update(env_flags(["XLA_FLAGS", "NVIDIA_TF32_OVERRIDE", "NEURON_RT_STOCHASTIC_ROUNDING_EN",
                              "NEURON_CC_FLAGS"]))
        return out

    def _precision(self, flags: dict) -> str:
        from ..core.errors import ParameterError

        precision = flags.get("precision")
        if precision is None:
            return "tensorfloat32" if bool(flags.get("allow_tf32", False)) else "highest"
        if precision not in _PRECISIONS:
            raise ParameterError(f"{self.name}: precision={precision!r}; use one of {', '.join(_PRECISIONS)}")
        return str(precision)

    def _function(self, op: str, params: dict) -> Callable:
        """The jitted function of ``op`` with these parameters (compiled once per shape and dtype)."""
        import jax

        key = (op, tuple(sorted((k, repr(v)) for k, v in params.items())))
        with self._lock:
            fn = self._jitted.get(key)
            if fn is None:
                impl = _table(jax).get(op) or framework_call(op, "jax")
                fn = self._jitted[key] = jax.jit(lambda *args: impl(list(args), params))
        return fn

    def _compute(self, op: str, arrays: list, params: dict, flags: dict) -> np.ndarray:
        import contextlib

        import jax

        precision = self._precision(flags)
        x64 = any(a is not None and a.dtype == np.float64 for a in arrays)
        dev = self._jax_device()
        with contextlib.ExitStack() as stack:
            stack.enter_context(jax.default_matmul_precision(precision))
            if x64:
                stack.enter_context(jax.enable_x64(True))
            args = [None if a is None else jax.device_put(a, dev) for a in arrays]
            out = self._function(op, params)(*args)
            host = np.asarray(jax.device_get(out))
        if host.dtype != arrays[0].dtype and host.dtype.kind not in "iu":  # e.g. a weak-typed scalar promotion
            # (argmax/argmin's integer indices are kept)
            host = host.astype(arrays[0].dtype)
        return host
