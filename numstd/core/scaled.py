"""Block-scaled formats: a low-precision element format plus shared scales, and their scale rules.

A scaled format stores ``x`` as element codes ``q`` (a :class:`~numstd.core.formats.Format`) and
one scale ``S`` per block of elements; the value of an element is ``q * S``.  Three families:

**OCP MX** (``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp6_e3m2``, ``mxfp6_e2m3``, ``mxfp4``): blocks of 32
consecutive elements along the last axis share an E8M0 scale ``X`` (a power of two,
``2**-127 .. 2**127``).  OCP Microscaling Formats (MX) v1.0 (2023), §6.3 "Conversion from vector of
scalar floats to MX format"::

    shared_exp = floor(log2(max_i |V_i|)) - emax_elem        (emax_elem: exponent of the element's largest normal)
    X = 2**shared_exp
    P_i = quantize_to_element_format(V_i / X)                (RNE, clamped to the largest normal)

``V_i / X`` is exact (``X`` is a power of two), so the codes are fixed bit for bit.  Where the rule
leaves a case open numstd follows the reference implementation of the spec's authors
(microsoft/microxcaling, ``mx_ops._quantize_mx``): ``shared_exp`` is clamped below at ``-127``
(a block whose amax is 0 gets ``X = 2**-127`` and codes 0), and a block whose amax is NaN or
infinite gets the NaN scale ``0xFF``: every element of that block decodes to NaN (§5.2: a NaN
scale makes the whole block NaN; the elements of FP6/FP4 have no NaN of their own).  A partial last
block (K not a multiple of 32) is a block of fewer elements.

**NVFP4** (``nvfp4``): blocks of 16 E2M1 elements along the last axis, an E4M3 block scale and one
fp32 scale per tensor (NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision
inference", 2025; NVIDIA Transformer Engine, ``NVFP4Quantizer`` / ``quantization_nvfp4.py``;
cuBLAS ``CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3``)::

    s_tensor = fl32(amax_tensor / (6 * 448))                 (1 when amax_tensor = 0)
    s_block  = RN_e4m3,sat(amax_block / 6 / s_tensor)         (real quotient, one rounding into E4M3)
    S = s_block * s_tensor,  q_i = RN_e2m1,sat(x_i / S)      (a block with s_block = 0 is all zeros)

so the largest block maps to the largest E2M1 value 6 and the largest block scale to 448.

**fp8 with fp32 scales** (``fp8_e4m3_tensor``, ``_row``, ``_block128`` (1 x 128 along the last axis,
DeepSeek-V3 activations), ``_tile128`` (128 x 128 over the last two axes, DeepSeek-V3 weights),
and the same for e5m2): ``s = fl32(amax / max_elem)`` per block (1 when amax = 0) and
``q_i = RN_fp8,sat(x_i / s)`` with the exact quotient (DeepSeek-AI, "DeepSeek-V3 technical report",
2024, §3.3.2; NVIDIA Transformer Engine's delayed/current scaling: ``scale = max / amax``).

The value of an element is ``q * S`` exactly (float64 holds it: at most 30 significant bits);
:func:`dequantize` rounds it once to the output format.  A kernel that computes an fp32 scale with
a different but legitimate sequence of fp32 operations (``amax * (1/448)`` instead of
``amax / 448``, ``1 / (448 / amax)``) gets a scale a few fp32 ulps away and may then round an
element the other way: :func:`legitimate_range` bounds what such kernels can return
(docs/methodology.md, "Casts into block-scaled formats").
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .errors import FormatError, ShapeError
from .formats import FORMATS, Format, get_format, round_to

__all__ = ["ScaledFormat", "SCALED_FORMATS", "Quantized", "get_scaled_format", "is_scaled",
           "compute_scales", "quantize", "dequantize", "scaled_round", "scaled_ulp", "element_scales",
           "legitimate_range"]

_U32 = 2.0**-24  # fp32 unit roundoff


@dataclass(frozen=True)
class ScaledFormat:
    """One block-scaled format (a row of :data:`SCALED_FORMATS`).

    Attributes
    ----------
    name : str
        Canonical name (``"mxfp8_e4m3"``).
    aliases : tuple of str
    element : Format
        The format of the codes.
    scale : Format
        The format of the block scales (E8M0, E4M3 or float32).
    block : tuple of int
        ``(rows, cols)`` of one block over the last two axes; ``cols = 0`` means the whole last axis
        (per row) and ``(0, 0)`` the whole tensor.  ``(1, 32)``: 32 consecutive elements of a row.
    rule : str
        ``"mx"`` (OCP MX §6.3), ``"nvfp4"`` or ``"amax"`` (fp32 ``amax / max``), see the module docstring.
    """

    name: str
    aliases: tuple[str, ...]
    element: Format
    scale: Format
    block: tuple[int, int]
    rule: str

    @property
    def per_tensor(self) -> bool:
        return self.block == (0, 0)

    def __str__(self) -> str:
        return self.name


def _sf(name: str, aliases: tuple[str, ...], element: str, scale: str, block: tuple[int, int], rule: str) -> ScaledFormat:
    return ScaledFormat(name, aliases, FORMATS[element], FORMATS[scale], block, rule)


def _fp8(kind: str, element: str) -> tuple[ScaledFormat, ...]:
    short = element.split("_")[1][:4]  # e4m3 / e5m2
    blocks = {"tensor": (0, 0), "row": (1, 0), "block128": (1, 128), "tile128": (128, 128)}
    return tuple(_sf(f"fp8_{short}_{g}", (f"{short}_{g}",), element, "float32", b, "amax") for g, b in blocks.items())


_TABLE: tuple[ScaledFormat, ...] = (
    _sf("mxfp8_e4m3", ("mxfp8", "mx_e4m3"), "float8_e4m3fn", "float8_e8m0fnu", (1, 32), "mx"),
    _sf("mxfp8_e5m2", ("mx_e5m2",), "float8_e5m2", "float8_e8m0fnu", (1, 32), "mx"),
    _sf("mxfp6_e3m2", ("mx_e3m2",), "float6_e3m2fn", "float8_e8m0fnu", (1, 32), "mx"),
    _sf("mxfp6_e2m3", ("mxfp6", "mx_e2m3"), "float6_e2m3fn", "float8_e8m0fnu", (1, 32), "mx"),
    _sf("mxfp4", ("mxfp4_e2m1", "mx_e2m1"), "float4_e2m1fn", "float8_e8m0fnu", (1, 32), "mx"),
    _sf("nvfp4", ("nvfp4_e2m1",), "float4_e2m1fn", "float8_e4m3fn", (1, 16), "nvfp4"),
    *_fp8("fp8", "float8_e4m3fn"),
    *_fp8("fp8", "float8_e5m2"),
)

SCALED_FORMATS: Mapping[str, ScaledFormat] = types.MappingProxyType({f.name: f for f in _TABLE})
"""Read-only mapping canonical name -> :class:`ScaledFormat`."""

_BY_NAME = types.MappingProxyType({n.lower(): f for f in _TABLE for n in (f.name, *f.aliases)})


def is_scaled(fmt: Any) -> bool:
    """True when ``fmt`` is a :class:`ScaledFormat` or names one."""
    return isinstance(fmt, ScaledFormat) or (isinstance(fmt, str) and fmt.strip().lower() in _BY_NAME)


def get_scaled_format(fmt: Any) -> ScaledFormat:
    """The :class:`ScaledFormat` named by ``fmt`` (case-insensitive), or :class:`FormatError` listing them."""
    if isinstance(fmt, ScaledFormat):
        return fmt
    found = _BY_NAME.get(fmt.strip().lower()) if isinstance(fmt, str) else None
    if found is None:
        raise FormatError(f"unknown block-scaled format {fmt!r}; use one of {', '.join(SCALED_FORMATS)}")
    return found


@dataclass(frozen=True)
class Quantized:
    """A quantized tensor: ``codes`` (element dtype, the input's shape), ``scales`` (one per block,
    in the scale format's dtype; shape :func:`scale_shape`), ``tensor_scale`` (NVFP4: the fp32
    per-tensor scale, else None)."""

    fmt: ScaledFormat
    codes: np.ndarray
    scales: np.ndarray
    tensor_scale: np.ndarray | None = None


# ------------------------------------------------------------------------------------- blocks
def _dims(fmt: ScaledFormat, shape: tuple[int, ...]) -> tuple[int, int, int, int, int]:
    """``(L, M, K, br, bc)``: the input as ``(L, M, K)`` and the block shape over (M, K)."""
    if len(shape) == 0:
        raise ShapeError(f"{fmt.name}: x is a scalar; pass an array with a last axis to cut into blocks")
    K = shape[-1]
    M = shape[-2] if len(shape) >= 2 else 1
    L = math.prod(shape[:-2]) if len(shape) >= 2 else 1
    br, bc = fmt.block
    if fmt.per_tensor:
        return 1, L * M, K, max(L * M, 1), max(K, 1)
    if bc == 0:
        return L, M, K, 1, max(K, 1)
    if br == 1:  # 1-D blocks along the last axis: every leading index is a row
        return 1, L * M, K, 1, bc
    return L, M, K, br, bc


def scale_shape(fmt: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of the scales of an input of ``shape``: ``()`` per tensor, ``shape[:-1] + (1,)`` per row,
    ``shape[:-1] + (ceil(K/bc),)`` for 1-D blocks, ``shape[:-2] + (ceil(M/br), ceil(K/bc))`` for tiles."""
    f = get_scaled_format(fmt)
    L, M, K, br, bc = _dims(f, tuple(shape))
    if f.per_tensor:
        return ()
    nk = -(-K // bc)
    if f.block[0] == 1:
        return tuple(shape[:-1]) + (nk,)
    return tuple(shape[:-2]) + (-(-M // br), nk)


def _block_view(a: np.ndarray, fmt: ScaledFormat) -> tuple[np.ndarray, tuple]:
    """``a`` zero-padded to whole blocks as ``(L, Mb, br, Kb, bc)`` (and the unpadded ``(L, M, K)``)."""
    L, M, K, br, bc = _dims(fmt, a.shape)
    a3 = a.reshape(L, M, K)
    Mb, Kb = -(-M // br), -(-K // bc)
    if Mb * br != M or Kb * bc != K:
        a3 = np.pad(a3, ((0, 0), (0, Mb * br - M), (0, Kb * bc - K)))
    return a3.reshape(L, Mb, br, Kb, bc), (L, M, K)


def element_scales(scales: Any, fmt: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The scale of every element (float64, ``shape``) from per-block ``scales`` (NVFP4: ``S``)."""
    f = get_scaled_format(fmt)
    L, M, K, br, bc = _dims(f, tuple(shape))
    s = np.asarray(scales, dtype=np.float64) if not isinstance(scales, np.ndarray) else _f64(scales)
    Mb, Kb = -(-M // br), -(-K // bc)
    s3 = s.reshape(L, Mb, Kb)
    full = np.repeat(np.repeat(s3, br, axis=1), bc, axis=2)[:, :M, :K]
    return np.ascontiguousarray(full).reshape(shape)


def _f64(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return a.astype(np.float64)


def _amax(x64: np.ndarray, fmt: ScaledFormat) -> np.ndarray:
    """max |x| per block, shape ``(L, Mb, Kb)`` (NaN propagates; an empty block has amax 0)."""
    v, _ = _block_view(np.abs(x64), fmt)
    if v.size == 0:
        return np.zeros(v.shape[:2] + v.shape[3:4])
    return v.max(axis=(2, 4))


# --------------------------------------------------------------------------------- the rules
def _mx_scale(amax: np.ndarray, elem: Format) -> np.ndarray:
    """OCP MX §6.3: ``2**(floor(log2 amax) - emax_elem)``, clamped to ``>= 2**-127``; NaN for non-finite amax."""
    finite = np.isfinite(amax)
    a = np.where(finite, amax, 1.0)
    _, e = np.frexp(a)  # a = m 2**e, 0.5 <= m < 1: floor(log2 a) = e - 1 (exact); a = 0 gives e = 0
    shared = np.where(a > 0, e - 1, -127) - elem.emax
    shared = np.maximum(shared, -127)
    return np.where(finite, np.ldexp(1.0, shared), np.nan)


def _fp32_div(a: np.ndarray, b: float | np.ndarray) -> np.ndarray:
    """``fl32(a / b)`` (float64 quotient rounded to float32: correctly rounded, 53 >= 2*24 + 2)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return (np.asarray(a, np.float64) / b).astype(np.float32).astype(np.float64)


def compute_scales(x: Any, fmt: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """The block scales the format's rule gives for ``x`` (float64 values, shape :func:`scale_shape`),
    and NVFP4's per-tensor fp32 scale (else None).  NaN marks a block whose amax is not finite."""
    f = get_scaled_format(fmt)
    x64 = _f64(np.asarray(x))
    amax = _amax(x64, f)
    shape = scale_shape(f, x64.shape)
    tensor = None
    if f.rule == "mx":
        s = _mx_scale(amax, f.element)
    elif f.rule == "amax":
        with np.errstate(invalid="ignore"):
            s = np.where(amax > 0, _fp32_div(amax, f.element.max_finite), 1.0)
        s[~np.isfinite(amax)] = np.nan
    else:  # nvfp4
        at = float(np.max(np.abs(x64))) if x64.size else 0.0
        if not math.isfinite(at):
            t = math.nan
        else:
            t = float(_fp32_div(at, 6.0 * 448.0)) if at > 0 else 1.0
            t = t if t > 0 else 2.0**-149  # a tensor amax below 6*448*2**-150 still needs a positive scale
        tensor = np.float32(t)
        with np.errstate(invalid="ignore", over="ignore"):
            v = amax / 6.0 / t
        s = _f64(round_to(np.where(np.isfinite(v), v, np.nan), f.scale, saturate=True)) if v.size else v
    return s.reshape(shape), tensor


def quantize(x: Any, fmt: Any, *, scales: Any = None, tensor_scale: Any = None) -> Quantized:
    """Quantize ``x`` into the block-scaled format ``fmt`` (codes and scales).

    Parameters
    ----------
    x : array-like
        Real values (any float dtype; the rule sees them exactly, widened to float64).
    fmt : str or ScaledFormat
        One of :data:`SCALED_FORMATS` (``"mxfp4"``, ``"nvfp4"``, ``"fp8_e4m3_block128"``, ...).
    scales, tensor_scale : array-like, optional
        Explicit block scales (shape :func:`scale_shape`; values of the scale format) and, for
        NVFP4, the per-tensor scale; by default the format's rule computes them.

    Returns
    -------
    Quantized
        ``codes = RN_elem,sat(x / S)`` per element with ``S`` its block's scale (times the tensor
        scale for NVFP4); codes of a NaN-scaled or zero-scaled block are 0.
    """
    f = get_scaled_format(fmt)
    x64 = _f64(np.asarray(x))
    if scales is None:
        s, t = compute_scales(x64, f)
        if tensor_scale is not None:
            raise FormatError(f"{f.name}: tensor_scale= given without scales=; pass both, or neither (the rule computes them)")
    else:
        s = _f64(np.asarray(scales)) if isinstance(scales, np.ndarray) else np.asarray(scales, dtype=np.float64)
        want = scale_shape(f, x64.shape)
        if s.shape != want:
            raise ShapeError(f"{f.name}: scales has shape {s.shape}; an input of shape {x64.shape} has {want} scales")
        if f.rule == "nvfp4":
            if tensor_scale is None:
                raise FormatError(f"{f.name}: explicit scales need the per-tensor fp32 scale too: pass tensor_scale=")
            t = np.float32(tensor_scale)
        else:
            t = None
    S = element_scales(s, f, x64.shape) * (float(t) if t is not None else 1.0)
    ok = np.isfinite(S) & (S > 0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        v = np.where(ok, x64 / np.where(ok, S, 1.0), 0.0)
    v = np.where(np.isnan(v), 0.0, v)  # (explicit finite scales and a NaN input: the code is 0)
    codes = round_to(v, f.element, saturate=True)
    scale_arr = round_to(s, f.scale) if f.scale.name != "float32" else s.astype(np.float32)
    return Quantized(f, codes, scale_arr, t)


def dequantize(q: Quantized, out: Any = "float32") -> np.ndarray:
    """``q * S`` rounded once to ``out`` (exact in float64; NaN where the block scale is NaN)."""
    return round_to(_values(q), get_format(out))


def _values(q: Quantized) -> np.ndarray:
    f = q.fmt
    S = element_scales(q.scales, f, q.codes.shape)
    if q.tensor_scale is not None:
        S = S * float(q.tensor_scale)
    return _f64(q.codes) * S  # exact: <= 4 + 4 + 24 significant bits


def scaled_round(x: Any, fmt: Any, *, scales: Any = None, tensor_scale: Any = None) -> np.ndarray:
    """``round_to`` for a block-scaled format: the exact values ``q * S`` (float64) of :func:`quantize`."""
    return _values(quantize(x, fmt, scales=scales, tensor_scale=tensor_scale))


def scaled_ulp(r: Any, fmt: Any, *, scales: Any = None, tensor_scale: Any = None) -> np.ndarray:
    """ULP of a block-scaled format at ``r``: ``S * ulp_elem(r / S)`` with ``S`` the element's scale
    (from ``scales`` or, by default, the rule applied to ``r``)."""
    from .ulp import ulp

    f = get_scaled_format(fmt)
    r64 = _f64(np.asarray(r))
    if scales is None:
        scales, tensor_scale = compute_scales(r64, f)
    S = element_scales(scales, f, r64.shape) * (float(tensor_scale) if tensor_scale is not None else 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return S * ulp(r64 / S, f.element)


# ------------------------------------------------------------------- legitimate fp32 variation
def legitimate_range(x: Any, fmt: Any, scale_ops: int = 2, elem_ops: int = 2,
                     out: Any = "float32") -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: every value a kernel following the rule with fp32 arithmetic can return, per element.

    A kernel may compute each fp32 quantity of the rule with up to ``scale_ops`` roundings (the
    scale: ``amax / max``, ``amax * fl(1/max)``, ``1 / fl(max / amax)``) and the element quotient
    ``x / S`` with up to ``elem_ops`` (``x * fl(1/S)``), then rounds ``q * S`` once to ``out``.
    Every such quantity lies within a factor ``(1 ± k u32)`` of the exact one, rounding is
    monotone, so with ``S`` in ``[S_lo, S_hi]`` the element is in ``[RN(|x|/S_hi (1 - k u)),
    RN(|x|/S_lo (1 + k u))]`` and the output within those codes times ``[S_lo, S_hi]``, rounded
    outward to ``out``.  MX scales are exact powers of two and their quotients exact: there the
    range is the single exact value.  NVFP4's E4M3 block scale is the rounding of a quantity with
    ``2 scale_ops`` roundings (tensor scale and quotient), so near an E4M3 midpoint both neighbours
    are legitimate.  Non-finite blocks: ``lo = hi = NaN``.
    """
    f = get_scaled_format(fmt)
    x64 = _f64(np.asarray(x))
    o = get_format(out)
    if f.rule == "mx":
        y = _f64(round_to(scaled_round(x64, f), o))
        return y, y
    s, t = compute_scales(x64, f)
    ks, ke = scale_ops * _U32, elem_ops * _U32
    if f.rule == "amax":
        amax = _amax(x64, f).reshape(s.shape)
        with np.errstate(invalid="ignore"):
            exact = np.where(amax > 0, amax / f.element.max_finite, 1.0)
        s_lo, s_hi = _fp32_floor(exact * (1 - ks)), _fp32_ceil(exact * (1 + ks))
        s_lo, s_hi = np.where(amax > 0, s_lo, 1.0), np.where(amax > 0, s_hi, 1.0)
        S_lo, S_hi = (element_scales(a, f, x64.shape) for a in (s_lo, s_hi))
    else:  # nvfp4: tensor scale within (1 ± ks), block scale the E4M3 rounding of a quantity within (1 ± 2ks)
        tt = float(t)
        at = float(np.max(np.abs(x64))) if x64.size else 0.0
        t_exact = at / (6.0 * 448.0) if at > 0 else 1.0
        t_lo, t_hi = float(_fp32_floor(t_exact * (1 - ks))), float(_fp32_ceil(t_exact * (1 + ks)))
        if at == 0:
            t_lo = t_hi = tt
        amax = _amax(x64, f).reshape(s.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            v = amax / 6.0 / t_exact
            sb_lo = _f64(round_to(np.nan_to_num(v * (1 - 2 * ks), nan=0.0), f.scale, saturate=True))
            sb_hi = _f64(round_to(np.nan_to_num(v * (1 + 2 * ks), nan=0.0), f.scale, saturate=True))
        S_lo = element_scales(sb_lo, f, x64.shape) * t_lo
        S_hi = element_scales(sb_hi, f, x64.shape) * t_hi
    a = np.abs(x64)
    elem = f.element
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        q_lo = _f64(round_to(np.where(S_hi > 0, a / np.where(S_hi > 0, S_hi, 1.0) * (1 - ke), 0.0), elem, saturate=True))
        q_hi = _f64(round_to(np.where(S_lo > 0, a / np.where(S_lo > 0, S_lo, 1.0) * (1 + ke), 0.0), elem, saturate=True))
        mag_lo = _f64(round_to(q_lo * S_lo, o, "rtz"))
        mag_hi = _round_up(q_hi * S_hi, o)
    neg = np.signbit(x64)
    lo = np.where(neg, -mag_hi, mag_lo)
    hi = np.where(neg, -mag_lo, mag_hi)
    bad = ~np.isfinite(element_scales(s, f, x64.shape))
    lo[bad] = np.nan
    hi[bad] = np.nan
    return lo, hi


def _fp32_floor(v: np.ndarray) -> np.ndarray:
    """Largest float32 <= v (v float64, positive)."""
    return _f64(round_to(v, "float32", "rtz"))


def _fp32_ceil(v: np.ndarray) -> np.ndarray:
    """Smallest float32 >= v (v float64, positive)."""
    return _round_up(v, get_format("float32"))


def _round_up(v: np.ndarray, o: Format) -> np.ndarray:
    """Smallest value of ``o`` >= v for v >= 0 (float64)."""
    d = _f64(round_to(v, o, "rtz"))
    up = d < v
    if up.any():
        d[up] = _f64(np.nextafter(d[up].astype(o.dtype), np.asarray(np.inf, o.dtype))) if o.name in (
            "float32", "float64", "float16") else _next_up(d[up], o)
    return d


def _next_up(d: np.ndarray, o: Format) -> np.ndarray:
    """The next value of ``o`` above ``d >= 0`` (bf16 and other ml_dtypes formats: by the spacing)."""
    from .ulp import ulp

    return d + ulp(d, o)
