"""Similarity variants: normalize, cosine_similarity, cosine_embedding_loss, triplet_margin_loss.

Legitimate (working format ``acc``, one final rounding): the norms' sums in sequential, pairwise
and blocked (128) order; ``x * rsqrt(max(sum x^2, eps^2))`` (the fused rsqrt form), ``x * RN(1/den)``
(reciprocal multiply); cosine as normalise-then-dot (torch 2.x) and as
``w12 * rsqrt(max(w1, eps^2)) * rsqrt(max(w2, eps^2))`` (the same clamps on the squared norms);
cosine_embedding_loss by torch's ``w12 / sqrt((w1 + 1e-12)(w2 + 1e-12))`` and by separate norms;
triplet distances with ``(x - y) + eps`` in either order of the two additions; numpy; torch CPU
(its default threads; torch.set_num_threads is process-global, so a one-thread variant would not be thread-safe); the ``stored16-*`` models of torch CPU's 16-bit kernels (the norm, for
cosine_similarity also the normalised vectors and their products, for triplet_margin_loss every
intermediate, rounded to the 16-bit type:
legitimate for the ``stored16`` standards only, excluded from the fp32-policy ones).

Bugs: no eps clamp (NaN on zero rows), eps added instead of the max, the wrong p, the wrong dim,
the missing sqrt, division by the squared norm, the norm's sum accumulated in float16, truncation of
the final rounding, zeros; for the losses also the margin's sign flipped, the missing max(0, .), the
wrong reduction axis (the cosine over the batch axis), the sum for the mean, a bfloat16 running sum of
the losses, ``swap`` ignored and the p-norm of the sum ``a + b`` instead of the difference.

References: PyTorch ``torch.nn.functional.normalize``, ``cosine_similarity`` (aten/src/ATen/native/Distance.cpp),
``cosine_embedding_loss`` and ``triplet_margin_loss`` (aten/src/ATen/native/Loss.cpp).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import ARITH16, FP32_ONLY, Work, f64, finish, from_torch, registrar, row_sum, to_torch, torch_same_format

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)
_BLOCK = 128
_F16 = FORMATS["float16"]
_BF16 = FORMATS["bfloat16"]


class _Calc:
    """The working-format arithmetic of one variant: inputs loaded into ``acc``, sums in ``order``."""

    def __init__(self, acc: Format, order: str = "sequential", sum_fmt: Format | None = None, **kw: Any) -> None:
        self.w = Work(acc)
        self.order, self.kw = order, kw
        self.sum_fmt = sum_fmt or acc

    def sum(self, t: np.ndarray) -> np.ndarray:
        """Sum over the last axis (keepdims) in the variant's order and format."""
        return self.w.q(row_sum(t, self.sum_fmt, self.order, **self.kw))

    def norm(self, x: np.ndarray, p: float) -> np.ndarray:
        q = self.w.q
        if p == 1.0:
            return self.sum(np.abs(x))
        if p == 2.0:
            return q(np.sqrt(self.sum(q(x * x))))
        return q(q(self.sum(q(np.abs(x) ** p))) ** q(1.0 / p))


def _obs(observable: Any) -> Callable | None:
    """``observable=True`` (always observable) as a predicate."""
    return (lambda inputs, params, out: True) if observable is True else observable


def _last(x: Any, dim: int) -> np.ndarray:
    return np.moveaxis(f64(x), dim, -1)


# ---------------------------------------------------------------------------------------------
# normalize
# ---------------------------------------------------------------------------------------------


def _normalize(inputs: list, params: Mapping[str, Any], c: _Calc, *, form: str = "divide", p: float | None = None,
               dim: int | None = None, clamp: str = "max") -> np.ndarray:
    x0 = np.asarray(inputs[0])
    d = (params.get("dim", 1) if dim is None else dim) % x0.ndim
    p = params.get("p", 2.0) if p is None else p
    eps = params.get("eps", 1e-12)
    w, q = c.w, c.w.q
    x = w.load(_last(x0, d))
    with np.errstate(all="ignore"):
        if form == "rsqrt" and p == 2.0:
            y = q(x * q(1.0 / q(np.sqrt(np.maximum(c.sum(q(x * x)), w.c(eps * eps))))))
        else:
            n = c.norm(x, p)
            if clamp == "max":
                den = np.maximum(n, w.c(eps))
            elif clamp == "add":
                den = q(n + w.c(eps))
            elif clamp == "none":
                den = n
            elif clamp == "no-sqrt":
                den = np.maximum(c.sum(q(x * x)), w.c(eps))
            else:  # "squared": the clamped norm squared
                m = np.maximum(n, w.c(eps))
                den = q(m * m)
            y = q(x * q(1.0 / den)) if form == "reciprocal" else q(x / den)
    return np.moveaxis(y, -1, d)


def _nz(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
        observable: Callable | None = None, acc_formats: tuple | None = None, mode: str = "rne") -> Callable:
    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            return finish(core(inputs, params, acc, out), out, mode)

        variant("normalize", name, family, legit, description, applies, _obs(observable), acc_formats)(run)
        return core

    return deco


for _name, (_order, _kw) in {"sequential": ("sequential", {}), "pairwise": ("pairwise", {}),
                             "blocked128": ("blocked", {"block": _BLOCK})}.items():
    _nz(_name, "accumulation-order", True, f"the norm's sum {_name} in the working format, then x / max(norm, eps)")(
        lambda inputs, params, acc, out, _o=_order, _k=_kw: _normalize(inputs, params, _Calc(acc, _o, **_k)))
del _name, _order, _kw


@_nz("rsqrt-fused", "formula", True, "x * rsqrt(max(sum x^2, eps^2)) (p = 2; x / max(norm, eps) for p = 1)")
def _nz_rsqrt(inputs, params, acc, out):
    return _normalize(inputs, params, _Calc(acc, "pairwise"), form="rsqrt")


