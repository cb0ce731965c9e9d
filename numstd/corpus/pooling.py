"""Variants of the pooling ops: ``max_pool{1,2,3}d`` and ``avg_pool{1,2,3}d``.

Windows come from :func:`numstd.ops.pooling.windows` (torch's output size, padding, dilation,
``ceil_mode``).

max pooling (exact, so every legitimate variant returns the same bits): the window maximum in
the input format, a running maximum over the window in row-major or reversed order, torch CPU.
Bugs: padding with 0 instead of -inf (wrong where a window touching the border holds only
negative values), NaN ignored (``nanmax``), the dilation ignored, the maximum of ``|x|``, the
result rounded through bfloat16 (fp32 and fp16), zeros.

avg pooling: the window sum in fp32 (sequential, or pairwise), then the division by the divisor;
each element times ``fl(1/D)`` then summed; torch CPU.  Bugs: ``count_include_pad`` inverted, the
divisor always the kernel volume (wrong on the clipped windows of ``ceil_mode``), the sum
accumulated in the output format (16-bit outputs), truncation, zeros.

Observability: a max-pool bug must change some output (float64, NaN-aware, zeros of either sign
equal); an avg-pool bug must move some fp32 output by more than 2 output ULPs plus
``16 (K + 1) u_fp32`` times the window's mean magnitude.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import FORMATS, Format
from ..ops.pooling import divisor, windows
from . import with_causes
from ._common import ARITH16, FP32_ONLY, f64, finish, from_torch, narrow_out, registrar, rnd, row_sum, to_torch, \
    torch_same_format, Work

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

MAX_OPS = ("max_pool1d", "max_pool2d", "max_pool3d")
AVG_OPS = ("avg_pool1d", "avg_pool2d", "avg_pool3d")


def _flat_windows(x: np.ndarray, op: str, params: Mapping[str, Any], fill: float) -> np.ndarray:
    """The windows with the window axes flattened into the last one."""
    d = int(op[-2])
    w = windows(x, op, dict(params), fill)
    return w.reshape(w.shape[:w.ndim - d] + (-1,))


# ---------------------------------------------------------------------------------------------
# max pooling
# ---------------------------------------------------------------------------------------------


def _running_max(w: np.ndarray, reverse: bool = False) -> np.ndarray:
    """A comparison loop that propagates NaN (``m = x if x > m or isnan(x) else m``)."""
    idx = range(w.shape[-1] - 1, -1, -1) if reverse else range(w.shape[-1])
    m = np.full(w.shape[:-1], -np.inf)
    for k in idx:
        xk = w[..., k]
        m = np.where((xk > m) | np.isnan(xk) | np.isnan(m), np.where(np.isnan(m), m, xk), m)
    return m


def _max_core(kind: str) -> Callable[[np.ndarray, str, Mapping[str, Any]], np.ndarray]:
    def core(x: np.ndarray, op: str, params: Mapping[str, Any]) -> np.ndarray:
        if kind == "zero-padding":
            return np.max(_flat_windows(x, op, params, 0.0), axis=-1)
        if kind == "nan-ignored":
            with np.errstate(all="ignore"):
                w = _flat_windows(x, op, params, -np.inf)
                m = np.max(np.where(np.isnan(w), -np.inf, w), axis=-1)
                return np.where(np.isnan(w).all(axis=-1), np.nan, m)
        if kind == "dilation-ignored":  # dense windows at the same starts, into the right output shape
            d = int(op[-2])
            right = _flat_windows(x, op, params, -np.inf).shape[:-1]
            dense = np.max(_flat_windows(x, op, dict(params, dilation=(1,) * d), -np.inf), axis=-1)
            return dense[tuple(slice(0, n) for n in right)]
        if kind == "abs-max":
            return np.max(_flat_windows(np.abs(x), op, params, -np.inf), axis=-1)
        w = _flat_windows(x, op, params, -np.inf)
        if kind in ("sequential", "reversed"):
            return _running_max(w, kind == "reversed")
        return np.max(w, axis=-1)

    return core


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def _max_visible(core: Callable, op: str) -> Callable:
    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        x = f64(inputs[0])
        if not x.size:
            return False
        with np.errstate(all="ignore"):
            return not _same_values(core(x, op, params), _max_core("exact")(x, op, params))

    return observable


def _bf16_visible(op: str) -> Callable:
    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        with np.errstate(all="ignore"):
            y = _max_core("exact")(f64(inputs[0]), op, params)
            y = y[np.isfinite(y)]
            return bool(np.any(f64(rnd(y, FORMATS["bfloat16"])) != y))

    return observable


def _register_max(name: str, family: str, legit: bool, description: str, kind: str, *,
                  applies: Callable | None = None) -> None:
    for op in MAX_OPS:
        core = _max_core(kind)

        def run(inputs, params, out, acc, seed, _op=op, _core=core):
            with np.errstate(all="ignore"):
                y = _core(f64(inputs[0]), _op, params)
                if kind == "bf16-rounding":
                    y = f64(rnd(y, FORMATS["bfloat16"]))
                return finish(y, out)

        obs = _bf16_visible(op) if kind == "bf16-rounding" else None if legit else _max_visible(core, op)
        variant(op, name, family, legit, description, applies, obs)(run)


_register_max("window-max", "accumulation-order", True, "numpy.max over each window in the input format", "exact")
_register_max("running-max", "accumulation-order", True,
              "a comparison loop over the window in row-major order (NaN propagates)", "sequential")
_register_max("running-max-reversed", "accumulation-order", True, "the comparison loop in reverse order", "reversed")
_register_max("zero-padding", "indexing", False, "padding with 0 instead of -inf", "zero-padding")
_register_max("nan-ignored", "missing-branch", False, "NaN dropped from the window (nanmax)", "nan-ignored")
_register_max("dilation-ignored", "indexing", False,
              "the window's dilation ignored (dense windows at the same starts, the right output shape)",
              "dilation-ignored")
_register_max("abs-max", "formula-error", False, "the maximum of |x| instead of x", "abs-max")
_register_max("bf16-rounding", "input-rounding", False, "the result rounded through bfloat16",
              "bf16-rounding", applies=lambda out, fmts, params: out.name != "bfloat16")


# ---------------------------------------------------------------------------------------------
# average pooling
# ---------------------------------------------------------------------------------------------


def _avg_core(kind: str) -> Callable:
    def core(x: Any, op: str, params: Mapping[str, Any], acc: Format, out: Format) -> np.ndarray:
        d = int(op[-2])
        w = Work(out if kind == "narrow-accumulation" and out.p < acc.p else acc)
        xv = w.load(x)
        p = dict(params)
        if kind == "count-include-pad-inverted":
            p["count_include_pad"] = not p["count_include_pad"]
        D = divisor(op, xv.shape[xv.ndim - d:], p)
        if kind == "kernel-volume":
            D = np.full(D.shape, float(math.prod(p["kernel_size"])))
        win = _flat_windows(xv, op, params, 0.0)
        if kind == "reciprocal":
            terms = w.q(win * w.q(1.0 / D)[..., None])
            return w.q(row_sum(terms, w.fmt)[..., 0])
        order = "pairwise" if kind == "pairwise" else "sequential"
        return w.q(w.q(row_sum(win, w.fmt, order)[..., 0]) / D)

    return core


def _avg_visible(core: Callable, op: str) -> Callable:
    from ..core.ulp import ulp

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        x = f64(inputs[0])
        if not x.size:
            return False
        with np.errstate(all="ignore"):
            fp32 = FORMATS["float32"]
            y_bug = f64(core(x, op, params, fp32, out))
            win = _flat_windows(x, op, params, 0.0)
            D = divisor(op, x.shape[x.ndim - int(op[-2]):], dict(params))
            y_true = win.sum(axis=-1) / D
            absmean = np.abs(win).sum(axis=-1) / D
            K = math.prod(params["kernel_size"])
            tol = 2.0 * ulp(y_true, out) + 16.0 * (K + 1) * 2.0 ** -24 * absmean
            bad = ~np.isfinite(y_bug) | (np.abs(y_bug - y_true) > tol)
        return bool((bad & np.isfinite(y_true)).any())

    return observable


def _register_avg(name: str, family: str, legit: bool, description: str, kind: str, *,
                  applies: Callable | None = None, mode: str = "rne", observable: str = "differs") -> None:
    for op in AVG_OPS:
        core = _avg_core(kind)

        def run(inputs, params, out, acc, seed, _op=op, _core=core):
            with np.errstate(all="ignore"):
                return finish(_core(inputs[0], _op, params, acc, out), out, mode, seed)

        obs = _avg_visible(core, op) if not legit and observable == "differs" else None
        variant(op, name, family, legit, description, applies, obs)(run)


_register_avg("sequential", "accumulation-order", True,
              "the window sum in fp32 (row-major order), divided by the divisor, one rounding", "sequential")
_register_avg("pairwise", "accumulation-order", True, "the window sum by pairwise summation", "pairwise")
_register_avg("reciprocal", "formula", True, "each element times fl(1/D), then summed", "reciprocal")
_register_avg("count-include-pad-inverted", "indexing", False,
              "count_include_pad inverted (padding counted when it should not be, or the reverse)",
              "count-include-pad-inverted")
_register_avg("kernel-volume", "scale", False,
              "always divided by prod(kernel_size), also for the windows ceil_mode clips", "kernel-volume")
_register_avg("narrow-accumulation", "accumulation-precision", False,
              "the window sum accumulated in the 16-bit output format", "narrow-accumulation", applies=narrow_out)
_register_avg("truncation", "truncation", False, "fp32 average converted to the output format by truncation",
              "sequential", applies=narrow_out, mode="rtz", observable="none")


def _xla16_avg(op: str) -> Callable:
    """XLA CPU's 16-bit average pooling (jax 0.10.2): ``lax.reduce_window(x, 0, lax.add, ...) / D`` on 16-bit
    arrays accumulates each window in the 16-bit type, one ``RN16`` per add in row-major window order
    (bf16: the fp32 add's result converted to bf16 inside the reducer; fp16: an f16 reduce-window; read
    from the compiled HLO, bit for bit in tests/test_arith16_norm.py), then bf16 ``RN16(S / D)`` (the
    divide upcast to fp32), fp16 ``RN16(S · RN16(1/D))`` (XLA rewrites the fp16 division by the constant
    divisors as a multiply by their fp16 reciprocals; measured)."""
    d = int(op[-2])

    def run(inputs, params, out, acc, seed):
        with np.errstate(all="ignore"):
            w = Work(acc)
            xv = w.load(inputs[0])
            D = divisor(op, xv.shape[xv.ndim - d:], dict(params))
            s16 = w.q(row_sum(_flat_windows(xv, op, params, 0.0), w.fmt, "sequential")[..., 0])
            y = w.q(s16 * w.q(1.0 / D)) if acc.name == "float16" else w.q(s16 / D)
            return finish(y, out)

    return run


for _op in AVG_OPS:
    variant(_op, "xla-arith16", "library", True,
            f"XLA CPU's 16-bit {_op} (jax 0.10.2, lax.reduce_window on 16-bit arrays): the window summed in "
            "the 16-bit type in row-major order, then RN16(S / D) (bf16) or RN16(S · RN16(1/D)) (fp16); "
            "16-bit arithmetic only",
            acc_formats=ARITH16)(_xla16_avg(_op))
del _op


for _op in MAX_OPS + AVG_OPS:
    def _zeros(inputs, params, out, acc, seed, _o=_op):
        from ..ops.pooling import output_size, spatial_params

        x = np.asarray(inputs[0])
        d = int(_o[-2])
        k, s, p, dil = spatial_params(_o, params)
        shape = x.shape[:x.ndim - d] + tuple(output_size(x.shape[x.ndim - d + i], k[i], s[i], p[i], dil[i],
                                                         params["ceil_mode"]) for i in range(d))
        return finish(np.zeros(shape), out)

    variant(_op, "zeros", "zeros", False, "returns zeros of the right shape and dtype")(_zeros)


def _torch(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch.nn.functional as F

        names = ("kernel_size", "stride", "padding", "dilation", "ceil_mode") if op.startswith("max") else \
            ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")
        y = getattr(F, op)(to_torch(inputs[0]), **{n: params[n] for n in names})
        return finish(from_torch(y), out)

    return run


def _torch_runs(op: str) -> Callable:
    """torch's CPU avg_pool3d has no bf16/fp16 kernel (NotImplementedError in torch 2.x)."""
    def applies(out: Format, fmts: Any, params: Any) -> bool:
        return torch_same_format(out, fmts, params) and not (op == "avg_pool3d" and out.p < 24)

    return applies


for _op in MAX_OPS + AVG_OPS:
    variant(_op, "torch-cpu", "library", True, f"torch.nn.functional.{_op} on CPU in the inputs' dtype",
            _torch_runs(_op), acc_formats=FP32_ONLY)(_torch(_op))
del _op

VARIANTS: tuple = with_causes(_V, {"count-include-pad-inverted": None, "zero-padding": None, "nan-ignored": None,
                                   "dilation-ignored": None, "abs-max": None})
