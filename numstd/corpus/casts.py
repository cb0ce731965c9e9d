"""Variants of ``cast`` (quantize into a block-scaled format, dequantize back): :mod:`numstd.ops.cast`.

Legitimate: the rule evaluated with numpy float32 arithmetic and ml_dtypes casts (MX exponents by
``np.log2``, elements clipped to the element's range and cast by ml_dtypes), the fp32 scale by a
reciprocal multiply (``amax * fl(1/max)``, ``x * fl(1/s)``), Transformer Engine's form
(``scale = fl(max / amax)``, ``q = RN(fl(x * scale))``, ``y = fl(q * fl(1/scale))``), torch on CPU
(``torch.float8_e4m3fn``/``e5m2`` casts, ``torch.float8_e8m0fnu`` for MX exponents) and jax on CPU
(``jnp.float8_*``, ``float4_e2m1fn`` casts; XLA CPU has no FP6 convert).  Bugs: elements truncated instead of
rounded to nearest even; the MX exponent from ``ceil(log2 amax)`` instead of ``floor``; no
saturation (overflow becomes NaN/inf: fp8 elements); blocks of the wrong size (half the format's);
one per-tensor scale where the format has per-block scales; amax over the wrong axis (blocks
along the second-last axis); an MX scale that is not a power of two (``amax / max_elem``); zeros.

A bug is observable where its output leaves the legitimate range of the reference somewhere (NaN
compared as NaN).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import numpy as np

from ..core import scaled as sc
from ..core.formats import FORMATS, Format, round_to
from . import with_causes
from ._common import f64, finish, registrar, torch_available

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)


def _fmt(params: Mapping[str, Any]) -> sc.ScaledFormat:
    return sc.get_scaled_format(params["to"])


def _differs(fn: Callable) -> Callable:
    """``observable``: the output leaves ``[values - legit, values + legit]`` (plus the output rounding) somewhere."""

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        from ..core.ulp import ulp
        from ..reference.cast import cast

        with np.errstate(all="ignore"):
            v, _, aux = cast("cast", inputs, dict(params))
            got = f64(fn(inputs, params, out, FORMATS["float32"], 0))
            tol = aux["legit"] + ulp(np.abs(v) + aux["legit"], out)
            ok = (np.abs(got - v) <= tol) | (np.isnan(got) & np.isnan(v))
        return bool((~ok).any())

    return observable


def _register(name: str, family: str, legit: bool, description: str,
              applies: Callable | None = None) -> Callable:
    """Register ``core(x float64, fmt ScaledFormat) -> float64 values q * S`` (rounded to ``out`` here)."""

    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            with np.errstate(all="ignore"):
                return finish(core(f64(inputs[0]), _fmt(params)), out)

        run.__name__, run.__doc__ = core.__name__, core.__doc__
        variant("cast", name, family, legit, description, applies, None if legit else _differs(run))(run)
        return core

    return deco


def _rule(*rules: str) -> Callable:
    """``applies``: the format's scale rule is one of ``rules``."""
    return lambda out, fmts, params: _fmt(params).rule in rules


def _blocks_f32(x: np.ndarray, f: sc.ScaledFormat) -> tuple[np.ndarray, tuple]:
    """float32 ``x`` zero-padded into whole blocks ``(L, Mb, br, Kb, bc)``."""
    return sc._block_view(x.astype(np.float32), f)


def _unblock(v: np.ndarray, dims: tuple, shape: tuple) -> np.ndarray:
    L, M, K = dims
    Lb, Mb, br, Kb, bc = v.shape
    return v.reshape(L, Mb * br, Kb * bc)[:, :M, :K].reshape(shape)


def _elements(t: np.ndarray, elem: Format) -> np.ndarray:
    """ml_dtypes: clip to the element's range (saturation), cast float32 -> element (RNE), back to float64."""
    m = np.float32(elem.max_finite)
    return f64(np.clip(t.astype(np.float32), -m, m).astype(elem.dtype))


