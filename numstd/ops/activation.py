"""Activations (KernelBench level 1): leaky_relu, elu, selu, celu, hardsigmoid, hardswish, softsign,
mish, new_gelu, swish, and the exact clamps hardtanh and clamp.

All are elementwise ops (kind ``"elementwise"``: :mod:`numstd.reference.elementwise` evaluates
``ref``, :mod:`numstd.corpus.elementwise` builds the generic variants from ``math`` and adds
``variants``), with ``torch.nn.functional`` semantics and parameter names.  hardtanh and clamp are
judged bit-exact (zero error bound, like relu) through :mod:`numstd.reference.exact`, which rounds
their bounds into the input's format first, as torch does (``min.to<scalar_t>()``).

Mappings (decisions, docs/methodology.md "Activations"):

* ``swish`` is ``silu`` (``x sigmoid(x)``, Ramachandran et al. 2017 with beta = 1): its own entry
  with silu's reference and formula, so a KernelBench "Swish" module has a standard of that name.
* ``new_gelu`` is KernelBench's ``NewGELU`` (the GPT-2/BERT formula
  ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``), i.e. ``gelu(approximate="tanh")``:
  its own entry with gelu's tanh reference and no parameters; torch computes it as
  ``F.gelu(x, approximate="tanh")``.

References (``ref``; relative error in units of ``u = 2**-53``, constants from
:mod:`numstd.ops.elementwise`, ``C_EXPM1 = 4``: numpy's ``expm1`` measured at 1.15 u, twice that
margin is 2.3; ``tests/test_reference.py::test_library_accuracy_has_a_2x_margin``):

* leaky_relu ``= x`` for ``x > 0``, ``x s`` otherwise: one product, ``u |v| + 2**-1074``.
* elu ``= x`` for ``x > 0``, ``alpha expm1(x)`` otherwise: ``(C_EXPM1 + 1) u |v| + 2**-1074``.
* selu ``= scale x`` or ``scale alpha expm1(x)`` with torch's constants (exact decimals from
  Klambauer et al. 2017); the float64 constants are off by ``u`` each and ``scale alpha`` is
  rounded once more: ``2 u |v|`` (``x > 0``) and ``(C_EXPM1 + 5) u |v| + 2**-1074``.
* celu ``= x`` or ``alpha expm1(z)``, ``z = fl(x / alpha)``: ``(C_EXPM1 + 1) u |v|`` plus the
  rounding of ``z`` propagated by ``alpha e^z``: ``u |x| e^z``.
* hardsigmoid ``= min(max(x + 3, 0), 6) / 6``: two roundings, ``2 u |v|`` (the error of ``x + 3``
  is ``u |x + 3| = 6 u |v|``, divided by 6).
* hardswish ``= x min(max(x + 3, 0), 6) / 6``: three roundings, ``3 u |v| + 2**-1074``.
* softsign ``= x / (1 + |x|)``: two roundings, ``2 u |v| + 2**-1074``.
* mish ``= x tanh(softplus(x))`` with ``softplus(x) = max(x, 0) + log1p(exp(-|x|))`` (relative
  error ``(C_EXP + C_LOG + 2) u``: ``log1p``'s condition number is ``<= 1``); tanh's condition
  number ``2t / sinh 2t <= 1``: ``(C_EXP + C_LOG + C_TANH + 3) u |v| + 2**-1072 (1 + |x|)``.
* hardtanh, clamp: exact (bound 0).

``cond = |x f'(x)|`` in every case (0 where ``f`` is constant).

Constants (``OpInfo.constants``): the scalars a kernel holds in its compute format, so that a
standard with ``rounded_constants`` allows their systematic effect on the bias
(:func:`numstd.judge.criteria.constant_shifts`): leaky_relu's ``negative_slope`` and elu's
``alpha`` (torch: ``negval.to<opmath_t>()``), selu's ``scale`` and ``neg_coef = scale alpha``
(torch's ``negcoef = alpha * scale`` in opmath; in float32 ``fl(fl(alpha) fl(scale)) =
fl(scale alpha)``, and jax's ``fl(scale) (fl(alpha) e)`` is 0.05 u from it), celu's ``alpha`` and
``inv_alpha = 1/alpha`` (torch: ``input_scale = 1/alpha``) and the ``1/6`` of hardsigmoid and
hardswish (torch's vectorised kernels multiply by ``one_sixth``).  In float32 the relative
rounding errors are −0.375 u (0.01), −0.222 u (scale alpha), +0.556 u (scale), +0.5 u (1/6).

Working precision (``math``): torch's CPU kernels (``aten/src/ATen/native/cpu/Activation.cpp``,
``UnaryOpsKernel.cpp``) in opmath (float32 for 16-bit inputs), every operation rounded by ``w.q``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping

import numpy as np

from ..core.errors import ParameterError
from ..core.summation import U
from ._shapes import same_shape
from .elementwise import (
    C_EXP, C_LOG, C_TANH, _gelu_math, _gelu_tanh, _real, _silu, sigmoid64,
)
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES", "C_EXPM1", "SELU_ALPHA", "SELU_SCALE"]

C_EXPM1: float = 4.0
#: torch's SELU constants (Klambauer et al., "Self-normalizing neural networks", 2017), float64
SELU_ALPHA: float = 1.6732632423543772848170429916717
SELU_SCALE: float = 1.0507009873554804934193349852946

_TINY = 2.0**-1074


# ---------------------------------------------------------------------------------------------
# float64 references: ref(x, params) -> (value, bound, cond)
# ---------------------------------------------------------------------------------------------


def _leaky_relu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    s = p["negative_slope"]  # (a constant: see OpInfo.constants)
    pos = x > 0
    v = np.where(pos, x, x * s)
    return v, np.where(pos, 0.0, U * np.abs(v) + _TINY), np.abs(v)


def _elu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    a = p["alpha"]
    pos = x > 0
    v = np.where(pos, x, a * np.expm1(np.minimum(x, 0.0)))
    bound = np.where(pos, 0.0, (C_EXPM1 + 1) * U * np.abs(v) + _TINY)
    return v, bound, np.where(pos, np.abs(x), np.abs(x * a * np.exp(np.minimum(x, 0.0))))


def _selu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    pos = x > 0
    s, sa = p.get("scale", SELU_SCALE), p.get("neg_coef", SELU_SCALE * SELU_ALPHA)
    neg = np.minimum(x, 0.0)
    v = np.where(pos, s * x, sa * np.expm1(neg))
    bound = np.where(pos, 2 * U * np.abs(v), (C_EXPM1 + 5) * U * np.abs(v) + _TINY)
    return v, bound, np.where(pos, np.abs(v), np.abs(x * sa * np.exp(neg)))


def _celu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    a = p["alpha"]
    pos = x > 0
    z = np.where(pos, 0.0, x * p["inv_alpha"] if "inv_alpha" in p else x / a)
    ez = np.exp(z)
    v = np.where(pos, x, a * np.expm1(z))
    bound = np.where(pos, 0.0, (C_EXPM1 + 1) * U * np.abs(v) + U * np.abs(x) * ez + _TINY)
    return v, bound, np.where(pos, np.abs(x), np.abs(x) * ez)


def _hardsigmoid(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = np.clip(x + 3.0, 0.0, 6.0) * p["inv6"] if "inv6" in p else np.clip(x + 3.0, 0.0, 6.0) / 6.0
    inside = (x > -3.0) & (x < 3.0)
    return v, 2 * U * v, np.where(inside, np.abs(x) / 6.0, 0.0)


def _hardswish(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = x * np.clip(x + 3.0, 0.0, 6.0) * p["inv6"] if "inv6" in p else x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    inside = (x > -3.0) & (x < 3.0)
    cond = np.where(inside, np.abs(x * (2.0 * x + 3.0)) / 6.0, np.where(x >= 3.0, np.abs(x), 0.0))
    return v, 3 * U * np.abs(v) + _TINY, cond


def _hardswish_spill(x: np.ndarray, p: Mapping[str, Any]) -> np.ndarray:
    """The largest intermediate of ``x·clamp(x + 3, 0, 6)`` before the division by 6 (or the
    multiplication by ``1/6``): ``6|x|`` for ``x ≥ 3``, ``|x (x + 3)| ≤ 18`` inside, 0 below −3.
    torch forms it (``F.hardswish(tensor(5.7e37))`` is ``inf`` in float32), so it overflows float32
    for ``x ≥ 5.67e37`` where the exact result is ``x``."""
    return np.where(x >= 3.0, 6.0 * np.abs(x), np.where(x > -3.0, np.abs(x * (x + 3.0)), 0.0))


def _softsign(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    d = 1.0 + np.abs(x)
    v = x / d
    return v, 2 * U * np.abs(v) + _TINY, np.abs(x) / (d * d)


def _mish(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    sp = np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    t = np.tanh(sp)
    v = x * t
    bound = (C_EXP + C_LOG + C_TANH + 3) * U * np.abs(v) + 2.0**-1072 * (1.0 + np.abs(x))
    cond = np.abs(x * (t + x * (1.0 - t) * (1.0 + t) * sigmoid64(x)))
    return v, bound, cond


def _new_gelu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    return _gelu_tanh(x)


def _clamp(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    """``min(max(x, lo), hi)`` (torch.clamp: NaN propagates, ``lo > hi`` gives ``hi``); exact."""
    lo, hi = _limits(p)
    v = x
    if lo is not None:
        v = np.where(v < lo, lo, v)  # keeps NaN (a comparison with NaN is false)
    if hi is not None:
        v = np.where(v > hi, hi, v)
    inside = np.ones(np.shape(x), dtype=bool) if lo is None else x > lo
    if hi is not None:
        inside &= x < hi
    return v, np.zeros_like(x), np.where(inside, np.abs(x), 0.0)


def _limits(p: Mapping[str, Any]) -> tuple:
    if "min_val" in p:
        return p["min_val"], p["max_val"]
    return p["min"], p["max"]


# ---------------------------------------------------------------------------------------------
# working precision: math(x, w, params), every operation rounded by w.q (torch CPU kernels)
# ---------------------------------------------------------------------------------------------


def _leaky_relu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    return np.where(x > 0, x, w.q(x * w.c(p["negative_slope"])))


def _elu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    return np.where(x > 0, x, w.q(w.q(np.expm1(x)) * w.c(p["alpha"])))


def _selu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    sa = w.c(SELU_SCALE * SELU_ALPHA)
    return np.where(x > 0, w.q(x * w.c(SELU_SCALE)), w.q(w.q(np.expm1(x)) * sa))


def _celu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """torch: ``elu(x, alpha, scale=1, input_scale=1/alpha)``: ``expm1(x * fl(1/alpha)) * alpha``."""
    a = p["alpha"]
    return np.where(x > 0, x, w.q(w.q(np.expm1(w.q(x * w.c(1.0 / a)))) * w.c(a)))


def _hardsigmoid_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    return w.q(np.clip(w.q(x + w.c(3.0)), w.c(0.0), w.c(6.0)) / w.c(6.0))


def _hardswish_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    return w.q(w.q(x * np.clip(w.q(x + w.c(3.0)), w.c(0.0), w.c(6.0))) / w.c(6.0))


def _softsign_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    return w.q(x / w.q(w.c(1.0) + np.abs(x)))


def _mish_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """torch's mish kernel: ``x * tanh(log1p(exp(x)))`` in opmath."""
    return w.q(x * w.q(np.tanh(w.q(np.log1p(w.q(np.exp(x)))))))


