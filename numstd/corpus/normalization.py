"""Normalization variants: ``layer_norm`` and ``rms_norm`` over the last axis.

Legitimate (all statistics in the working format, float32):

- layer_norm: two-pass (mean, then the mean of squared deviations), Welford's one-pass update,
  Welford on 4 chunks merged with Chan et al.'s formula (Apex / cuDNN warp reductions), pairwise
  and blocked(128) sums (Triton's layer-norm tutorial), then ``(x - mean) * rstd * w + b`` and one
  rounding to the output format; torch CPU.
- rms_norm: ``x * rsqrt(mean(x^2) + eps) * w`` in fp32 with sequential, pairwise or blocked sums;
  Hugging Face's ``LlamaRMSNorm`` (normalise in fp32, round to the output format, multiply by the
  weight in the output format: a legitimate double rounding); torch CPU.

Bugs: the one-pass variance ``E[x^2] - E[x]^2`` (cancellation on rows with a large mean), a
missing eps, eps outside the square root, the unbiased ``K - 1`` variance, the affine weight and
bias dropped, the bias added twice, truncation, zeros; for rms_norm also ``mean |x|`` instead of
``mean x^2``, ``x * sqrt(ms)`` instead of ``x / sqrt(ms)``, a sum instead of a mean, a dropped
weight.

Data-dependent bugs carry an ``observable`` predicate computed in float64 from the inputs: with
the bug's normalising factor some output must move by more than 2 output ULPs plus
16 sqrt(K) u_fp32 times its condition (:func:`_factor_differs`), or the weight/bias must differ from 1/0.

References: Welford, Technometrics 4(3), 1962; Chan, Golub & LeVeque, "Algorithms for computing
the sample variance", Am. Stat. 37(3), 1983; Ba, Kiros & Hinton, "Layer normalization" (2016);
Zhang & Sennrich, "Root mean square layer normalization" (2019).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import Format
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, f64, finish, from_torch, narrow_out, registrar, rnd, row_sum, to_torch,
    torch_same_format, Work,
)

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

BLOCK = 128
CHUNKS = 4


class Affine:
    """The inputs of a normalization in the working format: x rows, weight, bias, eps, K."""

    def __init__(self, inputs: list, params: Mapping[str, Any], acc: Format) -> None:
        self.w = Work(acc)
        self.x = self.w.load(inputs[0])
        self.K = self.x.shape[-1]
        self.weight = None if len(inputs) < 2 or inputs[1] is None else self.w.load(inputs[1])
        self.bias = None if len(inputs) < 3 or inputs[2] is None else self.w.load(inputs[2])
        self.eps = float(params.get("eps", 1e-5))

    def mean(self, t: np.ndarray, order: str = "sequential", **kw: Any) -> np.ndarray:
        """``RN(sum(t) / K)`` over the last axis (keepdims) with the sum in ``order``."""
        w = self.w
        return w.q(w.q(row_sum(t, w.fmt, order, **kw)) / w.c(max(self.K, 1)))

    def rsqrt(self, v: np.ndarray) -> np.ndarray:
        """``RN(1 / RN(sqrt(RN(v + eps))))``."""
        w = self.w
        return w.q(w.c(1.0) / w.q(np.sqrt(w.q(v + w.c(self.eps)))))

    def affine(self, xhat: np.ndarray, bias_times: int = 1) -> np.ndarray:
        """``RN(RN(xhat * weight) + bias)`` (bias added ``bias_times`` times)."""
        w = self.w
        y = xhat if self.weight is None else w.q(xhat * self.weight)
        for _ in range(bias_times if self.bias is not None else 0):
            y = w.q(y + self.bias)
        return y


def _norm(op: str, name: str, family: str, legit: bool, description: str, *,
          applies: Callable | None = None, observable: Callable | None = None,
          mode: str = "rne") -> Callable:
    """Register ``core(a: Affine, out) -> result`` for ``op``."""

    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            with np.errstate(all="ignore"):
                return finish(core(Affine(inputs, params, acc), out), out, mode, seed)

        variant(op, name, family, legit, description, applies, observable)(run)
        return core

    return deco


# ---------------------------------------------------------------------------------------------
# observability: float64 statistics of the inputs
# ---------------------------------------------------------------------------------------------


def _stats(inputs: list, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, float, int]:
    x = f64(inputs[0])
    K = max(x.shape[-1], 1)
    return x, x.mean(axis=-1, keepdims=True), float(params.get("eps", 1e-5)), K


def _outputs_differ(y_bug: np.ndarray, y_true: np.ndarray, cond: np.ndarray, K: int,
                    out: Format) -> bool:
    """Some element differs by more than ``2 ulp_out + 16 sqrt(K) u_fp32 cond`` (or is not finite).

    Legitimate fp32 kernels stay within about ``1.1 sqrt(K) u_fp32 cond`` (measured on the
    suites' distributions): the margin is 16x.
    """
    from ..core.ulp import ulp

    with np.errstate(all="ignore"):
        tol = 2.0 * ulp(y_true, out) + 16.0 * np.sqrt(K) * 2.0 ** -24 * cond
        bad = ~np.isfinite(y_bug) | (np.abs(y_bug - y_true) > tol)
    return bool((bad & np.isfinite(y_true)).any())


def _weights(inputs: list, n: int) -> tuple[Any, Any]:
    w = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
    b = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    return (1.0 if w is None else f64(w)), (0.0 if b is None else f64(b))


def _factor_differs(bug: Callable[[np.ndarray, np.ndarray, float, int], np.ndarray],
                    op: str = "layer_norm") -> Callable:
    """``observable`` of a bug in the normalising factor, judged on the outputs (float64).

    ``bug(x, stat, eps, K)`` returns the bug's factor per row (keepdims), ``stat`` being the
    biased variance (layer_norm) or the mean square (rms_norm).  The outputs
    ``(x - mean) * factor * w + b`` (rms_norm: ``x * factor * w``) with the bug's and the true
    factor ``1/sqrt(stat + eps)`` must differ by more than 2 output ULPs plus
    ``16 sqrt(K) u_fp32 * cond`` (cond = ``(|x| + |mean|) * factor * |w| + |b|``) somewhere: a
    change of the factor shows where the output cancels (layer norm's bias) or where the format
    is fine enough.
    """

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        x, mean, eps, K = _stats(inputs, params)
        if not x.size:
            return False
        w, b = _weights(inputs, K)
        with np.errstate(all="ignore"):
            if op == "layer_norm":
                stat = x.var(axis=-1, keepdims=True)
                true = 1.0 / np.sqrt(stat + eps)
                got = bug(x, stat, eps, K)
                y_true, y_bug = (x - mean) * true * w + b, (x - mean) * got * w + b
                cond = (np.abs(x) + np.abs(mean)) * true * np.abs(w) + np.abs(b)
            else:
                stat = (x * x).mean(axis=-1, keepdims=True)
                true = 1.0 / np.sqrt(stat + eps)
                got = bug(x, stat, eps, K)
                y_true, y_bug = x * true * w, x * got * w
                cond = np.abs(y_true)
        return _outputs_differ(y_bug, y_true, cond, K, out)

    return observable


def _has_weight(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return _has_scale(inputs, params, out) or _has_bias(inputs, params, out)


def _has_bias(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    b = inputs[2] if len(inputs) > 2 else None
    return b is not None and bool((f64(b) != 0.0).any())


def _has_scale(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    w = inputs[1] if len(inputs) > 1 else None
    return w is not None and bool((f64(w) != 1.0).any())


# ---------------------------------------------------------------------------------------------
# layer_norm
# ---------------------------------------------------------------------------------------------


def _two_pass(a: Affine, order: str = "sequential", **kw: Any) -> tuple[np.ndarray, np.ndarray]:
    """(mean, biased variance) by two passes with sums in ``order``."""
    w = a.w
    mean = a.mean(a.x, order, **kw)
    d = w.q(a.x - mean)
    return mean, a.mean(w.q(d * d), order, **kw)


def _welford(x: np.ndarray, w: Work) -> tuple[np.ndarray, np.ndarray, int]:
    """Welford's update over the last axis: (mean, M2, n), every step rounded to ``acc``."""
    mean = np.zeros(x.shape[:-1] + (1,), dtype=w.dtype)
    m2 = np.zeros_like(mean)
    for k in range(x.shape[-1]):
        xk = x[..., k:k + 1]
        delta = w.q(xk - mean)
        mean = w.q(mean + w.q(delta / w.c(k + 1)))
        m2 = w.q(m2 + w.q(delta * w.q(xk - mean)))
    return mean, m2, x.shape[-1]


def _chan(parts: list, w: Work) -> tuple[np.ndarray, np.ndarray, int]:
    """Chan et al.'s pairwise merge of Welford states (mean, M2, n), left to right."""
    mean, m2, n = parts[0]
    for mb, m2b, nb in parts[1:]:
        if nb == 0:
            continue
        tot = n + nb
        delta = w.q(mb - mean)
        mean = w.q(mean + w.q(delta * w.c(nb / tot)))
        m2 = w.q(w.q(m2 + m2b) + w.q(w.q(delta * delta) * w.c(n * nb / tot)))
        n = tot
    return mean, m2, n


def _ln_out(a: Affine, mean: np.ndarray, var: np.ndarray, bias_times: int = 1,
            rstd: np.ndarray | None = None) -> np.ndarray:
    w = a.w
    r = a.rsqrt(var) if rstd is None else rstd
    return a.affine(w.q(w.q(a.x - mean) * r), bias_times)


@_norm("layer_norm", "two-pass", "accumulation-order", True,
       "mean, then the mean of squared deviations (sequential fp32 sums), rstd = 1/sqrt(var + "
       "eps), (x - mean) * rstd * w + b in fp32")
def _ln_two_pass(a, out):
    return _ln_out(a, *_two_pass(a))


@_norm("layer_norm", "welford", "formula", True,
       "Welford's running mean and M2 over the row in fp32 (PyTorch CPU / CUDA layer norm), var = "
       "M2 / K")
def _ln_welford(a, out):
    mean, m2, n = _welford(a.x, a.w)
    return _ln_out(a, mean, a.w.q(m2 / a.w.c(max(n, 1))))


@_norm("layer_norm", "welford-chunks", "formula", True,
       "Welford on 4 chunks of the row merged with Chan's formula (Apex / cuDNN warp reductions)")
def _ln_chan(a, out):
    edges = np.linspace(0, a.K, CHUNKS + 1).astype(int)
    parts = [_welford(a.x[..., lo:hi], a.w) for lo, hi in zip(edges[:-1], edges[1:])]
    mean, m2, n = _chan(parts, a.w)
    return _ln_out(a, mean, a.w.q(m2 / a.w.c(max(n, 1))))


@_norm("layer_norm", "pairwise", "accumulation-order", True,
       "two-pass statistics with pairwise sums")
def _ln_pairwise(a, out):
    return _ln_out(a, *_two_pass(a, "pairwise"))


@_norm("layer_norm", "blocked128", "accumulation-order", True,
       "two-pass statistics with blocked(128) sums (Triton's layer-norm tutorial: a BLOCK_SIZE "
       "vector accumulator reduced at the end)")
def _ln_blocked(a, out):
    return _ln_out(a, *_two_pass(a, "blocked", block=BLOCK))


def _torch_norm(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch.nn.functional as F

        x = to_torch(inputs[0])
        ws = [None if i >= len(inputs) or inputs[i] is None else to_torch(inputs[i]) for i in (1, 2)]
        shape = (x.shape[-1],)
        if op == "layer_norm":
            y = F.layer_norm(x, shape, ws[0], ws[1], eps=float(params.get("eps", 1e-5)))
        else:
            y = F.rms_norm(x, shape, ws[0], eps=float(params["eps"]))
        return finish(from_torch(y), out)

    return run


for _op in ("layer_norm", "rms_norm"):
    variant(_op, "torch-cpu", "library", True,
            f"torch.nn.functional.{_op} on CPU in the inputs' dtype (fp32 statistics)",
            torch_same_format, acc_formats=FP32_ONLY)(_torch_norm(_op))
del _op


def _xla16_norm(op: str, inputs: list, params: Mapping[str, Any], acc: Format) -> np.ndarray:
    """XLA CPU's 16-bit layer_norm / rms_norm: the jnp formula on 16-bit arrays, no upcast (jax 0.10.2).

    Read from the compiled HLO and reproduced bit for bit (tests/test_arith16_norm.py): ``jnp.mean``
    sums in fp32 (XLA's upcasting reduction) and multiplies by ``RN32(1/K)``, the mean stored
    ``m16 = RN16(RN32(s · RN32(1/K)))``; ``d = RN16(x − m16)``; the squares are exact fp32 products
    for bf16 (XLA fuses the bf16 multiply into the fp32 reduction) and ``RN16(d·d)`` for fp16 (XLA
    keeps fp16 elementwise ops in fp16); ``v16`` the stored mean of the squares as ``m16``;
    ``r = RN16(rsqrt(RN16(v16 + RN16(eps))))``; ``y = RN16(RN16(RN16(d · r) · w) + b)`` for bf16,
    ``RN16(RN16(d · r) · w + b)`` for fp16 (XLA drops the rounding of the product before the bias
    add: ``RN16(d · r + b)`` without a weight; rms_norm: ``d = x``, no bias).  The fp32 sums' order (YNNPACK's reduce) matters only through ``RN16``.
    """
    w = Work(acc)
    f32 = np.float32
    x = w.load(inputs[0])
    K = max(x.shape[-1], 1)
    inv = f32(1.0) / f32(K)
    fp16 = acc.name == "float16"

    def mean16(t: np.ndarray) -> np.ndarray:
        s = np.sum(t.astype(f32), axis=-1, keepdims=True, dtype=f32)
        return w.q((s * inv).astype(f32))

    d = x
    if op == "layer_norm":
        d = w.q(x - mean16(x))
    sq = w.q(d * d) if fp16 else (d * d).astype(f32)
    eps = params.get("eps", 1e-5)
    eps = float(np.finfo(np.float32).eps if eps is None else eps)
    t = w.q(mean16(sq) + w.c(eps))
    r = w.q(1.0 / np.sqrt(f64(t)))
    weight = inputs[1] if len(inputs) > 1 else None
    bias = inputs[2] if len(inputs) > 2 and op == "layer_norm" else None
    y = (d * r).astype(f32)  # exact: a product of two 16-bit values
    if weight is not None:
        y = (w.q(y) * w.load(weight)).astype(f32)
    if bias is None:
        return w.q(y)
    # fp16: XLA drops the rounding of the last product before the bias add (an fp32 multiply-add,
    # the product exact): RN16(p + b); bf16 rounds the product first (measured bit for bit)
    return w.q((y if fp16 else w.q(y)) + w.load(bias))


for _op in ("layer_norm", "rms_norm"):
    def _xla_run(inputs, params, out, acc, seed, _op=_op):
        with np.errstate(all="ignore"):
            return finish(f64(_xla16_norm(_op, inputs, params, acc)), out)

    variant(_op, "xla-arith16", "library", True,
            f"XLA CPU's 16-bit {_op} (jax 0.10.2, jnp on 16-bit arrays without an upcast): fp32 row "
            "sums stored as a 16-bit mean, 16-bit "
            "elementwise steps, RN16(rsqrt); 16-bit arithmetic only", acc_formats=ARITH16)(_xla_run)
del _op, _xla_run


def _one_pass_var(a: Affine) -> tuple[np.ndarray, np.ndarray]:
    w = a.w
    mean = a.mean(a.x)
    return mean, w.q(a.mean(w.q(a.x * a.x)) - w.q(mean * mean))


def _one_pass_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """The fp32 one-pass variance changes some output beyond legitimate error (float64 check)."""
    from ..core.formats import FORMATS

    a = Affine(inputs, params, FORMATS["float32"])
    if not a.x.size:
        return False
    with np.errstate(all="ignore"):
        _, var = _one_pass_var(a)
        bug = lambda x, v, eps, K: 1.0 / np.sqrt(f64(var) + eps)  # noqa: E731
        return _factor_differs(bug)(inputs, params, out)


@_norm("layer_norm", "one-pass-variance", "variance", False,
       "var = E[x^2] - E[x]^2 in fp32: catastrophic cancellation on rows with a large mean "
       "(negative variances give NaN)", observable=_one_pass_visible)
def _ln_one_pass(a, out):
    return _ln_out(a, *_one_pass_var(a))


@_norm("layer_norm", "missing-eps", "eps", False,
       "rstd = 1/sqrt(var) without eps: wrong on rows whose variance is near eps",
       observable=_factor_differs(lambda x, v, eps, K: 1.0 / np.sqrt(v)))
def _ln_no_eps(a, out):
    mean, var = _two_pass(a)
    w = a.w
    return _ln_out(a, mean, var, rstd=w.q(w.c(1.0) / w.q(np.sqrt(var))))


@_norm("layer_norm", "eps-outside-sqrt", "eps", False,
       "rstd = 1/(sqrt(var) + eps) instead of 1/sqrt(var + eps)",
       observable=_factor_differs(lambda x, v, eps, K: 1.0 / (np.sqrt(v) + eps)))
def _ln_eps_outside(a, out):
    mean, var = _two_pass(a)
    w = a.w
    return _ln_out(a, mean, var, rstd=w.q(w.c(1.0) / w.q(w.q(np.sqrt(var)) + w.c(a.eps))))


@_norm("layer_norm", "unbiased-variance", "variance", False,
       "the unbiased variance sum / (K - 1) (torch.var's default) instead of the biased one: "
       "relative error 1/(2K) in rstd, invisible in bfloat16 for long rows",
       observable=_factor_differs(lambda x, v, eps, K: 1.0 / np.sqrt(v * K / max(K - 1, 1) + eps)
                                  if K > 1 else np.full(v.shape, np.inf)))
def _ln_unbiased(a, out):
    w = a.w
    mean = a.mean(a.x)
    d = w.q(a.x - mean)
    var = w.q(w.q(row_sum(w.q(d * d), w.fmt)) / w.c(max(a.K - 1, 1))) if a.K > 1 else mean * np.inf
    return _ln_out(a, mean, var)


@_norm("layer_norm", "affine-dropped", "formula-error", False,
       "the weight and bias are ignored (normalisation only)", observable=_has_weight)
def _ln_no_affine(a, out):
    mean, var = _two_pass(a)
    w = a.w
    return w.q(w.q(a.x - mean) * a.rsqrt(var))


@_norm("layer_norm", "bias-twice", "formula-error", False,
       "the bias is added twice (once in the kernel, once more in the epilogue)",
       observable=_has_bias)
def _ln_bias_twice(a, out):
    return _ln_out(a, *_two_pass(a), bias_times=2)


@_norm("layer_norm", "truncation", "truncation", False,
       "two-pass fp32 layer norm converted to the output format by truncation", applies=narrow_out,
       mode="rtz")
def _ln_truncation(a, out):
    return _ln_out(a, *_two_pass(a))


@_norm("layer_norm", "zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _ln_zeros(a, out):
    return np.zeros(a.x.shape)


# ---------------------------------------------------------------------------------------------
# rms_norm
# ---------------------------------------------------------------------------------------------


def _rms_out(a: Affine, r: np.ndarray) -> np.ndarray:
    return a.affine(a.w.q(a.x * r))


def _ms(a: Affine, order: str = "sequential", **kw: Any) -> np.ndarray:
    return a.mean(a.w.q(a.x * a.x), order, **kw)


@_norm("rms_norm", "fp32-internal", "accumulation-order", True,
       "mean of squares by a sequential fp32 sum, r = 1/sqrt(ms + eps), x * r * w in fp32, one "
       "rounding to the output format")
def _rms_fp32(a, out):
    return _rms_out(a, a.rsqrt(_ms(a)))


@_norm("rms_norm", "pairwise", "accumulation-order", True,
       "the mean of squares by pairwise summation")
def _rms_pairwise(a, out):
    return _rms_out(a, a.rsqrt(_ms(a, "pairwise")))


@_norm("rms_norm", "blocked128", "accumulation-order", True,
       "the mean of squares by blocked(128) summation (Triton / NKI row kernels)")
def _rms_blocked(a, out):
    return _rms_out(a, a.rsqrt(_ms(a, "blocked", block=BLOCK)))


@_norm("rms_norm", "hf-double-rounding", "rounding", True,
       "Hugging Face LlamaRMSNorm: x * rsqrt(ms + eps) in fp32, rounded to the output format, then "
       "multiplied by the weight in the output format (two roundings)", applies=narrow_out)
def _rms_hf(a, out):
    h = rnd(a.w.q(a.x * a.rsqrt(_ms(a))), out)
    return h if a.weight is None else rnd(f64(a.weight) * h, out)


@_norm("rms_norm", "missing-eps", "eps", False,
       "r = 1/sqrt(ms) without eps: wrong on rows whose mean square is near eps",
       observable=_factor_differs(lambda x, s, eps, K: 1.0 / np.sqrt(s), "rms_norm"))
def _rms_no_eps(a, out):
    w = a.w
    return _rms_out(a, w.q(w.c(1.0) / w.q(np.sqrt(_ms(a)))))


@_norm("rms_norm", "mean-abs", "formula-error", False,
       "r = 1/sqrt(mean |x| + eps): the mean absolute value in place of the mean square",
       observable=_factor_differs(
           lambda x, s, eps, K: 1.0 / np.sqrt(np.abs(x).mean(axis=-1, keepdims=True) + eps),
           "rms_norm"))
def _rms_mean_abs(a, out):
    return _rms_out(a, a.rsqrt(a.mean(np.abs(a.x))))


@_norm("rms_norm", "eps-outside-sqrt", "eps", False,
       "r = 1/(sqrt(ms) + eps) instead of 1/sqrt(ms + eps)",
       observable=_factor_differs(lambda x, s, eps, K: 1.0 / (np.sqrt(s) + eps), "rms_norm"))
def _rms_eps_outside(a, out):
    w = a.w
    return _rms_out(a, w.q(w.c(1.0) / w.q(w.q(np.sqrt(_ms(a))) + w.c(a.eps))))


@_norm("rms_norm", "weight-dropped", "formula-error", False,
       "the weight is ignored", observable=_has_scale)
def _rms_no_weight(a, out):
    return a.w.q(a.x * a.rsqrt(_ms(a)))


@_norm("rms_norm", "sqrt-instead-of-rsqrt", "formula-error", False,
       "x * sqrt(ms + eps) * w: the square root multiplied instead of its reciprocal",
       observable=_factor_differs(lambda x, s, eps, K: np.sqrt(s + eps), "rms_norm"))
def _rms_sqrt(a, out):
    w = a.w
    return _rms_out(a, w.q(np.sqrt(w.q(_ms(a) + w.c(a.eps)))))


@_norm("rms_norm", "sum-not-mean", "formula-error", False,
       "r = 1/sqrt(sum x^2 + eps): the sum of squares not divided by K",
       observable=_factor_differs(lambda x, s, eps, K: 1.0 / np.sqrt(s * K + eps), "rms_norm"))
def _rms_sum(a, out):
    w = a.w
    return _rms_out(a, a.rsqrt(w.q(row_sum(w.q(a.x * a.x), w.fmt))))


@_norm("rms_norm", "truncation", "truncation", False,
       "fp32 RMS norm converted to the output format by truncation", applies=narrow_out, mode="rtz")
def _rms_truncation(a, out):
    return _rms_out(a, a.rsqrt(_ms(a)))


@_norm("rms_norm", "zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _rms_zeros(a, out):
    return np.zeros(a.x.shape)


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"unbiased-variance": "scale"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