@_nz("reciprocal", "formula", True, "x * RN(1 / max(norm, eps))")
def _nz_recip(inputs, params, acc, out):
    return _normalize(inputs, params, _Calc(acc), form="reciprocal")


def _stored16_normalize(inputs: list, params: Mapping[str, Any], acc: Format, out: Format) -> np.ndarray:
    """torch CPU's 16-bit normalize: the fp32 norm stored in the 16-bit type, then x / clamp(norm)."""
    x0 = np.asarray(inputs[0])
    d = params.get("dim", 1) % x0.ndim
    c = _Calc(acc, "pairwise")
    x = c.w.load(_last(x0, d))
    with np.errstate(all="ignore"):
        n = f64(finish(c.norm(x, params.get("p", 2.0)), out))
        y = c.w.q(x / np.maximum(n, f64(finish(np.float64(params.get("eps", 1e-12)), out))))
    return np.moveaxis(y, -1, d)


_nz("stored16-norm", "rounding", True, "the fp32 norm stored in the 16-bit output type before the division "
    "(torch CPU's bf16/fp16 normalize, bit for bit)", applies=lambda out, f, p: out.p < 24,
    acc_formats=FP32_ONLY)(_stored16_normalize)


def _zero_or_tiny_rows(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    x = _last(inputs[0], params.get("dim", 1) % np.ndim(inputs[0]))
    with np.errstate(all="ignore"):
        return bool(np.any(np.sqrt(np.sum(x * x, axis=-1)) < params.get("eps", 1e-12)))


def _nz_bug(name: str, family: str, description: str, observable: Any = True, **kw: Any) -> None:
    _nz(name, family, False, description, observable=observable)(
        lambda inputs, params, acc, out: _normalize(inputs, params, _Calc(acc), **kw))


_nz_bug("no-eps-clamp", "eps", "x / norm without max(., eps): NaN on zero rows", _zero_or_tiny_rows, clamp="none")
_nz_bug("eps-added", "eps", "x / (norm + eps) instead of x / max(norm, eps)", _zero_or_tiny_rows, clamp="add")
_nz_bug("missing-sqrt", "formula-error", "x / max(sum x^2, eps): the square root forgotten", clamp="no-sqrt")
_nz_bug("squared-norm", "formula-error", "x / max(norm, eps)^2", clamp="squared")
_nz("wrong-p", "formula-error", False, "the other norm (p = 1 for p = 2 and p = 2 for p = 1)", observable=True)(
    lambda inputs, params, acc, out: _normalize(inputs, params, _Calc(acc), p=3.0 - params.get("p", 2.0)))
_nz("wrong-dim", "indexing", False, "normalised along the last axis before dim (dim - 1, or the last axis)",
    observable=lambda inputs, params, out: np.ndim(inputs[0]) > 1)(
    lambda inputs, params, acc, out: _normalize(inputs, params, _Calc(acc),
                                                dim=(params.get("dim", 1) - 1) % np.ndim(inputs[0])))


def _long_rows(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    x = np.asarray(inputs[0])
    return x.shape[params.get("dim", 1) % x.ndim] >= 64


_nz("norm-fp16-accumulation", "accumulation-precision", False, "the norm's running sum kept in float16",
    observable=_long_rows)(lambda inputs, params, acc, out: _normalize(inputs, params, _Calc(acc, sum_fmt=_F16)))
_nz("truncation", "truncation", False, "the final rounding toward zero", applies=lambda out, f, p: out.p < 24,
    mode="rtz")(lambda inputs, params, acc, out: _normalize(inputs, params, _Calc(acc)))
_nz("zeros", "zeros", False, "returns zeros", observable=True)(lambda inputs, params, acc, out: np.zeros(np.shape(inputs[0])))


# ---------------------------------------------------------------------------------------------
# cosine_similarity
# ---------------------------------------------------------------------------------------------


def _cosine(inputs: list, params: Mapping[str, Any], c: _Calc, *, form: str = "normalize", dim: int | None = None,
            clamp: str = "max", stored: Format | None = None) -> np.ndarray:
    x1 = np.asarray(inputs[0])
    d = (params.get("dim", 1) if dim is None else dim) % x1.ndim
    eps = params.get("eps", 1e-8)
    w, q = c.w, c.w.q
    a, b = w.load(_last(x1, d)), w.load(_last(inputs[1], d))
    st = (lambda v: f64(finish(v, stored))) if stored is not None else (lambda v: v)
    with np.errstate(all="ignore"):
        if form == "rsqrt":
            r1 = q(1.0 / q(np.sqrt(np.maximum(c.sum(q(a * a)), w.c(eps * eps)))))
            r2 = q(1.0 / q(np.sqrt(np.maximum(c.sum(q(b * b)), w.c(eps * eps)))))
            y = q(q(c.sum(q(a * b)) * r1) * r2)
        elif form == "joint":  # torch 1.x: w12 / sqrt(max(w1 w2, eps^2))
            y = q(c.sum(q(a * b)) / q(np.sqrt(np.maximum(q(c.sum(q(a * a)) * c.sum(q(b * b))), w.c(eps * eps)))))
        else:
            n1, n2 = st(c.norm(a, 2.0)), st(c.norm(b, 2.0))
            if clamp == "max":
                n1, n2 = np.maximum(n1, w.c(eps)), np.maximum(n2, w.c(eps))
            elif clamp == "add":
                n1, n2 = q(n1 + w.c(eps)), q(n2 + w.c(eps))
            elif clamp == "no-sqrt":
                n1 = np.maximum(c.sum(q(a * a)), w.c(eps))
                n2 = np.maximum(c.sum(q(b * b)), w.c(eps))
            y = c.sum(st(q(st(q(a / n1)) * st(q(b / n2)))))
    return y[..., 0]


def _cs(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
        observable: Callable | None = None, acc_formats: tuple | None = None, mode: str = "rne") -> Callable:
    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            return finish(core(inputs, params, acc, out), out, mode)

        variant("cosine_similarity", name, family, legit, description, applies, _obs(observable), acc_formats)(run)
        return core

    return deco


for _name, (_order, _kw) in {"sequential": ("sequential", {}), "pairwise": ("pairwise", {}),
                             "blocked128": ("blocked", {"block": _BLOCK})}.items():
    _cs(_name, "accumulation-order", True, f"normalise-then-dot (torch 2.x), sums {_name} in the working format")(
        lambda inputs, params, acc, out, _o=_order, _k=_kw: _cosine(inputs, params, _Calc(acc, _o, **_k)))
del _name, _order, _kw


@_cs("rsqrt-fused", "formula", True, "w12 * rsqrt(max(w1, eps^2)) * rsqrt(max(w2, eps^2)) (pairwise sums)")
def _cs_rsqrt(inputs, params, acc, out):
    return _cosine(inputs, params, _Calc(acc, "pairwise"), form="rsqrt")


_cs("stored16", "rounding", True, "torch CPU's 16-bit kernel: the norms, the normalised vectors and their products "
    "stored in the 16-bit output type, the sum in fp32 (bit for bit)", applies=lambda out, f, p: out.p < 24,
    acc_formats=FP32_ONLY)(lambda inputs, params, acc, out: _cosine(inputs, params, _Calc(acc, "pairwise"), stored=out))


def _cs_small_rows(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    d = params.get("dim", 1) % np.ndim(inputs[0])
    eps = params.get("eps", 1e-8)
    with np.errstate(all="ignore"):
        return any(bool(np.any(np.sqrt(np.sum(_last(x, d) ** 2, axis=-1)) < eps)) for x in inputs[:2])


def _cs_bug(name: str, family: str, description: str, observable: Any = True, **kw: Any) -> None:
    _cs(name, family, False, description, observable=observable)(
        lambda inputs, params, acc, out: _cosine(inputs, params, _Calc(acc), **kw))


_cs_bug("no-eps-clamp", "eps", "the norms not clamped: NaN on zero rows", _cs_small_rows, clamp="none")
_cs_bug("eps-added", "eps", "x / (norm + eps) instead of the clamp", _cs_small_rows, clamp="add")
_cs_bug("joint-clamp", "eps", "torch 1.x's w12 / sqrt(max(w1 w2, eps^2)) (one clamp of the product)", _cs_small_rows,
        form="joint")
_cs_bug("missing-sqrt", "formula-error", "each vector divided by its squared norm", clamp="no-sqrt")
_cs("wrong-dim", "indexing", False, "reduced along the axis before dim (the last axis for dim 0)",
    observable=lambda inputs, params, out: np.ndim(inputs[0]) > 1)(
    lambda inputs, params, acc, out: _wrong_dim_cos(inputs, params, acc))


def _wrong_dim_cos(inputs: list, params: Mapping[str, Any], acc: Format) -> np.ndarray:
    """The cosine along another axis, brought to the right output shape (the shape bug is not the point)."""
    x1 = np.asarray(inputs[0])
    d = params.get("dim", 1) % x1.ndim
    other = (d - 1) % x1.ndim
    y = _cosine(inputs, params, _Calc(acc), dim=other)  # (dim `other` removed)
    want = tuple(s for i, s in enumerate(x1.shape) if i != d)
    return np.resize(y, want)


def _cs_long(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return np.shape(inputs[0])[params.get("dim", 1) % np.ndim(inputs[0])] >= 64


_cs("norm-fp16-accumulation", "accumulation-precision", False, "the norms' and dot product's running sums in float16",
    observable=_cs_long)(lambda inputs, params, acc, out: _cosine(inputs, params, _Calc(acc, sum_fmt=_F16)))
_cs("truncation", "truncation", False, "the final rounding toward zero", applies=lambda out, f, p: out.p < 24,
    mode="rtz")(lambda inputs, params, acc, out: _cosine(inputs, params, _Calc(acc)))
_cs("zeros", "zeros", False, "returns zeros", observable=True)(
    lambda inputs, params, acc, out: np.zeros(_cos_shape(inputs, params)))


def _cos_shape(inputs: list, params: Mapping[str, Any]) -> tuple:
    x1 = np.asarray(inputs[0])
    d = params.get("dim", 1) % x1.ndim
    return tuple(s for i, s in enumerate(x1.shape) if i != d)


# ---------------------------------------------------------------------------------------------
# the losses
# ---------------------------------------------------------------------------------------------


def _reduce(loss: np.ndarray, params: Mapping[str, Any], c: _Calc, sum_fmt: Format | None = None,
            reduction: str | None = None) -> np.ndarray:
    red = reduction or params.get("reduction", "mean")
    if red == "none":
        return loss
    s = row_sum(loss.reshape(1, -1), sum_fmt or c.w.fmt, c.order, **c.kw)[0, 0] if loss.size else 0.0
    s = c.w.q(np.float64(s))
    return np.asarray(s if red == "sum" else c.w.q(s / loss.size))


def _rows(inputs: list, w: Work, n: int) -> list:
    return [w.load(np.atleast_2d(f64(a))) for a in inputs[:n]]


def _cel_cos(a: np.ndarray, b: np.ndarray, c: _Calc, form: str) -> np.ndarray:
    q, w = c.w.q, c.w
    if form == "norms":  # separate norms, 1e-12 inside each square root
        return q(q(c.sum(q(a * b)) / q(np.sqrt(q(c.sum(q(a * a)) + w.c(1e-12))))) /
                 q(np.sqrt(q(c.sum(q(b * b)) + w.c(1e-12)))))[:, 0]
    if form == "no-sqrt":
        return q(c.sum(q(a * b)) / q(q(c.sum(q(a * a)) + w.c(1e-12)) * q(c.sum(q(b * b)) + w.c(1e-12))))[:, 0]
    return q(c.sum(q(a * b)) / q(np.sqrt(q(q(c.sum(q(a * a)) + w.c(1e-12)) * q(c.sum(q(b * b)) + w.c(1e-12))))))[:, 0]


def _cel(inputs: list, params: Mapping[str, Any], c: _Calc, *, form: str = "torch", margin_sign: float = 1.0,
         clamp: bool = True, axis0: bool = False, reduction: str | None = None, sum_fmt: Format | None = None
         ) -> np.ndarray:
    w, q = c.w, c.w.q
    a, b = _rows(inputs, w, 2)
    t = f64(inputs[2]).reshape(-1)
    if axis0:  # the cosine over the batch axis, broadcast back to the rows
        cos = _cel_cos(a.T, b.T, c, form)
        cos = np.resize(np.resize(cos, (a.shape[1],)).mean(), (a.shape[0],)) * np.ones(a.shape[0])
        cos = q(cos)
    else:
        cos = _cel_cos(a, b, c, form)
    with np.errstate(all="ignore"):
        neg = q(cos - margin_sign * w.c(params.get("margin", 0.0)))
        neg = np.maximum(neg, 0.0) if clamp else neg
        loss = np.where(t == 1, q(1.0 - cos), neg)
    y = _reduce(loss, params, c, sum_fmt, reduction)
    return y.reshape(()) if np.ndim(inputs[0]) == 1 and y.size == 1 else y


def _loss_variant(op: str) -> Callable:
    def reg(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
            observable: Any = None, acc_formats: tuple | None = None, mode: str = "rne") -> Callable:
        def deco(core: Callable) -> Callable:
            def run(inputs, params, out, acc, seed):
                return finish(core(inputs, params, acc, out), out, mode)

            variant(op, name, family, legit, description, applies, _obs(observable), acc_formats)(run)
            return core

        return deco

    return reg


def _is(red: str) -> Callable:
    return lambda out, f, p: p.get("reduction", "mean") == red


def _reduced(out: Format, f: Any, p: Mapping[str, Any]) -> bool:
    return p.get("reduction", "mean") != "none"


_ce = _loss_variant("cosine_embedding_loss")
for _name, (_order, _kw) in {"sequential": ("sequential", {}), "pairwise": ("pairwise", {}),
                             "blocked128": ("blocked", {"block": _BLOCK})}.items():
    _ce(_name, "accumulation-order", True, f"torch's formula, every sum {_name} in the working format")(
        lambda inputs, params, acc, out, _o=_order, _k=_kw: _cel(inputs, params, _Calc(acc, _o, **_k)))
del _name, _order, _kw
_ce("separate-norms", "formula", True, "w12 / sqrt(w1 + 1e-12) / sqrt(w2 + 1e-12)")(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc, "pairwise"), form="norms"))


def _cel_stored16(inputs: list, params: Mapping[str, Any], acc: Format, out: Format) -> np.ndarray:
    """torch CPU's 16-bit cosine_embedding_loss: every tensor op in the 16-bit type (the products, the
    row sums accumulated in ``acc`` and stored, the 1e-12 additions, the product of the squared norms,
    its sqrt, the quotient, 1 - cos and cos - margin), the mean / sum of the stored losses in ``acc``."""
    loss = np.asarray(_cel(inputs, params, _Calc(out, "pairwise", sum_fmt=acc), reduction="none"))
    if params.get("reduction", "mean") == "none":
        return loss
    return _reduce(loss.reshape(-1), params, _Calc(acc, "pairwise"))


def _cel_stored_finite(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """The stored product of the squared norms is finite in ``out``: above its largest value it is inf and
    cos = 0, the documented defect torch-cpu-fp16-cosine-embedding-loss-overflow, not stored16 arithmetic."""
    a, b = (np.atleast_2d(f64(x)) for x in inputs[:2])
    with np.errstate(all="ignore"):
        return bool(np.all(np.sum(a * a, -1) * np.sum(b * b, -1) < 0.99 * out.max_finite))


_ce("stored16", "rounding", True, "torch CPU's 16-bit kernel: the products, row sums, squared norms, their product, "
    "sqrt, quotient and the losses stored in the 16-bit output type, the mean in fp32: evidence for the stored16 "
    "standards only, on inputs whose stored product of the squared norms is finite", applies=lambda out, f, p: out.p < 24,
    observable=_cel_stored_finite, acc_formats=FP32_ONLY)(_cel_stored16)


def _has_neg_active(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    a, b = (np.atleast_2d(f64(x)) for x in inputs[:2])
    cos = np.sum(a * b, -1) / np.sqrt(np.sum(a * a, -1) * np.sum(b * b, -1) + 1e-300)
    t = f64(inputs[2]).reshape(-1)
    return bool(np.any((t == -1) & (cos < params.get("margin", 0.0)))) and params.get("margin", 0.0) != 0


_ce("margin-sign", "formula-error", False, "cos + margin instead of cos - margin", observable=_has_neg_active)(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc), margin_sign=-1.0))


def _neg_inactive(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    a, b = (np.atleast_2d(f64(x)) for x in inputs[:2])
    cos = np.sum(a * b, -1) / np.sqrt(np.sum(a * a, -1) * np.sum(b * b, -1) + 1e-300)
    t = f64(inputs[2]).reshape(-1)
    return bool(np.any((t == -1) & (cos < params.get("margin", 0.0) - 1e-3)))


_ce("missing-clamp", "missing-branch", False, "cos - margin without max(0, .)", observable=_neg_inactive)(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc), clamp=False))
_ce("wrong-axis", "indexing", False, "the cosine taken over the batch axis (dim 0) instead of each row",
    observable=lambda i, p, o: np.ndim(i[0]) == 2 and np.shape(i[0])[0] > 1)(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc), axis0=True))
