"""Elementwise variants: exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt.

Legitimate: the function evaluated in the working precision by numpy/scipy (``np.exp`` on a
float32 array is float32 libm, at most ~2.5 ULP off on x86-64 glibc) and rounded once to the
output format; the correctly rounded float64 value rounded to float32 and then to the output (a
double rounding: "compute in fp32, then cast"); torch CPU in the inputs' dtype; and equivalent
formulas used by real kernels -- ``exp2(x log2 e)`` (CUDA ``__expf``/``ex2.approx``),
``log2(x) ln 2`` (``__logf``), ``tanh`` from ``expm1``, sigmoid as ``1/(1+exp(-x))`` and as
``(1 + tanh(x/2))/2`` (XLA's logistic expansion), GELU via ``erfc`` (exact) or via sigmoid
(tanh approximation, ``0.5(1+tanh z) = sigmoid(2z)``), SiLU as ``x/(1+exp(-x))`` or as eager
bf16 ``x * sigmoid(x)`` (two roundings), rsqrt as a 12-bit hardware estimate refined by one
Newton step (``rsqrtps`` + Newton, CUDA ``rsqrtf``), sqrt as ``x * rsqrt(x)``.

Bugs: round toward zero, zeros, the wrong GELU (tanh under an exact call and vice versa),
positive-only SiLU, missing overflow branches (``exp(x)/(1+exp(x))`` is NaN beyond 88.7),
an unclamped tanh, erf by Abramowitz & Stegun 7.1.26 (absolute error 1.5e-7: large relative error
near 0), exp evaluated in bfloat16 arithmetic, sqrt as ``exp(0.5 log x)`` in bfloat16, a
"safe" ``log(x + 1e-6)``, a raw 12-bit rsqrt estimate, identity and leaky ReLU.

References: Abramowitz & Stegun, *Handbook of Mathematical Functions* (1964), eq. 7.1.26;
Hendrycks & Gimpel, "Gaussian error linear units" (2016) for the tanh approximation; Intel SDM
(``rsqrtps``: relative error <= 1.5 * 2**-12); NVIDIA CUDA C Programming Guide, Table 13
(intrinsics ``__expf``, ``__logf``, ``rsqrtf`` accuracy).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import Format
from ..ops import OPS as CATALOG
from . import with_causes
from ._common import (
    FP32_ONLY, f64, finish, from_torch, narrow_out, registrar, rnd, to_torch, torch_inputs, Work,
)

__all__ = ["VARIANTS", "EXACT", "OPS"]

#: the elementwise ops of the catalog (numstd.ops.elementwise): each gets the generic variants below
OPS: tuple[str, ...] = tuple(name for name, e in CATALOG.items() if e.kind == "elementwise")

_V: list = []
variant = registrar(_V)

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_SQRT1_2 = 0.7071067811865476
_TANH_C = 0.7978845608028654  # sqrt(2/pi)


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


def _erfc(x: np.ndarray) -> np.ndarray:
    from scipy.special import erfc

    return erfc(x)


def _expit(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(x)


def _gelu_tanh_exact(x: np.ndarray) -> np.ndarray:
    """``x/2 (1 + tanh z) = x sigmoid(2z)``, ``z = sqrt(2/pi)(x + 0.044715 x^3)``: no cancellation."""
    return x * _expit(2.0 * _TANH_C * (x + 0.044715 * x ** 3))


def _gelu_exact(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return _gelu_tanh_exact(x)
    return 0.5 * x * _erfc(-x * _SQRT1_2)


#: float64 formulas of the first ten ops (accurate to a few float64 ULPs): the "correctly rounded" values.
_FORMULAS: Mapping[str, Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]] = {
    "exp": lambda x, p: np.exp(x),
    "log": lambda x, p: np.log(x),
    "tanh": lambda x, p: np.tanh(x),
    "sigmoid": lambda x, p: _expit(x),
    "erf": lambda x, p: _erf(x),
    "gelu": lambda x, p: _gelu_exact(x, p.get("approximate", "none")),
    "silu": lambda x, p: x * _expit(x),
    "relu": lambda x, p: np.maximum(x, 0.0),
    "rsqrt": lambda x, p: 1.0 / np.sqrt(x),
    "sqrt": lambda x, p: np.sqrt(x),
}


def _entry_value(op: str) -> Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]:
    ref = CATALOG[op].ref
    return lambda x, p: ref(x, dict(CATALOG[op].params, **p))[0]


#: the "correctly rounded" float64 value of every elementwise op: the formulas above, else the
#: value of the op's reference (numstd.ops.elementwise, OpInfo.ref)
EXACT: Mapping[str, Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]] = {
    op: _FORMULAS[op] if op in _FORMULAS else _entry_value(op) for op in OPS
}


def _math(op: str, x: np.ndarray, w: Work, params: Mapping[str, Any]) -> np.ndarray:
    """The op in the working precision (each operation rounded to ``acc``): the entry's ``math``."""
    return CATALOG[op].math(x, w, params)


