"""References for the elementwise functions: float64 with stable formulas and per-function bounds.

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
"""

from __future__ import annotations

import numpy as np

from ..core.summation import U, two_prod

__all__ = ["elementwise", "C_EXP", "C_LOG", "C_TANH", "C_ERF", "C_ERFCX"]

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


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Stable sigmoid: ``1/(1 + exp(-x))`` for ``x >= 0``, ``e/(1 + e)`` with ``e = exp(x)`` below."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erfc_neg(x: np.ndarray) -> np.ndarray:
    """``erfc(-x / sqrt 2)`` for ``x < 0`` with the exact square (module docstring)."""
    from scipy.special import erfcx

    p, q = two_prod(x, x)
    z = -x * _RSQRT2
    return erfcx(z) * (np.exp(-0.5 * p) * (1.0 - 0.5 * q))


def _gelu_none(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _gelu_tanh(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x2 = x * x
    a = _C_TANH_GELU * (x * (1.0 + _KAPPA * x2))
    s = _sigmoid(a)
    sm = _sigmoid(-a)
    v = x * s
    bound = (7.0 * np.abs(a) * sm + 2 * C_EXP + 3) * U * np.abs(v) + 2.0**-1072 * (1.0 + np.abs(x))
    da = _C_TANH_GELU * (1.0 + 3.0 * _KAPPA * x2)
    cond = np.abs(x * (s + x * s * sm * da))
    return v, bound, cond


def elementwise(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of the elementwise op ``op``; see the module docstring for formulas and bounds."""
    x = np.asarray(arrays[0], dtype=np.float64)
    ax = np.abs(x)
    if op == "exp":
        v = np.exp(x)
        bound, cond = C_EXP * U * v + _TINY, ax * v
    elif op == "log":
        v = np.log(x)
        bound, cond = C_LOG * U * np.abs(v), np.ones_like(x)
    elif op == "tanh":
        v = np.tanh(x)
        bound, cond = C_TANH * U * np.abs(v), ax * (1.0 - v) * (1.0 + v)
    elif op == "sigmoid":
        v = _sigmoid(x)
        bound, cond = (2 * C_EXP + 2) * U * v + 2 * _TINY, ax * v * _sigmoid(-x)
    elif op == "silu":
        e = np.exp(-ax)
        v = np.where(x >= 0, x / (1.0 + e), (x * e) / (1.0 + e))
        s = _sigmoid(x)
        bound = (2 * C_EXP + 3) * U * np.abs(v) + 2.0**-1072 * (1.0 + ax)
        cond = np.abs(x * (s + x * s * _sigmoid(-x)))
    elif op == "erf":
        from scipy.special import erf

        v = erf(x)
        bound, cond = C_ERF * U * np.abs(v) + 2 * _TINY, 2.0 * _INV_SQRT_PI * ax * np.exp(-x * x)
    elif op == "gelu":
        v, bound, cond = _gelu_none(x) if params["approximate"] == "none" else _gelu_tanh(x)
    elif op == "relu":
        v = np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))
        bound, cond = np.zeros_like(x), np.where(x > 0, ax, 0.0)
    elif op == "sqrt":
        v = np.sqrt(x)
        bound, cond = U * v, 0.5 * v
    elif op == "rsqrt":
        v = 1.0 / np.sqrt(x)
        bound, cond = 2.01 * U * np.abs(v), 0.5 * np.abs(v)
    else:  # pragma: no cover - the catalog and this table are kept in step by tests
        raise AssertionError(f"no elementwise reference for {op!r}")
    return v, bound, {"x": x, "cond": cond}
