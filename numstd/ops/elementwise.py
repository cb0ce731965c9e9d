"""Elementwise functions: exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt, softplus.

Everything about an elementwise op is its entry here: its formula and parameters, its float64
reference with a proven bound (``ref``), the function in a working precision the way a kernel
computes it (``math``: the corpus's legitimate "compute in fp32, round once" variant and the base
of its bugs), the op-specific bugs of the corpus (``variants``) and the framework calls.
:mod:`numstd.reference.elementwise` and :mod:`numstd.corpus.elementwise` evaluate these entries.

References (``ref``).
Library accuracy (relative error in units of ``u = 2**-53``; 1 ulp of ``v`` is at most ``2u|v|``).
Measured maxima against mpmath on this project's test points, and the constant used (at least
twice the measured maximum):

=======================  ==========================  ================
function                 measured max                constant (u)
=======================  ==========================  ================
``np.exp``               0.65 ulp                    ``C_EXP = 4``
``np.log``, ``np.log1p``  0.55 ulp                    ``C_LOG = 4``
``np.tanh``              0.99 ulp                    ``C_TANH = 6``
``np.sqrt``              correctly rounded (IEEE)    1
``scipy.special.erf``    2.4 ulp                     ``C_ERF = 12``
``scipy.special.erfcx``  7.9 ulp                     ``C_ERFCX = 40``
=======================  ==========================  ================

numpy's float64 ``exp``/``log`` are its own SIMD kernels (documented <= 1 ulp in numpy's
``umath-validation-set-*.csv``); scipy's ``erfc`` is *not* used: its error grows like ``0.8 z^2``
ulp (500 ulp at ``z = 25``), so ``erfc(z) = erfcx(z) exp(-z^2)`` with ``z^2`` formed exactly.

Formulas and bounds (relative to ``|v|``, plus an absolute term where results can be subnormal):

* exp: ``C_EXP u |v| + 2**-1074``.   log: ``C_LOG u |v|``.   tanh: ``C_TANH u |v|``.
* sqrt: ``u |v|``.   rsqrt ``= 1 / sqrt(x)``: ``2.01 u |v|``.   relu: exact (0).
* sigmoid: ``1 / (1 + exp(-x))`` for ``x >= 0``, ``exp(x) / (1 + exp(x))`` for ``x < 0``:
  ``(2 C_EXP + 2) u |v| + 2**-1073``.
* silu ``= x sigmoid(x)`` (``x / (1 + exp(-x))`` for ``x >= 0``, ``x e / (1 + e)``, ``e = exp(x)``
  otherwise): ``(2 C_EXP + 3) u |v| + 2**-1072 (1 + |x|)``.
* erf: ``C_ERF u |v| + 2**-1073``.
* gelu (none) ``= x/2 erfc(-x/sqrt2)``.  ``x >= 0``: ``x/2 (1 + erf(w))``, ``w = fl(x fl(1/sqrt2))``
  (relative error ``2u``; erf's condition number ``|w erf'(w) / erf(w)| <= 1``), error ``(C_ERF +
  4) u`` in ``1 + erf >= 1``: ``(C_ERF + 5) u |v|``.  ``x < 0``: ``z = -x/sqrt2``,
  ``erfc(z) = erfcx(z) exp(-z^2)``, ``z^2 = (p + q)/2`` exactly by ``two_prod(x, x)``,
  ``exp(-z^2) = exp(-p/2) (1 - q/2)`` (dropped term ``q^2/8 < u^2 p^2``); ``erfcx``'s condition
  number is ``<= 1`` on ``z >= 0``: ``(C_ERFCX + C_EXP + 7) u |v| + 2**-1072 (1 + |x|)``.
* gelu (tanh) ``= x sigmoid(a)``, ``a = 2 sqrt(2/pi) (x + 0.044715 x^3)`` (``(1 + tanh t)/2 =
  sigmoid(2t)``); ``a`` is formed as ``c x (1 + k x^2)`` with correctly rounded constants
  (relative error ``<= 7u``, no cancellation), sigmoid's relative condition number is
  ``|a| sigmoid(-a)``: ``(7 |a| sigmoid(-a) + 2 C_EXP + 3) u |v| + 2**-1072 (1 + |x|)``.

aux: ``x`` (the float64 input) and ``cond = |x f'(x)|`` (relu: ``|x| [x > 0]``).
* softplus (torch semantics) ``= x`` where ``beta x > threshold``, else ``sp(z)/beta`` with
  ``z = fl(beta x)`` and ``sp(z) = max(z, 0) + log1p(exp(-|{z}|))`` (no cancellation: both terms are
  non-negative).  ``exp`` and ``log1p`` contribute ``(C_EXP + C_LOG + 1) u`` relative to the
  ``log1p`` term (``log1p``'s condition number ``t/((1+t) log1p t) <= 1``), the addition and the
  division by ``beta`` ``2u |v|``, the rounding of ``z`` ``u |z|`` propagated by ``sp'(z) =
  sigmoid(z)``: ``(C_EXP + C_LOG + 3) u |v| + u |x| sigmoid(z) + 2**-1073``.  ``cond = |x| sigmoid(z)``
  (``|x|`` in the linear branch).  Checked against mpmath in ``tests/test_reference.py``.

Working precision (``math``): every operation rounded to the accumulation format by ``w.q``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping

import numpy as np

from ..core.errors import ParameterError
from ..core.summation import U, two_prod
from ._shapes import same_shape
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES", "C_EXP", "C_LOG", "C_TANH", "C_ERF", "C_ERFCX", "sigmoid64"]

C_EXP: float = 4.0
C_LOG: float = 4.0
C_TANH: float = 6.0
C_ERF: float = 12.0
C_ERFCX: float = 40.0

_TINY = 2.0**-1074
_RSQRT2 = 0.7071067811865476          # 1/sqrt(2), correctly rounded
_C_TANH_GELU = 1.5957691216057308     # 2 sqrt(2/pi), correctly rounded
_KAPPA = 0.044715                     # torch's constant, correctly rounded
_INV_SQRT_PI = 0.5641895835477563     # 1/sqrt(pi)
_INV_SQRT_2PI = 0.3989422804014327    # 1/sqrt(2 pi)
_TANH_C = 0.7978845608028654          # sqrt(2/pi)
_SQRT1_2 = 0.7071067811865476


def sigmoid64(x: np.ndarray) -> np.ndarray:
    """Stable sigmoid: ``1/(1 + exp(-x))`` for ``x >= 0``, ``e/(1 + e)`` with ``e = exp(x)`` below."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