_ce("missing-sqrt", "formula-error", False, "w12 / ((w1 + 1e-12)(w2 + 1e-12)): the square root forgotten", observable=True)(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc), form="no-sqrt"))
_ce("sum-not-mean", "scale", False, "reduction='mean' returning the sum", applies=_is("mean"),
    observable=lambda i, p, o: np.ndim(i[0]) == 2 and np.shape(i[0])[0] > 1)(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc), reduction="sum"))
_ce("acc-bf16", "accumulation-precision", False, "the row sums kept in bfloat16", applies=lambda o, f, p: o.name != "bfloat16",
    observable=lambda i, p, o: np.shape(i[0])[-1] >= 64)(
    lambda inputs, params, acc, out: _cel(inputs, params, _Calc(acc, sum_fmt=_BF16)))
_ce("zeros", "zeros", False, "returns zeros", observable=True)(
    lambda inputs, params, acc, out: np.zeros(np.shape(inputs[2])) if params.get("reduction", "mean") == "none"
    else np.asarray(0.0))


def _triplet(inputs: list, params: Mapping[str, Any], c: _Calc, *, order: str = "diff-first", swap: bool | None = None,
             margin_sign: float = 1.0, clamp: bool = True, p: float | None = None, add: bool = False,
             reduction: str | None = None, sum_fmt: Format | None = None, stored: Format | None = None) -> np.ndarray:
    w = c.w
    q = w.q if stored is None else (lambda v: f64(finish(w.q(v), stored)))  # (stored: every intermediate in 16 bits)
    a, pos, neg = _rows(inputs, w, 3)
    p = params.get("p", 2.0) if p is None else p
    eps = w.c(params.get("eps", 1e-6))

    def dist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            if add:
                t = q(q(x + y) + eps)
            elif order == "diff-first":
                t = q(q(x - y) + eps)
            else:
                t = q(q(x + eps) - y)
            return q(c.norm(t, p)[:, 0])

    d_pos, d_neg = dist(a, pos), dist(a, neg)
    if params.get("swap", False) if swap is None else swap:
        d_neg = np.minimum(d_neg, dist(pos, neg))
    with np.errstate(all="ignore"):
        l = q(q(margin_sign * w.c(params.get("margin", 1.0)) + d_pos) - d_neg)
        loss = np.maximum(l, 0.0) if clamp else l
    y = _reduce(loss, params, c, sum_fmt, reduction)
    return y.reshape(()) if np.ndim(inputs[0]) == 1 and y.size == 1 else y


