"""Loss variants: ``cross_entropy`` (logits ``(N, C)``, integer targets, reduction) and ``mse_loss``.

``loss_n = logsumexp(x_n) - x_n[t_n]``; reduction ``mean`` (sum / N), ``sum`` or ``none``.
All legitimate variants compute in float32 with the row max subtracted: ``RN(m + log s) - x_t``
(Liger / Apex fused kernels), ``-((x_t - m) - log s)`` (PyTorch's log_softmax followed by
nll_loss), the online logsumexp over blocks of 128 classes, pairwise sums; losses summed in order
and divided by N; torch CPU.

Bugs: no max-subtraction (``inf`` once a logit exceeds 88.7), the loss also averaged over
classes, labels off by one, NLL applied to probabilities (the missing log), a sum returned for
``reduction="mean"``, zeros.  Data-dependent bugs are observable when their float32 result differs
from the float64 loss by more than 8 output ULPs plus ``32 u_fp32 (max|x| + log C + 1)``
(:func:`_ce_differs`).

``mse_loss`` (input and target of one shape; reduction ``mean``, ``sum`` or ``none``).  Legitimate:
``d = RN(a - b)``, ``q = RN(d * d)`` in the accumulation format, the ``q`` summed sequentially,
pairwise, as a tree, in blocks of 128, split in 4, by Kahan, or by FMA (``s = RN(s + d * d)``, the
square not rounded), then ``RN(s / K)`` or ``RN(s * RN(1/K))``; numpy's float32 ``mean(d * d)``;
torch CPU (which stores ``d`` and ``d²`` in a 16-bit input's dtype); ``stored16``, that 16-bit
arithmetic (evidence for the stored16 standards; huber / smooth_l1: ``stored16-arith``, every
operation of the term in 16 bits, and ``stored16-once``, the fp32 term stored rounded once; hinge:
``stored16``, ``RN16(margin - x)``).  Bugs: the sum returned for
the mean and the mean for the sum, ``|d|`` for ``d²`` (the missing square), a ``K − 1`` denominator,
the square of the mean difference, ½·MSE, a running sum in the output format or in bfloat16, the
last block of 128 dropped, truncation of the final rounding, zeros.

16-bit kl_div, nll_loss and cross_entropy: ``stored16``, torch CPU's arithmetic, bit for bit
(tests/test_loss16.py): kl_div's composite with every primitive stored and at::sum's 16-bit chunk
sums; nll_loss's cascade of 16-bit partial sums (LossNLL.cpp) and 16-bit row count; cross_entropy's
16-bit log_softmax followed by that cascade (evidence for the stored16 standards only: the fp32-policy
templates exclude them, with torch CPU).

References: PyTorch ``torch.nn.functional.cross_entropy`` and ``mse_loss``; Hsu et al., "Liger Kernel: efficient
Triton kernels for LLM training", arXiv:2410.10989 (2024).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import Format
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, at_sum16, f64, finish, from_torch, narrow_out, registrar, row_sum, to_torch, torch_same_format,
    truncation_visible, Work,
)
from .softmax import Row, _xla16, online

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)


def _ce_reduce(loss: np.ndarray, params: Mapping[str, Any], w: Work, order: str = "sequential"
               ) -> np.ndarray:
    """Per-row losses reduced as ``params['reduction']`` asks (mean: sum in order, then / N)."""
    red = params.get("reduction", "mean")
    if red == "none":
        return loss
    s = row_sum(loss[None, :], w.fmt, order)[0, 0] if loss.size else np.float64(0.0)
    if red == "sum":
        return np.asarray(s)
    return np.asarray(w.q(np.float64(s) / loss.size))


def _ce_parts(inputs: list, acc: Format) -> tuple[np.ndarray, np.ndarray, Work]:
    w = Work(acc)
    x = w.load(inputs[0])
    t = np.asarray(inputs[1]).astype(np.int64)
    return x, t, w


def _picked(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.take_along_axis(x, t[:, None], axis=-1)[:, 0] if x.size else np.zeros(t.shape)


def _ce(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
        observable: Callable | None = None, differs: bool = False) -> Callable:
    """Register ``core(x, t, w, params) -> reduced loss`` for cross_entropy.

    ``differs=True`` uses :func:`_ce_differs` of the core as its ``observable``.
    """

    def deco(core: Callable) -> Callable:
        obs = _ce_differs(core) if differs else observable

        def run(inputs, params, out, acc, seed):
            x, t, w = _ce_parts(inputs, acc)
            with np.errstate(all="ignore"):
                return finish(core(x, t, w, params), out)

        variant("cross_entropy", name, family, legit, description, applies, obs)(run)
        return core

    return deco


@_ce("logsumexp", "formula", True,
     "loss_n = RN(m + log s) - x_t in fp32 (Liger / Apex fused kernels), losses summed "
     "sequentially and divided by N")
def _ce_lse(x, t, w, params):
    r = Row(x, w)
    lse = w.q(r.m[:, 0] + w.q(np.log(r.s[:, 0])))
    return _ce_reduce(w.q(lse - _picked(x, t)), params, w)


@_ce("via-log-softmax", "formula", True,
     "loss_n = -((x_t - m) - log s): PyTorch's log_softmax followed by nll_loss, in fp32")
def _ce_logsoftmax(x, t, w, params):
    ls = Row(x, w).log_softmax()
    return _ce_reduce(-_picked(ls, t), params, w)


@_ce("online", "accumulation-order", True,
     "online logsumexp over blocks of 128 classes (running max, rescaled sum; Liger kernel), "
     "loss = RN(m + log l) - x_t")
def _ce_online(x, t, w, params):
    m, l = online(x, w)
    lse = w.q(m[:, 0] + w.q(np.log(l[:, 0])))
    return _ce_reduce(w.q(lse - _picked(x, t)), params, w)


@_ce("pairwise", "accumulation-order", True,
     "two-pass logsumexp with pairwise row sums and a pairwise sum of the losses")
def _ce_pairwise(x, t, w, params):
    r = Row(x, w, "pairwise")
    lse = w.q(r.m[:, 0] + w.q(np.log(r.s[:, 0])))
    return _ce_reduce(w.q(lse - _picked(x, t)), params, w, "pairwise")


def _torch_ce(inputs, params, out, acc, seed):
    import torch
    import torch.nn.functional as F

    target = torch.from_numpy(np.asarray(inputs[1]).astype(np.int64))
    y = F.cross_entropy(to_torch(inputs[0]), target, reduction=params.get("reduction", "mean"))
    return finish(from_torch(y), out)


variant("cross_entropy", "torch-cpu", "library", True,
        "torch.nn.functional.cross_entropy on CPU in the logits' dtype", torch_same_format,
        acc_formats=FP32_ONLY)(_torch_ce)


def _ce_stored16(inputs, params, out, acc, seed):
    """PyTorch CPU's 16-bit cross_entropy: log_softmax in the input dtype (the row sum ``s`` and ``log s``
    stored in ``scalar_t`` buffers, ``(x - m) - log s`` formed in fp32 and stored) then nll_loss's cascade
    of 16-bit partial sums (:func:`_nll_cascade16`); bit for bit against torch 2.13 (tests/test_loss16.py)."""
    x, t, w = _ce_parts(inputs, acc)
    o = Work(out)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=-1, keepdims=True) if x.size else np.zeros((x.shape[0], 1))
        d = w.q(x - m)
        s = o.q(row_sum(w.q(np.exp(f64(d))), w.fmt, "pairwise"))
        lp = o.q(w.q(d - o.q(w.q(np.log(f64(s))))))
        loss = -_picked(lp, t)
        if params.get("reduction", "mean") == "none":
            return finish(loss, out)
        return finish(_nll_cascade16(loss, np.ones(loss.shape, bool), params, w, out), out)


def _ce_cascade_finite(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """The 16-bit model's result is finite (an fp16 partial sum above 65504: the defect
    torch-cpu-nll-loss-fp16-overflow)."""
    from ..core.formats import get_format

    with np.errstate(all="ignore"):
        return bool(np.all(np.isfinite(f64(_ce_stored16(inputs, params, out, get_format("float32"), 0)))))


variant("cross_entropy", "stored16", "rounding", True,
        "PyTorch CPU's 16-bit cross_entropy: log_softmax with s and log s stored in the 16-bit type, the "
        "log-probabilities stored, nll_loss's cascade of 16-bit partial sums and 16-bit row count: "
        "evidence for the stored16 standards only, on inputs where no stored partial sum overflows",
        lambda out, f, p: out.name in ("bfloat16", "float16"), _ce_cascade_finite, acc_formats=FP32_ONLY)(_ce_stored16)


def _ce_xla(inputs, params, out, acc, seed):
    """XLA CPU's 16-bit cross_entropy (jax 0.10.2, ``-take_along_axis(jax.nn.log_softmax(x), t)`` then
    ``jnp.mean`` / ``jnp.sum``, compiled HLO): the 16-bit log_softmax (:func:`numstd.corpus.softmax._xla16`:
    ``RN16(d − RN16(log RN16(s)))``, ``d = RN16(x − m)``, ``s`` an fp32 sum), the picked log-probabilities
    negated (exact), then :func:`_xla_reduce` (an fp32 sum, the mean ``RN16(s·RN32(1/N))``)."""
    o = Work(out)
    x = np.asarray(f64(inputs[0]), dtype=np.float32)
    t = np.asarray(inputs[1]).astype(np.int64)
    with np.errstate(all="ignore"):
        if not x.size:
            return _xla_reduce(np.zeros(t.shape, np.float32), params, out)
        lp = _xla16("log_softmax", x, o)
        return _xla_reduce(-_picked(f64(lp), t), params, out)


variant("cross_entropy", "xla-arith16", "library", True,
        "XLA CPU's 16-bit cross_entropy (jax 0.10.2): jax.nn.log_softmax in 16-bit steps (RN16(x − m), an fp32 "
        "row sum stored in 16 bits, RN16(d − RN16(log s16))), the picked values negated, an fp32 reduce rounded "
        "once (mean: RN16(s·RN32(1/N))); 16-bit arithmetic only",
        lambda out, f, p: out.name in ("bfloat16", "float16"), acc_formats=ARITH16)(_ce_xla)


def _ce_exact(inputs: list, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """float64 cross entropy (reduced as asked) and the scale of a legitimate fp32 error."""
    x = f64(inputs[0])
    t = np.asarray(inputs[1]).astype(np.int64)
    m = x.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[:, 0]
    loss = lse - _picked(x, t)
    scale = np.abs(x).max(axis=-1) + np.log(max(x.shape[-1], 1)) + 1.0
    red = params.get("reduction", "mean")
    if red == "none":
        return loss, scale
    if red == "sum":
        return np.asarray(loss.sum()), np.asarray(scale.sum())
    return np.asarray(loss.mean()), np.asarray(scale.mean())


def _ce_differs(bug: Callable) -> Callable:
    """``observable``: the bug's loss is off by more than 8 output ULPs + 32 u_fp32 * scale."""

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        from ..core.formats import get_format
        from ..core.ulp import ulp

        if not np.size(inputs[0]):
            return False
        with np.errstate(all="ignore"):
            exact, scale = _ce_exact(inputs, params)
            x, t, w = _ce_parts(inputs, get_format("float32"))
            got = f64(bug(x, t, w, params))
            tol = 8.0 * ulp(exact, out) + 32.0 * 2.0 ** -24 * scale
            bad = ~np.isfinite(got) | (np.abs(got - exact) > tol)
        return bool(np.any(bad))

    return observable


