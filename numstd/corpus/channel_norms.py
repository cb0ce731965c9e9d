"""Variants of the channel norms: ``group_norm``, ``instance_norm`` and ``batch_norm``.

Each normalised group is a row of the rearranged input (:mod:`numstd.reference.normalization`);
the statistics are layer_norm's, computed in the working format (float32), then
``(x - mean) * rstd * weight[c] + bias[c]`` and one rounding to the output format.

Legitimate: two-pass (mean, then the mean of squared deviations) with sequential, pairwise or
blocked(128) sums; Welford's one-pass update (PyTorch CPU's batch_norm / group_norm collect their
statistics this way); torch CPU.  batch_norm with ``training=False`` normalises with the running
statistics in every variant.

Bugs: the one-pass variance ``E[x^2] - E[x]^2`` (cancellation on groups with a large mean), the
unbiased ``K - 1`` variance, the statistics over the wrong axes (group_norm per channel,
instance_norm over the batch, batch_norm per sample), eps outside the square root, the affine
weight and bias dropped, truncation, zeros.  The statistics bugs apply to batch_norm only with
``training=True``.

Each bug carries an ``observable`` predicate: its fp32 output differs from the float64 truth by
more than 2 output ULPs plus ``16 sqrt(K) u_fp32`` times the element's condition
``(|x| + |mean|) / sigma * |w| + |b|`` somewhere (as :mod:`numstd.corpus.normalization` does for
layer_norm), or the weight/bias differ from 1/0 (affine dropped).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import FP32_ONLY, f64, finish, from_torch, narrow_out, registrar, rnd, row_sum, to_torch, torch_same_format, Work

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

OPS = ("group_norm", "instance_norm", "batch_norm")
BLOCK = 128


class Channels:
    """A channel norm's inputs in the working format, as rows of one normalised group each."""

    def __init__(self, op: str, inputs: list, params: Mapping[str, Any], acc: Format, axes: str | None = None) -> None:
        self.op, self.w = op, Work(acc)
        self.x = self.w.load(inputs[0])
        self.n, self.c = self.x.shape[:2]
        eval_bn = op == "batch_norm" and not params.get("training", False)
        self.running = [self.w.load(inputs[i]) for i in (1, 2)] if eval_bn else None
        rest = list(inputs[3:]) if op == "batch_norm" else list(inputs[1:])
        rest += [None] * (2 - len(rest))
        self.weight, self.bias = (None if a is None else self.w.load(a) for a in rest[:2])
        self.eps = float(params.get("eps", 1e-5))
        self.groups = int(params.get("num_groups", self.c)) if op == "group_norm" else self.c
        self.axes = axes or {"group_norm": "group", "instance_norm": "instance", "batch_norm": "batch"}[op]

    def rows(self) -> np.ndarray:
        """The rows (one normalised group each) for :attr:`axes`."""
        if self.axes == "batch":
            return np.moveaxis(self.x, 1, 0).reshape(self.c, -1)
        return self.x.reshape(self.n * (self.groups if self.axes == "group" else self.c), -1)

    def back(self, r: np.ndarray) -> np.ndarray:
        """Row data (full rows) back in the layout of ``x``."""
        if self.axes == "batch":
            return np.moveaxis(r.reshape((self.c, self.n) + self.x.shape[2:]), 0, 1)
        return r.reshape(self.x.shape)

    def mean(self, t: np.ndarray, order: str = "sequential", **kw: Any) -> np.ndarray:
        w = self.w
        return w.q(w.q(row_sum(t, w.fmt, order, **kw)) / w.c(max(t.shape[-1], 1)))

    def rsqrt(self, v: np.ndarray) -> np.ndarray:
        w = self.w
        return w.q(w.c(1.0) / w.q(np.sqrt(w.q(v + w.c(self.eps)))))

    def affine(self, xhat: np.ndarray) -> np.ndarray:
        w, shape = self.w, (1, self.c) + (1,) * (self.x.ndim - 2)
        y = xhat if self.weight is None else w.q(xhat * self.weight.reshape(shape))
        return y if self.bias is None else w.q(y + self.bias.reshape(shape))

    def normalise(self, stats: Callable[[np.ndarray], tuple], rstd: Callable | None = None) -> np.ndarray:
        """``(x - mean) * rstd`` with ``stats(rows) -> (mean, var)`` (or the running statistics)."""
        w = self.w
        if self.running is not None:
            shape = (1, self.c) + (1,) * (self.x.ndim - 2)
            m, v = (a.reshape(shape) for a in self.running)
            return w.q(w.q(self.x - m) * (rstd or self.rsqrt)(v))
        r = self.rows()
        mean, var = stats(r)
        return self.back(w.q(w.q(r - mean) * (rstd or self.rsqrt)(var)))


def _two_pass(a: Channels, order: str = "sequential", **kw: Any) -> Callable:
    def stats(r: np.ndarray) -> tuple:
        mean = a.mean(r, order, **kw)
        d = a.w.q(r - mean)
        return mean, a.mean(a.w.q(d * d), order, **kw)

    return stats