# ---------------------------------------------------------------------------------------------
# legitimate
# ---------------------------------------------------------------------------------------------


@_register("numpy-mldtypes", "formula", True,
           "the rule in numpy float32 arithmetic: MX exponents by floor(np.log2(amax)), fp32 scales amax / max in "
           "float32, NVFP4's block scale fl32(fl32(amax / 6) / s_tensor) cast to E4M3; elements x / S in float32, "
           "clipped to the element's range and cast by ml_dtypes (RNE); q * S in float32")
def _numpy_rule(x, f):
    b, dims = _blocks_f32(x, f)
    amax = np.abs(b).max(axis=(2, 4), keepdims=True) if b.size else np.zeros((1,) * 5, np.float32)
    elem = f.element
    if f.rule == "mx":
        a = np.where(amax > 0, amax, np.float32(2.0**-126))
        e = np.floor(np.log2(a.astype(np.float64))) - elem.emax
        S = np.where(np.isfinite(amax), np.exp2(np.maximum(e, -127.0)), np.nan).astype(np.float32)
        St = None
    elif f.rule == "amax":
        S = np.where(amax > 0, amax / np.float32(elem.max_finite), np.float32(1.0)).astype(np.float32)
        S[~np.isfinite(amax)] = np.nan
        St = None
    else:
        at = np.float32(np.abs(x).max()) if x.size else np.float32(0)
        St = at / np.float32(6 * 448) if at > 0 or not np.isfinite(at) else np.float32(1.0)
        St = St if np.isfinite(St) else np.float32(np.nan)  # an inf or NaN in the tensor: every block NaN
        sb = (amax / np.float32(6.0)) / St
        S = f64(np.clip(np.nan_to_num(sb, nan=0.0), 0, 448).astype(np.float32).astype(FORMATS["float8_e4m3fn"].dtype))
        S = np.where(np.isfinite(sb), S, np.nan).astype(np.float32)
    with np.errstate(all="ignore"):
        full = S * St if St is not None else S
        t = np.where(full > 0, b / np.where(full > 0, full, 1), 0).astype(np.float32)
        q = _elements(np.nan_to_num(t, nan=0.0), elem)
        if St is None:
            y = (q * S).astype(np.float32)
        else:
            y = ((q * S).astype(np.float32) * St).astype(np.float32)  # (q * s_block exact, then the tensor scale)
        y = np.where(np.isfinite(full), y, np.nan)
    return f64(_unblock(y, dims, x.shape))


@_register("fp32-reciprocal", "formula", True,
           "fp32 scales by reciprocal multiplies: s = fl32(amax * fl32(1/max)), elements RN(fl32(x * fl32(1/s))), "
           "y = fl32(q * s) (a 1-ulp different scale than amax / max on about half the blocks)", _rule("amax"))
def _reciprocal(x, f):
    b, dims = _blocks_f32(x, f)
    amax = np.abs(b).max(axis=(2, 4), keepdims=True)
    inv_max = np.float32(1.0) / np.float32(f.element.max_finite)
    with np.errstate(all="ignore"):
        s = np.where(amax > 0, amax * inv_max, np.float32(1.0)).astype(np.float32)
        t = (b * (np.float32(1.0) / s)).astype(np.float32)
        y = (_elements(np.nan_to_num(t, nan=0.0), f.element) * s).astype(np.float32)
        y = np.where(np.isfinite(amax), y, np.nan)
    return f64(_unblock(y, dims, x.shape))


@_register("transformer-engine", "formula", True,
           "Transformer Engine's form: scale = fl32(max / amax), q = RN(fl32(x * scale)), scale_inv = fl32(1 / scale), "
           "y = fl32(q * scale_inv)", _rule("amax"))