def _expit(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(x)


def _erfc_neg(x: np.ndarray) -> np.ndarray:
    """``erfc(-x / sqrt 2)`` for ``x < 0`` with the exact square (module docstring)."""
    from scipy.special import erfcx

    p, q = two_prod(x, x)
    z = -x * _RSQRT2
    return erfcx(z) * (np.exp(-0.5 * p) * (1.0 - 0.5 * q))


# ---------------------------------------------------------------------------------------------
# float64 references: ref(x, params) -> (value, bound, cond)
# ---------------------------------------------------------------------------------------------


def _exp(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = np.exp(x)
    return v, C_EXP * U * v + _TINY, np.abs(x) * v


def _log(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = np.log(x)
    return v, C_LOG * U * np.abs(v), np.ones_like(x)


def _tanh(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = np.tanh(x)
    return v, C_TANH * U * np.abs(v), np.abs(x) * (1.0 - v) * (1.0 + v)


def _sigmoid(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = sigmoid64(x)
    return v, (2 * C_EXP + 2) * U * v + 2 * _TINY, np.abs(x) * v * sigmoid64(-x)


def _silu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    ax = np.abs(x)
    e = np.exp(-ax)
    v = np.where(x >= 0, x / (1.0 + e), (x * e) / (1.0 + e))
    s = sigmoid64(x)
    bound = (2 * C_EXP + 3) * U * np.abs(v) + 2.0**-1072 * (1.0 + ax)
    return v, bound, np.abs(x * (s + x * s * sigmoid64(-x)))


def _erf_ref(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = _erf(x)
    return v, C_ERF * U * np.abs(v) + 2 * _TINY, 2.0 * _INV_SQRT_PI * np.abs(x) * np.exp(-x * x)


def _gelu_none(x: np.ndarray) -> tuple:
    from scipy.special import erf

    pos = x >= 0
    xp = np.where(pos, x, 0.0)
    xn = np.where(pos, -1.0, x)
    phi2 = np.where(pos, 1.0 + erf(xp * _RSQRT2), _erfc_neg(xn))  # = 2 Phi(x)
    v = 0.5 * x * phi2
    rel = np.where(pos, (C_ERF + 5) * U, (C_ERFCX + C_EXP + 7) * U)
    bound = rel * np.abs(v) + 2.0**-1072 * (1.0 + np.abs(x))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    cond = np.abs(x * (0.5 * phi2 + x * pdf))
    return v, bound, cond


def _gelu_tanh(x: np.ndarray) -> tuple:
    x2 = x * x
    a = _C_TANH_GELU * (x * (1.0 + _KAPPA * x2))
    s = sigmoid64(a)
    sm = sigmoid64(-a)
    v = x * s
    bound = (7.0 * np.abs(a) * sm + 2 * C_EXP + 3) * U * np.abs(v) + 2.0**-1072 * (1.0 + np.abs(x))
    da = _C_TANH_GELU * (1.0 + 3.0 * _KAPPA * x2)
    cond = np.abs(x * (s + x * s * sm * da))
    return v, bound, cond


def _gelu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    return _gelu_none(x) if p["approximate"] == "none" else _gelu_tanh(x)


def _relu(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))
    return v, np.zeros_like(x), np.where(x > 0, np.abs(x), 0.0)


def _sqrt(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = np.sqrt(x)
    return v, U * v, 0.5 * v


def _rsqrt(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    v = 1.0 / np.sqrt(x)
    return v, 2.01 * U * np.abs(v), 0.5 * np.abs(v)


def _softplus(x: np.ndarray, p: Mapping[str, Any]) -> tuple:
    beta, threshold = p["beta"], p["threshold"]
    z = beta * x
    linear = z > threshold
    az = np.abs(z)
    sp = (np.maximum(z, 0.0) + np.log1p(np.exp(-az))) / beta
    s = sigmoid64(z)
    v = np.where(linear, x, sp)
    ax = np.abs(x)
    bound = np.where(linear, 0.0, (C_EXP + C_LOG + 3) * U * np.abs(sp) + U * ax * s + 2.0 * _TINY)
    return v, bound, np.where(linear, ax, ax * s)


# ---------------------------------------------------------------------------------------------
# working precision: math(x, w, params), every operation rounded by w.q
# ---------------------------------------------------------------------------------------------


def _gelu_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    q, c = w.q, w.c
    if p.get("approximate", "none") == "tanh":
        inner = q(c(_TANH_C) * q(x + q(c(0.044715) * q(q(x * x) * x))))
        return q(q(c(0.5) * x) * q(c(1.0) + q(np.tanh(inner))))
    return q(q(c(0.5) * x) * q(c(1.0) + q(_erf(q(x * c(_SQRT1_2))))))


def _softplus_math(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """torch's CPU/CUDA kernel: ``beta x > threshold ? x : log1p(exp(beta x)) / beta`` in opmath."""
    q, c = w.q, w.c
    z = q(x * c(p["beta"]))
    return np.where(z > c(p["threshold"]), x, q(q(np.log1p(q(np.exp(z)))) / c(p["beta"])))


def _softplus_naive(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``log(1 + exp(beta x)) / beta`` with no threshold and no log1p."""
    q, c = w.q, w.c
    z = q(x * c(p["beta"]))
    return q(q(np.log(q(c(1.0) + q(np.exp(z))))) / c(p["beta"]))


def _softplus_no_threshold(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``log1p(exp(beta x)) / beta`` everywhere: overflows to inf where ``exp`` does."""
    q, c = w.q, w.c
    z = q(x * c(p["beta"]))
    return q(q(np.log1p(q(np.exp(z)))) / c(p["beta"]))


def _softplus_relu(x: Any, w: Any, p: Mapping[str, Any]) -> Any:
    """``max(x, 0)``: the softplus "approximated" by its asymptote (off by log 2 / beta at 0)."""
    return np.maximum(x, w.dtype(0))


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------


def _real(op: str, name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{op}: {name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        raise ParameterError(f"{op}: {name} must be finite, got {value!r}")
    return v


def _beta(op: str, value: Any) -> float:
    v = _real(op, "beta", value)
    if not v > 0:
        raise ParameterError(f"{op}: beta must be > 0 (torch.nn.functional.softplus), got {v!r}")
    return v


def _threshold(op: str, value: Any) -> float:
    return _real(op, "threshold", value)


# ---------------------------------------------------------------------------------------------
# the entries
# ---------------------------------------------------------------------------------------------


def _unary(name: str, doc: str, ref: Any, math_fn: Any, *, torch: str | None, jax: str | None,
           params: Mapping[str, object] | None = None, positive: bool = False, **fields: Any) -> OpInfo:
    calls = {}
    kwargs = fields.pop("call_kwargs", {})
    if torch:
        calls["torch"] = Call(torch, kwargs)
    if jax:
        calls["jax"] = Call(jax, kwargs)
    return entry(name, "elementwise", ("x",), 0, params or {}, doc, shape=same_shape,
                 reference="elementwise:elementwise", corpus="elementwise", terms=("x", "cond"),
                 positive=positive, calls=calls, ref=ref, math=math_fn, **fields)


def _lib(fn: Any) -> Any:
    return lambda x, w, p: w.q(fn(x))


ENTRIES: tuple[OpInfo, ...] = (
    _unary("exp", 'y = exp(x)', _exp, _lib(np.exp), torch="torch.exp", jax="jax.numpy.exp"),
    _unary("log", 'y = log(x)  (natural logarithm; -inf at 0, NaN below 0)', _log, _lib(np.log), torch="torch.log", jax="jax.numpy.log", positive=True),
    _unary("tanh", 'y = tanh(x)', _tanh, _lib(np.tanh), torch="torch.tanh", jax="jax.numpy.tanh"),
    _unary("sigmoid", 'y = 1 / (1 + exp(-x))', _sigmoid, _lib(_expit), torch="torch.sigmoid", jax="jax.nn.sigmoid"),
    _unary("erf", 'y = erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt', _erf_ref, _lib(_erf), torch="torch.erf", jax="jax.scipy.special.erf"),
    _unary("gelu", (
            'approximate="none": y = x/2 * (1 + erf(x/sqrt(2))) = x/2 * erfc(-x/sqrt(2)); '
            'approximate="tanh": y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))  '
            '(torch.nn.functional.gelu)'
        ),
           _gelu, _gelu_math, torch="torch.nn.functional.gelu", jax=None, params={"approximate": "none"},
           call_kwargs={"approximate": "approximate"}),
    _unary("silu", 'y = x * sigmoid(x) = x / (1 + exp(-x))', _silu, lambda x, w, p: w.q(x * w.q(_expit(x))),
           torch="torch.nn.functional.silu", jax="jax.nn.silu"),
    _unary("relu", 'y = max(x, 0)', _relu, lambda x, w, p: np.maximum(x, w.dtype(0)),
           torch="torch.nn.functional.relu", jax="jax.nn.relu"),
    _unary("rsqrt", 'y = 1 / sqrt(x)', _rsqrt, lambda x, w, p: w.q(w.c(1.0) / w.q(np.sqrt(x))),
           torch="torch.rsqrt", jax="jax.lax.rsqrt", positive=True),
    _unary("sqrt", 'y = sqrt(x)', _sqrt, _lib(np.sqrt), torch="torch.sqrt", jax="jax.numpy.sqrt", positive=True),
    _unary("softplus",
           "y = log(1 + exp(beta x)) / beta, and y = x where beta x > threshold (torch.nn.functional.softplus; "
           "beta > 0, defaults beta=1, threshold=20)",
           _softplus, _softplus_math, torch="torch.nn.functional.softplus", jax=None,
           params={"beta": 1.0, "threshold": 20.0}, call_kwargs={"beta": "beta", "threshold": "threshold"},
           param_checks={"beta": _beta, "threshold": _threshold},
           variants=(
               ("naive-log-exp", "formula-error", False,
                "softplus as log(1 + exp(beta x)) / beta: no threshold branch (inf where exp overflows) and "
                "no log1p (0 instead of exp(beta x) where that is below half an ulp of 1)", _softplus_naive, 64),
               ("no-threshold", "missing-branch", False,
                "log1p(exp(beta x)) / beta without the linear branch: inf where exp(beta x) overflows "
                "(beta x > 88.7 in float32)", _softplus_no_threshold),
               ("relu-asymptote", "approximation", False,
                "max(x, 0) returned for softplus: off by log(2)/beta at 0", _softplus_relu),
           )),
)
