"""Losses: ``cross_entropy`` with class-index targets, ``mse_loss``, ``huber_loss``, ``smooth_l1_loss``, ``kl_div``, ``nll_loss`` and ``hinge_embedding_loss``.

Reference: :mod:`numstd.reference.loss`; variants: :mod:`numstd.corpus.losses`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping

import numpy as np

from ..core.errors import ParameterError, ShapeError
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES"]


def _cross_entropy_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    logits, target = a
    if logits.ndim != 2:
        raise ShapeError(f"cross_entropy: logits has shape {logits.shape}; it must be (N, C) "
                         "(reshape to (-1, C); 1-D logits: logits[None])")
    n, c = logits.shape
    if target.shape != (n,):
        raise ShapeError(f"cross_entropy: target has shape {target.shape}; it must be ({n},), one class "
                         f"index per row of logits {logits.shape}")
    if target.size and (int(target.min()) < 0 or int(target.max()) >= c):
        bad = int(target.min()) if int(target.min()) < 0 else int(target.max())
        raise ShapeError(f"cross_entropy: target holds class index {bad}, outside [0, {c}) for logits "
                         f"with C={c} classes (ignore_index is not supported: drop those rows)")
    if p["reduction"] == "mean" and n == 0:
        raise ShapeError("cross_entropy: reduction='mean' of 0 rows is undefined; pass at least one row "
                         "or use reduction='sum'")
    return (n,) if p["reduction"] == "none" else ()


def _mse_loss_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, target = a
    op = spec.name
    if target.shape != x.shape:
        raise ShapeError(f"{op}: target has shape {target.shape}, input {x.shape}; they must be equal "
                         "(torch would broadcast them with a warning: broadcast explicitly, e.g. "
                         "np.broadcast_to(target, input.shape))")
    if p["reduction"] == "mean" and x.size == 0:
        raise ShapeError(f"{op}: reduction='mean' of an empty input {x.shape} is undefined; pass at least "
                         "one element or use reduction='sum'")
    return tuple(x.shape) if p["reduction"] == "none" else ()


def _threshold(name: str, allow_zero: bool) -> Any:
    """``param_checks`` of huber's ``delta`` (``> 0``) and smooth_l1's ``beta`` (``>= 0``)."""
    what = "non-negative" if allow_zero else "positive"

    def check(op: str, value: Any) -> float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ParameterError(f"{op}: {name} must be a real number, got {value!r}; the default is 1.0")
        v = float(value)
        if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
            raise ParameterError(f"{op}: {name} must be a finite {what} number, got {v!r} (torch rejects "
                                 f"{'negative' if allow_zero else 'non-positive'} values of {name}); "
                                 "the default is 1.0")
        return v

    return check


def _kl_div_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, target = a
    if p["reduction"] == "batchmean" and x.ndim and x.shape[0] == 0:
        raise ShapeError(f"kl_div: reduction='batchmean' of an input {x.shape} with 0 rows is undefined; pass at "
                         "least one row or use reduction='sum'")
    return _mse_loss_shape(spec, a, p)


def _nll_loss_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, target = a
    if x.ndim != 2:
        raise ShapeError(f"nll_loss: input has shape {x.shape}; it must be (N, C) log-probabilities "
                         "(reshape to (-1, C))")
    n, c = x.shape
    if target.shape != (n,):
        raise ShapeError(f"nll_loss: target has shape {target.shape}; it must be ({n},), one class index per row")
    keep = target != p["ignore_index"]
    if np.any(keep) and (int(target[keep].min()) < 0 or int(target[keep].max()) >= c):
        bad = int(target[keep].min()) if int(target[keep].min()) < 0 else int(target[keep].max())
        raise ShapeError(f"nll_loss: target holds class index {bad}, outside [0, {c}) and not ignore_index "
                         f"({p['ignore_index']})")
    if p["reduction"] == "mean" and not np.any(keep):
        raise ShapeError("nll_loss: reduction='mean' with every target ignored (or 0 rows) is undefined "
                         "(torch returns NaN); use reduction='sum'")
    return (n,) if p["reduction"] == "none" else ()


def _index(op: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{op}: ignore_index must be an int, got {value!r}; the default is -100")
    return int(value)


def _hinge_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, target = a
    out = _mse_loss_shape(spec, a, p)
    if target.size and not np.all((target == 1) | (target == -1)):
        raise ShapeError("hinge_embedding_loss: target must hold only 1 and -1 (torch adds both branches "
                         "for any other value)")
    return out


def _finite_margin(op: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ParameterError(f"{op}: margin must be a finite real number, got {value!r}; the default is 1.0")
    return float(value)


def _flag(op: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"kl_div: log_target must be True or False, got {value!r}")
    return bool(value)


ENTRIES: tuple[OpInfo, ...] = (
    entry("cross_entropy", "loss", ("logits", "target"), 0, {"reduction": "mean"}, (
        'loss_n = logsumexp(logits[n]) - logits[n, target[n]] '
        '(torch.nn.functional.cross_entropy with class-index targets, no weights, no '
        'ignore_index, no label smoothing): logits (N, C), target (N,) integers in [0, C); '
        "reduction 'mean' (sum / N), 'sum' or 'none' (the N losses)."
    ),
          shape=_cross_entropy_shape, reference="loss:cross_entropy", corpus="losses", terms=("lse", "dev", "devmean", "R", "K", "N", "M", "s16", "a16", "h16"),
          integer_inputs=(1,)),
    entry("mse_loss", "loss", ("input", "target"), 0, {"reduction": "mean"}, (
        "l_i = (input_i - target_i)**2 (torch.nn.functional.mse_loss without the legacy size_average/"
        "reduce arguments and without weight): input and target of the same shape; reduction 'mean' "
        "(sum / numel), 'sum' or 'none' (the squared differences, input's shape)."
    ),
          shape=_mse_loss_shape, reference="loss:mse_loss", corpus="losses", terms=("K", "s16", "a16", "g16", "e16", "spillmag"),
          calls={"torch": Call("torch.nn.functional.mse_loss", {"reduction": "reduction"})}),
    entry("huber_loss", "loss", ("input", "target"), 0, {"reduction": "mean", "delta": 1.0}, (
        "l_i = 0.5 d_i**2 if |d_i| < delta else delta (|d_i| - 0.5 delta), d_i = input_i - target_i "
        "(torch.nn.functional.huber_loss without weight): input and target of the same shape, delta > 0; "
        "reduction 'mean' (sum / numel), 'sum' or 'none' (input's shape)."
    ),
          shape=_mse_loss_shape, reference="loss:huber_loss", corpus="losses", terms=("K", "s16", "a16", "h16", "s16t", "a16t", "g16", "e16t"),
          param_checks={"delta": _threshold("delta", False)},
          calls={"torch": Call("torch.nn.functional.huber_loss", {"reduction": "reduction", "delta": "delta"})}),
    entry("smooth_l1_loss", "loss", ("input", "target"), 0, {"reduction": "mean", "beta": 1.0}, (
        "l_i = 0.5 d_i**2 / beta if |d_i| < beta else |d_i| - 0.5 beta, d_i = input_i - target_i; "
        "|d_i| for beta = 0 (torch.nn.functional.smooth_l1_loss without the legacy size_average/reduce "
        "arguments): input and target of the same shape, beta >= 0; reduction 'mean', 'sum' or 'none'."
    ),
          shape=_mse_loss_shape, reference="loss:smooth_l1_loss", corpus="losses", terms=("K", "s16", "a16", "h16", "s16t", "a16t", "g16", "e16t"),
          param_checks={"beta": _threshold("beta", True)},
          calls={"torch": Call("torch.nn.functional.smooth_l1_loss", {"reduction": "reduction", "beta": "beta"})}),
    entry("kl_div", "loss", ("input", "target"), 0, {"reduction": "mean", "log_target": False}, (
        "l_i = target_i (log target_i - input_i) (0 where target_i = 0: torch's xlogy), or with "
        "log_target=True exp(target_i) (target_i - input_i) (torch.nn.functional.kl_div without the legacy "
        "size_average/reduce arguments): input holds log-probabilities, input and target of the same shape; "
        "reduction 'mean' (sum / numel), 'batchmean' (sum / input.shape[0], the KL divergence per sample), "
        "'sum' or 'none'."
    ),
          shape=_kl_div_shape, reference="loss:kl_div", corpus="losses", terms=("K", "N", "mag", "s16", "a16", "h16"),
          param_checks={"log_target": _flag},
          calls={"torch": Call("torch.nn.functional.kl_div", {"reduction": "reduction", "log_target": "log_target"})}),
    entry("nll_loss", "loss", ("input", "target"), 0, {"reduction": "mean", "ignore_index": -100}, (
        "loss_n = -input[n, target[n]] (torch.nn.functional.nll_loss without weight): input (N, C) "
        "log-probabilities, target (N,) integers in [0, C) or ignore_index (those rows count 0 and are left "
        "out of the mean); reduction 'mean' (sum / rows kept), 'sum' or 'none' (the N losses)."
    ),
          shape=_nll_loss_shape, reference="loss:nll_loss", corpus="losses", terms=("K", "mag", "s16", "a16", "h16", "e16", "spillmag"),
          integer_inputs=(1,), param_checks={"ignore_index": _index}),  # (torch: the backend's own call, target.long())
    entry("hinge_embedding_loss", "loss", ("input", "target"), 0, {"reduction": "mean", "margin": 1.0}, (
        "l_i = input_i where target_i = 1, max(0, margin - input_i) where target_i = -1 "
        "(torch.nn.functional.hinge_embedding_loss): input and target (only 1 and -1) of the same shape; "
        "reduction 'mean', 'sum' or 'none'."
    ),
          shape=_hinge_shape, reference="loss:hinge_embedding_loss", corpus="losses", terms=("K", "mag", "s16", "a16", "g16"),
          param_checks={"margin": _finite_margin},
          calls={"torch": Call("torch.nn.functional.hinge_embedding_loss",
                               {"margin": "margin", "reduction": "reduction"})}),
)
