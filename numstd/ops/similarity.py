"""Similarity: ``normalize``, ``cosine_similarity``, ``cosine_embedding_loss`` and ``triplet_margin_loss``.

numpy has none of these ops, so their parameters carry ``torch.nn.functional``'s names (``p``,
``dim``, ``eps``, ``margin``, ``swap``, ``reduction``; DESIGN.md's naming convention) and their
semantics are torch 2.13's:

- ``normalize(input, p=2.0, dim=1, eps=1e-12)``: ``y = x / max(||x||_p, eps)`` along ``dim``
  (torch.nn.functional.normalize: ``input.norm(p, dim, keepdim=True).clamp_min(eps)``), p = 1 or 2.
- ``cosine_similarity(x1, x2, dim=1, eps=1e-8)``: ``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))``
  along ``dim``: torch >= 2.0 clamps each norm separately (``aten/src/ATen/native/Distance.cpp``,
  ``x1_norm.clamp_min_(eps); x2_norm.clamp_min_(eps)``; torch 1.x divided by
  ``sqrt(max(w1 w2, eps^2))``): measured on torch 2.13,
  ``F.cosine_similarity([[1e-3, 0]], [[10, 0]], dim=1, eps=1e-2) = 0.1`` (the joint clamp gives 1).
- ``cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean")``: per row
  ``cos = sum(x1 x2) / sqrt((sum x1^2 + 1e-12) (sum x2^2 + 1e-12))`` (torch's ``EPSILON = 1e-12``
  added to the squared norms, ``aten/src/ATen/native/Loss.cpp``), ``1 - cos`` where the target is 1,
  ``max(0, cos - margin)`` where it is -1; inputs ``(N, D)`` or ``(D,)``, target ``(N,)`` or ``()``.
- ``triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
  reduction="mean")``: ``max(0, margin + d(a, p) - d(a, n))`` with ``pairwise_distance``'s
  ``d(x, y) = ||x - y + eps||_p`` over the last axis (eps added to the *difference*); ``swap``
  replaces ``d(a, n)`` by ``min(d(a, n), d(p, n))``.

Reference: :mod:`numstd.reference.similarity`; variants: :mod:`numstd.corpus.similarity`;
framework formulas: :mod:`numstd.backends.similarity`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import ParameterError, ShapeError
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES", "SIMILARITY_OPS", "reduced_dim", "suite_inputs"]

#: the ops of this family
SIMILARITY_OPS: tuple[str, ...] = ("normalize", "cosine_similarity", "cosine_embedding_loss", "triplet_margin_loss")


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def reduced_dim(op: str, dim: Any, ndim: int) -> int:
    """``dim`` as a non-negative axis of an ``ndim``-dimensional input; a ParameterError otherwise."""
    if not isinstance(dim, numbers.Integral) or isinstance(dim, (bool, np.bool_)):
        raise ParameterError(f"{op}: dim must be an int, got {dim!r}; the default is 1 (torch.nn.functional's name: "
                             "numpy has no such op)")
    d = int(dim)
    if ndim == 0 or not -ndim <= d < ndim:
        raise ParameterError(f"{op}: dim {d} is out of range for an input with {ndim} dimension(s); use a dim in "
                             f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}]")
    return d % ndim


def _norm_p(op: str, value: Any) -> float:
    if not _is_real(value) or float(value) not in (1.0, 2.0):
        raise ParameterError(f"{op}: p must be 1 or 2 (the L1 or L2 norm), got {value!r}; the default is 2.0")
    return float(value)


def _triplet_p(op: str, value: Any) -> float:
    if not _is_real(value) or not math.isfinite(float(value)) or float(value) < 1.0:
        raise ParameterError(f"{op}: p must be a finite real number >= 1 (a norm's order), got {value!r}; "
                             "the default is 2.0")
    return float(value)


def _finite(name: str, default: str) -> Any:
    def check(op: str, value: Any) -> float:
        if not _is_real(value) or not math.isfinite(float(value)):
            raise ParameterError(f"{op}: {name} must be a finite real number, got {value!r}; the default is {default}")
        return float(value)

    return check


def _positive_margin(op: str, value: Any) -> float:
    if not _is_real(value) or not math.isfinite(float(value)) or float(value) <= 0:
        raise ParameterError(f"{op}: margin must be a finite real number > 0 (torch rejects margin <= 0), got "
                             f"{value!r}; the default is 1.0")
    return float(value)


def _swap(op: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{op}: swap must be True or False, got {value!r}; the default is False")
    return bool(value)


def _normalize_stored(values: np.ndarray, aux: Mapping[str, Any], fmt: Any) -> np.ndarray:
    """normalize with its norm stored in ``fmt``: ``y·n/RN(n)`` (torch.nn.functional.normalize,
    ``torch/nn/functional.py``: ``denom = input.norm(p, dim, keepdim=True).clamp_min(eps)``, a tensor
    of the input's 16-bit dtype, then ``input / denom``)."""
    from ..core.formats import round_to

    den = np.asarray(aux["den"], dtype=np.float64)
    with np.errstate(all="ignore"):
        return values * (den / np.asarray(round_to(den, fmt), dtype=np.float64))


def _normalize_xla16(values: np.ndarray, aux: Mapping[str, Any], fmt: Any) -> np.ndarray:
    """normalize with XLA CPU's 16-bit roundings of the row's shared values (numstd.corpus.similarity's
    xla-arith16), from the exact sum ``s`` (``den²`` for p = 2, ``den`` for p = 1, where the norm wins the
    clamp): ``den16 = max(RN16(sqrt(RN16(s))), RN16(eps))``, ``r = RN(1/den16)`` (fp16: RN16, bf16: fp32),
    ``y·den·r``."""
    from ..core.formats import FORMATS, round_to

    def rn(v: Any, f: Any) -> np.ndarray:
        return np.asarray(round_to(np.asarray(v, dtype=np.float64), f), dtype=np.float64)

    den = np.asarray(aux["den"], dtype=np.float64)
    p, eps = float(np.asarray(aux["p"])), float(np.asarray(aux["eps"]))
    with np.errstate(all="ignore"):
        s16 = rn(den * den if p == 2.0 else den, fmt)
        n16 = rn(np.sqrt(s16), fmt) if p == 2.0 else s16
        e16 = float(rn(eps, fmt))
        den16 = np.where(den > eps, np.maximum(n16, e16), e16)
        r = rn(1.0 / den16, fmt if fmt.name == "float16" else FORMATS["float32"])
        return values * (den * r)


def _normalize_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    reduced_dim(spec.name, p["dim"], a[0].ndim)
    return tuple(a[0].shape)


def _cosine_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x1, x2 = a
    if x1.shape != x2.shape:
        raise ShapeError(f"cosine_similarity: x2 has shape {x2.shape}, x1 {x1.shape}; they must be equal (torch "
                         "broadcasts them: broadcast explicitly, e.g. np.broadcast_to(x2, x1.shape))")
    d = reduced_dim(spec.name, p["dim"], x1.ndim)
    return tuple(s for i, s in enumerate(x1.shape) if i != d)


def _rows_of_pair(op: str, names: tuple[str, ...], arrays: list) -> None:
    first = arrays[0]
    if first.ndim not in (1, 2):
        raise ShapeError(f"{op}: {names[0]} has shape {first.shape}; it must be (N, D) or (D,)")
    for name, arr in zip(names[1:], arrays[1:]):
        if arr.shape != first.shape:
            raise ShapeError(f"{op}: {name} has shape {arr.shape}, {names[0]} {first.shape}; they must be equal")
    if first.shape[-1] == 0:
        raise ShapeError(f"{op}: {names[0]} has shape {first.shape}; the vectors need at least one element (D >= 1)")


def _loss_out(op: str, n: int, batched: bool, reduction: str) -> tuple[int, ...]:
    if reduction == "mean" and n == 0:
        raise ShapeError(f"{op}: reduction='mean' of 0 rows is undefined; pass at least one row or use reduction='sum'")
    return (n,) if reduction == "none" and batched else ()


def _cel_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x1, x2, t = a
    _rows_of_pair(spec.name, ("input1", "input2"), [x1, x2])
    want = x1.shape[:1] if x1.ndim == 2 else ()
    if t.shape != want:
        raise ShapeError(f"cosine_embedding_loss: target has shape {t.shape}; it must be {want}, one label per row "
                         f"of input1 {x1.shape}")
    if t.size and not np.all((t == 1) | (t == -1)):
        raise ShapeError("cosine_embedding_loss: target must hold only 1 and -1 (torch returns 0 for any other value)")
    return _loss_out(spec.name, x1.shape[0] if x1.ndim == 2 else 1, x1.ndim == 2, p["reduction"])


def _triplet_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    _rows_of_pair(spec.name, ("anchor", "positive", "negative"), a)
    x = a[0]
    return _loss_out(spec.name, x.shape[0] if x.ndim == 2 else 1, x.ndim == 2, p["reduction"])


def suite_inputs(op: str, rng: np.random.Generator, shape: tuple, distribution: str,
                 draw: Callable[[tuple, str], np.ndarray], q: Callable[[np.ndarray, int], np.ndarray],
                 params: Mapping[str, Any]) -> list:
    """A suite case's inputs (:func:`numstd.catalog.suites.make_case`): ``draw(shape, dist)`` float64 values,
    ``q(x, i)`` rounded into input ``i``'s format.

    normalize, cosine_similarity: the reduced vectors (along ``dim``) of ``x`` (and ``x2 = rho x1 + noise``
    with ``rho`` per vector from {0, +-0.3, +-3, +-30}: cosines near 0, in between and near +-1); one
    vector in 8 scaled by 1e-4 (its norm below the suite's ``eps``: the clamp) and the first one zero.
    cosine_embedding_loss: rows of ``(N, D)`` the same way, targets +-1 with equal odds.
    triplet_margin_loss: ``positive = anchor + noise``, ``negative = anchor + noise'`` on half the rows and
    ``positive + 0.5 noise'`` on the others (where ``swap`` changes the distance).
    """
    shape = tuple(shape)
    if op in ("normalize", "cosine_similarity"):
        dim = reduced_dim(op, params.get("dim", 1), len(shape))
        vec = tuple(1 if i == dim else s for i, s in enumerate(shape))  # one factor per reduced vector
        scale = np.where(rng.random(vec) < 0.125, 1e-4, 1.0)
        scale.reshape(-1)[0] = 0.0
        x1 = draw(shape, distribution)
        if op == "normalize":
            return [q(x1 * scale, 0)]
        rho = rng.choice(np.array([0.0, 0.3, -0.3, 3.0, -3.0, 30.0, -30.0]), size=vec)
        x2 = rho * x1 + draw(shape, distribution)
        return [q(x1 * scale, 0), q(x2 * scale, 1)]
    n = shape[0] if len(shape) == 2 else 1
    rows = (n, 1) if len(shape) == 2 else ()
    if op == "cosine_embedding_loss":
        x1 = draw(shape, distribution)
        rho = rng.choice(np.array([0.0, 0.3, -0.3, 3.0, -3.0, 30.0, -30.0]), size=rows)
        x2 = rho * x1 + draw(shape, distribution)
        t = rng.choice([-1.0, 1.0], size=shape[:1] if len(shape) == 2 else ())
        return [q(x1, 0), q(x2, 1), q(np.asarray(t), 2)]
    a = draw(shape, distribution)
    pos = a + draw(shape, distribution)
    near = rng.random(rows) < 0.5
    noise = draw(shape, distribution)
    neg = np.where(near, pos + 0.5 * noise, a + noise)
    return [q(a, 0), q(pos, 1), q(neg, 2)]


_SIM = "numstd.backends.similarity"

ENTRIES: tuple[OpInfo, ...] = (
    entry("normalize", "normalization", ("input",), 0, {"p": 2.0, "dim": 1, "eps": 1e-12}, (
        "y = x / max(||x||_p, eps) along dim (torch.nn.functional.normalize), p = 1 or 2; output of input's shape."
    ),
          shape=_normalize_shape, reference="similarity:normalize", corpus="similarity", terms=("K", "den"),
          param_checks={"p": _norm_p}, stored=_normalize_stored, stored16_arith=_normalize_xla16,
          calls={"torch": Call("torch.nn.functional.normalize", {"p": "p", "dim": "dim", "eps": "eps"}),
                 "jax": Call(f"{_SIM}.normalize_jnp", {"p": "p", "dim": "dim", "eps": "eps"}),
                 "numpy": Call(f"{_SIM}.normalize_np", {"p": "p", "dim": "dim", "eps": "eps"})}),
    entry("cosine_similarity", "reduction", ("x1", "x2"), 0, {"dim": 1, "eps": 1e-8}, (
        "sum(x1 / max(||x1||_2, eps) * x2 / max(||x2||_2, eps)) along dim (torch.nn.functional.cosine_similarity, "
        "torch >= 2.0: each norm clamped separately); x1 and x2 of one shape, dim removed."
    ),
          shape=_cosine_shape, reference="similarity:cosine_similarity", corpus="similarity",
          terms=("K", "mag", "den1", "den2"),
          calls={"torch": Call("torch.nn.functional.cosine_similarity", {"dim": "dim", "eps": "eps"}),
                 "jax": Call(f"{_SIM}.cosine_similarity_jnp", {"dim": "dim", "eps": "eps"}),
                 "numpy": Call(f"{_SIM}.cosine_similarity_np", {"dim": "dim", "eps": "eps"})}),
    entry("cosine_embedding_loss", "loss", ("input1", "input2", "target"), 0, {"margin": 0.0, "reduction": "mean"}, (
        "l_n = 1 - cos_n (target 1) or max(0, cos_n - margin) (target -1), cos_n = sum(x1 x2) / sqrt((sum x1^2 + 1e-12) "
        "(sum x2^2 + 1e-12)) over each row (torch.nn.functional.cosine_embedding_loss): input1, input2 (N, D) or (D,), "
        "target (N,) or () of 1 and -1; reduction 'mean', 'sum' or 'none'."
    ),
          shape=_cel_shape, reference="similarity:cosine_embedding_loss", corpus="similarity", terms=("K", "N", "mag"),
          param_checks={"margin": _finite("margin", "0.0")},
          calls={"torch": Call("torch.nn.functional.cosine_embedding_loss", {"margin": "margin", "reduction": "reduction"}),
                 "jax": Call(f"{_SIM}.cosine_embedding_loss_jnp", {"margin": "margin", "reduction": "reduction"}),
                 "numpy": Call(f"{_SIM}.cosine_embedding_loss_np", {"margin": "margin", "reduction": "reduction"})}),
    entry("triplet_margin_loss", "loss", ("anchor", "positive", "negative"), 0,
          {"margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False, "reduction": "mean"}, (
        "l_n = max(0, margin + d(a_n, p_n) - d(a_n, n_n)), d(x, y) = ||x - y + eps||_p over the last axis "
        "(torch.nn.functional.triplet_margin_loss / pairwise_distance; swap: d(a, n) -> min(d(a, n), d(p, n))): "
        "anchor, positive, negative (N, D) or (D,), margin > 0, p >= 1; reduction 'mean', 'sum' or 'none'."
    ),
          shape=_triplet_shape, reference="similarity:triplet_margin_loss", corpus="similarity",
          terms=("K", "N", "P", "mag"),
          param_checks={"margin": _positive_margin, "p": _triplet_p, "swap": _swap},
          calls={"torch": Call("torch.nn.functional.triplet_margin_loss",
                               {"margin": "margin", "p": "p", "eps": "eps", "swap": "swap", "reduction": "reduction"}),
                 "jax": Call(f"{_SIM}.triplet_margin_loss_jnp",
                             {"margin": "margin", "p": "p", "eps": "eps", "swap": "swap", "reduction": "reduction"}),
                 "numpy": Call(f"{_SIM}.triplet_margin_loss_np",
                               {"margin": "margin", "p": "p", "eps": "eps", "swap": "swap", "reduction": "reduction"})}),
)
