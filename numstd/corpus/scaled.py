"""Scaled-GEMM variants: ``scaled_matmul`` (``C = (s_A ⊙ A_q) @ (s_B ⊙ B_q)``).

Every variant computes what one real fp8 / MX GEMM computes from the codes and the scales, then
rounds once to the output format.  K is cut into the scale blocks of the layout (the whole of K
for ``"tensor"`` and ``"row"``, 128 for ``"block128"``, 32 for ``"mx"``); each block's code
partial sum ``P_b = sum_{k in b} q_a q_b`` is formed in fp32 (in one of the orders of
:mod:`numstd.emulate`, or on a tensor-core model), multiplied by its block's scale ``s_A s_B`` in
fp32 and accumulated over the blocks in fp32 -- the structure of cuBLAS's per-tensor ``alpha``,
CUTLASS's row-wise epilogue, DeepSeek-V3's fine-grained scaling (§3.3.2: partial results
multiplied by the scales when they are promoted to CUDA cores) and MX block scaling.

Legitimate: fp32 accumulation in four orders (sequential with the scales in one fp32 ``alpha =
fl(s_A s_B)``, pairwise with two successive scale multiplies, blocked(32), split-K(4)); operands
dequantized to fp32 first and multiplied by numpy's float32 BLAS; the H100/H200 fp8 tensor core
(32-product block FMA into a 13-bit truncating accumulator, :mod:`numstd.emulate.tensor_core`)
promoted to fp32 every 128 products, and the Ada/L40S one (16-product blocks); both only for fp8
elements and fp32-scaled layouts (H100 and Ada have no MX instructions).

Bugs: the scales forgotten, one scale (``s_A``) applied twice, ``s_A`` inverted (``1/s_A``),
block scales misaligned by one block (block ``b`` takes the scales of block ``b + 1``), the
H100 narrow accumulator over the whole of K with no promotion (``use_fast_accum=True``: a bug
under the fp32-accumulation standards where K is long enough for it to show; the ``-FASTACCUM``
standard allows it), bf16 accumulation, truncation of the output conversion, zeros.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import f64, finish, narrow_out, registrar, rnd

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

OP = "scaled_matmul"
_F32 = FORMATS["float32"]


def _ranges(K: int, scaling: str) -> list[tuple[int, int]]:
    from ..ops.scaled import BLOCK_K

    b = BLOCK_K[scaling] or max(K, 1)
    return [(k, min(k + b, K)) for k in range(0, K, b)] or [(0, 0)]


def _block_scales(inputs: list, scaling: str, b: int) -> tuple[np.ndarray, np.ndarray]:
    """``(s_A column (M, 1), s_B row (1, N))`` of K block ``b`` in float64."""
    A_q, sA, B_q, sB = inputs
    M, N = A_q.shape[0], B_q.shape[1]
    sA, sB = f64(sA), f64(sB)
    if scaling == "tensor":
        return np.full((M, 1), sA.reshape(-1)[0]), np.full((1, N), sB.reshape(-1)[0])
    if scaling == "row":
        return sA.reshape(M, 1), sB.reshape(1, N)
    col = sA[:, b:b + 1]
    row = sB[b:b + 1]
    if scaling == "block128":
        row = np.repeat(row, 128, axis=1)[:, :N]
    return col, row


def _blockwise(inputs: list, params: dict, partial: Callable, combine: str = "alpha",
               scales: Callable | None = None) -> np.ndarray:
    """The fp32 accumulator of a scaled GEMM (float64 values): ``y = RN(y + RN(P_b * s_b))`` over K blocks.

    ``partial(Aq_block, Bq_block) -> P_b`` (fp32 values); ``combine``: ``"alpha"`` multiplies by
    ``fl(s_A s_B)``, ``"two"`` by ``s_A`` then ``s_B`` (each product rounded to fp32);
    ``scales(inputs, scaling, b) -> (s_A col, s_B row)`` replaces :func:`_block_scales` (bugs).
    """
    A_q, _, B_q, _ = inputs
    scaling = params["scaling"]
    get = scales or _block_scales
    y = None
    for b, (k0, k1) in enumerate(_ranges(A_q.shape[1], scaling)):
        P = f64(partial(A_q[:, k0:k1], B_q[k0:k1]))
        sa, sb = get(inputs, scaling, b)
        if combine == "alpha":
            t = rnd(P * rnd(sa * sb, _F32), _F32)
        else:
            t = rnd(rnd(P * sa, _F32) * sb, _F32)
        y = t if y is None else rnd(y + t, _F32)
    return y


def _order(order: str, acc: Format | None = None, **kw: Any) -> Callable:
    """``partial`` of a generic summation order in ``acc`` (default fp32)."""

    def partial(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from ..emulate import matmul

        if a.shape[1] == 0:
            return np.zeros((a.shape[0], b.shape[1]))
        return matmul(a, b, order=order, acc=acc or _F32, out=acc or _F32, **kw)

    return partial


def _tensor_core(arch: str, promote: int | None) -> Callable:
    """``partial`` on a tensor-core model (fp32 accumulator), promoted to fp32 every ``promote`` terms."""

    def partial(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from ..emulate import tensor_core_matmul

        return tensor_core_matmul(a, b, arch=arch, out="float32", acc="float32", promote_every=promote)

    return partial


def _fp8_layout(out: Format, fmts: list, params: Any) -> bool:
    """fp8 elements with fp32 scales (the layouts H100 and Ada tensor cores serve)."""
    return params.get("scaling") != "mx" and all(f is not None and f.bits == 8 for f in (fmts[0], fmts[2]))


def _whole_k(out: Format, fmts: list, params: Any) -> bool:
    """One scale per tensor or per row/column: the whole of K is one accumulation."""
    return params.get("scaling") in ("tensor", "row")


def _blocked_layout(out: Format, fmts: list, params: Any) -> bool:
    return params.get("scaling") in ("block128", "mx")


def _register(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
              observable: Callable | None = None, mode: str = "rne") -> Callable:
    """Register ``core(inputs, params) -> fp32 accumulator`` with the final conversion (``mode``)."""

    def deco(core: Callable) -> Callable:
        def run(inputs: list, params: dict, out: Format, acc: Format, seed: int) -> np.ndarray:
            with np.errstate(all="ignore"):
                return finish(core(inputs, params), out, mode, seed)

        variant(OP, name, family, legit, description, applies, observable, ("float32",))(run)
        return core

    return deco


# ---------------------------------------------------------------------------------------------
# legitimate
# ---------------------------------------------------------------------------------------------


@_register("fp32-sequential", "accumulation-order", True,
           "code products summed by one fp32 FMA chain per scale block, each block sum times alpha = "
           "fl32(s_A s_B), blocks accumulated in fp32 (cuBLAS alpha; per-block promotion)")
def _sequential(inputs, params):
    return _blockwise(inputs, params, _order("sequential"))


@_register("fp32-pairwise", "accumulation-order", True,
           "pairwise fp32 sums per scale block, then times s_A and times s_B (two fp32 roundings: a "
           "row-wise epilogue), blocks accumulated in fp32")
def _pairwise(inputs, params):
    return _blockwise(inputs, params, _order("pairwise"), combine="two")


@_register("fp32-blocked32", "accumulation-order", True,
           "fp32 FMA chains over 32 products inside each scale block (BLOCK_K = 32), then the scales")
def _blocked(inputs, params):
    return _blockwise(inputs, params, _order("blocked", block=32))


@_register("fp32-splitk4", "accumulation-order", True,
           "split-K: each scale block's products in 4 slices summed in fp32 and added in order, then the scales")
def _splitk(inputs, params):
    return _blockwise(inputs, params, _order("splitk", splits=4), combine="two")


@_register("dequant-sgemm", "library", True,
           "operands dequantized to fp32 first (fl32(q s), one rounding each; exact for MX) and "
           "multiplied by numpy's float32 BLAS (a dequantize-then-sgemm fallback)")
def _dequant_sgemm(inputs, params):
    from ..ops.scaled import element_scales

    A_q, sA, B_q, sB = inputs
    s = params["scaling"]
    with np.errstate(all="ignore"):
        A = (f64(A_q) * element_scales(sA, s, A_q.shape, "A")).astype(np.float32)
        B = (f64(B_q) * element_scales(sB, s, B_q.shape, "B")).astype(np.float32)
        return f64(np.matmul(A, B))


@_register("tc-h100-promote128", "hardware", True,
           "H100/H200 fp8 tensor core: 32-product block FMAs into the 13-bit truncating accumulator, "
           "promoted to fp32 every 128 products (DeepSeek-V3 §3.3.2, cuBLAS default), scales applied on "
           "promotion (per block) or in the epilogue; fp8 elements, fp32 scales", applies=_fp8_layout)
def _h100(inputs, params):
    return _blockwise(inputs, params, _tensor_core("h100-fp8", 128))


@_register("tc-ada-promote128", "hardware", True,
           "Ada/L40S fp8 tensor core: 16-product block FMAs into the 13-bit truncating accumulator, "
           "promoted to fp32 every 128 products; fp8 elements, fp32 scales", applies=_fp8_layout)
def _ada(inputs, params):
    return _blockwise(inputs, params, _tensor_core("ada", 128), combine="two")


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


def _not_one(inputs: list, params: Any, out: Format) -> bool:
    """``s_A`` is not 1 everywhere (a wrong or missing ``s_A`` changes something)."""
    s = f64(inputs[1])
    return bool(np.any(np.isfinite(s) & (np.abs(s) != 1.0)))


@_register("scales-forgotten", "scale", False,
           "the dequantization scales are never applied: C = A_q @ B_q (codes only), fp32 accumulation",
           observable=lambda i, p, o: _not_one(i, p, o) or bool(np.any(f64(i[3]) != 1.0)))
def _forgotten(inputs, params):
    return _order("blocked", block=32)(inputs[0], inputs[2])


def _twice(inputs: list, scaling: str, b: int) -> tuple[np.ndarray, np.ndarray]:
    sa, sb = _block_scales(inputs, scaling, b)
    return sa * sa, sb


def _inverted(inputs: list, scaling: str, b: int) -> tuple[np.ndarray, np.ndarray]:
    sa, sb = _block_scales(inputs, scaling, b)
    with np.errstate(divide="ignore"):
        return 1.0 / sa, sb


def _shifted(inputs: list, scaling: str, b: int) -> tuple[np.ndarray, np.ndarray]:
    nb = len(_ranges(inputs[0].shape[1], scaling))
    return _block_scales(inputs, scaling, min(b + 1, nb - 1))


@_register("scale-twice", "scale", False,
           "s_A applied twice (once when loading A, once in the epilogue): C scaled by s_A too much",
           observable=_not_one)
def _scale_twice(inputs, params):
    return _blockwise(inputs, params, _order("blocked", block=32), scales=_twice)


@_register("scale-inverted", "scale", False,
           "s_A inverted: the kernel multiplies by 1/s_A (a quantization scale taken for a "
           "dequantization one)", observable=_not_one)
def _scale_inverted(inputs, params):
    return _blockwise(inputs, params, _order("blocked", block=32), scales=_inverted)


def _blocks_differ(inputs: list, params: Any, out: Format) -> bool:
    """More than one scale block along K, with different scales in neighbouring blocks."""
    sa, sb = f64(inputs[1]), f64(inputs[3])
    return sa.ndim == 2 and sa.shape[1] > 1 and bool(np.any(sa[:, 1:] != sa[:, :-1]) or np.any(sb[1:] != sb[:-1]))


@_register("block-misaligned", "indexing", False,
           "block scales misaligned by one block: K block b uses the scales of block b + 1 (the last "
           "block its own), an off-by-one in the scale index", applies=_blocked_layout, observable=_blocks_differ)
def _misaligned(inputs, params):
    return _blockwise(inputs, params, _order("blocked", block=32), scales=_shifted)


#: K from which the unpromoted narrow accumulator can show under the fp32-accumulation standards: its error grows
#: like (K/32) u_tc |c| against the promoted one's sqrt(K/32) u_tc |c_chunk|; calibration (fp32 output) caught it on
#: no suite case with K <= 300, on 7-8 of 8 e4m3 cases with K = 640 and on every e4m3 case with K = 4096 (e5m2: 6-7 of
#: 8 at K = 4096); docs/scaled_gemm.md §5
NO_PROMOTION_VISIBLE_K = 2048


@_register("narrow-no-promotion", "accumulation-precision", False,
           "H100 fp8 tensor core with its 13-bit truncating accumulator over the whole of K, never promoted "
           "to fp32 (torch._scaled_mm use_fast_accum=True, CUBLASLT_MATMUL_DESC_FAST_ACCUM), scales in the "
           "epilogue; a bug where fp32 accumulation is declared and K is long",
           applies=lambda o, f, p: _fp8_layout(o, f, p) and _whole_k(o, f, p),
           observable=lambda i, p, o: i[0].shape[1] >= NO_PROMOTION_VISIBLE_K)
def _no_promotion(inputs, params):
    return _blockwise(inputs, params, _tensor_core("h100-fp8", None))


@_register("acc-bf16", "accumulation-precision", False,
           "code products accumulated in bfloat16 (an FMA chain rounding every partial sum to 8 bits), "
           "then the scales")
def _acc_bf16(inputs, params):
    return _blockwise(inputs, params, _order("sequential", FORMATS["bfloat16"]))


@_register("truncation", "truncation", False,
           "fp32 accumulation, then the output conversion truncates (round toward zero) instead of "
           "rounding to nearest: within 1 ULP but biased", applies=narrow_out, mode="rtz")
def _truncation(inputs, params):
    return _blockwise(inputs, params, _order("blocked", block=32))


@_register("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _zeros(inputs, params):
    return np.zeros((inputs[0].shape[0], inputs[2].shape[1]))


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"block-misaligned": None}

VARIANTS: tuple = with_causes(_V, _CAUSES)