def _new_gelu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    return _gelu_math(x, w, {"approximate": "tanh"})


def _silu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    from scipy.special import expit

    return w.q(x * w.q(expit(x)))


def _clamp_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``clamp`` with its limits rounded into the working format (torch: ``min.to<opmath_t>()``)."""
    lo, hi = _limits(p)
    v = x
    if lo is not None:
        v = np.where(v < w.c(lo), w.c(lo), v)
    if hi is not None:
        v = np.where(v > w.c(hi), w.c(hi), v)
    return v


# ---------------------------------------------------------------------------------------------
# op-specific bugs (corpus variants)
# ---------------------------------------------------------------------------------------------


def _leaky_as_relu(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``max(x, 0)``: the negative slope dropped."""
    return np.maximum(x, w.dtype(0))


def _leaky_slope_swapped(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``x > 0 ? x s : x``: the slope applied to the positive branch."""
    return np.where(x > 0, w.q(x * w.c(p["negative_slope"])), x)


def _elu_exp_minus_one(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``alpha (exp(x) - 1)`` evaluated in bfloat16 arithmetic: cancellation near 0."""
    from ..core.formats import FORMATS, round_to

    def b(y: Any) -> Any:  # a result rounded to bfloat16, held in the working dtype
        return np.asarray(round_to(np.asarray(y, dtype=np.float64), FORMATS["bfloat16"]),
                          dtype=np.float64).astype(w.dtype)

    e = b(np.exp(b(x)))
    return np.where(x > 0, x, w.q(b(e - w.dtype(1.0)) * w.c(p["alpha"])))


def _elu_alpha_dropped(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``expm1(x)`` for ``x <= 0`` whatever ``alpha``: alpha ignored."""
    return np.where(x > 0, x, w.q(np.expm1(x)))


def _selu_no_scale(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``elu(x, alpha=1.6733)`` without the ``scale`` factor: 5 % off everywhere."""
    return np.where(x > 0, x, w.q(w.q(np.expm1(x)) * w.c(SELU_ALPHA)))


def _selu_rounded_constants(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """SELU with the constants written as 1.67 and 1.05 (a transcription error of ~2e-3)."""
    return np.where(x > 0, w.q(x * w.c(1.05)), w.q(w.q(np.expm1(x)) * w.c(1.05 * 1.67)))


def _celu_no_input_scale(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``alpha expm1(x)`` (elu) returned for celu: ``x / alpha`` dropped."""
    return np.where(x > 0, x, w.q(w.q(np.expm1(x)) * w.c(p["alpha"])))


def _hardsigmoid_slope_5(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """Keras' old hard sigmoid ``clip(0.2 x + 0.5, 0, 1)`` returned for torch's ``x/6 + 1/2``."""
    return np.clip(w.q(w.q(x * w.c(0.2)) + w.c(0.5)), w.c(0.0), w.c(1.0))


def _hardsigmoid_unclamped(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``(x + 3) / 6`` without the clamp to [0, 1]."""
    return w.q(w.q(x + w.c(3.0)) / w.c(6.0))


def _hardswish_no_x(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """hardsigmoid returned for hardswish (the factor ``x`` dropped)."""
    return _hardsigmoid_math(x, w, p)


def _softsign_no_abs(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``x / (1 + x)``: the absolute value dropped (wrong sign of the denominator for x < 0)."""
    return w.q(x / w.q(w.c(1.0) + x))


def _mish_relu_softplus(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``x tanh(max(x, 0))``: softplus replaced by relu (0 for every negative x)."""
    return w.q(x * w.q(np.tanh(np.maximum(x, w.dtype(0)))))


def _mish_naive(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``x tanh(log(1 + exp(x)))`` without log1p: 0 where exp(x) is below half an ulp of 1."""
    return w.q(x * w.q(np.tanh(w.q(np.log(w.q(w.c(1.0) + w.q(np.exp(x))))))))


def _new_gelu_erf(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """the exact (erf) GELU returned for NewGELU (the tanh formula)."""
    return _gelu_math(x, w, {"approximate": "none"})


def _swish_sigmoid_only(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``sigmoid(x)`` returned for ``x sigmoid(x)``."""
    from scipy.special import expit

    return w.q(expit(x))


def _clamp_limits_swapped(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """the clamp's lower and upper limits swapped."""
    lo, hi = _limits(p)
    return _clamp_math(x, w, {"min": hi, "max": lo})


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------


def _finite(name: str) -> Any:
    return lambda op, value: _real(op, name, value)


def _celu_alpha(op: str, value: Any) -> float:
    v = _real(op, "alpha", value)
    if v == 0:
        raise ParameterError(f"{op}: alpha must be nonzero (celu divides by it; torch: 'alpha cannot be 0 "
                             f"for CELU'), got {v!r}; the default is 1.0")
    return v


def _limit(name: str) -> Any:
    def check(op: str, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ParameterError(f"{op}: {name} must be a real number or None, got {value!r}")
        v = float(value)
        if math.isnan(v):
            raise ParameterError(f"{op}: {name} must not be NaN; pass None for no limit")
        return v

    return check


def _hardtanh_limits(op: str, full: dict) -> None:
    for name in ("min_val", "max_val"):
        if full[name] is None:
            raise ParameterError(f"{op}: {name} must be a real number, got None")
    if full["min_val"] > full["max_val"]:
        raise ParameterError(f"{op}: min_val ({full['min_val']!r}) must not be greater than max_val "
                             f"({full['max_val']!r}) (torch.nn.functional.hardtanh rejects it)")


def _clamp_limits(op: str, full: dict) -> None:
    if full["min"] is None and full["max"] is None:
        raise ParameterError(f"{op}: give min, max or both (torch.clamp: 'At least one of min or max must "
                             "not be None'); e.g. min=0.0")


# ---------------------------------------------------------------------------------------------
# the entries
# ---------------------------------------------------------------------------------------------


def _act(name: str, doc: str, ref: Any, math_fn: Any, *, torch: str | None, jax: str | None,
         params: Mapping[str, object] | None = None, call_kwargs: Mapping[str, Any] | None = None,
         jax_kwargs: Mapping[str, Any] | None = None, reference: str = "elementwise:elementwise",
         **fields: Any) -> OpInfo:
    calls = {}
    if torch:
        calls["torch"] = Call(torch, call_kwargs or {})
    if jax:
        calls["jax"] = Call(jax, (call_kwargs or {}) if jax_kwargs is None else jax_kwargs)
    return entry(name, "elementwise", ("x",), 0, params or {}, doc, shape=same_shape, reference=reference,
                 corpus="elementwise", terms=("x", "cond"), calls=calls, ref=ref, math=math_fn, **fields)


ENTRIES: tuple[OpInfo, ...] = (
    _act("leaky_relu", "y = x for x > 0, negative_slope * x otherwise (torch.nn.functional.leaky_relu; "
         "default negative_slope=0.01)", _leaky_relu, _leaky_relu_math,
         torch="torch.nn.functional.leaky_relu", jax="jax.nn.leaky_relu", params={"negative_slope": 0.01},
         call_kwargs={"negative_slope": "negative_slope"},
         param_checks={"negative_slope": _finite("negative_slope")}, constants={"negative_slope": None},
         variants=(
             ("relu-instead", "formula-error", False, "max(x, 0) returned for leaky_relu: the negative slope "
              "dropped", _leaky_as_relu),
             ("slope-on-positive", "formula-error", False, "the slope applied to x > 0 instead of x <= 0",
              _leaky_slope_swapped),
         )),
    _act("elu", "y = x for x > 0, alpha * (exp(x) - 1) otherwise (torch.nn.functional.elu; default alpha=1)",
         _elu, _elu_math, torch="torch.nn.functional.elu", jax="jax.nn.elu", params={"alpha": 1.0},
         call_kwargs={"alpha": "alpha"}, param_checks={"alpha": _finite("alpha")}, constants={"alpha": None},
         variants=(
             ("exp-minus-one-bf16", "formula", False, "alpha (exp(x) - 1) with exp and the subtraction in "
              "bfloat16: cancellation near 0 (expm1 not used)", _elu_exp_minus_one),
             ("alpha-dropped", "formula-error", False, "expm1(x) whatever alpha", _elu_alpha_dropped),
         )),
    _act("selu", "y = scale * (x for x > 0, alpha * (exp(x) - 1) otherwise), alpha = 1.6732632423543772, "
         "scale = 1.0507009873554805 (torch.nn.functional.selu)", _selu, _selu_math,
         torch="torch.nn.functional.selu", jax="jax.nn.selu",
         constants={"scale": lambda p: SELU_SCALE, "neg_coef": lambda p: SELU_SCALE * SELU_ALPHA},
         variants=(
             ("no-scale", "formula-error", False, "elu with alpha = 1.6733 but without scale (5 % off)",
              _selu_no_scale),
             ("rounded-constants", "formula-error", False, "SELU with alpha = 1.67 and scale = 1.05 "
              "(relative error ~2e-3: a bug for float32 and float16 outputs)", _selu_rounded_constants),
         )),
    _act("celu", "y = x for x > 0, alpha * (exp(x / alpha) - 1) otherwise (torch.nn.functional.celu; "
         "alpha != 0, default 1)", _celu, _celu_math, torch="torch.nn.functional.celu", jax="jax.nn.celu",
         params={"alpha": 1.0}, call_kwargs={"alpha": "alpha"}, param_checks={"alpha": _celu_alpha},
         constants={"alpha": None, "inv_alpha": lambda p: 1.0 / p["alpha"]},
         variants=(
             ("elu-instead", "formula-error", False, "alpha expm1(x) (elu) returned for celu: the input "
              "scale 1/alpha dropped (visible where alpha != 1)", _celu_no_input_scale),
         )),
    _act("hardsigmoid", "y = min(max(x + 3, 0), 6) / 6 (torch.nn.functional.hardsigmoid)", _hardsigmoid,
         _hardsigmoid_math, torch="torch.nn.functional.hardsigmoid", jax="jax.nn.hard_sigmoid",
         constants={"inv6": lambda p: 1.0 / 6.0},
         variants=(
             ("keras-slope", "formula-error", False, "clip(0.2 x + 0.5, 0, 1) (Keras' hard sigmoid) returned "
              "for torch's clip(x/6 + 1/2, 0, 1)", _hardsigmoid_slope_5),
             ("unclamped", "missing-branch", False, "(x + 3) / 6 without the clamp to [0, 1]",
              _hardsigmoid_unclamped),
         )),
    _act("hardswish", "y = x * min(max(x + 3, 0), 6) / 6 (torch.nn.functional.hardswish)", _hardswish,
         _hardswish_math, torch="torch.nn.functional.hardswish", jax="jax.nn.hard_swish",
         constants={"inv6": lambda p: 1.0 / 6.0}, spill=_hardswish_spill,
         variants=(
             ("hardsigmoid-instead", "formula-error", False, "hardsigmoid returned for hardswish (factor x "
              "dropped)", _hardswish_no_x),
         )),
    _act("softsign", "y = x / (1 + |x|) (torch.nn.functional.softsign)", _softsign, _softsign_math,
         torch="torch.nn.functional.softsign", jax="jax.nn.soft_sign",
         variants=(
             ("no-abs", "formula-error", False, "x / (1 + x): the absolute value dropped", _softsign_no_abs),
         )),
    _act("mish", "y = x * tanh(softplus(x)) = x * tanh(log(1 + exp(x))) (torch.nn.functional.mish)",
         _mish, _mish_math, torch="torch.nn.functional.mish", jax="jax.nn.mish",
         variants=(
             ("relu-softplus", "approximation", False, "x tanh(max(x, 0)): softplus replaced by relu",
              _mish_relu_softplus),
             ("naive-log-exp", "formula-error", False, "x tanh(log(1 + exp(x))) without log1p: 0 where "
              "exp(x) < half an ulp of 1, where mish is x exp(x) (observable where 64 ULPs off)", _mish_naive,
              64.0),
         )),
    _act("new_gelu", "y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (KernelBench's NewGELU, the "
         "GPT-2 formula; = torch.nn.functional.gelu(x, approximate='tanh'))", _new_gelu, _new_gelu_math,
         torch="torch.nn.functional.gelu", jax="jax.nn.gelu", call_kwargs={"approximate": ("=", "tanh")},
         jax_kwargs={"approximate": ("=", True)},
         variants=(
             ("erf-gelu-instead", "approximation", False, "the exact (erf) GELU returned for NewGELU: up to "
              "~5e-4 absolute error", _new_gelu_erf),
         )),
    _act("swish", "y = x * sigmoid(x) (swish with beta = 1, = silu; torch.nn.functional.silu)", _silu,
         _silu_math, torch="torch.nn.functional.silu", jax="jax.nn.swish",
         variants=(
             ("sigmoid-only", "formula-error", False, "sigmoid(x) returned for x sigmoid(x)", _swish_sigmoid_only),
         )),
    _act("hardtanh", "y = min(max(x, min_val), max_val) (torch.nn.functional.hardtanh; min_val <= max_val, "
         "defaults -1, 1); exact, NaN propagates, the limits rounded to the input format",
         _clamp, _clamp_math, torch="torch.nn.functional.hardtanh", jax="jax.numpy.clip",
         params={"min_val": -1.0, "max_val": 1.0}, call_kwargs={"min_val": "min_val", "max_val": "max_val"},
         jax_kwargs={"min": "min_val", "max": "max_val"}, reference="exact:exact",
         param_checks={"min_val": _limit("min_val"), "max_val": _limit("max_val")},
         check_params=_hardtanh_limits,
         variants=(
             ("limits-swapped", "formula-error", False, "min_val and max_val swapped", _clamp_limits_swapped),
         )),
    _act("clamp", "y = min(max(x, min), max) (torch.clamp; min or max may be None, not both; min > max gives "
         "max everywhere); exact, NaN propagates, the limits rounded to the input format",
         _clamp, _clamp_math, torch="torch.clamp", jax="jax.numpy.clip", params={"min": None, "max": None},
         call_kwargs={"min": "min", "max": "max"}, reference="exact:exact",
         param_checks={"min": _limit("min"), "max": _limit("max")}, check_params=_clamp_limits,
         variants=(
             ("limits-swapped", "formula-error", False, "min and max swapped", _clamp_limits_swapped),
         )),
)