def _ce_overflows(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    x = f64(inputs[0])
    return bool(x.size) and bool((x.max(axis=-1) > 88.0).any() or (x.max(axis=-1) < -87.0).any())


@_ce("no-max-subtraction", "max-subtraction", False,
     "logsumexp computed as log(sum exp(x)) without the max: inf once a logit exceeds 88.7",
     observable=_ce_overflows)
def _ce_nomax(x, t, w, params):
    lse = w.q(np.log(w.q(row_sum(w.q(np.exp(x)), w.fmt))[:, 0]))
    return _ce_reduce(w.q(lse - _picked(x, t)), params, w)


@_ce("mean-over-classes", "scale", False,
     "the loss averaged over classes too (divided by N * C, as an elementwise mean over one-hot "
     "targets would)", differs=True)
def _ce_mean_classes(x, t, w, params):
    loss = _ce_lse(x, t, w, {"reduction": "none"})
    return _ce_reduce(w.q(loss / w.c(max(x.shape[-1], 1))), params, w)


@_ce("label-off-by-one", "indexing", False,
     "targets shifted by one class ((t + 1) mod C: a 1-based label convention)", differs=True)
def _ce_off_by_one(x, t, w, params):
    return _ce_lse(x, (t + 1) % max(x.shape[-1], 1), w, params)


@_ce("missing-log", "formula-error", False,
     "NLL applied to probabilities instead of log-probabilities: loss_n = -softmax(x)_t (the "
     "missing log)", differs=True)
def _ce_missing_log(x, t, w, params):
    return _ce_reduce(-_picked(Row(x, w).softmax(), t), params, w)


@_ce("sum-not-mean", "scale", False,
     "reduction='mean' returning the sum of the losses",
     applies=lambda out, f, p: p.get("reduction", "mean") == "mean",
     differs=True)
def _ce_sum(x, t, w, params):
    return _ce_lse(x, t, w, {"reduction": "sum"})


@_ce("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _ce_zeros(x, t, w, params):
    return np.zeros(t.shape) if params.get("reduction", "mean") == "none" else np.asarray(0.0)


# ---------------------------------------------------------------------------------------------
# mse_loss
# ---------------------------------------------------------------------------------------------

_MSE_BLOCK = 128


def _mse_terms(inputs: list, w: Work, square: bool = True) -> np.ndarray:
    """The squared differences ``RN(RN(a - b)^2)`` (or ``|RN(a - b)|``) in the working format."""
    d = w.q(w.load(inputs[0]) - w.load(inputs[1]))
    return w.q(d * d) if square else np.abs(d)


def _mse_reduce(q: np.ndarray, params: Mapping[str, Any], w: Work, order: str = "sequential",
                recip: bool = False, **kw: Any) -> np.ndarray:
    """``q`` reduced as ``params['reduction']`` asks: summed in ``order`` (every partial sum rounded to
    the working format), the mean ``RN(s / K)`` (``recip``: ``RN(s * RN(1/K))``)."""
    red = params.get("reduction", "mean")
    if red == "none":
        return q
    k = q.size
    s = row_sum(f64(q).reshape(1, -1), w.fmt, order, **kw)[0, 0] if k else np.float64(0.0)
    if red == "sum":
        return np.asarray(s)
    if recip:
        return np.asarray(w.q(np.float64(s) * np.float64(w.c(1.0 / k))))
    return np.asarray(w.q(np.float64(s) / k))


def _reduce16(q: np.ndarray, params: Mapping[str, Any], w: Work, out: Format) -> np.ndarray:
    """Stored 16-bit terms ``q`` reduced as torch's ``apply_loss_reduction`` does on CPU: ``mean``
    through at::mean (fp32 sum, ``RN(s / K)``), ``sum`` through at::sum (:func:`~numstd.corpus._common.at_sum16`: 16-bit chunk
    sums above 32768 elements)."""
    if params.get("reduction", "mean") == "sum":
        return at_sum16(q, w, out)
    return _mse_reduce(q, params, w, "pairwise")


def _not_none(out: Format, fmts: Any, params: Mapping[str, Any]) -> bool:
    return params.get("reduction", "mean") != "none"


def _mse(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
         observable: Callable | None = None, mode: str = "rne", acc_formats: tuple | None = None) -> Callable:
    """Register ``core(inputs, w, params, out) -> loss in the working format`` for mse_loss; the result
    is rounded once to the output format (``mode``: RNE, or RTZ for the truncation bug)."""

    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            w = Work(acc)
            with np.errstate(all="ignore"):
                y = np.asarray(core(inputs, w, params, out))
                return finish(y.reshape(np.shape(inputs[0])) if y.ndim else y, out, mode, seed)

        variant("mse_loss", name, family, legit, description, applies, observable, acc_formats)(run)
        return core

    return deco


for _name, (_order, _kw, _desc) in {
    "sequential": ("sequential", {}, "one running sum s = RN(s + q_i)"),
    "pairwise": ("pairwise", {}, "recursive halving, every partial sum rounded"),
    "tree": ("tree", {}, "adjacent pairs level by level (a block tree reduction)"),
    "blocked128": ("blocked", {"block": _MSE_BLOCK}, "sequential sums of blocks of 128, block sums added in order"),
    "splitk4": ("splitk", {"splits": 4}, "4 contiguous slices summed separately, then added"),
    "kahan": ("kahan", {}, "Kahan compensated summation"),
}.items():
    _mse(_name, "accumulation-order", True,
         f"q_i = RN(RN(a_i - b_i)^2) in the accumulation format, summed by {_desc}, then RN(s / K)")(
        lambda inputs, w, params, out, _o=_order, _k=_kw: _mse_reduce(_mse_terms(inputs, w), params, w, _o, **_k))
del _name, _order, _kw, _desc


@_mse("fma", "formula", True,
      "s = fma(d_i, d_i, s): the square enters the running sum unrounded (one rounding per term), "
      "then RN(s / K)")
def _mse_fma(inputs, w, params, out):
    d = w.q(w.load(inputs[0]) - w.load(inputs[1]))
    exact_sq = f64(d) * f64(d)  # (exact: at most 2 x 24 significand bits)
    if params.get("reduction", "mean") == "none":
        return w.q(exact_sq)
    return _mse_reduce(exact_sq, params, w)


@_mse("reciprocal-multiply", "formula", True,
      "blocked(128) sum of the q_i times RN(1/K) (a multiply instead of a division, as GPU kernels do)")
def _mse_recip(inputs, w, params, out):
    return _mse_reduce(_mse_terms(inputs, w), params, w, "blocked", recip=True, block=_MSE_BLOCK)


@_mse("numpy", "library", True,
      "numpy on float32 arrays: d = a - b; np.mean(d * d) (pairwise over unrolled blocks)",
      acc_formats=FP32_ONLY)
def _mse_numpy(inputs, w, params, out):
    a = np.asarray(f64(inputs[0]), dtype=np.float32)
    d = a - np.asarray(f64(inputs[1]), dtype=np.float32)
    red = params.get("reduction", "mean")
    return d * d if red == "none" else (np.sum(d * d) if red == "sum" else np.mean(d * d))


def _torch_mse(inputs, params, out, acc, seed):
    import torch.nn.functional as F

    y = F.mse_loss(to_torch(inputs[0]), to_torch(inputs[1]), reduction=params.get("reduction", "mean"))
    return finish(from_torch(y), out)


variant("mse_loss", "torch-cpu", "library", True,
        "torch.nn.functional.mse_loss on CPU in the inputs' dtype (16-bit inputs: d and d² stored in "
        "16 bits, the mean accumulated in float32)", torch_same_format, acc_formats=FP32_ONLY)(_torch_mse)


def _stored16_only(out: Format, fmts: Any, params: Mapping[str, Any]) -> bool:
    """A 16-bit output: the stored16 models store intermediates in it."""
    return out.name in ("bfloat16", "float16")


def _stored_squares_finite(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """The stored RN16(RN16(d)^2) are finite: a d^2 above the format's largest value stored as inf is
    the documented defect torch-cpu-mse-loss-fp16-overflow, not legitimate stored16 arithmetic."""
    with np.errstate(all="ignore"):
        d = f64(Work(out).q(f64(inputs[0]) - f64(inputs[1])))
        return bool(np.all(np.isfinite(f64(Work(out).q(d * d)))))


@_mse("stored16", "rounding", True,
      "PyTorch CPU's 16-bit mse_loss: d = RN16(a - b) and d^2 = RN16(d^2) stored in the 16-bit output "
      "format, the mean's terms summed in float32, RN(s / K), the sum through at::sum (16-bit chunk sums): "
      "evidence for the stored16 standards only, on inputs whose stored squares are finite", applies=_stored16_only, observable=_stored_squares_finite)
def _mse_stored16(inputs, w, params, out):
    o = Work(out)
    d = o.q(w.q(w.load(inputs[0]) - w.load(inputs[1])))
    return _reduce16(o.q(w.q(d * d)), params, w, out)


def _xla_reduce(t: np.ndarray, params: Mapping[str, Any], out: Format) -> np.ndarray:
    """XLA CPU's reduction of a 16-bit loss's fp32 terms ``t`` (``jnp.mean`` / ``jnp.sum``, jax 0.10.2,
    read from the compiled HLO): an fp32 reduce (reduce-window blocks, then a reduce; numpy's fp32
    pairwise sum here: the order only matters through the final rounding), the mean
    ``RN16(s · RN32(1/K))``, the sum ``RN16(s)``; ``none`` the terms rounded once."""
    f32 = np.float32
    t = np.asarray(t, dtype=f32)
    red = params.get("reduction", "mean")
    if red == "none":
        return finish(f64(t), out)
    s = np.sum(t, dtype=f32) if t.size else f32(0)
    if red == "mean":
        s = f32(s) * f32(1.0 / t.size)
    return finish(f64(f32(s)), out)


def _xla_mse_terms(inputs: list, out: Format) -> np.ndarray:
    """XLA CPU's 16-bit mse_loss terms (jax 0.10.2, ``d = a - b; d * d``, compiled HLO):
    ``d16 = RN16(a − b)`` (fp32 subtract, rounded: bf16 ``convert``, fp16's f16 ``subtract``); bf16
    squares ``d16²`` in fp32 (exact: 16 significant bits), fp16 ``RN16(d16²)`` (an f16 ``multiply``,
    then converted to fp32 for the reduce)."""
    f32 = np.float32
    o = Work(out)
    d = o.q(np.asarray(f64(inputs[0]), dtype=f32) - np.asarray(f64(inputs[1]), dtype=f32))
    sq = d * d
    return o.q(sq) if out.name == "float16" else sq


def _xla_run(terms: Callable) -> Callable:
    def run(inputs, params, out, acc, seed):
        with np.errstate(all="ignore"):
            y = _xla_reduce(terms(inputs, params, out), params, out)
            return y.reshape(np.shape(inputs[0])) if y.ndim else y
    return run


variant("mse_loss", "xla-arith16", "library", True,
        "XLA CPU's 16-bit mse_loss (jax 0.10.2, jnp d = a - b; mean(d * d)): d = RN16(a - b), bf16 squares "
        "in fp32 (exact), fp16 RN16(d²), an fp32 reduce rounded once (mean: RN16(s·RN32(1/K))); "
        "16-bit arithmetic only", _stored16_only, acc_formats=ARITH16)(
    _xla_run(lambda inputs, params, out: _xla_mse_terms(inputs, out)))


def _mse_exact(inputs: list, params: Mapping[str, Any]) -> np.ndarray:
    q = (f64(inputs[0]) - f64(inputs[1])) ** 2
    red = params.get("reduction", "mean")
    return q if red == "none" else np.asarray(q.sum() if red == "sum" else q.mean())


def _mse_truncation_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """``observable`` of the truncation bug: for ``none``, RTZ and RNE differ on enough elements to bias
    the mean (:func:`~numstd.corpus._common.truncation_visible`); for a reduced loss (one number),
    truncating its float32 value lands more than 0.75 output ULP from the exact loss (beyond half an
    ULP plus the float32 accumulation error, where round-to-nearest would not)."""
    from ..core.formats import get_format, round_to
    from ..core.ulp import ulp

    fp32 = get_format("float32")
    if params.get("reduction", "mean") == "none":
        return _truncation_by_elements(inputs, params, out)
    with np.errstate(all="ignore"):
        y = f64(_mse_reduce(_mse_terms(inputs, Work(fp32)), params, Work(fp32), "blocked", block=_MSE_BLOCK))
        exact = _mse_exact(inputs, params)
        cut = f64(round_to(y, out, "rtz"))
        return bool(np.isfinite(cut) and abs(cut - exact) > 0.75 * float(ulp(exact, out)))


@_mse("truncation", "truncation", False,
      "blocked fp32 loss converted to the output format by truncation instead of rounding",
      applies=narrow_out, mode="rtz", observable=_mse_truncation_visible)
def _mse_trunc(inputs, w, params, out):
    return _mse_reduce(_mse_terms(inputs, w), params, w, "blocked", block=_MSE_BLOCK)


def _mse_trunc_run(inputs, params, out, acc, seed):
    y = np.asarray(_mse_trunc(inputs, Work(acc), params, out))
    return y.reshape(np.shape(inputs[0])) if y.ndim else y


_truncation_by_elements = truncation_visible(_mse_trunc_run)


def _mse_is(*reductions: str) -> Callable:
    return lambda out, f, p: p.get("reduction", "mean") in reductions


@_mse("sum-not-mean", "scale", False, "reduction='mean' returning the sum of the squared differences",
      applies=_mse_is("mean"))
def _mse_sum_for_mean(inputs, w, params, out):
    return _mse_reduce(_mse_terms(inputs, w), {"reduction": "sum"}, w, "blocked", block=_MSE_BLOCK)


def _more_than_one(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return np.size(inputs[0]) > 1


@_mse("mean-not-sum", "scale", False, "reduction='sum' returning the mean (the wrong reduction)",
      applies=_mse_is("sum"), observable=_more_than_one)
def _mse_mean_for_sum(inputs, w, params, out):
    return _mse_reduce(_mse_terms(inputs, w), {"reduction": "mean"}, w, "blocked", block=_MSE_BLOCK)


@_mse("missing-square", "formula-error", False, "|a_i - b_i| instead of (a_i - b_i)^2 (an L1 loss)")
def _mse_abs(inputs, w, params, out):
    return _mse_reduce(_mse_terms(inputs, w, square=False), params, w, "blocked", block=_MSE_BLOCK)


def _k_minus_1_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    k = np.size(inputs[0])
    return k <= 1 or 1.0 / (k - 1) >= 4.0 * out.u


@_mse("by-k-minus-1", "scale", False,
      "the sum divided by K - 1 (an unbiased-variance denominator): relative error 1/(K - 1), "
      "observable when 1/(K - 1) >= 4 u_out", applies=_mse_is("mean"), observable=_k_minus_1_visible)
def _mse_k_minus_1(inputs, w, params, out):
    q = _mse_terms(inputs, w)
    s = _mse_reduce(q, {"reduction": "sum"}, w, "blocked", block=_MSE_BLOCK)
    return w.q(f64(s) / (q.size - 1)) if q.size > 1 else np.asarray(np.inf)


@_mse("squared-mean", "formula-error", False,
      "the square of the mean difference, (mean(a - b))^2, instead of the mean of the squares",
      applies=_mse_is("mean"))
def _mse_squared_mean(inputs, w, params, out):
    d = w.q(w.load(inputs[0]) - w.load(inputs[1]))
    m = _mse_reduce(d, params, w, "blocked", block=_MSE_BLOCK)
    return w.q(m * m)


@_mse("half", "scale", False, "½·MSE (the ½‖d‖² convention of least squares) returned for mse_loss")
def _mse_half(inputs, w, params, out):
    return w.q(_mse_reduce(_mse_terms(inputs, w), params, w, "blocked", block=_MSE_BLOCK) * w.c(0.5))


@_mse("acc-output-format", "accumulation-precision", False,
      "the running sum kept in the output format (e.g. bfloat16): stagnates once the sum is large",
      applies=lambda out, f, p: narrow_out(out, f, p) and _not_none(out, f, p))
def _mse_acc_out(inputs, w, params, out):
    return _mse_reduce(_mse_terms(inputs, w), params, Work(out))


@_mse("acc-bf16", "accumulation-precision", False,
      "the running sum kept in bfloat16 whatever the output format",
      applies=lambda out, f, p: out.name != "bfloat16" and _not_none(out, f, p))
def _mse_acc_bf16(inputs, w, params, out):
    from ..core.formats import FORMATS

    return _mse_reduce(_mse_terms(inputs, w), params, Work(FORMATS["bfloat16"]))


def _tail_counts(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """The dropped squared differences hold more than 4 u_out of the total (a remainder of small
    differences next to rows of large ones changes nothing visible)."""
    q = ((f64(inputs[0]) - f64(inputs[1])) ** 2).reshape(-1)
    k = q.size
    if k <= _MSE_BLOCK:
        return False
    tail = q[((k - 1) // _MSE_BLOCK) * _MSE_BLOCK:].sum()
    return bool(tail > 4.0 * out.u * q.sum())


@_mse("dropped-tail-block", "dropped-tile", False,
      "the last block of 128 squared differences (or the partial remainder) is never added (off-by-one "
      "in the block count); observable when K > 128 and the dropped terms hold more than 4 u_out of the sum",
      applies=_not_none, observable=_tail_counts)
def _mse_dropped(inputs, w, params, out):
    q = _mse_terms(inputs, w).reshape(-1)
    k = q.size
    keep = ((k - 1) // _MSE_BLOCK) * _MSE_BLOCK if k else 0
    s = _mse_reduce(q[:keep], {"reduction": "sum"}, w, "blocked", block=_MSE_BLOCK)
    return s if params.get("reduction", "mean") == "sum" else w.q(f64(s) / k)


@_mse("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _mse_zeros(inputs, w, params, out):
    return np.zeros(np.shape(inputs[0])) if params.get("reduction", "mean") == "none" else np.asarray(0.0)



# ---------------------------------------------------------------------------------------------
# huber_loss and smooth_l1_loss
# ---------------------------------------------------------------------------------------------

_HUBER_OPS = ("huber_loss", "smooth_l1_loss")


def _thr(op: str, params: Mapping[str, Any]) -> float:
    """huber's ``delta`` or smooth_l1's ``beta``."""
    return float(params.get("delta", 1.0) if op == "huber_loss" else params.get("beta", 1.0))


def _hub_terms(op: str, inputs: list, w: Work, params: Mapping[str, Any], *, form: str = "torch",
               absolute: bool = True, branch: bool = True, offset: bool = True, half: bool = True,
               divide: bool = True, stored: Format | None = None) -> np.ndarray:
    """The terms in the working format, every operation rounded; ``form`` "torch" is torch's
    ``0.5 z z`` / ``delta (z - 0.5 delta)`` (smooth_l1 ``0.5 z z / beta`` / ``z - 0.5 beta``),
    "expanded" the linear branch ``delta z - 0.5 delta^2`` (smooth_l1: ``z z (0.5 / beta)``), "scaled"
    smooth_l1 as huber(d, beta) / beta.  The keywords off are the bugs: ``absolute`` (signed d in the
    test and the linear branch), ``branch`` (always quadratic), ``offset`` (no ``- 0.5 delta``),
    ``half`` (no 0.5 in the quadratic branch), ``divide`` (smooth_l1 without ``/ beta``); ``stored``:
    the difference rounded to that (16-bit) format before the rest (PyTorch CPU's stored ``d``)."""
    t = _thr(op, params)
    d = w.q(w.load(inputs[0]) - w.load(inputs[1]))
    d = Work(stored).q(d) if stored is not None else d
    z = np.abs(d) if absolute else d
    tc, hc = w.c(t), w.c(0.5 * t)
    sq = w.q(z * z)
    quad = w.q(sq * w.c(0.5)) if half else sq
    off = hc if offset else 0.0
    if op == "huber_loss":
        if form == "expanded":
            lin = w.q(w.q(tc * z) - (w.c(0.5 * t * t) if offset else 0.0))
        else:
            lin = w.q(tc * w.q(z - off))
    else:
        if t == 0:
            return np.abs(d)
        if form == "expanded":
            quad = w.q(sq * w.c((0.5 if half else 1.0) / t)) if divide else quad
        elif form == "scaled":
            quad = w.q(quad / tc) if divide else quad
            lin = w.q(w.q(tc * w.q(z - off)) / tc)
        elif divide:
            quad = w.q(quad / tc)
        if form != "scaled":
            lin = w.q(z - off)
    return quad if not branch else np.where(z < tc, quad, lin)


def _xla_hub_terms(op: str, inputs: list, out: Format, params: Mapping[str, Any]) -> np.ndarray:
    """XLA CPU's 16-bit huber / smooth_l1 terms (jax 0.10.2, :func:`numstd.backends.base.huber_terms` with jnp,
    compiled HLO): every primitive rounded to the 16-bit type (bf16 upcast between the roundings XLA keeps,
    fp16 kept in fp16), the Python constants rounded to it: ``d = RN16(a − b)``, ``z = |d|``, the quadratic
    ``RN16(RN16(z·0.5)·z)`` (huber; smooth_l1 divides it by ``RN16(beta)``: bf16 ``RN16(q / t16)``, fp16 a multiply
    by the stored reciprocal ``RN16(q·RN16(1/t16))``), the linear ``RN16(t16·RN16(z − RN16(t/2)))`` (huber) or
    ``RN16(z − RN16(t/2))`` (smooth_l1), picked by ``z < t16``."""
    o = Work(out)
    f32 = np.float32
    t = _thr(op, params)
    d = o.q(np.asarray(f64(inputs[0]), dtype=f32) - np.asarray(f64(inputs[1]), dtype=f32))
    z = np.abs(d)
    if op == "smooth_l1_loss" and t == 0:
        return z
    tc, hc = o.c(t), o.c(0.5 * t)
    quad = o.q(o.q(z * f32(0.5)) * z)
    if op == "huber_loss":
        lin = o.q(tc * o.q(z - hc))
    else:
        quad = o.q(quad * o.c(1.0 / float(tc))) if out.name == "float16" else o.q(quad / tc)
        lin = o.q(z - hc)
    return np.where(z < tc, quad, lin)


for _op in _HUBER_OPS:
    variant(_op, "xla-arith16", "library", True,
            f"XLA CPU's 16-bit {_op} (jax 0.10.2): every primitive and constant of the term rounded to the 16-bit "
            "type (fp16: the division by the threshold a multiply by its stored reciprocal), an fp32 reduce rounded "
            "once (mean: RN16(s·RN32(1/K))); 16-bit arithmetic only", _stored16_only, acc_formats=ARITH16)(
        _xla_run(lambda inputs, params, out, _op=_op: _xla_hub_terms(_op, inputs, out, params)))
del _op


def _hub_exact(op: str, inputs: list, params: Mapping[str, Any]) -> np.ndarray:
    from ..reference import reference

    return f64(reference(op, [f64(inputs[0]), f64(inputs[1])], **dict(params)).values)


def _hub_differs(core: Callable) -> Callable:
    """``observable``: the bug's float32 result is off the float64 loss by more than 8 output ULPs
    plus ``8 (sqrt(K) + 5) u_fp32`` times the loss (K the terms per output: 4x a model of lam = 1,
    margin 2), somewhere."""
    from ..core.formats import get_format
    from ..core.ulp import ulp

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        op = params["_op"]
        fp32 = get_format("float32")
        with np.errstate(all="ignore"):
            y = f64(finish(np.asarray(core(op, inputs, Work(fp32), params, out)), out))
            exact = _hub_exact(op, inputs, {k: v for k, v in params.items() if k != "_op"})
        k = 1 if params.get("reduction", "mean") == "none" else np.size(inputs[0])
        tol = 8.0 * f64(ulp(exact, out)) + 8.0 * (np.sqrt(k) + 5.0) * fp32.u * np.abs(exact)
        return bool(np.any(~(np.abs(y.reshape(np.shape(exact)) - exact) <= tol)))

    return observable


def _hub(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
         observable: Any = None, acc_formats: tuple | None = None, ops: tuple = _HUBER_OPS) -> Callable:
    """Register ``core(op, inputs, w, params, out) -> loss in the working format`` for the ops, rounded
    once to the output format; ``observable=True``: :func:`_hub_differs`."""

    def deco(core: Callable) -> Callable:
        for op in ops:
            def run(inputs, params, out, acc, seed, _op=op):
                with np.errstate(all="ignore"):
                    y = np.asarray(core(_op, inputs, Work(acc), params, out))
                    return finish(y.reshape(np.shape(inputs[0])) if y.ndim else y, out)

            obs = observable
            if observable is True:
                differs = _hub_differs(core)
                obs = (lambda inputs, params, out, _d=differs, _op=op: _d(inputs, dict(params, _op=_op), out))
            variant(op, name, family, legit, description, applies, obs, acc_formats)(run)
        return core

    return deco


def _hub_reduce(op: str, inputs: list, w: Work, params: Mapping[str, Any], order: str = "blocked",
                recip: bool = False, **kw: Any) -> np.ndarray:
    kw = kw or ({"block": _MSE_BLOCK} if order == "blocked" else {})
    return _mse_reduce(_hub_terms(op, inputs, w, params), params, w, order, recip=recip, **kw)


for _name, (_order, _kw, _desc) in {
    "sequential": ("sequential", {}, "one running sum s = RN(s + l_i)"),
    "pairwise": ("pairwise", {}, "recursive halving, every partial sum rounded"),
    "tree": ("tree", {}, "adjacent pairs level by level (a block tree reduction)"),
    "blocked128": ("blocked", {"block": _MSE_BLOCK}, "sequential sums of blocks of 128, block sums added in order"),
    "splitk4": ("splitk", {"splits": 4}, "4 contiguous slices summed separately, then added"),
    "kahan": ("kahan", {}, "Kahan compensated summation"),
}.items():
    _hub(_name, "accumulation-order", True,
         f"the terms in the accumulation format (torch's formula, every operation rounded), summed by "
         f"{_desc}, then RN(s / K)")(
        lambda op, inputs, w, params, out, _o=_order, _k=_kw: _hub_reduce(op, inputs, w, params, _o, **_k))
del _name, _order, _kw, _desc


@_hub("expanded", "formula", True,
      "huber's linear branch as delta z - 0.5 delta^2 (smooth_l1's square times RN(0.5 / beta)), "
      "blocked sum, mean by RN(1/K) multiply")
def _hub_expanded(op, inputs, w, params, out):
    q = _hub_terms(op, inputs, w, params, form="expanded")
    return _mse_reduce(q, params, w, "blocked", recip=True, block=_MSE_BLOCK)


@_hub("via-huber", "formula", True, "smooth_l1 as huber_loss(d, beta) / beta (both branches divided)",
      ops=("smooth_l1_loss",))
def _hub_scaled(op, inputs, w, params, out):
    return _mse_reduce(_hub_terms(op, inputs, w, params, form="scaled"), params, w, "pairwise")


@_hub("numpy", "library", True, "numpy on float32 arrays: torch's formula with np.where, np.mean / np.sum",
      acc_formats=FP32_ONLY)
def _hub_numpy(op, inputs, w, params, out):
    from ..backends.base import huber_terms, reduce_loss

    a = np.asarray(f64(inputs[0]), dtype=np.float32)
    b = np.asarray(f64(inputs[1]), dtype=np.float32)
    return reduce_loss(np, huber_terms(np, a, b, _thr(op, params), op == "smooth_l1_loss"),
                       params.get("reduction", "mean"))


def _torch_hub(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch.nn.functional as F

        kw = {"delta": _thr(op, params)} if op == "huber_loss" else {"beta": _thr(op, params)}
        y = getattr(F, op)(to_torch(inputs[0]), to_torch(inputs[1]), reduction=params.get("reduction", "mean"), **kw)
        return finish(from_torch(y), out)

    return run


for _op in _HUBER_OPS:
    variant(_op, "torch-cpu", "library", True, f"torch.nn.functional.{_op} on CPU in the inputs' dtype",
            torch_same_format, acc_formats=FP32_ONLY)(_torch_hub(_op))
del _op


@_hub("stored16-arith", "rounding", True,
      "PyTorch CPU's bf16 huber_loss and fp16 smooth_l1_loss: every operation of the term (d, the "
      "threshold, its half, the product, subtraction, division) rounded to the 16-bit output format "
      "(bit for bit torch's 'none' output), the mean's terms summed pairwise in float32, RN(s / K), the "
      "sum through at::sum (16-bit chunk sums): evidence for the stored16 standards only", applies=_stored16_only)
def _hub_stored16(op, inputs, w, params, out):
    return _reduce16(_hub_terms(op, inputs, Work(out), params), params, w, out)


@_hub("stored16-once", "rounding", True,
      "PyTorch CPU's fp16 huber_loss and bf16 smooth_l1_loss: the term computed in float32 and stored "
      "rounded once to the 16-bit output format (bit for bit torch's 'none' output), the mean's stored "
      "terms summed pairwise in float32, RN(s / K), the sum through at::sum (16-bit chunk sums): evidence "
      "for the stored16 standards only", applies=_stored16_only)
def _hub_stored_once(op, inputs, w, params, out):
    return _reduce16(Work(out).q(_hub_terms(op, inputs, w, params)), params, w, out)


@_hub("sum-not-mean", "scale", False, "reduction='mean' returning the sum of the terms", applies=_mse_is("mean"))
def _hub_sum_for_mean(op, inputs, w, params, out):
    return _hub_reduce(op, inputs, w, {**params, "reduction": "sum"})


@_hub("mean-not-sum", "scale", False, "reduction='sum' returning the mean (the wrong reduction)",
      applies=_mse_is("sum"), observable=_more_than_one)
def _hub_mean_for_sum(op, inputs, w, params, out):
    return _hub_reduce(op, inputs, w, {**params, "reduction": "mean"})


@_hub("by-k-minus-1", "scale", False,
      "the sum divided by K - 1: relative error 1/(K - 1), observable when 1/(K - 1) >= 4 u_out",
      applies=_mse_is("mean"), observable=_k_minus_1_visible)
def _hub_k_minus_1(op, inputs, w, params, out):
    k = np.size(inputs[0])
    s = _hub_reduce(op, inputs, w, {**params, "reduction": "sum"})
    return w.q(f64(s) / (k - 1)) if k > 1 else np.asarray(np.inf)


@_hub("missing-abs", "formula-error", False,
      "the signed d in the branch test and the linear branch (|d| forgotten): a large negative d is "
      "squared, observable where some d < -delta", observable=True)
def _hub_missing_abs(op, inputs, w, params, out):
    return _mse_reduce(_hub_terms(op, inputs, w, params, absolute=False), params, w, "blocked", block=_MSE_BLOCK)


@_hub("missing-branch", "formula-error", False,
      "the quadratic branch everywhere (the clamp to the linear branch missing: MSE / 2), observable "
      "where some |d| exceeds the threshold", observable=True)
def _hub_missing_branch(op, inputs, w, params, out):
    return _mse_reduce(_hub_terms(op, inputs, w, params, branch=False), params, w, "blocked", block=_MSE_BLOCK)


@_hub("missing-offset", "formula-error", False,
      "the linear branch without its - 0.5 delta (discontinuous at the threshold)", observable=True)
def _hub_missing_offset(op, inputs, w, params, out):
    return _mse_reduce(_hub_terms(op, inputs, w, params, offset=False), params, w, "blocked", block=_MSE_BLOCK)


@_hub("missing-half", "formula-error", False, "d^2 for the quadratic branch (the 0.5 forgotten)", observable=True)
def _hub_missing_half(op, inputs, w, params, out):
    return _mse_reduce(_hub_terms(op, inputs, w, params, half=False), params, w, "blocked", block=_MSE_BLOCK)


@_hub("missing-divide", "formula-error", False,
      "smooth_l1's quadratic branch not divided by beta (huber's formula): observable when beta != 1",
      observable=True, ops=("smooth_l1_loss",))
def _hub_missing_divide(op, inputs, w, params, out):
    return _mse_reduce(_hub_terms(op, inputs, w, params, divide=False), params, w, "blocked", block=_MSE_BLOCK)


@_hub("acc-bf16", "accumulation-precision", False, "the running sum kept in bfloat16 whatever the output format",
      applies=lambda out, f, p: out.name != "bfloat16" and _not_none(out, f, p))
def _hub_acc_bf16(op, inputs, w, params, out):
    from ..core.formats import FORMATS

    return _mse_reduce(_hub_terms(op, inputs, w, params), params, Work(FORMATS["bfloat16"]))


def _hub_tail_counts(op: str) -> Callable:
    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        q = f64(_hub_exact(op, inputs, {**params, "reduction": "none"})).reshape(-1)
        k = q.size
        if k <= _MSE_BLOCK:
            return False
        return bool(q[((k - 1) // _MSE_BLOCK) * _MSE_BLOCK:].sum() > 4.0 * out.u * q.sum())

    return observable


for _op in _HUBER_OPS:
    def _dropped_run(inputs, params, out, acc, seed, _op=_op):
        w = Work(acc)
        with np.errstate(all="ignore"):
            q = _hub_terms(_op, inputs, w, params).reshape(-1)
            k = q.size
            keep = ((k - 1) // _MSE_BLOCK) * _MSE_BLOCK if k else 0
            s = _mse_reduce(q[:keep], {"reduction": "sum"}, w, "blocked", block=_MSE_BLOCK)
            return finish(s if params.get("reduction", "mean") == "sum" else w.q(f64(s) / k), out)

    variant(_op, "dropped-tail-block", "dropped-tile", False,
            "the last block of 128 terms (or the partial remainder) is never added; observable when K > 128 "
            "and the dropped terms hold more than 4 u_out of the sum", _not_none, _hub_tail_counts(_op))(_dropped_run)
del _op


@_hub("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _hub_zeros(op, inputs, w, params, out):
    return np.zeros(np.shape(inputs[0])) if params.get("reduction", "mean") == "none" else np.asarray(0.0)



# ---------------------------------------------------------------------------------------------
# kl_div
# ---------------------------------------------------------------------------------------------


def _kl_terms(inputs: list, w: Work, params: Mapping[str, Any], form: str = "xlogy") -> np.ndarray:
    """kl_div's terms in the working format, every operation rounded (log and exp correctly rounded
    into it): ``form`` "xlogy" is torch's ``xlogy(t, t) - t x``, "diff" ``t (log t - x)``; the bugs
    "nolog" ``t (t - x)``, "flipped" ``t (x - log t)``, "reversed" KL(input || target)
    ``exp(x) (x - log t)``, "rawlog" ``t log t - t x`` without xlogy's 0 at t = 0."""
    x, t = w.load(inputs[0]), w.load(inputs[1])
    if params.get("log_target", False):
        e = w.q(np.exp(f64(t)))
        return w.q(e * w.q(t - x))
    pos = t > 0
    lt = w.q(np.log(np.where(pos, f64(t), 1.0)))
    if form == "diff":
        return np.where(pos, w.q(t * w.q(lt - x)), w.q(-t * x) * 0.0)
    if form == "nolog":
        return w.q(t * w.q(t - x))
    if form == "flipped":
        return np.where(pos, w.q(t * w.q(x - lt)), 0.0)
    if form == "reversed":
        lt_all = w.q(np.log(f64(t)))
        return w.q(w.q(np.exp(f64(x))) * w.q(x - lt_all))
    tlogt = w.q(t * lt) if form != "rawlog" else w.q(t * w.q(np.log(f64(t))))
    tlogt = np.where(pos | (form == "rawlog"), tlogt, 0.0)
    return w.q(tlogt - w.q(t * x))


def _kl_reduce(q: np.ndarray, params: Mapping[str, Any], w: Work, n: int, order: str = "blocked",
               **kw: Any) -> np.ndarray:
    red = params.get("reduction", "mean")
    if red == "none":
        return q
    kw = kw or ({"block": _MSE_BLOCK} if order == "blocked" else {})
    s = row_sum(f64(q).reshape(1, -1), w.fmt, order, **kw)[0, 0] if q.size else np.float64(0.0)
    div = {"sum": 1, "mean": q.size, "batchmean": n}[red]
    return np.asarray(s) if div == 1 else np.asarray(w.q(np.float64(s) / div))


def _rows(inputs: list) -> int:
    return int(np.shape(inputs[0])[0]) if np.ndim(inputs[0]) else 1


def _mag_differs(op: str, c: float, core: Callable) -> Callable:
    """``observable``: the bug's float32 result is off the float64 loss of ``op`` by more than 8 output
    ULPs plus ``8 (sqrt(K) + c) u_fp32`` times the reference's ``mag`` (4x a model of lam = 1, margin 2),
    somewhere (K the terms per output)."""
    from ..core.formats import get_format
    from ..core.ulp import ulp
    from ..reference import reference

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        fp32 = get_format("float32")
        with np.errstate(all="ignore"):
            y = f64(finish(np.asarray(core(inputs, Work(fp32), params, out)), out))
            ref = reference(op, [f64(inputs[0]), f64(inputs[1])], **dict(params))
            exact, mag = f64(ref.values), f64(ref.aux["mag"])
        k = 1 if params.get("reduction", "mean") == "none" else np.size(inputs[0])
        tol = 8.0 * f64(ulp(exact, out)) + 8.0 * (np.sqrt(k) + c) * fp32.u * mag
        return bool(np.any(~(np.abs(y.reshape(np.shape(exact)) - exact) <= tol)))

    return observable


def _registrar(op: str, c: float) -> Callable:
    """The variant decorator of a two-input loss ``op``: it registers ``core(inputs, w, params, out) ->
    loss in the working format``, rounded once to the output format; ``observable=True`` means
    :func:`_mag_differs` with the constant ``c`` of ``op``'s model."""

    def register(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
                 observable: Any = None, acc_formats: tuple | None = None) -> Callable:
        def deco(core: Callable) -> Callable:
            def run(inputs, params, out, acc, seed):
                with np.errstate(all="ignore"):
                    y = np.asarray(core(inputs, Work(acc), params, out))
                    return finish(y.reshape(np.shape(inputs[0])) if y.ndim else y, out)

            obs = _mag_differs(op, c, core) if observable is True else observable
            variant(op, name, family, legit, description, applies, obs, acc_formats)(run)
            return core

        return deco

    return register


_kl = _registrar("kl_div", 6.0)


for _name, (_order, _kw, _desc) in {
    "sequential": ("sequential", {}, "one running sum"),
    "pairwise": ("pairwise", {}, "recursive halving, every partial sum rounded"),
    "blocked128": ("blocked", {"block": _MSE_BLOCK}, "sequential sums of blocks of 128, block sums added in order"),
    "splitk4": ("splitk", {"splits": 4}, "4 contiguous slices summed separately, then added"),
    "kahan": ("kahan", {}, "Kahan compensated summation"),
}.items():
    _kl(_name, "accumulation-order", True,
        f"torch's xlogy(t, t) - t x in the accumulation format (log correctly rounded into it), summed by "
        f"{_desc}, then RN(s / K) (batchmean: / N)")(
        lambda inputs, w, params, out, _o=_order, _k=_kw: _kl_reduce(_kl_terms(inputs, w, params), params, w,
                                                                    _rows(inputs), _o, **_k))
del _name, _order, _kw, _desc


@_kl("log-difference", "formula", True, "t (log t - x) (0 where t = 0), pairwise sum")
def _kl_diff(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params, "diff"), params, w, _rows(inputs), "pairwise")


@_kl("numpy", "library", True, "numpy on float32 arrays: torch's formula with np.where, np.sum / np.mean",
     acc_formats=FP32_ONLY)
def _kl_numpy(inputs, w, params, out):
    from ..backends.base import kl_div_loss

    a = np.asarray(f64(inputs[0]), dtype=np.float32)
    b = np.asarray(f64(inputs[1]), dtype=np.float32)
    return kl_div_loss(np, a, b, params.get("reduction", "mean"), bool(params.get("log_target", False)))


def _torch_kl(inputs, params, out, acc, seed):
    import torch.nn.functional as F

    y = F.kl_div(to_torch(inputs[0]), to_torch(inputs[1]), reduction=params.get("reduction", "mean"),
                 log_target=bool(params.get("log_target", False)))
    return finish(from_torch(y), out)


variant("kl_div", "torch-cpu", "library", True, "torch.nn.functional.kl_div on CPU in the inputs' dtype",
        torch_same_format, acc_formats=FP32_ONLY)(_torch_kl)


def _kl_stored16_terms(inputs: list, w: Work, params: Mapping[str, Any], out: Format) -> np.ndarray:
    """torch's composite kl_div in a 16-bit type (``aten::xlogy``, ``aten::mul``, ``aten::sub`` /
    ``aten::sub``, ``aten::exp``, ``aten::mul``), every primitive computed in fp32 and stored:
    ``RN16(RN16(t RN16(log t)) - RN16(t x))`` (0 · log 0 = 0) or ``RN16(RN16(exp t) RN16(t - x))``."""
    o = Work(out)
    x, t = w.load(inputs[0]), w.load(inputs[1])
    if params.get("log_target", False):
        return o.q(w.q(o.q(w.q(np.exp(f64(t)))) * o.q(w.q(t - x))))
    pos = t > 0
    lt = o.q(w.q(np.log(np.where(pos, f64(t), 1.0))))
    xl = np.where(pos, o.q(w.q(t * lt)), 0.0)
    return o.q(w.q(xl - o.q(w.q(t * x))))


@_kl("stored16", "rounding", True,
     "PyTorch CPU's 16-bit kl_div: every primitive of the term (log t, t log t, t x, the difference; "
     "log_target: exp t, t - x, the product) stored in the 16-bit type; mean through at::mean (fp32 sum, "
     "one rounding), sum through at::sum (16-bit chunk sums), batchmean that stored sum divided by N: "
     "evidence for the stored16 standards only", applies=_stored16_only)
def _kl_stored16(inputs, w, params, out):
    q = _kl_stored16_terms(inputs, w, params, out)
    red = params.get("reduction", "mean")
    if red in ("none", "mean"):
        return _kl_reduce(q, params, w, _rows(inputs), "pairwise")
    s = at_sum16(q, w, out)
    return s if red == "sum" else np.asarray(Work(out).q(w.q(f64(s) / _rows(inputs))))


@_kl("mean-not-batchmean", "scale", False,
     "reduction='batchmean' returning the mean over every element (torch's own 'mean' trap): 1/C of the KL",
     applies=_mse_is("batchmean"), observable=True)
def _kl_mean_for_batchmean(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params), {"reduction": "mean"}, w, _rows(inputs))


@_kl("sum-not-mean", "scale", False, "reduction='mean' or 'batchmean' returning the sum",
     applies=_mse_is("mean", "batchmean"), observable=True)
def _kl_sum_for_mean(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params), {"reduction": "sum"}, w, _rows(inputs))


@_kl("by-n-minus-1", "scale", False, "batchmean's sum divided by N - 1", applies=_mse_is("batchmean"),
     observable=True)
def _kl_n_minus_1(inputs, w, params, out):
    n = _rows(inputs)
    s = _kl_reduce(_kl_terms(inputs, w, params), {"reduction": "sum"}, w, n)
    return w.q(f64(s) / (n - 1)) if n > 1 else np.asarray(np.inf)


@_kl("missing-log", "formula-error", False, "t (t - x): the log of the target forgotten", observable=True)
def _kl_nolog(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params, "nolog"), params, w, _rows(inputs))


@_kl("flipped-sign", "formula-error", False, "t (x - log t): the negated divergence", observable=True)
def _kl_flipped(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params, "flipped"), params, w, _rows(inputs))


@_kl("swapped-args", "formula-error", False,
     "the arguments' roles swapped: KL(input || target) = exp(x) (x - log t) instead of KL(target || input)",
     applies=lambda out, f, p: not p.get("log_target", False), observable=True)
def _kl_reversed(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params, "reversed"), params, w, _rows(inputs))


def _has_zero_target(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return bool(np.any(f64(inputs[1]) == 0))


@_kl("log-of-zero", "formula-error", False,
     "t log t - t x without xlogy's 0 at t = 0: NaN (0 · -inf) wherever a target is 0",
     applies=lambda out, f, p: not p.get("log_target", False), observable=_has_zero_target)
def _kl_log0(inputs, w, params, out):
    return _kl_reduce(_kl_terms(inputs, w, params, "rawlog"), params, w, _rows(inputs))


@_kl("acc-bf16", "accumulation-precision", False, "the running sum kept in bfloat16",
     applies=lambda out, f, p: out.name != "bfloat16" and _not_none(out, f, p), observable=True)
def _kl_acc_bf16(inputs, w, params, out):
    from ..core.formats import FORMATS

    return _kl_reduce(_kl_terms(inputs, w, params), params, Work(FORMATS["bfloat16"]), _rows(inputs), "sequential")


@_kl("zeros", "zeros", False, "returns zeros of the right shape and dtype", observable=True)
def _kl_zeros(inputs, w, params, out):
    return np.zeros(np.shape(inputs[0])) if params.get("reduction", "mean") == "none" else np.asarray(0.0)



# ---------------------------------------------------------------------------------------------
# nll_loss
# ---------------------------------------------------------------------------------------------


def _nll_parts(inputs: list, w: Work, params: Mapping[str, Any], *, ignore: bool = True, shift: int = 0,
               sign: float = -1.0) -> tuple[np.ndarray, np.ndarray]:
    """The per-row losses ``-x[n, t_n]`` (exact) and the rows kept; the bugs: ``ignore`` False (the
    ignore_index rows read as class C - 100 ... wrapped, i.e. not left out), ``shift`` (labels off by
    one), ``sign`` +1 (not negated)."""
    x = w.load(inputs[0])
    t = np.asarray(inputs[1]).astype(np.int64)
    c = x.shape[-1]
    keep = t != params.get("ignore_index", -100)
    idx = np.where(keep, t, 0) if ignore else np.mod(t, c)
    idx = np.mod(idx + shift, c)
    picked = np.take_along_axis(x, idx[:, None], axis=-1)[:, 0] if x.size else np.zeros(t.shape)
    loss = sign * picked
    return (np.where(keep, loss, 0.0), keep) if ignore else (loss, np.ones_like(keep))


def _nll_reduce(loss: np.ndarray, keep: np.ndarray, params: Mapping[str, Any], w: Work, order: str = "sequential",
                denom: int | None = None) -> np.ndarray:
    red = params.get("reduction", "mean")
    if red == "none":
        return loss
    s = row_sum(f64(loss)[None, :], w.fmt, order)[0, 0] if loss.size else np.float64(0.0)
    if red == "sum":
        return np.asarray(s)
    return np.asarray(w.q(np.float64(s) / (int(np.sum(keep)) if denom is None else denom)))


def _nll(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
         observable: Callable | None = None, acc_formats: tuple | None = None) -> Callable:
    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            with np.errstate(all="ignore"):
                return finish(np.asarray(core(inputs, Work(acc), params, out)), out)

        variant("nll_loss", name, family, legit, description, applies, observable, acc_formats)(run)
        return core

    return deco


for _name, _order in (("sequential", "sequential"), ("pairwise", "pairwise"), ("tree", "tree"), ("kahan", "kahan")):
    _nll(_name, "accumulation-order", True, f"-x[n, t_n] (0 for ignored rows) summed {_name}, / rows kept")(
        lambda inputs, w, params, out, _o=_order: _nll_reduce(*_nll_parts(inputs, w, params), params, w, _o))
del _name, _order


@_nll("numpy", "library", True, "numpy on float32 arrays: take_along_axis, np.where, np.sum / rows kept",
      acc_formats=FP32_ONLY)
def _nll_numpy(inputs, w, params, out):
    from ..backends.base import nll_loss_of

    x = np.asarray(f64(inputs[0]), dtype=np.float32)
    return nll_loss_of(np, x, np.asarray(inputs[1]).astype(np.int64), params.get("reduction", "mean"),
                       params.get("ignore_index", -100))


def _torch_nll(inputs, params, out, acc, seed):
    import torch
    import torch.nn.functional as F

    y = F.nll_loss(to_torch(inputs[0]), torch.as_tensor(np.asarray(inputs[1]).astype(np.int64)),
                   reduction=params.get("reduction", "mean"), ignore_index=params.get("ignore_index", -100))
    return finish(from_torch(y), out)


variant("nll_loss", "torch-cpu", "library", True, "torch.nn.functional.nll_loss on CPU in the inputs' dtype",
        torch_same_format, acc_formats=FP32_ONLY)(_torch_nll)


def _nll_xla(inputs, params, out, acc, seed):
    """XLA CPU's 16-bit nll_loss (jax 0.10.2, ``nll_loss_of`` with jnp, compiled HLO): the picked ``-x[n, t_n]``
    (exact), 0 for the ignored rows; ``jnp.sum`` an fp32 reduce rounded once, ``RN16(S)``; the mean that stored
    sum divided by the kept-row count converted to the 16-bit type, ``RN16(RN16(S) / RN16(k))`` (an fp32
    divide); none the exact losses."""
    o = Work(out)
    loss, keep = _nll_parts(inputs, Work(out), params)
    red = params.get("reduction", "mean")
    with np.errstate(all="ignore"):
        if red == "none":
            return finish(loss, out)
        f32 = np.float32
        s16 = o.q(np.sum(np.asarray(loss, dtype=f32), dtype=f32) if loss.size else f32(0))
        if red == "sum":
            return finish(s16, out)
        k16 = o.q(f32(np.sum(keep)))
        return finish(f64(f32(s16) / f32(k16)), out)


variant("nll_loss", "xla-arith16", "library", True,
        "XLA CPU's 16-bit nll_loss (jax 0.10.2): the picked -x[n, t_n], an fp32 reduce stored in 16 bits, the mean "
        "RN16(RN16(S) / RN16(rows kept)); 16-bit arithmetic only", _stored16_only, acc_formats=ARITH16)(_nll_xla)


def _some_ignored(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return bool(np.any(np.asarray(inputs[1]) == params.get("ignore_index", -100)))


def _nll_cascade16(loss: np.ndarray, keep: np.ndarray, params: Mapping[str, Any], w: Work, out: Format
                   ) -> np.ndarray:
    """nll_loss_out_frame's reduction in a 16-bit ``scalar_t`` (aten/src/ATen/native/LossNLL.cpp): the
    cascade of 8 partial sums (:func:`numstd.reference.loss.nll_cascade`), every
    addition computed in fp32 and stored in the 16-bit type, the mean divided by the row count stored
    in it."""
    from ..reference.loss import nll_cascade

    o = Work(out)
    r16 = lambda v: float(o.q(w.q(np.float64(v))))  # noqa: E731
    acc = nll_cascade(loss, keep, r16)[1]
    if params.get("reduction", "mean") == "mean":
        acc = r16(acc / r16(int(np.sum(keep))))
    return np.asarray(acc)


def _nll_cascade_finite(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """The 16-bit cascade's result is finite: an fp16 partial sum above 65504 stored as inf (a finite mean
    loss returned as inf) is the documented defect torch-cpu-nll-loss-fp16-overflow, not legitimate
    stored16 arithmetic."""
    from ..core.formats import get_format

    w = Work(get_format("float32"))
    with np.errstate(all="ignore"):
        loss, keep = _nll_parts(inputs, w, params)
        return params.get("reduction", "mean") == "none" or bool(np.isfinite(_nll_cascade16(loss, keep, params, w, out)))


@_nll("stored16", "rounding", True,
      "PyTorch CPU's 16-bit nll_loss: the kept -x[n, t_n] summed in its cascade of 16-bit partial sums "
      "(blocks of 16, 8 levels), the mean divided by the row count rounded to 16 bits: evidence for the "
      "stored16 standards only, on inputs where no stored partial sum overflows",
      applies=_stored16_only, observable=_nll_cascade_finite)
def _nll_stored16(inputs, w, params, out):
    loss, keep = _nll_parts(inputs, w, params)
    if params.get("reduction", "mean") == "none":
        return loss
    return _nll_cascade16(loss, keep, params, w, out)


@_nll("ignore-index-ignored", "formula-error", False,
      "ignore_index rows not left out (their index wrapped into [0, C) and averaged in); observable when "
      "some target is ignore_index", observable=_some_ignored)
def _nll_no_ignore(inputs, w, params, out):
    return _nll_reduce(*_nll_parts(inputs, w, params, ignore=False), params, w)


@_nll("mean-over-all-rows", "scale", False,
      "ignored rows left out of the sum but counted in the mean's denominator (sum / N)",
      applies=_mse_is("mean"), observable=_some_ignored)
def _nll_all_rows(inputs, w, params, out):
    loss, keep = _nll_parts(inputs, w, params)
    return _nll_reduce(loss, keep, params, w, denom=loss.size)


@_nll("not-negated", "formula-error", False, "x[n, t_n] without the minus sign")
def _nll_sign(inputs, w, params, out):
    return _nll_reduce(*_nll_parts(inputs, w, params, sign=1.0), params, w)


@_nll("off-by-one", "formula-error", False, "labels read one class off (t_n + 1 mod C)")
def _nll_shift(inputs, w, params, out):
    return _nll_reduce(*_nll_parts(inputs, w, params, shift=1), params, w)


@_nll("sum-not-mean", "scale", False, "reduction='mean' returning the sum", applies=_mse_is("mean"))
def _nll_sum(inputs, w, params, out):
    return _nll_reduce(*_nll_parts(inputs, w, params), {"reduction": "sum"}, w)


@_nll("acc-bf16", "accumulation-precision", False, "the running sum kept in bfloat16",
      applies=lambda out, f, p: out.name != "bfloat16" and _not_none(out, f, p))
def _nll_acc_bf16(inputs, w, params, out):
    from ..core.formats import FORMATS

    return _nll_reduce(*_nll_parts(inputs, w, params), params, Work(FORMATS["bfloat16"]))


@_nll("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _nll_zeros(inputs, w, params, out):
    n = np.shape(inputs[1])[0]
    return np.zeros(n) if params.get("reduction", "mean") == "none" else np.asarray(0.0)



# ---------------------------------------------------------------------------------------------
# hinge_embedding_loss
# ---------------------------------------------------------------------------------------------


def _hinge_terms(inputs: list, w: Work, params: Mapping[str, Any], *, clamp: bool = True, flip: bool = False,
                 sign: float = 1.0, stored: Format | None = None) -> np.ndarray:
    """``x`` (target 1) or ``RN(max(0, RN(margin - x)))`` (target -1) in the working format; the bugs:
    ``clamp`` False (the max forgotten), ``flip`` (the branches swapped), ``sign`` -1 (``-x`` for target 1)."""
    x, y = w.load(inputs[0]), f64(inputs[1])
    h = w.q(w.c(params.get("margin", 1.0)) - x)
    h = Work(stored).q(h) if stored is not None else h  # (PyTorch CPU stores margin - x in a 16-bit input's dtype)
    h = np.maximum(h, 0.0) if clamp else h
    pos = (y == 1) if not flip else (y != 1)
    return np.where(pos, sign * x, h)


_hinge = _registrar("hinge_embedding_loss", 3.0)


for _name, (_order, _kw) in {"sequential": ("sequential", {}), "pairwise": ("pairwise", {}),
                             "blocked128": ("blocked", {"block": _MSE_BLOCK}), "kahan": ("kahan", {})}.items():
    _hinge(_name, "accumulation-order", True, f"the terms in the accumulation format, summed {_name}, then RN(s / K)")(
        lambda inputs, w, params, out, _o=_order, _k=_kw: _mse_reduce(_hinge_terms(inputs, w, params), params, w, _o, **_k))
del _name, _order, _kw


variant("hinge_embedding_loss", "xla-arith16", "library", True,
        "XLA CPU's 16-bit hinge_embedding_loss (jax 0.10.2, numstd.backends.base.hinge_terms with jnp): x where the "
        "target is 1, max(RN16(RN16(margin) − x), 0) where it is −1, an fp32 reduce rounded once (mean: "
        "RN16(s·RN32(1/K))); 16-bit arithmetic only", _stored16_only, acc_formats=ARITH16)(
    _xla_run(lambda inputs, params, out: _hinge_terms(inputs, Work(out), params)))


@_hinge("numpy", "library", True, "numpy on float32 arrays: np.where / np.maximum, np.mean / np.sum",
        acc_formats=FP32_ONLY)
def _hinge_numpy(inputs, w, params, out):
    from ..backends.base import hinge_terms, reduce_loss

    x = np.asarray(f64(inputs[0]), dtype=np.float32)
    y = np.asarray(f64(inputs[1]), dtype=np.float32)
    return reduce_loss(np, hinge_terms(np, x, y, params.get("margin", 1.0)), params.get("reduction", "mean"))


def _torch_hinge(inputs, params, out, acc, seed):
    import torch.nn.functional as F

    y = F.hinge_embedding_loss(to_torch(inputs[0]), to_torch(inputs[1]), margin=params.get("margin", 1.0),
                               reduction=params.get("reduction", "mean"))
    return finish(from_torch(y), out)


variant("hinge_embedding_loss", "torch-cpu", "library", True,
        "torch.nn.functional.hinge_embedding_loss on CPU in the inputs' dtype", torch_same_format,
        acc_formats=FP32_ONLY)(_torch_hinge)


@_hinge("stored16", "rounding", True,
        "PyTorch CPU's 16-bit hinge_embedding_loss: RN16(margin - x) stored in the 16-bit output format, "
        "the mean's terms summed pairwise in float32, RN(s / K), the sum through at::sum (16-bit chunk sums): "
        "evidence for the stored16 standards only", applies=_stored16_only)
def _hinge_stored16(inputs, w, params, out):
    return _reduce16(_hinge_terms(inputs, w, params, stored=out), params, w, out)


@_hinge("missing-clamp", "formula-error", False, "margin - x without the max(0, .)", observable=True)
def _hinge_noclamp(inputs, w, params, out):
    return _mse_reduce(_hinge_terms(inputs, w, params, clamp=False), params, w, "blocked", block=_MSE_BLOCK)


@_hinge("labels-swapped", "formula-error", False, "the branches of target 1 and -1 swapped", observable=True)
def _hinge_flip(inputs, w, params, out):
    return _mse_reduce(_hinge_terms(inputs, w, params, flip=True), params, w, "blocked", block=_MSE_BLOCK)


@_hinge("negated-positive", "formula-error", False, "-x for target 1", observable=True)
def _hinge_sign(inputs, w, params, out):
    return _mse_reduce(_hinge_terms(inputs, w, params, sign=-1.0), params, w, "blocked", block=_MSE_BLOCK)


@_hinge("sum-not-mean", "scale", False, "reduction='mean' returning the sum", applies=_mse_is("mean"), observable=True)
def _hinge_sum(inputs, w, params, out):
    return _mse_reduce(_hinge_terms(inputs, w, params), {"reduction": "sum"}, w, "blocked", block=_MSE_BLOCK)


@_hinge("by-k-minus-1", "scale", False, "the sum divided by K - 1", applies=_mse_is("mean"), observable=True)
def _hinge_k1(inputs, w, params, out):
    q = _hinge_terms(inputs, w, params)
    s = _mse_reduce(q, {"reduction": "sum"}, w, "blocked", block=_MSE_BLOCK)
    return w.q(f64(s) / (q.size - 1)) if q.size > 1 else np.asarray(np.inf)


@_hinge("acc-bf16", "accumulation-precision", False, "the running sum kept in bfloat16",
        applies=lambda out, f, p: out.name != "bfloat16" and _not_none(out, f, p), observable=True)
def _hinge_bf16(inputs, w, params, out):
    from ..core.formats import FORMATS

    return _mse_reduce(_hinge_terms(inputs, w, params), params, Work(FORMATS["bfloat16"]))


@_hinge("zeros", "zeros", False, "returns zeros of the right shape and dtype", observable=True)
def _hinge_zeros(inputs, w, params, out):
    return np.zeros(np.shape(inputs[0])) if params.get("reduction", "mean") == "none" else np.asarray(0.0)


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"mean-over-classes": "scale", "sum-not-mean": "scale", "mean-not-sum": "scale",
                 "by-k-minus-1": "scale", "by-n-minus-1": "scale", "mean-not-batchmean": "scale", "mean-over-all-rows": "scale", "half": "scale", "dropped-tail-block": "dropped-terms"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