_tr = _loss_variant("triplet_margin_loss")
for _name, (_order, _kw) in {"sequential": ("sequential", {}), "pairwise": ("pairwise", {}),
                             "blocked128": ("blocked", {"block": _BLOCK})}.items():
    _tr(_name, "accumulation-order", True, f"fl(fl(x - y) + eps), norms and losses summed {_name}")(
        lambda inputs, params, acc, out, _o=_order, _k=_kw: _triplet(inputs, params, _Calc(acc, _o, **_k)))
del _name, _order, _kw
_tr("stored16", "rounding", True, "torch CPU's 16-bit kernel: a - b, a - b + eps, both distances and the two "
    "additions stored in the 16-bit output type, the mean in fp32 (bit for bit)", applies=lambda out, f, p: out.p < 24,
    acc_formats=FP32_ONLY)(lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc, "pairwise"), stored=out))
_tr("eps-first", "formula", True, "fl(fl(x + eps) - y): the other order of pairwise_distance's two additions")(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc, "pairwise"), order="eps-first"))


def _dists(inputs: list, params: Mapping[str, Any]) -> tuple:
    a, pos, neg = (np.atleast_2d(f64(x)) for x in inputs[:3])
    p, eps = params.get("p", 2.0), params.get("eps", 1e-6)
    dist = (lambda x, y: np.sum(np.abs(x - y + eps) ** p, -1) ** (1 / p))
    return dist(a, pos), dist(a, neg), dist(pos, neg)