def _welford(a: Channels) -> Callable:
    def stats(r: np.ndarray) -> tuple:
        w = a.w
        mean = np.zeros(r.shape[:-1] + (1,), dtype=w.dtype)
        m2 = np.zeros_like(mean)
        for k in range(r.shape[-1]):
            xk = r[..., k:k + 1]
            delta = w.q(xk - mean)
            mean = w.q(mean + w.q(delta / w.c(k + 1)))
            m2 = w.q(m2 + w.q(delta * w.q(xk - mean)))
        return mean, w.q(m2 / w.c(max(r.shape[-1], 1)))

    return stats


def _stored16(a: Channels, out: Format) -> np.ndarray:
    """PyTorch CPU's 16-bit batch_norm / instance_norm: fp32 statistics, the mean and
    ``1/sqrt(var + eps)`` stored in the output format (the weight's dtype), for bfloat16 the variance
    too, then ``(x - mean) * invstd * w + b`` in fp32 (reproduces every bf16 and fp16 output of torch
    in benchmarks/torch_norm16.py)."""
    two = _two_pass(a)

    def stats(r: np.ndarray) -> tuple:
        mean, var = two(r)
        return a.w.load(rnd(mean, out)), (a.w.load(rnd(var, out)) if out.name == "bfloat16" else var)

    return a.affine(a.normalise(stats, rstd=lambda v: a.w.load(rnd(a.rsqrt(v), out))))


def _one_pass(a: Channels) -> Callable:
    def stats(r: np.ndarray) -> tuple:
        w = a.w
        mean = a.mean(r)
        return mean, w.q(a.mean(w.q(r * r)) - w.q(mean * mean))

    return stats


def _unbiased(a: Channels) -> Callable:
    def stats(r: np.ndarray) -> tuple:
        w = a.w
        mean = a.mean(r)
        d = w.q(r - mean)
        k = r.shape[-1]
        return mean, w.q(w.q(row_sum(w.q(d * d), w.fmt)) / w.c(max(k - 1, 1))) if k > 1 else mean * np.inf

    return stats


# ---------------------------------------------------------------------------------------------
# observability (float64 truth against the bug's fp32 output)
# ---------------------------------------------------------------------------------------------


