"""Cross-entropy variants (``cross_entropy``: logits ``(N, C)``, integer targets, reduction).

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

References: PyTorch ``torch.nn.functional.cross_entropy``; Hsu et al., "Liger Kernel: efficient
Triton kernels for LLM training", arXiv:2410.10989 (2024).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..formats import Format
from ._common import (
    FP32_ONLY, f64, finish, from_torch, registrar, row_sum, to_torch, torch_same_format, Work,
)
from .softmax import Row, online

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
        from ..formats import get_format
        from ..ulp import ulp

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


VARIANTS: tuple = tuple(_V)