def _swap_matters(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    dp, dn, ds = _dists(inputs, params)
    m = params.get("margin", 1.0)
    return bool(params.get("swap", False)) and bool(np.any((ds < dn - 1e-3) & (m + dp - ds > 0)))


def _inactive(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    dp, dn, ds = _dists(inputs, params)
    dn = np.minimum(dn, ds) if params.get("swap", False) else dn
    return bool(np.any(params.get("margin", 1.0) + dp - dn < -1e-3))


_tr("swap-ignored", "formula-error", False, "swap=True computed as swap=False", observable=_swap_matters)(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc), swap=False))
_tr("margin-sign", "formula-error", False, "-margin + d_pos - d_neg", observable=True)(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc), margin_sign=-1.0))
_tr("missing-clamp", "missing-branch", False, "margin + d_pos - d_neg without max(0, .)", observable=_inactive)(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc), clamp=False))
_tr("wrong-p", "formula-error", False, "the L1 distance for p = 2 (L2 for any other p)", observable=True)(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc), p=1.0 if params.get("p", 2.0) == 2.0 else 2.0))
_tr("norm-of-sum", "formula-error", False, "||x + y + eps||_p: the norm of the sum instead of the difference",
    observable=True)(lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc), add=True))
_tr("sum-not-mean", "scale", False, "reduction='mean' returning the sum", applies=_is("mean"),
    observable=lambda i, p, o: np.ndim(i[0]) == 2 and np.shape(i[0])[0] > 1)(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc), reduction="sum"))
_tr("norm-fp16-accumulation", "accumulation-precision", False, "the distances' running sums kept in float16",
    observable=lambda i, p, o: np.shape(i[0])[-1] >= 64)(
    lambda inputs, params, acc, out: _triplet(inputs, params, _Calc(acc, sum_fmt=_F16)))
