"""Softmax-family variants: ``softmax``, ``log_softmax`` and ``cross_entropy``.

All legitimate variants compute in the working format (float32): ``d = RN(x - m)`` with the row
maximum ``m``, ``e = RN(exp(d))``, a row sum ``s`` in some order, then ``RN(e / s)`` (softmax),
``RN(d - RN(log s))`` (log_softmax) or ``lse - x_t`` (cross entropy), and one rounding to the
output format.

Legitimate: two-pass (max, exp, sequential sum, divide), pairwise row sum, online softmax (blocks
of 128 with a running max and a rescaled running sum: Milakov & Gimelshein 2018, FlashAttention),
exp2 with the ``log2 e`` factor folded in and a fused multiply-add ``exp2(fma(x, log2 e,
-m log2 e))`` (FlashAttention-2 / Triton: its error grows with ``|m| u``, not ``|x - m| u``), a
multiply by ``RN(1/s)``, ``x - logsumexp``, torch CPU.  Cross entropy: ``lse - x_t`` (Liger / Apex
style), ``-((x_t - m) - log s)`` (PyTorch's log_softmax + nll), online, pairwise.

Bugs: no max-subtraction (``exp`` overflows for logits above 88.7), the max over the whole tensor
instead of per row (rows far below the global max underflow), the row sum accumulated in
bfloat16, zeros, uniform ``1/K``, truncation, a 1 % scale error, a missing division by the sum,
``log(softmax(x))`` for log_softmax (``-inf`` where softmax underflows, the output rounding of
``p`` amplified where ``p`` is near 1); for cross entropy the mean over classes too, labels off by
one, NLL applied to probabilities (the missing log), a sum instead of a mean.

References: Milakov & Gimelshein, "Online normalizer calculation for softmax", arXiv:1805.02867
(2018); Dao, "FlashAttention-2", arXiv:2307.08691 (2023); Blanchard, Higham & Mary, "Accurate
computation of the log-sum-exp and softmax functions", IMA J. Numer. Anal. 41(4), 2021.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, f64, finish, from_last, from_torch, narrow_out, registrar, rnd, row_sum, to_last,
    to_torch, torch_same_format, Work,
)

__all__ = ["VARIANTS", "BLOCK", "Row", "online", "rows"]

_V: list = []
variant = registrar(_V)

BLOCK = 128  # block of the online softmax
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
SOFTMAX_OPS = ("softmax", "log_softmax")


# ---------------------------------------------------------------------------------------------
# row computations in the working format (rows along the last axis)
# ---------------------------------------------------------------------------------------------


class Row:
    """The pieces of one row-wise exp-normalise: ``d = x - m``, ``e = exp(d)``, sum ``s``."""

    def __init__(self, x: np.ndarray, w: Work, order: str = "sequential", m: Any = None,
                 sum_acc: Format | None = None) -> None:
        self.w, self.x = w, x
        self.m = np.max(x, axis=-1, keepdims=True) if m is None else m
        self.d = w.q(x - self.m)
        self.e = w.q(np.exp(self.d))
        self.s = w.q(row_sum(self.e, sum_acc or w.fmt, order))

    def softmax(self) -> np.ndarray:
        return self.w.q(self.e / self.s)

    def log_softmax(self) -> np.ndarray:
        return self.w.q(self.d - self.w.q(np.log(self.s)))


def online(x: np.ndarray, w: Work) -> tuple[np.ndarray, np.ndarray]:
    """Running max ``m`` and rescaled running sum ``l`` over blocks of :data:`BLOCK`."""
    m = np.full(x.shape[:-1] + (1,), -np.inf, dtype=w.dtype)
    l = np.zeros(x.shape[:-1] + (1,), dtype=w.dtype)
    for k0 in range(0, x.shape[-1], BLOCK):
        blk = x[..., k0:k0 + BLOCK]
        m_new = np.maximum(m, np.max(blk, axis=-1, keepdims=True))
        alpha = w.q(np.exp(w.q(m - m_new)))  # exp(-inf) = 0 for the first block
        part = w.q(row_sum(w.q(np.exp(w.q(blk - m_new))), w.fmt, "sequential"))
        l = w.q(w.q(l * alpha) + part)
        m = m_new
    return m, l


def rows(inputs: list, params: Mapping[str, Any], acc: Format) -> tuple[np.ndarray, Work, int]:
    """``(x with axis last, Work, axis)`` for softmax/log_softmax."""
    w = Work(acc)
    axis = int(params.get("axis", -1))
    return np.ascontiguousarray(to_last(w.load(inputs[0]), axis)), w, axis


def _softmax_family(name: str, family: str, legit: bool, description: str, *,
                    ops: tuple[str, ...] = SOFTMAX_OPS, applies: Callable | None = None,
                    observable: Callable | None = None, observable_for: Callable | None = None,
                    mode: str = "rne") -> Callable:
    """Register ``core(op, x, w, out) -> result (axis last)`` for softmax and/or log_softmax.

    ``observable_for(op)``, if given, returns the op's ``observable`` predicate.
    """

    def deco(core: Callable) -> Callable:
        for op in ops:
            def run(inputs, params, out, acc, seed, _op=op):
                x, w, axis = rows(inputs, params, acc)
                with np.errstate(all="ignore"):
                    y = core(_op, x, w, out)
                    return finish(from_last(f64(y), axis), out, mode, seed)

            obs = observable_for(op) if observable_for is not None else observable
            variant(op, name, family, legit, description.format(op=op), applies, obs)(run)
        return core

    return deco


# ---------------------------------------------------------------------------------------------
# observability of data-dependent bugs
# ---------------------------------------------------------------------------------------------


def _row_stats(inputs: list, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    x = to_last(f64(inputs[0]), int(params.get("axis", -1)))
    return x, np.max(x, axis=-1, keepdims=True)


def _overflows(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """exp(x) without max-subtraction overflows (x > 88.8) or a whole row flushes (x < -104)."""
    x, m = _row_stats(inputs, params)
    return bool(x.size) and bool((m > 88.8).any() or (m < -104.0).any())


def _global_max_hurts(op: str) -> Callable:
    """``observable`` of the global-max bug: the global max flushes something the row max keeps.

    softmax: an element whose exp(x - global max) is subnormal (gap > 88) while its probability
    is a normal number of the output format (row gap below ``-ln(min normal) - ln K - 2``, capped
    at 75).  log_softmax: a whole row flushes to zero (its max is 104 below the global max).
    """

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        x, m = _row_stats(inputs, params)
        if not x.size:
            return False
        if op == "log_softmax":
            return bool((x.max() - m > 104.0).any())
        keep = min(75.0, -np.log(out.smallest_normal) - np.log(x.shape[-1]) - 2.0)
        return bool(((x.max() - x > 88.0) & (m - x < keep)).any())

    return observable


def _sum_bf16_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """A sequential bfloat16 row sum of exp(x - m) is off by more than 2^-6 (relative) somewhere.

    That is four bfloat16 ULPs: beyond the single rounding of the sum to a 16-bit format that
    some libraries do (torch CPU's bfloat16 log_softmax).  For float32 outputs the threshold is
    2^-14 (any bfloat16 accumulation is far outside float32 accuracy).
    """
    x, m = _row_stats(inputs, params)
    if not x.size:
        return False
    e = np.exp(x - m)
    s_bf16 = row_sum(e.astype(np.float32), FORMATS["bfloat16"])
    tol = 2.0 ** -6 if out.p < 24 else 2.0 ** -14
    return bool((np.abs(s_bf16 - e.sum(axis=-1, keepdims=True)) > tol * s_bf16).any())


def _non_constant(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """Some row is not constant (uniform 1/K is the right answer on constant rows)."""
    x, m = _row_stats(inputs, params)
    return bool((x != m).any())


# ---------------------------------------------------------------------------------------------
# legitimate
# ---------------------------------------------------------------------------------------------


@_softmax_family("two-pass", "accumulation-order", True,
                 "{op} as max, exp(x - max), sequential fp32 row sum, then divide (or subtract "
                 "the log): the textbook safe kernel")
def _two_pass(op, x, w, out):
    r = Row(x, w)
    return r.softmax() if op == "softmax" else r.log_softmax()


@_softmax_family("pairwise", "accumulation-order", True,
                 "{op} with the row sum formed by pairwise (recursive halving) summation")
def _pairwise(op, x, w, out):
    r = Row(x, w, "pairwise")
    return r.softmax() if op == "softmax" else r.log_softmax()


@_softmax_family("online", "accumulation-order", True,
                 "{op} by online normalisation (blocks of 128: running max, running sum "
                 "rescaled by exp(m_old - m_new)), then exp(x - m) / l (FlashAttention style)")
def _online_sm(op, x, w, out):
    m, l = online(x, w)
    d = w.q(x - m)
    if op == "softmax":
        return w.q(w.q(np.exp(d)) / l)
    return w.q(d - w.q(np.log(l)))


@_softmax_family("exp2", "formula", True,
                 "{op} with exp2(fma(x, log2 e, -RN(m log2 e))) (FlashAttention-2 / Triton): the "
                 "rounding of m log2 e adds an error ~ |m| u_fp32, legitimate but not bounded by "
                 "|x - m|")
def _exp2(op, x, w, out):
    m = np.max(x, axis=-1, keepdims=True)
    c = w.c(_LOG2E)
    mc = w.q(m * c)
    t = w.q(f64(x) * f64(c) - f64(mc))  # fused multiply-add: the product is exact in float64
    e = w.q(np.exp2(t))
    s = w.q(row_sum(e, w.fmt))
    if op == "softmax":
        return w.q(e / s)
    return w.q(w.q(x - m) - w.q(w.q(np.log2(s)) * w.c(_LN2)))


@_softmax_family("reciprocal-multiply", "formula", True,
                 "softmax as exp(x - m) * RN(1 / s): a multiply by the reciprocal instead of a "
                 "division (one extra rounding)", ops=("softmax",))
def _recip(op, x, w, out):
    r = Row(x, w)
    return w.q(r.e * w.q(w.c(1.0) / r.s))


@_softmax_family("logsumexp", "formula", True,
                 "log_softmax as x - RN(m + log s): the logsumexp form (cancellation when x is "
                 "large: error ~ |m| u_fp32)", ops=("log_softmax",))
def _lse_form(op, x, w, out):
    r = Row(x, w)
    return w.q(x - w.q(r.m + w.q(np.log(r.s))))


def _xla16(op: str, x: np.ndarray, w: Work) -> np.ndarray:
    """XLA CPU's 16-bit softmax / log_softmax (``jax.nn.softmax``/``log_softmax``, jax 0.10.2), row last.

    Read from the compiled HLO and reproduced bit for bit (tests/test_arith16_rows.py): the row
    maximum ``m`` is exact; ``d = RN16(x − m)``; the row sum ``s`` is accumulated in fp32 over
    ``e = exp(d)`` — the fp32 exp for bf16, the fp16-rounded ``RN16(exp d)`` for fp16 (XLA keeps
    fp16 elementwise ops in fp16 and upcasts bf16 ones) — and stored ``s16 = RN16(s)``. softmax:
    bf16 ``RN16(RN16(e) · RN32(1/s16))``, fp16 ``RN16(e16 · RN16(1/s16))`` (the division becomes a
    multiply by the reciprocal); log_softmax: ``RN16(d − RN16(log s16))``. The fp32 row sum's order
    (reduce-window blocks of 32, or YNNPACK's reduce) only matters through ``RN16(s)``.
    """
    f32 = np.float32
    m = np.max(x, axis=-1, keepdims=True)
    d = w.q(x.astype(f32) - m.astype(f32))
    e = np.exp(d.astype(f32))
    fp16 = w.fmt.name == "float16"
    if fp16:
        e = w.q(e)
    s16 = w.q(np.sum(e.astype(f32), axis=-1, keepdims=True, dtype=f32))
    if op == "log_softmax":
        return w.q(d - w.q(np.log(s16.astype(f32))))
    rec = f32(1) / s16.astype(f32)
    if fp16:
        return w.q(e * w.q(rec))
    return w.q(w.q(e) * rec)


for _op in SOFTMAX_OPS:
    def _xla_run(inputs, params, out, acc, seed, _op=_op):
        x, w, axis = rows(inputs, params, acc)
        with np.errstate(all="ignore"):
            return finish(from_last(f64(_xla16(_op, x, w)), axis), out)

    variant(_op, "xla-arith16", "library", True,
            f"XLA CPU's 16-bit {_op} (jax 0.10.2): RN16(x − max), exp, an fp32 row sum stored in 16 bits, "
            "then the 16-bit reciprocal multiply (softmax) or RN16(d − RN16(log s)) (log_softmax); 16-bit "
            "arithmetic only", acc_formats=ARITH16)(_xla_run)
del _op, _xla_run


def _torch_softmax(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch

        fn = torch.softmax if op == "softmax" else torch.log_softmax
        return finish(from_torch(fn(to_torch(inputs[0]), dim=int(params.get("axis", -1)))), out)

    return run


for _op in SOFTMAX_OPS:
    variant(_op, "torch-cpu", "library", True,
            f"torch.{_op} on CPU in the input's dtype (float32 internally for 16-bit inputs)",
            torch_same_format, acc_formats=FP32_ONLY)(_torch_softmax(_op))
del _op


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


@_softmax_family("no-max-subtraction", "max-subtraction", False,
                 "{op} without subtracting the row max: exp overflows to inf (NaN results) once "
                 "a logit exceeds 88.7; identical otherwise", observable=_overflows)
def _no_max(op, x, w, out):
    r = Row(x, w, m=np.zeros(x.shape[:-1] + (1,), dtype=w.dtype))
    return r.softmax() if op == "softmax" else r.log_softmax()


@_softmax_family("global-max", "max-subtraction", False,
                 "{op} subtracting the maximum of the whole tensor instead of each row's: rows "
                 "far below the global max underflow", observable_for=_global_max_hurts)
def _global_max(op, x, w, out):
    m = np.full(x.shape[:-1] + (1,), np.max(x) if x.size else 0, dtype=w.dtype)
    r = Row(x, w, m=m)
    return r.softmax() if op == "softmax" else r.log_softmax()


@_softmax_family("sum-bf16", "accumulation-precision", False,
                 "{op} with the row sum accumulated in bfloat16 (the sum stagnates after a few "
                 "dozen terms)", observable=_sum_bf16_visible)
def _sum_bf16(op, x, w, out):
    r = Row(x, w, sum_acc=FORMATS["bfloat16"])
    return r.softmax() if op == "softmax" else r.log_softmax()


@_softmax_family("zeros", "zeros", False,
                 "returns zeros (passes fixed tolerances on softmax of many classes: KernelBench "
                 "#165)")
def _zeros(op, x, w, out):
    return np.zeros(x.shape)


@_softmax_family("uniform", "formula-error", False,
                 "{op} of a constant row (1/K, or -log K): what a kernel returns when it reads "
                 "the wrong buffer or broadcasts the max", observable=_non_constant)
def _uniform(op, x, w, out):
    K = max(x.shape[-1], 1)
    v = 1.0 / K if op == "softmax" else -np.log(K)
    return np.full(x.shape, v)


@_softmax_family("truncation", "truncation", False,
                 "two-pass fp32 {op} converted to the output format by truncation instead of "
                 "rounding", applies=narrow_out, mode="rtz")
def _truncation(op, x, w, out):
    return _two_pass(op, x, w, out)


@_softmax_family("scale", "scale", False, "the {op} result multiplied by 1.01")
def _scale(op, x, w, out):
    return w.q(_two_pass(op, x, w, out) * w.c(1.01))


@_softmax_family("missing-normalisation", "formula-error", False,
                 "{op} without the division by (or subtraction of the log of) the row sum: "
                 "returns exp(x - m), or x - m")
def _unnormalised(op, x, w, out):
    r = Row(x, w)
    return r.e if op == "softmax" else r.d


def _log_of_softmax_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """softmax underflows somewhere, or (16-bit outputs) some probability exceeds 0.95."""
    x, m = _row_stats(inputs, params)
    if not x.size:
        return False
    if ((m - x) > 87.0).any():
        return True
    if out.p >= 24:
        return False
    e = np.exp(x - m)
    return bool((e / e.sum(axis=-1, keepdims=True) > 0.95).any())


def _log_of_softmax(inputs, params, out, acc, seed):
    """log(softmax(x)) as eager code computes it: softmax rounded to the output format first."""
    x, w, axis = rows(inputs, params, acc)
    with np.errstate(all="ignore"):
        p = rnd(Row(x, w).softmax(), out).astype(w.dtype)
        return finish(from_last(f64(w.q(np.log(p))), axis), out)


variant("log_softmax", "log-of-softmax", "formula-error", False,
        "log(softmax(x)) in eager code (softmax rounded to the output format, then log): -inf "
        "where softmax underflows, the output rounding of p amplified where p is near 1",
        observable=_log_of_softmax_visible)(_log_of_softmax)


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"uniform": "constant-output", "log-of-softmax": "specials"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