def _truth(op: str, inputs: list, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """(float64 output, condition per element, K) of the op on ``inputs``."""
    a = Channels(op, inputs, params, FORMATS["float64"])
    shape = (1, a.c) + (1,) * (a.x.ndim - 2)
    wt = 1.0 if a.weight is None else a.weight.reshape(shape)
    bs = 0.0 if a.bias is None else a.bias.reshape(shape)
    if a.running is not None:
        mean, var = (v.reshape(shape) for v in a.running)
        K = 1
    else:
        r = a.rows()
        mean, var = a.back(np.broadcast_to(r.mean(axis=-1, keepdims=True), r.shape)), \
            a.back(np.broadcast_to(r.var(axis=-1, keepdims=True), r.shape))
        K = r.shape[-1]
    sigma = np.sqrt(var + a.eps)
    y = (a.x - mean) / sigma * wt + bs
    return y, (np.abs(a.x) + np.abs(mean)) / sigma * np.abs(wt) + np.abs(bs), K


def _differs(core: Callable, op: str) -> Callable:
    """``observable``: ``core`` run in fp32 moves some output beyond legitimate error (module docstring)."""
    from ..core.ulp import ulp

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        if not np.asarray(inputs[0]).size:
            return False
        with np.errstate(all="ignore"):
            y_true, cond, K = _truth(op, inputs, params)
            y_bug = f64(core(Channels(op, inputs, params, FORMATS["float32"]), out))
            tol = 2.0 * ulp(y_true, out) + 16.0 * np.sqrt(K) * 2.0 ** -24 * cond
            bad = ~np.isfinite(y_bug) | (np.abs(y_bug - y_true) > tol)
        return bool((bad & np.isfinite(y_true)).any())

    return observable


def _has_affine(inputs: list, params: Mapping[str, Any], out: Format, op: str = "") -> bool:
    first = 3 if op == "batch_norm" else 1
    return any(a is not None and bool((f64(a) != (1.0 if i == first else 0.0)).any())
               for i, a in enumerate(inputs) if i in (first, first + 1))


def _training(out: Format, fmts: Any, params: Any) -> bool:
    return bool(params.get("training", True)) if params is not None else True


# ---------------------------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------------------------


def _register(name: str, family: str, legit: bool, description: str, core: Callable, *, ops=OPS,
              stats_bug: bool = False, observable: str | None = "differs", mode: str = "rne",
              applies: Callable | None = None) -> None:
    for op in ops:
        def run(inputs, params, out, acc, seed, _op=op):
            with np.errstate(all="ignore"):
                return finish(core(Channels(_op, inputs, params, acc), out), out, mode, seed)

        obs = None
        if not legit and observable == "differs":
            obs = _differs(core, op)
        elif observable == "affine":
            obs = (lambda o: lambda i, p, f: _has_affine(i, p, f, o))(op)
        app = applies
        if stats_bug and op == "batch_norm":
            app = _training if applies is None else (lambda o, f, p: applies(o, f, p) and _training(o, f, p))
        variant(op, name, family, legit, description, app, obs)(run)


_register("two-pass", "accumulation-order", True,
          "mean, then the mean of squared deviations of each normalised group (sequential fp32 sums), "
          "(x - mean) * rstd * weight[c] + bias[c] in fp32, one rounding",
          lambda a, out: a.affine(a.normalise(_two_pass(a))))
_register("pairwise", "accumulation-order", True, "two-pass statistics with pairwise sums",
          lambda a, out: a.affine(a.normalise(_two_pass(a, "pairwise"))))
_register("blocked128", "accumulation-order", True,
          "two-pass statistics with blocked(128) sums (a vector accumulator reduced at the end)",
          lambda a, out: a.affine(a.normalise(_two_pass(a, "blocked", block=BLOCK))))
_register("welford", "formula", True,
          "Welford's running mean and M2 per group in fp32 (PyTorch CPU collects batch statistics so)",
          lambda a, out: a.affine(a.normalise(_welford(a))))
_register("stored16-stats", "rounding", True,
          "fp32 statistics with the mean and 1/sqrt(var + eps) (bf16: the variance too) stored in the "
          "16-bit output format (PyTorch CPU's batch_norm and instance_norm on bf16/fp16 tensors): "
          "evidence for the stored16 standards only",
          _stored16, ops=("instance_norm", "batch_norm"),
          applies=lambda out, fmts, params: narrow_out(out, fmts, params) and _training(out, fmts, params))
_register("one-pass-variance", "variance", False,
          "var = E[x^2] - E[x]^2 in fp32: cancellation on groups with a large mean",
          lambda a, out: a.affine(a.normalise(_one_pass(a))), stats_bug=True)
_register("unbiased-variance", "variance", False,
          "the unbiased variance sum / (K - 1) instead of the biased one (torch.var's default)",
          lambda a, out: a.affine(a.normalise(_unbiased(a))), stats_bug=True)
_register("eps-outside-sqrt", "eps", False, "rstd = 1/(sqrt(var) + eps) instead of 1/sqrt(var + eps)",
          lambda a, out: a.affine(a.normalise(_two_pass(a), rstd=lambda v: a.w.q(
              a.w.c(1.0) / a.w.q(a.w.q(np.sqrt(v)) + a.w.c(a.eps))))))
_register("affine-dropped", "formula-error", False, "the per-channel weight and bias are ignored",
          lambda a, out: a.normalise(_two_pass(a)), observable="affine")
_register("truncation", "truncation", False,
          "two-pass fp32 statistics, output converted to the output format by truncation",
          lambda a, out: a.affine(a.normalise(_two_pass(a))), applies=narrow_out, mode="rtz", observable=None)
_register("zeros", "zeros", False, "returns zeros of the right shape and dtype", lambda a, out: np.zeros(a.x.shape),
          observable=None)


def _wrong_axes(axes: str) -> Callable:
    def core(a: Channels, out: Format) -> np.ndarray:
        a.axes = axes
        return a.affine(a.normalise(_two_pass(a)))

    return core


for _op, _axes, _what in (("group_norm", "instance", "per channel instead of per group of channels"),
                          ("instance_norm", "batch", "over the batch and spatial axes (batch_norm's) instead of "
                                                     "per sample"),
                          ("batch_norm", "instance", "per sample and channel (instance_norm's) instead of over the "
                                                     "batch")):
    _register("wrong-axes", "indexing", False, f"the statistics taken {_what}", _wrong_axes(_axes),
              ops=(_op,), stats_bug=True)


def _torch(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch.nn.functional as F

        t = [None if a is None else to_torch(a) for a in inputs] + [None] * 5
        eps = float(params.get("eps", 1e-5))
        if op == "group_norm":
            y = F.group_norm(t[0], int(params["num_groups"]), t[1], t[2], eps)
        elif op == "instance_norm":
            y = F.instance_norm(t[0], None, None, t[1], t[2], True, 0.1, eps)
        else:
            training = bool(params.get("training", False))
            y = F.batch_norm(t[0], None if training else t[1], None if training else t[2], t[3], t[4], training,
                             0.1, eps)
        return finish(from_torch(y), out)

    return run


for _op in OPS:
    variant(_op, "torch-cpu", "library", True, f"torch.nn.functional.{_op} on CPU in the inputs' dtype",
            torch_same_format, acc_formats=FP32_ONLY)(_torch(_op))
del _op

#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"unbiased-variance": "scale", "wrong-axes": None}

VARIANTS: tuple = with_causes(_V, _CAUSES)