_tr("zeros", "zeros", False, "returns zeros", observable=True)(
    lambda inputs, params, acc, out: np.zeros(np.shape(inputs[0])[:1]) if params.get("reduction", "mean") == "none"
    and np.ndim(inputs[0]) == 2 else np.asarray(0.0))


# ---------------------------------------------------------------------------------------------
# XLA CPU's 16-bit arithmetic (the arith16 policy)
# ---------------------------------------------------------------------------------------------

_F32 = np.float32


def _xla_recip(x: np.ndarray, p: float, eps: float, w: Work) -> np.ndarray:
    """XLA CPU's ``1 / max(||x||_p, eps)`` of 16-bit rows ``x`` (last axis; jax 0.10.2, compiled HLO):
    the terms ``x²`` (p = 2; exact in fp32 for bf16, ``RN16(x·x)`` for fp16, which keeps fp16
    elementwise ops in fp16) or ``|x|`` summed in fp32 (YNNPACK's reduce), the sum stored
    ``s16 = RN16(s)``, ``n = RN16(sqrt(s16))`` (p = 2), ``den = max(n, RN16(eps))``, then the
    reciprocal ``RN32(1/den)`` (bf16: upcast between the roundings XLA keeps) or ``RN16(1/den)`` (fp16)."""
    fp16 = w.fmt.name == "float16"
    xf = np.asarray(x, dtype=_F32)
    t = xf * xf if p == 2.0 else np.abs(xf)
    if fp16:
        t = w.q(t)
    s16 = w.q(np.sum(np.asarray(t, dtype=_F32), axis=-1, keepdims=True, dtype=_F32))
    n = w.q(np.sqrt(np.asarray(s16, dtype=_F32))) if p == 2.0 else s16
    den = np.maximum(np.asarray(n, dtype=_F32), _F32(w.c(eps)))
    r = _F32(1.0) / den
    return w.q(r) if fp16 else r


def xla_normalize16(x: np.ndarray, p: float, eps: float, w: Work, last: Work | None = None) -> np.ndarray:
    """XLA CPU's 16-bit ``x / max(||x||_p, eps)`` (``jnp``: numstd.backends.similarity), rows last:
    ``RN16(x · r)`` with :func:`_xla_recip`'s ``r`` (XLA rewrites the division by the broadcast norm
    into a multiply by its reciprocal).  Bit for bit jax 0.10.2 on CPU (tests/test_arith16_sim.py).
    ``last``: the arithmetic of that final rounding (the bug ``xla-truncation``: RTZ)."""
    return (last or w).q(np.asarray(x, dtype=_F32) * _xla_recip(x, p, eps, w))


#: the input size from which XLA CPU (jax 0.10.2) hands a reduce to YNNPACK (``__ynn_fusion``, compiled HLO:
#: 4095 elements stay an XLA loop fusion, 4096 go to YNNPACK; a reduced axis of length 1 never does)
YNN_MIN_SIZE = 4096


def xla_cosine16(a: np.ndarray, b: np.ndarray, eps: float, w: Work, size: int | None = None,
                 last: Work | None = None) -> np.ndarray:
    """XLA CPU's 16-bit cosine_similarity (normalise-then-dot), rows last: ``x̂ = x · r`` per vector
    (:func:`xla_normalize16`'s ``r``), the products ``x̂1·x̂2`` summed in fp32 and rounded once to the
    16-bit type.  fp16: ``x̂ = RN16(x·r)`` and the products ``RN16`` (XLA keeps fp16 elementwise ops in
    fp16).  bf16: the products are formed in fp32 inside the reduce's fusion; there the HLO rounds
    ``x̂`` to bf16 (convert pair), which XLA's own loop fusion does (inputs of fewer than
    :data:`YNN_MIN_SIZE` elements, ``size``) and YNNPACK's fused reduce does not (larger inputs:
    ``x̂`` stays fp32, measured bit for bit).  Bit for bit jax 0.10.2 on CPU (tests/test_arith16_sim.py)."""
    size = a.size if size is None else size
    if w.fmt.name == "float16" or size < YNN_MIN_SIZE or a.shape[-1] <= 1:
        h1, h2 = xla_normalize16(a, 2.0, eps, w), xla_normalize16(b, 2.0, eps, w)
    else:
        h1 = np.asarray(a, dtype=_F32) * _xla_recip(a, 2.0, eps, w)
        h2 = np.asarray(b, dtype=_F32) * _xla_recip(b, 2.0, eps, w)
    prod = np.asarray(h1, dtype=_F32) * np.asarray(h2, dtype=_F32)
    if w.fmt.name == "float16":
        prod = w.q(prod)
    return (last or w).q(np.sum(np.asarray(prod, dtype=_F32), axis=-1, dtype=_F32))