def _te(x, f):
    b, dims = _blocks_f32(x, f)
    amax = np.abs(b).max(axis=(2, 4), keepdims=True)
    with np.errstate(all="ignore"):
        scale = np.where(amax > 0, np.float32(f.element.max_finite) / amax, np.float32(1.0)).astype(np.float32)
        t = (b * scale).astype(np.float32)
        inv = (np.float32(1.0) / scale).astype(np.float32)
        y = (_elements(np.nan_to_num(t, nan=0.0), f.element) * inv).astype(np.float32)
        y = np.where(np.isfinite(amax), y, np.nan)
    return f64(_unblock(y, dims, x.shape))


def _torch_dtype(elem: Format) -> Any:
    import torch

    return {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}.get(elem.name)


def _torch_applies(out: Format, fmts: Any, params: Mapping[str, Any]) -> bool:
    f = _fmt(params)
    return torch_available() and f.rule in ("amax", "mx") and f.element.name in ("float8_e4m3fn", "float8_e5m2")


@_register("torch-cpu", "library", True,
           "torch on CPU: amax by torch.amax over the blocks, fp32 scales amax / max (MX: the exponent of amax by "
           "torch.frexp), elements (x / s).clamp(-max, max).to(torch.float8_e4m3fn / e5m2), y = q.float() * s; "
           "only where torch is installed (fp8 elements)", _torch_applies)
def _torch(x, f):
    import torch

    b, dims = _blocks_f32(x, f)
    t = torch.from_numpy(np.ascontiguousarray(b))
    amax = t.abs().amax(dim=(2, 4), keepdim=True)
    m = float(f.element.max_finite)
    if f.rule == "mx":
        _, e = torch.frexp(torch.where(amax > 0, amax, torch.tensor(2.0**-126)))
        S = torch.ldexp(torch.ones_like(amax), torch.clamp(e - 1 - f.element.emax, min=-127))
    else:
        S = torch.where(amax > 0, amax / m, torch.ones_like(amax))
    S = torch.where(torch.isfinite(amax), S, torch.full_like(amax, float("nan")))
    q = (t / S).nan_to_num(0.0).clamp(-m, m).to(_torch_dtype(f.element)).to(torch.float32)
    y = torch.where(torch.isfinite(S), q * S, torch.full_like(q, float("nan")))
    return f64(_unblock(y.numpy(), dims, x.shape))


def _jax_applies(out: Format, fmts: Any, params: Mapping[str, Any]) -> bool:
    import importlib.util

    f = _fmt(params)  # (XLA CPU has no convert for the FP6 types: "Invalid XLA PrimitiveType F6E3M2FN")
    return importlib.util.find_spec("jax") is not None and f.rule == "mx" and not f.element.name.startswith("float6")


@_register("jax-cpu", "library", True,
           "jax on CPU (XLA): the element conversion by astype(jnp.float8_e4m3fn / float8_e5m2 / float4_e2m1fn) of "
           "x / X clipped to the element's range (the MX exponent by frexp of the block amax, NaN propagated); only "
           "where jax is installed (XLA CPU cannot convert to the FP6 types)", _jax_applies)
def _jax(x, f):
    import jax
    import jax.numpy as jnp

    b, dims = _blocks_f32(x, f)
    amax = np.abs(b).max(axis=(2, 4), keepdims=True)
    _, e = np.frexp(np.where(amax > 0, amax, np.float32(2.0**-126)))
    X = np.where(np.isfinite(amax), np.ldexp(np.float32(1.0), np.maximum(e - 1 - f.element.emax, -127)), np.nan)
    m = np.float32(f.element.max_finite)
    with np.errstate(all="ignore"):
        t = np.clip(np.nan_to_num((b / X).astype(np.float32), nan=0.0), -m, m)
    with jax.default_device(jax.devices("cpu")[0]):  # XLA's convert (one op: no per-shape compile of a graph)
        q = np.asarray(jnp.asarray(t).astype(getattr(jnp, f.element.name)).astype(jnp.float32))
    y = np.where(np.isfinite(X), q.astype(np.float64) * X, np.nan)
    return f64(_unblock(y, dims, x.shape))


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


