"""Scaled matrix products: ``scaled_matmul`` (fp8 / MX GEMMs with dequantization scales).

``scaled_matmul(A_q, scale_A, B_q, scale_B, scaling=G)`` is ``C = (s_A ⊙ A_q) @ (s_B ⊙ B_q)``:
the element codes ``A_q`` (M, K) and ``B_q`` (K, N) in a narrow format, each multiplied by the
scale of its block (``⊙`` repeats every scale over its block), as ``torch._scaled_mm`` computes
(``scale_a``, ``scale_b`` are *dequantization* factors: ``(A * scale_a) @ (B * scale_b)``).

The parameter ``scaling`` names the scale layout (the granularity); each layout fixes the shapes
and the dtype of both scales:

==============  ==============================  ==============================  ==================
scaling         scale_A                         scale_B                         scale dtype
==============  ==============================  ==============================  ==================
``"tensor"``    one value (size 1)              one value (size 1)              float32
``"row"``       ``(M, 1)``: per row of A        ``(1, N)``: per column of B     float32
``"block128"``  ``(M, ceil(K/128))``: 1 x 128   ``(ceil(K/128), ceil(N/128))``  float32
                blocks along K (activations)    128 x 128 tiles (weights)
``"mx"``        ``(M, ceil(K/32))``             ``(ceil(K/32), N)``             float8_e8m0fnu
==============  ==============================  ==============================  ==================

``"tensor"`` and ``"row"`` are ``torch._scaled_mm``'s per-tensor and row-wise recipes;
``"block128"`` is DeepSeek-V3's fine-grained fp8 scaling (DeepSeek-AI, "DeepSeek-V3 technical
report", arXiv:2412.19437, 2024, §3.3.2: 1 x 128 tiles of activations, 128 x 128 blocks of
weights); ``"mx"`` is OCP Microscaling v1.0 (blocks of 32 along the reduction axis K, E8M0 power
of two scales) as the MXFP8 GEMMs of Blackwell take them.  Element codes: float8_e4m3fn or
float8_e5m2 (A and B may differ); ``"mx"`` also accepts the MX element formats float6_e3m2fn,
float6_e2m3fn and float4_e2m1fn.

``use_fast_accum`` (default False) is ``torch._scaled_mm``'s flag of that name
(``CUBLASLT_MATMUL_DESC_FAST_ACCUM``): the caller allows the tensor core's narrow fp8 accumulator
over the whole of K, without the periodic promotion to fp32.  It is a variant parameter
(:attr:`~numstd.ops.entry.OpInfo.variant_params`): only a standard whose selector names it
judges such a call.

Reference: :mod:`numstd.reference.scaled`; variants: :mod:`numstd.corpus.scaled`; error
analysis: ``docs/scaled_gemm.md``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import DtypeError, ParameterError, ShapeError
from .entry import REQUIRED, OpInfo, entry

__all__ = ["ENTRIES", "SCALINGS", "BLOCK_K", "FP8_ELEMENTS", "MX_ELEMENTS", "scale_shapes", "k_blocks",
           "element_scales", "suite_inputs"]

#: the scale layouts of ``scaling`` (module docstring)
SCALINGS: tuple[str, ...] = ("tensor", "row", "block128", "mx")

#: the K extent of one scale block per layout (0: the whole of K)
BLOCK_K: Mapping[str, int] = {"tensor": 0, "row": 0, "block128": 128, "mx": 32}

#: element formats of the fp32-scaled layouts
FP8_ELEMENTS: tuple[str, ...] = ("float8_e4m3fn", "float8_e5m2")
#: element formats of ``scaling="mx"`` (OCP MX v1.0 §5: MXFP8, MXFP6, MXFP4)
MX_ELEMENTS: tuple[str, ...] = FP8_ELEMENTS + ("float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn")


def _scaling(op: str, value: Any) -> str:
    """``scaling``: one of :data:`SCALINGS` (any case)."""
    v = value.strip().lower() if isinstance(value, str) else value
    if v not in SCALINGS:
        raise ParameterError(f"{op}: scaling={value!r} is not a scale layout; use one of "
                             f"{', '.join(repr(s) for s in SCALINGS)} (docs/scaled_gemm.md)")
    return str(v)


def _flag(op: str, value: Any) -> bool:
    """``use_fast_accum``: a bool (the catalog's shared rule)."""
    from .catalog import _bool  # (at call time: the catalog imports this module while it is built)

    return _bool(op, "use_fast_accum", value)


def k_blocks(K: int, scaling: str) -> int:
    """Number of scale blocks along K: ``ceil(K / BLOCK_K)``, 1 for ``"tensor"`` and ``"row"``."""
    b = BLOCK_K[scaling]
    return 1 if b == 0 else -(-K // b)


def scale_shapes(scaling: str, M: int, K: int, N: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of ``scale_A`` and ``scale_B`` for ``A`` (M, K), ``B`` (K, N) (module docstring's
    table; ``"tensor"``: ``()``, though any shape of size 1 is accepted)."""
    nk = k_blocks(K, scaling)
    if scaling == "tensor":
        return (), ()
    if scaling == "row":
        return (M, 1), (1, N)
    if scaling == "block128":
        return (M, nk), (nk, -(-N // 128))
    return (M, nk), (nk, N)


def element_scales(scale: np.ndarray, scaling: str, shape: tuple[int, int], operand: str) -> np.ndarray:
    """The scale of every element of ``A`` (``operand="A"``) or ``B`` (``"B"``), float64 of ``shape``.

    ``"tensor"``: the one value; ``"row"``: broadcast; ``"block128"``/``"mx"``: every scale repeated
    over its block (A: ``BLOCK_K`` columns; B: ``BLOCK_K`` rows, and 128 columns for ``"block128"``).
    """
    s = np.asarray(scale).astype(np.float64)
    if scaling == "tensor":
        return np.full(shape, s.reshape(-1)[0])
    if scaling == "row":
        return np.broadcast_to(s, shape)
    bk = BLOCK_K[scaling]
    if operand == "A":
        return np.repeat(s, bk, axis=1)[:, :shape[1]]
    full = np.repeat(s, bk, axis=0)[:shape[0]]
    if scaling == "block128":
        full = np.repeat(full, 128, axis=1)
    return full[:, :shape[1]]


def _check_scale(spec: OpInfo, pos: int, s: np.ndarray, want: tuple[int, ...], scaling: str, operands: str) -> None:
    name = spec.inputs[pos]
    dtype = "float8_e8m0fnu" if scaling == "mx" else "float32"
    if s.dtype.name != dtype:
        raise ParameterError(
            f"{spec.name}: {name} has dtype {s.dtype}; scaling={scaling!r} takes {dtype} scales "
            + ("(OCP MX E8M0: pass ml_dtypes.float8_e8m0fnu)" if scaling == "mx" else
               f"as torch._scaled_mm does: pass {name}.astype(np.float32)"))
    ok = s.size == 1 and s.ndim <= 2 if scaling == "tensor" else s.shape == want
    if not ok:
        what = "one value (size 1)" if scaling == "tensor" else f"shape {want}"
        raise ParameterError(
            f"{spec.name}: {name} has shape {s.shape}; scaling={scaling!r} needs {what} for {operands} "
            f"(docs/scaled_gemm.md lists the layouts: {', '.join(SCALINGS)}; or pass the scaling= that "
            "your scales follow)")


def _shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    A, sA, B, sB = a
    for pos, arr in ((0, A), (2, B)):
        if arr.ndim != 2:
            raise ShapeError(f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) has shape {arr.shape}; scaled_matmul "
                             "takes 2-D operands (M, K) and (K, N) as torch._scaled_mm does")
    scaling = p["scaling"]
    allowed = MX_ELEMENTS if scaling == "mx" else FP8_ELEMENTS
    for pos, arr in ((0, A), (2, B)):
        if arr.dtype.name not in allowed:
            raise DtypeError(f"{spec.name}: inputs[{pos}] ({spec.inputs[pos]}) has dtype {arr.dtype}; scaling="
                             f"{scaling!r} takes element codes in {', '.join(allowed)} (quantize with "
                             "numstd.core.scaled.quantize)")
    M, K = A.shape
    if B.shape[0] != K:
        raise ShapeError(f"{spec.name}: inner dimensions differ: A {A.shape} has K={K} columns but B {B.shape} has "
                         f"K={B.shape[0]} rows; A is (M, K) and B is (K, N) (pass W.T for a (N, K) weight)")
    N = B.shape[1]
    want_a, want_b = scale_shapes(scaling, M, K, N)
    operands = f"A {A.shape} and B {B.shape}"
    _check_scale(spec, 1, sA, want_a, scaling, operands)
    _check_scale(spec, 3, sB, want_b, scaling, operands)
    return (M, N)


def suite_inputs(rng: np.random.Generator, shape: tuple, distribution: str,
                 draw: Callable[[tuple, str], np.ndarray], formats: list, params: Mapping[str, Any]) -> list:
    """A suite case's ``[A_q, scale_A, B_q, scale_B]`` (:func:`numstd.catalog.suites.make_case`).

    ``shape = [M, K, N]``; real ``A`` (M, K) is drawn from ``distribution`` and real ``B`` (K, N)
    normal (as the matmul suite does for its offset rows), then each is quantized by the scale rule of
    its layout (:mod:`numstd.core.scaled`: fp32 ``amax / max`` per tensor, row of A / column of B,
    1 x 128 block of A, 128 x 128 tile of B; OCP MX E8M0 per 32 along K), element formats
    ``formats[0]`` and ``formats[2]``.
    """
    from ..core.scaled import quantize

    M, K, N = (int(s) for s in shape)
    scaling = params["scaling"]
    a = draw((M, K), distribution)
    b = draw((K, N), "normal" if distribution in ("offset", "rowscale") else distribution)

    def scaled_name(elem: str, block: str) -> str:
        short = elem.split("_")[1][:4]  # e4m3 / e5m2
        if scaling == "mx":
            return {"float8_e4m3fn": "mxfp8_e4m3", "float8_e5m2": "mxfp8_e5m2", "float6_e3m2fn": "mxfp6_e3m2",
                    "float6_e2m3fn": "mxfp6_e2m3", "float4_e2m1fn": "mxfp4"}[elem]
        return f"fp8_{short}_{block}"

    block_a, block_b = {"tensor": ("tensor", "tensor"), "row": ("row", "row"), "block128": ("block128", "tile128"),
                        "mx": ("", "")}[scaling]
    qa = quantize(a, scaled_name(formats[0].name, block_a))
    qb = quantize(np.ascontiguousarray(b.T), scaled_name(formats[2].name, block_b))  # B's blocks run along K
    sdtype = qa.scales.dtype
    sa = np.asarray(qa.scales, dtype=sdtype)
    sb = np.asarray(qb.scales, dtype=sdtype).T
    if scaling == "tensor":  # (one value each: 0-d, as torch._scaled_mm's per-tensor scales)
        sa, sb = sa.reshape(()), sb.reshape(())
    return [qa.codes, np.array(sa, order="C"), np.ascontiguousarray(qb.codes.T), np.array(sb, order="C")]


ENTRIES: tuple[OpInfo, ...] = (
    entry("scaled_matmul", "contraction", ("A", "scale_A", "B", "scale_B"), 0,
          {"scaling": REQUIRED, "use_fast_accum": False}, (
              "C = (s_A * A_q) @ (s_B * B_q) (torch._scaled_mm): A_q (M, K) and B_q (K, N) element codes "
              "(fp8 e4m3/e5m2; MX elements for scaling='mx'), each multiplied by the scale of its block, "
              "scaling = 'tensor' (one fp32 scale each), 'row' (scale_A (M, 1), scale_B (1, N)), 'block128' "
              "(scale_A (M, ceil(K/128)) per 1x128 block along K, scale_B (ceil(K/128), ceil(N/128)) per 128x128 "
              "tile; DeepSeek-V3) or 'mx' (E8M0 scales per 32 along K: scale_A (M, ceil(K/32)), scale_B "
              "(ceil(K/32), N); OCP MX v1.0). K = A.shape[1]. use_fast_accum: the caller allows the "
              "tensor core's narrow fp8 accumulator without promotion to fp32."
          ),
          shape=_shape, reference="scaled:scaled_matmul", corpus="scaled",
          terms=("absdot", "K", "nblocks", "tcmag", "tcsum"),
          param_checks={"scaling": _scaling, "use_fast_accum": _flag},
          variant_params=("use_fast_accum",)),
)