def _nz_xla(mode: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        x0 = np.asarray(inputs[0])
        d = params.get("dim", 1) % x0.ndim
        w = Work(acc)
        with np.errstate(all="ignore"):
            y = xla_normalize16(w.load(_last(x0, d)), params.get("p", 2.0), params.get("eps", 1e-12), w,
                                Work(acc, mode))
        return finish(np.moveaxis(f64(y), -1, d), out)

    return run


def _cs_xla(mode: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        x1 = np.asarray(inputs[0])
        d = params.get("dim", 1) % x1.ndim
        w = Work(acc)
        with np.errstate(all="ignore"):
            y = xla_cosine16(w.load(_last(x1, d)), w.load(_last(inputs[1], d)), params.get("eps", 1e-8), w,
                             size=x1.size, last=Work(acc, mode))
        return finish(f64(y), out)

    return run


variant("normalize", "xla-arith16", "library", True,
        "XLA CPU's 16-bit normalize (jax 0.10.2): the terms x² (fp16: RN16(x·x)) or |x| summed in fp32, the sum "
        "stored in 16 bits, RN16(sqrt), max with RN16(eps), the reciprocal (bf16 RN32, fp16 RN16), RN16(x · r); "
        "16-bit arithmetic only", acc_formats=ARITH16)(_nz_xla("rne"))
variant("normalize", "xla-truncation", "truncation", False,
        "XLA CPU's 16-bit normalize with its last rounding, RN16(x · r), toward zero (16-bit arithmetic only: "
        "the arith16 standards' truncation bug)", acc_formats=ARITH16, observable=_obs(True))(_nz_xla("rtz"))
variant("cosine_similarity", "xla-arith16", "library", True,
        "XLA CPU's 16-bit cosine_similarity (jax 0.10.2): each vector normalised as XLA's 16-bit normalize "
        "(bf16: x · r kept in fp32 inside YNNPACK's fused reduce, inputs of 4096 elements or more), the products "
        "(fp16: RN16) summed in fp32, rounded once to 16 bits; 16-bit arithmetic only",
        acc_formats=ARITH16)(_cs_xla("rne"))
variant("cosine_similarity", "xla-truncation", "truncation", False,
        "XLA CPU's 16-bit cosine_similarity with its last rounding (the fp32 sum to 16 bits) toward zero "
        "(16-bit arithmetic only: the arith16 standards' truncation bug)", acc_formats=ARITH16,
        observable=_obs(True))(_cs_xla("rtz"))


def _xla_reduce(loss: np.ndarray, reduction: str, w: Work, last: Work | None = None) -> np.ndarray:
    """XLA CPU's mean / sum of 16-bit losses: accumulated in fp32 (reduce-window blocks of 32, then their
    sum), the mean as the sum times ``RN32(1/N)``, one rounding to the 16-bit type (``last``: its mode)."""
    if reduction == "none":
        return loss
    s = np.sum(np.asarray(loss, dtype=_F32).reshape(-1), dtype=_F32)
    if reduction == "mean":
        s = _F32(s * _F32(1.0 / max(loss.size, 1)))
    return (last or w).q(np.asarray(s, dtype=_F32))


def xla_cel16(a: np.ndarray, b: np.ndarray, t: np.ndarray, margin: float, reduction: str, w: Work,
              last: Work | None = None) -> np.ndarray:
    """XLA CPU's 16-bit cosine_embedding_loss (numstd.backends.similarity's jnp formula, jax 0.10.2, compiled
    HLO), rows ``(N, D)``: the products ``x1·x2``, ``x1²``, ``x2²`` (exact in fp32 for bf16, ``RN16`` for fp16)
    summed in fp32 and stored in 16 bits; ``m = RN16(s + RN16(1e-12))`` (in fp16 the constant is 0 and the
    addition is folded away); ``q = RN16(m1·m2)``; bf16 ``cos = RN16(w12 / RN16(sqrt q))``, fp16
    ``cos = RN16(w12 · RN16(rsqrt q))`` (XLA rewrites the division by the square root); the losses
    ``RN16(1 − cos)`` and ``max(RN16(cos + RN16(−margin)), 0)``; the mean or sum of :func:`_xla_reduce`."""
    fp16 = w.fmt.name == "float16"
    af, bf = np.asarray(a, dtype=_F32), np.asarray(b, dtype=_F32)

    def rowsum(t_: np.ndarray) -> np.ndarray:
        return w.q(np.sum(np.asarray(w.q(t_) if fp16 else t_, dtype=_F32), axis=-1, dtype=_F32))

    w12, s1, s2 = rowsum(af * bf), rowsum(af * af), rowsum(bf * bf)
    e = _F32(w.c(1e-12))
    m1, m2 = w.q(np.asarray(s1, dtype=_F32) + e), w.q(np.asarray(s2, dtype=_F32) + e)
    q = np.asarray(w.q(np.asarray(m1, dtype=_F32) * np.asarray(m2, dtype=_F32)), dtype=_F32)
    if fp16:
        cos = w.q(np.asarray(w12, dtype=_F32) * np.asarray(w.q(_F32(1.0) / np.sqrt(q)), dtype=_F32))
    else:
        cos = w.q(np.asarray(w12, dtype=_F32) / np.asarray(w.q(np.sqrt(q)), dtype=_F32))
    cos = np.asarray(cos, dtype=_F32)
    l1 = w.q(_F32(1.0) - cos)
    ln = np.maximum(np.asarray(w.q(cos + _F32(w.c(-margin))), dtype=_F32), _F32(0.0))
    loss = np.where(np.asarray(t).reshape(-1) == 1, l1, ln)
    return _xla_reduce(loss, reduction, w, last)


def _xla_loss(n: int, loss: Callable) -> Callable:
    """``mode`` -> a corpus run of XLA's 16-bit loss ``loss(rows, inputs, params, w, last)`` on the first ``n``
    inputs loaded as 2-D rows, its last rounding in ``mode`` (``"rtz"``: the xla-truncation bug); a scalar
    loss of 1-D inputs keeps its 0-D shape."""
    def of_mode(mode: str) -> Callable:
        def run(inputs, params, out, acc, seed):
            w = Work(acc)
            rows = [w.load(np.atleast_2d(f64(x))) for x in inputs[:n]]
            with np.errstate(all="ignore"):
                y = f64(loss(rows, inputs, params, w, Work(acc, mode)))
            return finish(y.reshape(()) if np.ndim(inputs[0]) == 1 and y.size == 1 else y, out)

        return run

    return of_mode


_ce_xla = _xla_loss(2, lambda rows, inputs, params, w, last: xla_cel16(
    *rows, f64(inputs[2]), params.get("margin", 0.0), params.get("reduction", "mean"), w, last))


variant("cosine_embedding_loss", "xla-arith16", "library", True,
        "XLA CPU's 16-bit cosine_embedding_loss (jax 0.10.2): fp32 row sums of the products (fp16: RN16) stored in "
        "16 bits, RN16 of every elementwise step (bf16 w12 / sqrt, fp16 w12 · rsqrt), the losses summed in fp32; "
        "16-bit arithmetic only", acc_formats=ARITH16)(_ce_xla("rne"))
variant("cosine_embedding_loss", "xla-truncation", "truncation", False,
        "XLA CPU's 16-bit cosine_embedding_loss with its last rounding toward zero (16-bit arithmetic only)",
        acc_formats=ARITH16, observable=_obs(True))(_ce_xla("rtz"))


def xla_triplet16(a: np.ndarray, pos: np.ndarray, neg: np.ndarray, margin: float, p: float, eps: float, swap: bool,
                  reduction: str, w: Work, size: int | None = None, last: Work | None = None) -> np.ndarray:
    """XLA CPU's 16-bit triplet_margin_loss (numstd.backends.similarity's jnp formula, jax 0.10.2, compiled HLO),
    rows ``(N, D)``: ``t = RN16(RN16(x − y) + RN16(eps))`` and its ``t²`` (p = 2; fp16 ``RN16``, bf16 exact in
    fp32) or ``|t|`` summed in fp32, stored in 16 bits, ``d = RN16(sqrt)``; ``RN16(RN16(margin + d_pos) −
    d_neg)`` (``swap``: ``d_neg = min(d_neg, d_swap)``), ``max(·, 0)``, the mean or sum of :func:`_xla_reduce`.
    bf16 inputs of :data:`YNN_MIN_SIZE` elements or more (``size``): ``t`` and ``t²`` are formed inside
    YNNPACK's fused reduce, which keeps them in fp32 (the HLO's convert pairs are not applied, measured)."""
    fp16 = w.fmt.name == "float16"
    size = a.size if size is None else size
    keep = fp16 or size < YNN_MIN_SIZE or a.shape[-1] <= 1
    qe = w.q if keep else (lambda v: np.asarray(v, dtype=_F32))
    e = _F32(w.c(eps))

    def dist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        t = np.asarray(qe(np.asarray(qe(np.asarray(x, dtype=_F32) - np.asarray(y, dtype=_F32)), dtype=_F32) + e),
                       dtype=_F32)
        if p == 2.0:
            terms = t * t
        elif p == 1.0:
            terms = np.abs(t)
        else:
            terms = np.abs(t) ** _F32(p)
        if fp16:
            terms = w.q(terms)
        s16 = np.asarray(w.q(np.sum(np.asarray(terms, dtype=_F32), axis=-1, dtype=_F32)), dtype=_F32)
        if p == 2.0:
            return np.asarray(w.q(np.sqrt(s16)), dtype=_F32)
        if p == 1.0:
            return s16
        return np.asarray(w.q(s16 ** _F32(w.c(1.0 / p))), dtype=_F32)

    d_pos, d_neg = dist(a, pos), dist(a, neg)
    if swap:
        d_neg = np.minimum(d_neg, dist(pos, neg))
    first = np.asarray(w.q(_F32(w.c(margin)) + d_pos), dtype=_F32)
    loss = np.maximum(np.asarray(w.q(first - d_neg), dtype=_F32), _F32(0.0))
    return _xla_reduce(loss, reduction, w, last)


_tr_xla = _xla_loss(3, lambda rows, inputs, params, w, last: xla_triplet16(
    *rows, params.get("margin", 1.0), params.get("p", 2.0), params.get("eps", 1e-6), bool(params.get("swap", False)),
    params.get("reduction", "mean"), w, size=np.size(inputs[0]), last=last))


variant("triplet_margin_loss", "xla-arith16", "library", True,
        "XLA CPU's 16-bit triplet_margin_loss (jax 0.10.2): RN16(RN16(x − y) + eps) (bf16: fp32 inside YNNPACK's "
        "fused reduce from 4096 input elements), the p-th powers (fp16: RN16) summed in fp32 and stored in 16 bits, "
        "RN16 of the root, the margin and the difference, the losses summed in fp32; 16-bit arithmetic only",
        acc_formats=ARITH16)(_tr_xla("rne"))
variant("triplet_margin_loss", "xla-truncation", "truncation", False,
        "XLA CPU's 16-bit triplet_margin_loss with its last rounding toward zero (16-bit arithmetic only)",
        acc_formats=ARITH16, observable=_obs(True))(_tr_xla("rtz"))


# ---------------------------------------------------------------------------------------------
# torch CPU (default threads and one thread)
# ---------------------------------------------------------------------------------------------


def _torch_run(op: str, threads: int | None) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch
        import torch.nn.functional as F

        from ..ops import get_op

        call = get_op(op).calls["torch"]
        fn = getattr(F, call.fn.rpartition(".")[2])
        args = [to_torch(np.asarray(a)) for a in inputs]
        old = torch.get_num_threads()
        try:
            if threads is not None:
                torch.set_num_threads(threads)
            with torch.no_grad():
                y = fn(*args, **call.arguments(params))
        finally:
            if threads is not None:
                torch.set_num_threads(old)
        return finish(from_torch(y), out)

    return run


def _numpy_run(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        from ..backends.base import framework_call

        args = [np.asarray(f64(a), dtype=np.float32) for a in inputs]
        with np.errstate(all="ignore"):
            return finish(f64(framework_call(op, "numpy")(args, params)), out)

    return run


for _op in ("normalize", "cosine_similarity", "cosine_embedding_loss", "triplet_margin_loss"):
    variant(_op, "torch-cpu", "library", True, f"torch.nn.functional.{_op} on CPU in the inputs' dtype",
            torch_same_format, acc_formats=FP32_ONLY)(_torch_run(_op, None))
    variant(_op, "numpy", "library", True, "numpy on float32 arrays (numstd.backends.similarity)",
            acc_formats=FP32_ONLY)(_numpy_run(_op))
del _op

#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"sum-not-mean": "scale"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
