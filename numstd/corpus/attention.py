"""Attention variants: ``softmax(q k^T * scale + mask) v`` (torch scaled_dot_product_attention).

Legitimate (float32 accumulation throughout, one final rounding):

- ``two-gemm``: scores by an fp32 GEMM (``numpy.matmul`` on float32: BLAS sgemm), scaled and
  masked, a two-pass fp32 softmax, the fp32 ``P @ V`` GEMM;
- ``flash``: FlashAttention-2's loop over blocks of 64 keys with a running max, a running sum and
  an output accumulator rescaled by ``exp2(m_old - m_new)``, with the softmax scale folded into the
  ``exp2`` argument (``exp2(s * scale * log2 e - m)``), divided by the running sum at the end;
- ``flash-p-rounded``: the same with the probabilities rounded to the format of ``v`` (bf16 /
  fp16) before the ``P @ V`` GEMM, as FlashAttention-2 feeds its tensor cores (the running sum
  uses the unrounded fp32 probabilities);
- ``torch-cpu``: ``torch.nn.functional.scaled_dot_product_attention`` in the inputs' dtype.

Bugs: the scale forgotten (1) or taken as 1/E instead of 1/sqrt(E), a causal mask that lets each
query see one future key, the softmax over the query axis, no max-subtraction (overflow once a
score exceeds 88.7), the last partial key block dropped, truncation, zeros.

References: Vaswani et al., "Attention is all you need" (2017); Dao, "FlashAttention-2",
arXiv:2307.08691 (2023), Algorithm 1.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import Format
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, f64, finish, from_torch, narrow_out, registrar, rnd, row_sum, to_torch,
    torch_same_format, Work,
)
from .softmax import Row

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

BLOCK = 64  # keys per FlashAttention block
_LOG2E = 1.4426950408889634


class Problem:
    """q, k, v in the working format, the scale and the causal flag."""

    def __init__(self, inputs: list, params: Mapping[str, Any], acc: Format) -> None:
        self.w = Work(acc)
        self.q, self.k, self.v = (self.w.load(t) for t in inputs[:3])
        self.E = self.q.shape[-1]
        self.L, self.S = self.q.shape[-2], self.k.shape[-2]
        scale = params.get("scale")
        self.scale = 1.0 / math.sqrt(self.E) if scale is None else float(scale)
        self.causal = bool(params.get("causal", False))
        self.vfmt = inputs[2].dtype.name

    def mask(self, k0: int = 0, k1: int | None = None, shift: int = 0) -> np.ndarray | None:
        """Boolean ``(L, k1 - k0)`` mask of *hidden* keys (``j > i + shift``), or None."""
        if not self.causal:
            return None
        k1 = self.S if k1 is None else k1
        i = np.arange(self.L)[:, None]
        j = np.arange(k0, k1)[None, :]
        return j > i + shift

    def scores(self, k0: int = 0, k1: int | None = None, scale: float | None = None,
               shift: int = 0) -> np.ndarray:
        """``RN(RN(q k^T) * scale)`` for keys ``k0 .. k1-1``, masked keys at -inf."""
        w = self.w
        k = self.k[..., k0:k1, :]
        s = w.q(np.matmul(self.q, np.swapaxes(k, -1, -2)))
        s = w.q(s * w.c(self.scale if scale is None else scale))
        m = self.mask(k0, self.S if k1 is None else k1, shift)
        return s if m is None else np.where(m, -np.inf, s)

    def pv(self, p: np.ndarray, k0: int = 0, k1: int | None = None) -> np.ndarray:
        return self.w.q(np.matmul(p, self.v[..., k0:k1, :]))


def _attn(name: str, family: str, legit: bool, description: str, *,
          applies: Callable | None = None, observable: Callable | None = None,
          mode: str = "rne", acc_formats: tuple[str, ...] | None = None) -> Callable:
    """Register ``core(pb: Problem, out) -> output`` for attention."""

    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            with np.errstate(all="ignore"):
                return finish(core(Problem(inputs, params, acc), out), out, mode, seed)

        variant("attention", name, family, legit, description, applies, observable, acc_formats)(run)
        return core

    return deco


def _two_gemm(pb: Problem, scale: float | None = None, shift: int = 0, axis: int = -1,
              max_sub: bool = True) -> np.ndarray:
    s = pb.scores(scale=scale, shift=shift)
    if axis != -1:
        s = np.swapaxes(s, -1, axis)
    r = Row(s, pb.w, m=None if max_sub else np.zeros(s.shape[:-1] + (1,), dtype=pb.w.dtype))
    p = r.softmax()
    if axis != -1:
        p = np.swapaxes(p, -1, axis)
    return pb.pv(p)


def _flash(pb: Problem, round_p: Format | None = None, stop: int | None = None) -> np.ndarray:
    """FlashAttention-2 forward (Dao 2023, Algorithm 1) over key blocks ``[0, stop)``."""
    w = pb.w
    c = w.c(pb.scale * _LOG2E)
    shape = np.broadcast_shapes(pb.q.shape[:-2], pb.k.shape[:-2], pb.v.shape[:-2]) + (pb.L,)
    m = np.full(shape + (1,), -np.inf, dtype=w.dtype)
    l = np.zeros(shape + (1,), dtype=w.dtype)
    acc = np.zeros(shape + (pb.v.shape[-1],), dtype=w.dtype)
    end = pb.S if stop is None else stop
    for k0 in range(0, end, BLOCK):
        k1 = min(k0 + BLOCK, end)
        s = pb.scores(k0, k1, scale=1.0)  # raw q k^T; the scale is folded into exp2
        m_new = np.maximum(m, w.q(np.max(s, axis=-1, keepdims=True) * c))
        m_use = np.where(np.isinf(m_new), w.dtype(0), m_new)  # fully masked so far
        t = w.q(f64(s) * f64(c) - f64(m_use))  # fma(s, scale log2 e, -m)
        p = w.q(np.exp2(t))
        alpha = w.q(np.exp2(w.q(m - m_use)))
        l = w.q(w.q(l * alpha) + w.q(row_sum(p, w.fmt)))
        pp = p if round_p is None else rnd(p, round_p).astype(w.dtype)
        acc = w.q(w.q(acc * alpha) + pb.pv(pp, k0, k1))
        m = m_new
    return w.q(acc / l)


@_attn("two-gemm", "accumulation-order", True,
       "fp32 GEMM for q k^T, scale, mask, two-pass fp32 softmax, fp32 GEMM with v (the "
       "unfused 'math' backend)")
def _a_two_gemm(pb, out):
    return _two_gemm(pb)


@_attn("flash", "accumulation-order", True,
       "FlashAttention-2: blocks of 64 keys, running max and sum, rescaled fp32 output "
       "accumulator, exp2 with the scale folded in, one division at the end")
def _a_flash(pb, out):
    return _flash(pb)


def _sixteen_bit_v(out: Format, fmts: list, params: Any) -> bool:
    """v is a 16-bit format (a shorter list repeats its last format, as numstd.suites does)."""
    fv = fmts[min(2, len(fmts) - 1)] if fmts else None
    return fv is not None and fv.bits == 16


@_attn("flash-p-rounded", "rounding", True,
       "FlashAttention-2 with the probabilities P rounded to v's 16-bit format before the P @ V "
       "tensor-core GEMM (the running sum keeps fp32 P)", applies=_sixteen_bit_v)
def _a_flash_p(pb, out):
    from ..core.formats import get_format

    return _flash(pb, round_p=get_format(pb.vfmt))


class _Problem16(Problem):
    """A :class:`Problem` whose two GEMMs accumulate in the working format itself, one sequential FMA chain
    per dot product (a 16-bit-accumulating kernel under the arith16 policy), not an fp32 GEMM rounded once."""

    def _gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from ..emulate import matmul

        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
        return np.asarray(f64(matmul(a, b, order="sequential", acc=self.w.fmt, out=self.w.fmt)), dtype=self.w.dtype)

    def scores(self, k0: int = 0, k1: int | None = None, scale: float | None = None,
               shift: int = 0) -> np.ndarray:
        w = self.w
        s = self._gemm(self.q, np.swapaxes(self.k[..., k0:k1, :], -1, -2))
        s = w.q(s * w.c(self.scale if scale is None else scale))
        m = self.mask(k0, self.S if k1 is None else k1, shift)
        return s if m is None else np.where(m, -np.inf, s)

    def pv(self, p: np.ndarray, k0: int = 0, k1: int | None = None) -> np.ndarray:
        return self._gemm(p, self.v[..., k0:k1, :])


def _two_gemm16(inputs, params, out, acc, seed):
    with np.errstate(all="ignore"):
        return finish(_two_gemm(_Problem16(inputs, params, acc)), out)


variant("attention", "two-gemm-acc16", "accumulation-order", True,
        "the two-GEMM attention with every primitive in the 16-bit working format, both GEMMs one sequential "
        "FMA chain per dot product accumulated in that format (q·kᵀ over E, P·v over the keys); the arith16 "
        "policy's only", acc_formats=ARITH16)(_two_gemm16)


def _flash16(inputs, params, out, acc, seed):
    with np.errstate(all="ignore"):
        return finish(_flash(_Problem16(inputs, params, acc)), out)


variant("attention", "flash-acc16", "accumulation-order", True,
        "FlashAttention-2 (blocks of 64 keys, running max and sum) with every primitive in the 16-bit working "
        "format and both GEMMs accumulated in it (sequential FMA chains); the arith16 policy's only",
        acc_formats=ARITH16)(_flash16)


def _xla_attention(inputs, params, out, acc, seed):
    """XLA CPU's bf16 ``jax.nn.dot_product_attention`` (jax 0.10.2, compiled HLO): the scores ``q·kᵀ`` by a
    ``dot_bf16_bf16_f32`` dot (fp32 accumulation), scaled in fp32, the row max, ``e = exp(s − m)`` and its
    sum in fp32, ``P = RN16(e · (1/Σe))`` (a reciprocal multiply, rounded to bf16), ``P·v`` in fp32, one
    rounding to bf16."""
    q, k, v = (f64(t).astype(np.float32) for t in inputs[:3])
    E = q.shape[-1]
    scale = params.get("scale")
    scale = np.float32(1.0 / math.sqrt(E) if scale is None else float(scale))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if params.get("causal", False):
        L, S = s.shape[-2:]
        s = np.where(np.arange(S)[None, :] > np.arange(L)[:, None], np.float32(-np.inf), s)
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - m)
    r = np.float32(1.0) / np.sum(e, axis=-1, keepdims=True, dtype=np.float32)
    p = rnd(e * r, acc).astype(np.float32)
    return finish(f64(np.matmul(p, v)), out)


variant("attention", "xla-arith16", "library", True,
        "XLA CPU's bf16 dot_product_attention (jax 0.10.2): fp32 scores, softmax and P·v with the "
        "probabilities rounded to bf16 (P = RN16(e·(1/Σe))) before the P·v dot; the arith16 policy's only "
        "(it is also the fp32 policy's flash-p-rounded arithmetic)", lambda out, f, p: out.name == "bfloat16",
        acc_formats=ARITH16)(_xla_attention)


def _torch_attention(inputs, params, out, acc, seed):
    import torch.nn.functional as F

    q, k, v = (to_torch(t) for t in inputs[:3])
    y = F.scaled_dot_product_attention(q, k, v, scale=params.get("scale"),
                                       is_causal=bool(params.get("causal", False)))
    return finish(from_torch(y), out)


variant("attention", "torch-cpu", "library", True,
        "torch scaled_dot_product_attention on CPU in the inputs' dtype", torch_same_format,
        acc_formats=FP32_ONLY)(_torch_attention)


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


def _attention64(inputs: list, params: Mapping[str, Any], *, scale: float | None = None,
                 shift: int = 0, axis: int = -1, stop: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """float64 attention with a bug's changes, and ``sum_j p_j |v_j|`` (its condition)."""
    q, k, v = (f64(t) for t in inputs[:3])
    E = q.shape[-1]
    if scale is None:
        scale = params.get("scale")
        scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    S = k.shape[-2] if stop is None else stop
    k, v = k[..., :S, :], v[..., :S, :]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if params.get("causal", False):
        L = s.shape[-2]
        s = np.where(np.arange(S)[None, :] > np.arange(L)[:, None] + shift, -np.inf, s)
    with np.errstate(all="ignore"):
        m = np.max(s, axis=axis, keepdims=True) if s.size else s
        e = np.exp(s - m)
        p = e / e.sum(axis=axis, keepdims=True)
        return np.matmul(p, v), np.matmul(p, np.abs(v))