def _exact_with(x: np.ndarray, f: sc.ScaledFormat, scales: np.ndarray, tensor: Any = None, mode: str = "rne",
                saturate: bool = True) -> np.ndarray:
    """``q * S`` for given block ``scales`` with elements rounded by ``mode`` (saturating or not)."""
    S = sc.element_scales(scales, f, x.shape) * (float(tensor) if tensor is not None else 1.0)
    with np.errstate(all="ignore"):
        ok = np.isfinite(S) & (S > 0)
        t = np.where(ok, x / np.where(ok, S, 1.0), 0.0)
        q = f64(round_to(np.nan_to_num(t, nan=0.0), f.element, mode, saturate=saturate))
        return np.where(np.isfinite(S), q * S, np.nan)


@_register("truncation", "truncation", False, "elements rounded toward zero (x / S truncated) instead of to nearest even")
def _truncation(x, f):
    s, t = sc.compute_scales(x, f)
    return _exact_with(x, f, s, t, "rtz")


@_register("ceil-exponent", "scale", False,
           "the MX shared exponent from ceil(log2 amax) instead of floor (one bit of every element lost where amax "
           "is not a power of two)", _rule("mx"))
def _ceil(x, f):
    s, _ = sc.compute_scales(x, f)
    amax = sc._amax(x, f).reshape(s.shape)
    with np.errstate(all="ignore"):
        e = np.ceil(np.log2(np.where(amax > 0, amax, 1.0))) - f.element.emax
        s2 = np.where(np.isfinite(s), np.exp2(np.maximum(e, -127)), np.nan)
    return _exact_with(x, f, s2)


@_register("no-saturation", "missing-branch", False,
           "elements cast without saturation: a quotient above the element's largest value becomes NaN (e4m3) or "
           "inf (e5m2) instead of the largest value", lambda out, fmts, p: _fmt(p).element.has_nan)
def _no_saturation(x, f):
    s, t = sc.compute_scales(x, f)
    return _exact_with(x, f, s, t, saturate=False)


def _resized(f: sc.ScaledFormat) -> sc.ScaledFormat:
    br, bc = f.block
    block = (1, bc // 2) if br == 1 and bc > 0 else ((br // 2, bc // 2) if br > 1 else (1, 64))
    return dataclasses.replace(f, block=block)


@_register("wrong-block-size", "indexing", False,
           "blocks of half the format's size (16 for MX, 8 for NVFP4, 64 for 1x128, 64x64 tiles; per-tensor and "
           "per-row scales: blocks of 64)")
def _wrong_block(x, f):
    return sc.scaled_round(x, _resized(f))


@_register("per-tensor-scale", "scale", False,
           "one scale for the whole tensor (the rule applied to the tensor's amax) where the format has one per block",
           lambda out, fmts, p: not _fmt(p).per_tensor)
def _per_tensor(x, f):
    return sc.scaled_round(x, dataclasses.replace(f, block=(0, 0)))


@_register("wrong-axis", "indexing", False,
           "blocks along the second-last axis instead of the last (the amax of a column block: a transposed layout)",
           lambda out, fmts, p: not _fmt(p).per_tensor)
def _wrong_axis(x, f):
    if x.ndim < 2:
        return sc.scaled_round(x, f)
    return np.swapaxes(sc.scaled_round(np.swapaxes(x, -1, -2), f), -1, -2)


@_register("scale-not-power-of-two", "scale", False,
           "an MX scale amax / max_elem (fp32) instead of the power of two 2^(floor(log2 amax) - emax_elem)", _rule("mx"))
def _not_pow2(x, f):
    amax = sc._amax(x, f).reshape(sc.scale_shape(f, x.shape))
    with np.errstate(all="ignore"):
        s = np.where(amax > 0, f64((amax / f.element.max_finite).astype(np.float32)), 2.0**-127)
        s[~np.isfinite(amax)] = np.nan
    return _exact_with(x, f, s)


@_register("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _zeros(x, f):
    return np.zeros(x.shape)


VARIANTS: tuple = with_causes(_V, {"no-saturation": "specials"})