def _x(inputs: list, w: Work) -> np.ndarray:
    return w.load(inputs[0])


def _deviates(op: str, bug: Callable, ulps: float = 8.0) -> Callable:
    """``observable``: the bug's output is ``ulps`` output ULPs from the exact value somewhere.

    ULPs at the exact value (Goldberg); non-finite results where the exact value is finite (or the
    reverse) count as deviations.  The margin is above every legitimate library's error.
    """

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        from ..core.formats import get_format
        from ..core.ulp import ulp

        x = f64(inputs[0])
        with np.errstate(all="ignore"):
            exact = EXACT[op](x, params)
            got = f64(bug(inputs, params, out, get_format("float32"), 0))
            fin = np.isfinite(exact)
            if (np.isfinite(got) != fin).any():
                return True
            r = np.where(fin, exact, 0.0)
            err = np.abs(np.where(fin, got, 0.0) - r) / ulp(r, out)
        return bool((err > ulps).any())

    return observable


def _bind_op(op: str, fn: Callable) -> Callable:
    """``fn(op, inputs, params, out, acc, seed)`` as a variant function of ``op``."""

    def run(inputs: list, params: Mapping[str, Any], out: Format, acc: Format, seed: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(op, inputs, params, out, acc, seed)

    run.__name__ = f"{fn.__name__}_{op}"
    run.__doc__ = fn.__doc__
    return run


def _each(name: str, family: str, legit: bool, description: str, ops: tuple[str, ...] = OPS,
          applies: Callable | None = None, observe: bool = False, ulps: float = 8.0,
          acc_formats: tuple[str, ...] | None = None) -> Callable:
    """Register ``fn(op, inputs, params, out, acc, seed)`` as variant ``name`` of each op in ``ops``."""

    def deco(fn: Callable) -> Callable:
        for op in ops:
            bound = _bind_op(op, fn)
            obs = _deviates(op, bound, ulps) if observe else None
            variant(op, name, family, legit, description.format(op=op), applies, obs, acc_formats)(bound)
        return fn

    return deco


# ---------------------------------------------------------------------------------------------
# legitimate, every op
# ---------------------------------------------------------------------------------------------


@_each("fp32-math", "library", True,
       "{op} by numpy/scipy functions on working-precision (float32) arrays, each library call "
       "rounded once, then rounded to the output format: what an fp32-compute kernel does")
def _fp32_math(op, inputs, params, out, acc, seed):
    w = Work(acc)
    return finish(_math(op, _x(inputs, w), w, params), out)


@_each("cr-then-round", "rounding", True,
       "{op} correctly rounded to the working format (float32), then rounded to the output "
       "format: a legitimate double rounding (at most one extra half ULP of the output)")
def _cr_then_round(op, inputs, params, out, acc, seed):
    return finish(rnd(EXACT[op](f64(inputs[0]), params), acc), out)


@_each("torch-cpu", "library", True,
       "{op} by torch on CPU in the input's dtype (torch upcasts 16-bit math to float32 "
       "internally), cast to the output format; only where torch is installed",
       applies=torch_inputs, acc_formats=FP32_ONLY)
def _torch_cpu(op, inputs, params, out, acc, seed):
    from ..backends.base import framework_call

    t = to_torch(inputs[0])
    return finish(from_torch(framework_call(op, "torch")([t], params)), out)


# ---------------------------------------------------------------------------------------------
# legitimate, op-specific formulas
# ---------------------------------------------------------------------------------------------


@_each("exp2-scaled", "formula", True,
       "exp(x) as exp2(fl(x * log2 e)) in float32 (CUDA __expf / ex2.approx style); the rounding "
       "of the argument adds a relative error ~|x| u_fp32, within exp's conditioning |x|",
       ops=("exp",))
def _exp2_scaled(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(w.q(np.exp2(w.q(x * w.c(_LOG2E)))), out)


@_each("log2-scaled", "formula", True,
       "log(x) as fl(log2(x) * ln 2) in float32 (CUDA __logf style): one extra rounding",
       ops=("log",))
def _log2_scaled(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(w.q(w.q(np.log2(x)) * w.c(_LN2)), out)


@_each("expm1-form", "formula", True,
       "tanh(x) = -sign(x) t / (t + 2) with t = expm1(-2|x|) in float32: accurate near 0 and "
       "saturating without overflow (the expm1-based libm algorithm)", ops=("tanh",))
def _tanh_expm1(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    t = w.q(np.expm1(w.q(w.c(-2.0) * np.abs(x))))
    y = w.q(-t / w.q(t + w.c(2.0)))
    return finish(np.copysign(y, x), out)


@_each("recip-exp", "formula", True,
       "{op} through 1 / (1 + exp(-x)) in float32 (the textbook kernel; exp(-x) overflowing to "
       "inf gives the right limit 0)", ops=("sigmoid", "silu"))
def _recip_exp(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    s = w.q(w.c(1.0) / w.q(w.c(1.0) + w.q(np.exp(-x))))
    return finish(s if op == "sigmoid" else w.q(x * s), out)


@_each("tanh-form", "formula", True,
       "sigmoid(x) = 0.5 * (1 + tanh(x / 2)) in float32 (XLA's logistic expansion); it loses "
       "relative accuracy for x < -9 where the result is below u_fp32 (absolute error <= u_fp32)",
       ops=("sigmoid",))
def _sigmoid_tanh(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(w.q(w.c(0.5) * w.q(w.c(1.0) + w.q(np.tanh(w.q(x * w.c(0.5)))))), out)


@_each("erfc-form", "formula", True,
       "exact GELU as 0.5 x erfc(-x / sqrt 2) in float32 (no cancellation for negative x)",
       ops=("gelu",), applies=lambda out, f, p: p.get("approximate", "none") == "none")
def _gelu_erfc(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(w.q(w.q(w.c(0.5) * x) * w.q(_erfc(w.q(-x * w.c(_SQRT1_2))))), out)


@_each("sigmoid-form", "formula", True,
       "tanh-approximate GELU as x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) in float32, the "
       "identity 0.5 (1 + tanh z) = sigmoid(2z) used by fused kernels",
       ops=("gelu",), applies=lambda out, f, p: p.get("approximate", "none") == "tanh")
def _gelu_sigmoid(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    inner = w.q(w.c(2.0 * _TANH_C) * w.q(x + w.q(w.c(0.044715) * w.q(w.q(x * x) * x))))
    return finish(w.q(x * w.q(_expit(inner))), out)


@_each("eager-double-rounding", "rounding", True,
       "SiLU as eager PyTorch computes x * torch.sigmoid(x) on 16-bit tensors: sigmoid rounded to "
       "the output format, then the product rounded again (two roundings, about 1 ULP)",
       ops=("silu",), applies=narrow_out)
def _silu_eager(op, inputs, params, out, acc, seed):
    x = f64(inputs[0])
    s = rnd(_expit(x.astype(np.float32)), out)
    return finish(rnd(x * s, out), out)


@_each("newton", "formula", True,
       "rsqrt as a 12-bit hardware estimate (relative error <= 2^-12, like rsqrtps) refined by "
       "one Newton step y (1.5 - 0.5 x y^2) in float32: about 2 float32 ULPs",
       ops=("rsqrt",))
def _rsqrt_newton(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    y = w.q(_estimate12(x))
    h = w.q(w.c(0.5) * x)
    y = w.q(y * w.q(w.c(1.5) - w.q(w.q(h * y) * y)))
    return finish(y, out)


def _estimate12(x: np.ndarray) -> np.ndarray:
    """A 12-bit estimate of 1/sqrt(x): the exact value rounded to 12 significant bits."""
    return _round_bits(1.0 / np.sqrt(f64(x)), 12)


def _round_bits(r: np.ndarray, bits: int) -> np.ndarray:
    """``r`` rounded (RNE) to ``bits`` significant bits (float64; exact scaling by powers of two)."""
    m, e = np.frexp(r)
    return np.ldexp(np.rint(np.ldexp(m, bits)), e - bits)


@_each("x-times-rsqrt", "formula", True,
       "sqrt(x) as x * rsqrt(x) in float32 (GPU sqrt through the reciprocal square root), with "
       "x = 0 kept as 0: about 1.5 float32 ULPs", ops=("sqrt",))
def _sqrt_rsqrt(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    r = w.q(w.c(1.0) / w.q(np.sqrt(x)))
    y = w.q(x * r)
    return finish(np.where(x == 0, x, y), out)


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


#: ops whose outputs are exact (representable inputs or limits) on half the suite's inputs or more:
#: truncation changes too few of their outputs to bias the mean (truncation_visible), so it gets no
#: variant there; relu, hardtanh and clamp are exact everywhere
_MOSTLY_EXACT = ("relu", "hardtanh", "clamp", "leaky_relu", "elu", "celu", "hardsigmoid")


@_each("truncation", "truncation", False,
       "{op} computed in float32 but converted to the output format by truncation (round toward "
       "zero) instead of round-to-nearest: every error within 1 ULP but biased towards zero",
       ops=tuple(o for o in OPS if o not in _MOSTLY_EXACT), applies=narrow_out)
def _truncation(op, inputs, params, out, acc, seed):
    # in 16-bit arithmetic (arith16) the result is already in the output format, so truncating
    # it again changes nothing: there the bug is arithmetic that truncates, every primitive RTZ
    w = Work(acc, "rtz" if acc.p < 24 else "rne")
    return finish(_math(op, _x(inputs, w), w, params), out, "rtz")


@_each("zeros", "zeros", False, "returns zeros of the right shape and dtype (KernelBench #165)")
def _zeros(op, inputs, params, out, acc, seed):
    return finish(np.zeros(np.shape(inputs[0])), out)


@_each("tanh-under-exact", "approximation", False,
       "the tanh approximation of GELU returned for an exact (approximate='none') call: up to "
       "~5e-4 absolute error, visible in float32 outputs", ops=("gelu",),
       applies=lambda out, f, p: p.get("approximate", "none") == "none", observe=True)
def _gelu_tanh_for_exact(op, inputs, params, out, acc, seed):
    w = Work(acc)
    return finish(_math(op, _x(inputs, w), w, {"approximate": "tanh"}), out)


@_each("exact-under-tanh", "approximation", False,
       "the exact (erf) GELU returned for an approximate='tanh' call", ops=("gelu",),
       applies=lambda out, f, p: p.get("approximate", "none") == "tanh", observe=True)
def _gelu_exact_for_tanh(op, inputs, params, out, acc, seed):
    w = Work(acc)
    return finish(_math(op, _x(inputs, w), w, {"approximate": "none"}), out)


@_each("positive-only", "missing-branch", False,
       "SiLU as x * sigmoid(x) for x > 0 and 0 otherwise (a dropped negative branch, invisible "
       "on inputs in [0, 1))", ops=("silu",), observe=True)
def _silu_positive(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(np.where(x > 0, _math("silu", x, w, params), w.dtype(0)), out)


@_each("unclamped-exp", "missing-branch", False,
       "{op} as exp(x) / (1 + exp(x)) without the branch for large x: inf / inf = NaN beyond "
       "x = 88.7", ops=("sigmoid", "silu"), observe=True)
def _unclamped(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    e = w.q(np.exp(x))
    s = w.q(e / w.q(w.c(1.0) + e))
    return finish(s if op == "sigmoid" else w.q(x * s), out)


@_each("dropped-clamp", "missing-branch", False,
       "tanh as (exp(2x) - 1) / (exp(2x) + 1) without clamping x: NaN beyond x = 44.4 and a "
       "cancellation near 0", ops=("tanh",), observe=True)
def _tanh_unclamped(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    e = w.q(np.exp(w.q(w.c(2.0) * x)))
    return finish(w.q(w.q(e - w.c(1.0)) / w.q(e + w.c(1.0))), out)


@_each("abramowitz-stegun", "approximation", False,
       "erf by Abramowitz & Stegun 7.1.26 in float32: absolute error up to 1.5e-7, so a large "
       "relative error for small |x|; a bug for float32 outputs only (in 16-bit outputs the error "
       "is the size and kind of torch CPU's own bfloat16 erf)", ops=("erf",),
       applies=lambda out, f, p: out.p >= 24, observe=True)
def _erf_as(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    c = w.c
    ax = np.abs(x)
    t = w.q(c(1.0) / w.q(c(1.0) + w.q(c(0.3275911) * ax)))
    poly = c(1.061405429)
    for a in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = w.q(w.q(poly * t) + c(a))
    poly = w.q(poly * t)
    y = w.q(c(1.0) - w.q(poly * w.q(np.exp(w.q(-w.q(ax * ax))))))
    return finish(np.copysign(y, x), out)


@_each("bf16-math", "approximation", False,
       "exp evaluated in bfloat16 arithmetic: n = rint(x log2 e), r = x - n ln2 and a degree-4 "
       "polynomial, every step rounded to bfloat16 (relative error ~ |n| 2^-9)", ops=("exp",),
       observe=True)
def _exp_bf16(op, inputs, params, out, acc, seed):
    from ..core.formats import FORMATS

    b = Work(FORMATS["bfloat16"])
    x = b.load(inputs[0])
    c = b.c
    n = np.rint(b.q(x * c(_LOG2E)))
    r = b.q(x - b.q(n * c(_LN2)))
    p = c(1.0 / 24.0)
    for a in (1.0 / 6.0, 0.5, 1.0, 1.0):
        p = b.q(b.q(p * r) + c(a))
    with np.errstate(over="ignore"):
        y = np.ldexp(f64(p), np.clip(n, -300, 300).astype(np.int64))
    return finish(y, out)


@_each("exp-log-bf16", "approximation", False,
       "sqrt(x) as exp(0.5 * log(x)) with each step rounded to bfloat16 (relative error "
       "~ |log x| 2^-9)", ops=("sqrt",), observe=True)
def _sqrt_explog(op, inputs, params, out, acc, seed):
    from ..core.formats import FORMATS

    b = Work(FORMATS["bfloat16"])
    x = b.load(inputs[0])
    return finish(b.q(np.exp(b.q(b.c(0.5) * b.q(np.log(x))))), out)


@_each("eps-added", "eps", False,
       "a 'safe' log(x + 1e-6): wrong by 1e-6 / x, visible for small x", ops=("log",), observe=True)
def _log_eps(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(w.q(np.log(w.q(x + w.c(1e-6)))), out)


@_each("estimate-only", "approximation", False,
       "rsqrt returned as the raw 12-bit hardware estimate without the Newton step (relative "
       "error up to 2^-12: thousands of float32 ULPs, invisible in 16-bit outputs)",
       ops=("rsqrt",), applies=lambda out, f, p: out.p > 13)
def _rsqrt_estimate(op, inputs, params, out, acc, seed):
    return finish(_estimate12(inputs[0]), out)


@_each("identity", "formula-error", False,
       "ReLU that returns x (passes on inputs in [0, 1), KernelBench's default)", ops=("relu",),
       observe=True)
def _relu_identity(op, inputs, params, out, acc, seed):
    return finish(f64(inputs[0]), out)


@_each("leaky", "formula-error", False,
       "leaky ReLU with slope 0.01 returned for ReLU", ops=("relu",), observe=True)
def _relu_leaky(op, inputs, params, out, acc, seed):
    w = Work(acc)
    x = _x(inputs, w)
    return finish(np.where(x > 0, x, w.q(x * w.c(0.01))), out)


# ---------------------------------------------------------------------------------------------
# op-specific variants that the ops' entries define (numstd.ops.elementwise, OpInfo.variants)
# ---------------------------------------------------------------------------------------------


def _entry_variant(formula: Callable) -> Callable:
    def run(op, inputs, params, out, acc, seed):
        w = Work(acc)
        return finish(formula(_x(inputs, w), w, params), out)

    run.__name__ = formula.__name__.lstrip("_")
    run.__doc__ = formula.__doc__
    return run


for _op in OPS:
    for _name, _family, _legit, _description, _formula, *_ulps in CATALOG[_op].variants:
        _each(_name, _family, _legit, _description, ops=(_op,), observe=not _legit,
              ulps=_ulps[0] if _ulps else 8.0)(_entry_variant(_formula))

#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"unclamped-exp": "specials", "dropped-clamp": "specials", "positive-only": None}

VARIANTS: tuple = with_causes(_V, _CAUSES)