def _attn_differs(**bug: Any) -> Callable:
    """``observable``: the bug's float64 output differs from the true one beyond legitimate error.

    Tolerance: 2 output ULPs + (16 sqrt(S) u_fp32 + 4 u_v) * sum_j p_j |v_j|, where the ``u_v``
    term (16-bit ``v`` only) covers FlashAttention's rounding of P to v's format.
    """

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        from ..core.formats import FORMATS
        from ..core.ulp import ulp

        if not np.size(inputs[0]) or not np.size(inputs[1]):
            return False
        y, cond = _attention64(inputs, params)
        yb, _ = _attention64(inputs, params, **bug)
        fmt_v = FORMATS.get(inputs[2].dtype.name)
        u_v = fmt_v.u if fmt_v is not None and fmt_v.bits == 16 else 0.0
        S = np.shape(inputs[1])[-2]
        with np.errstate(all="ignore"):
            tol = 2.0 * ulp(np.where(np.isfinite(y), y, 0.0), out) \
                + (16.0 * np.sqrt(S) * 2.0 ** -24 + 4.0 * u_v) * cond
            bad = (np.isfinite(yb) != np.isfinite(y)) | (np.abs(yb - y) > tol)
        return bool(bad.any())

    return observable


def _scale_1_over_e(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return _attn_differs(scale=1.0 / max(np.shape(inputs[0])[-1], 1))(inputs, params, out)


@_attn("missing-scale", "scale", False,
       "the softmax scale is never applied (scale = 1)", observable=_attn_differs(scale=1.0))
def _a_no_scale(pb, out):
    return _two_gemm(pb, scale=1.0)


@_attn("scale-1-over-e", "scale", False,
       "the scale taken as 1/E instead of 1/sqrt(E)", observable=_scale_1_over_e)
def _a_scale_e(pb, out):
    return _two_gemm(pb, scale=1.0 / pb.E)


def _causal_leaks(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return bool(params.get("causal", False)) and _attn_differs(shift=1)(inputs, params, out)


@_attn("causal-off-by-one", "indexing", False,
       "the causal mask hides keys j > i + 1: every query also sees the next (future) key",
       observable=_causal_leaks)
def _a_causal(pb, out):
    return _two_gemm(pb, shift=1)


@_attn("softmax-wrong-axis", "indexing", False,
       "the softmax taken over the query axis instead of the key axis",
       observable=_attn_differs(axis=-2))
def _a_wrong_axis(pb, out):
    return _two_gemm(pb, axis=-2)


def _scores_overflow(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    q, k = f64(inputs[0]), f64(inputs[1])
    E = q.shape[-1]
    scale = params.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if params.get("causal", False):
        L, S = s.shape[-2:]
        s = np.where(np.arange(S)[None, :] > np.arange(L)[:, None], -np.inf, s)
    m = s.max(axis=-1)
    return bool(s.size) and bool((m > 88.8).any() or (m < -104.0).any())


@_attn("no-max-subtraction", "max-subtraction", False,
       "the score row max is not subtracted before exp: inf / inf = NaN once a score exceeds 88.7",
       observable=_scores_overflow)
def _a_no_max(pb, out):
    return _two_gemm(pb, max_sub=False)


def _dropped_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    S = np.shape(inputs[1])[-2]
    return S % BLOCK != 0 and _attn_differs(stop=S - S % BLOCK)(inputs, params, out)


@_attn("dropped-tail-block", "dropped-tile", False,
       "the last partial block of keys (S mod 64) is skipped by the FlashAttention loop "
       "(S // 64 blocks; NaN when S < 64); observable when S % 64 != 0",
       observable=_dropped_visible)
def _a_dropped(pb, out):
    return _flash(pb, stop=pb.S - pb.S % BLOCK)


@_attn("truncation", "truncation", False,
       "two-GEMM fp32 attention converted to the output format by truncation", applies=narrow_out,
       mode="rtz")
def _a_truncation(pb, out):
    return _two_gemm(pb)


@_attn("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _a_zeros(pb, out):
    shape = np.broadcast_shapes(pb.q.shape[:-2], pb.k.shape[:-2], pb.v.shape[:-2])
    return np.zeros(shape + (pb.L, pb.v.shape[-1]))


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"causal-off-by-one": "mask", "softmax-wrong-axis": "wrong-axis"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
