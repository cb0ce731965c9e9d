"""NVIDIA tensor cores: the block fused multiply-add model of Fasi et al. (2021) and Khattak &
Mikaitis (2025).

A tensor core computes ``d = c + sum_{i=1..b} a_i b_i`` for a block of ``b`` products and an
accumulator ``c`` in one operation that is *not* IEEE 754 arithmetic.  The model (Fasi, Higham,
Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021;
Khattak & Mikaitis, "Accurate models of NVIDIA tensor cores", arXiv:2512.07004, 2025, whose
parameterised MATLAB model ``models/tools/Generic_BFMA_TC.m`` -- global-alignment branch -- this
follows):

1. the products ``a_i b_i`` are exact;
2. every term (the products and ``c``) is aligned to the largest exponent of the block,
   ``E = max(e_min_align, e(c), max_i e(a_i) + e(b_i))`` with ``e(x) = max(floor(log2|x|),
   emin_x)`` the exponent of the encoding (products are aligned by their unnormalised exponent
   sum, their significands in [1, 4) keep one carry bit; zero terms take no part) and
   ``e_min_align`` a floor on the alignment exponent (``min_exp_limit`` upstream);
3. the aligned significands are *truncated* (toward zero, sign-magnitude) to the grid
   ``2**(E - 23 - n_eab)``, where ``n_eab`` is the number of extra alignment bits;
4. the truncated terms are added exactly (the hardware's carry bits make the addition exact);
5. the sum is normalised and rounded to the accumulator format -- fp32, or fp16 for the
   fp16-accumulator paths -- keeping ``min(p, 24 + n_eab)`` significant bits (``p`` = 24 or 11:
   the fp8 -> fp32 paths of H100 and Ada keep only 13 fraction bits; with fp16 output the 13-bit
   aligned sum is rounded to fp16's 11 bits, as ``Generic_BFMA_TC.m`` rounds to the output's
   ``NoManBitsOut``), toward zero (``"rz"``) or to nearest even (``"rne"``) as the path says; the
   subnormal quantum is ``2**(emin - p + 1 - min(n_eab, 0))`` (fp32) or ``2**(emin - 10)``
   (fp16); a result of magnitude ``2**(emax + 1)`` or more is ``±inf``;
6. blocks are applied in K order, each one's ``d`` becoming the next one's ``c``.

**fp8 mma.sync on H100/H200 and B200** is not an fp8 datapath: ptxas compiles
``mma.sync.aligned.m16n8k32.row.col.{f16,f32}.e4m3.e4m3.{f16,f32}`` for sm_90 and sm_100 into
``F2FP.F16.E4M3.UNPACK_B`` conversions (exact) of the low and the high 16-bit halves of each
fp8x4 operand register, ``HMMA.16816`` over the low halves from a zero accumulator, a second
``HMMA.16816`` over the high halves accumulating onto it, and ``HADD2`` / ``FADD`` of ``c``
(``scripts/tc_mma_fp8_sass.sh``, CUDA 13.0; for sm_89, Ada, it is one ``QMMA.16832``).  In the
``m16n8k32`` fragments the low halves hold the positions ``k`` with ``k mod 4`` in {0, 1}.  So
these paths are blocks of 32 split into the sub-blocks :data:`FP8_REGISTER_HALVES`, each a block
FMA of the GPU's fp16-input datapath (16 products, ``n_eab = 2``; RNE to fp16 or RZ to fp32), and
``c`` added last with round to nearest (late c).  The structure was chosen on the even rows of
the H100/H200/B200 fp8 datasets (``scripts/tc_fit_search.py``: of 22 structures only this one
fits) before the SASS was read; the odd rows are held out (all 2,500 match in every dataset).
The H100/H200 fp8 -> fp32 datasets come from WGMMA (``c`` ignored), which *is* the 13-bit fp8
datapath of ``H100TC.m``; an ``mma.sync`` fp8 -> fp32 on H100 would be the emulation above (no
dataset measures it; the ``h100`` fp8 -> fp32 path models WGMMA).

**fp16 output** (``out="float16"``) is *fp16 accumulation*: the PTX ``mma``/``wmma`` with an
``.f16`` accumulator rounds every block FMA's result to fp16 (step 5 with RNE) and that fp16 value
is the next block's ``c``; the ``c`` given is first rounded to fp16 with RNE, as the validation
kernels do with ``__float2half`` (``model_validation/CUDA/*.cu``).  It is not an fp32 result
converted at the end (that is ``out="float16", acc="float32"``, what cuBLAS does with an fp32
compute type).

Parameters per architecture (block ``b``, ``n_eab``, output rounding, ``e_min_align``) from the
models ``V100TC.m``, ``A100TC.m`` (A100, A2, A30), ``AdaTC.m`` / ``L40STC.m``, ``H100TC.m`` /
``H200TC.m``, ``B200TC.m`` / ``B200TCRN.m`` of the MATLAB-tensor-core repository, validated
bit-for-bit by ``tests/test_tensor_core_truth.py`` against the GPU outputs shipped in
``reference_data/tensor_core/`` (match table in ``docs/emulators.md``).  Per path ``(b, n_eab,
rounding, e_min_align)``:

=================  ==============  =========  ============  ===================  ===================
arch (GPUs)        fp16/bf16>fp32  tf32>fp32  fp16>fp16     fp8>fp32             fp8>fp16
=================  ==============  =========  ============  ===================  ===================
v100 (V100)        4,0,RZ,-1024    4,0,RZ     4,0,RNE,-19   (fp16 path)          (fp16 path)
a100 (A100, A2)    8,1,RZ,-132     4,1,RZ     8,1,RNE,-20   (fp16 path)          (fp16 path)
ada (Ada, L40S)    8,1,RZ,-132     4,1,RZ     8,1,RNE,-20   16,-10,RZ,-132       16,-10,RNE,-132
h100 (H100, H200)  16,2,RZ,-133    8,2,RZ     16,2,RNE,-21  32,-10,RZ,-133       32,2,RNE,-21,h [f]
b200 (B200)        16,2,RZ,-133    8,2,RZ     16,2,RNE,-21  32,2,RZ,-133,h [f]   32,2,RNE,-21,h [f]
=================  ==============  =========  ============  ===================  ===================

Sources: the MATLAB models named above; ``h`` = sub-blocks :data:`FP8_REGISTER_HALVES` with late
c (:class:`BFMAPath`), the fp8 ``mma.sync`` emulation described above, whose block FMAs take the
parameters of the same GPU's fp16-input path; [f] = no upstream model reproduces the
measurements: the structure was fitted on the even rows of the datasets, odd rows held out
(docs/emulators.md).  The even rows alone accept ``n_eab`` from -4 up (fp16 output) and do not
tell RZ from RNE or the split of the products with fp32 output (only that ``c`` comes last): the
values are those of the HMMA that the SASS shows.  ``h100-fp8`` and ``b200-fp8`` force the fp8
parameters whatever the inputs.

Fasi et al. found "3 extra bits" on V100/T4/A100: those are *carry* bits of the multi-operand adder
(which step 4 makes exact), not alignment bits; the alignment bits measured by Khattak & Mikaitis
are 0 (V100) and 1 (A100).  The 13 fraction bits of the H100 fp8 accumulator agree with
DeepSeek-AI, "DeepSeek-V3 technical report" (arXiv:2412.19437, 2024, §3.3.2: "around 14 bits").
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..core.errors import ParameterError
from ..core.formats import get_format, round_to
from ._accumulator import Accumulator
from ._terms import ProductTerms, check_order_parameter, exponents
from .matmul import to_output
from .summation import contiguous_slices

__all__ = ["BFMAPath", "TensorCoreModel", "TENSOR_CORES", "tensor_core_matmul", "block_fma",
           "input_kind", "FP8_REGISTER_HALVES"]

_ACCS = {"float32": (24, -126, 127), "float16": (11, -14, 15)}  # (p, emin, emax)


@dataclass(frozen=True)
class BFMAPath:
    """One datapath of a tensor core: the block FMA for one input kind and accumulator.

    Attributes
    ----------
    block : int
        Products per block FMA ``b``.
    extra_bits : int
        Extra alignment bits ``n_eab`` (negative: fewer bits than the accumulator's).
    rounding : {"rz", "rne"}
        Rounding of the normalised sum to the accumulator format.
    min_exp : int
        Floor ``e_min_align`` of the alignment exponent ``E``.
    acc : {"float32", "float16"}
        Accumulator (and output) format of the block FMA.
    late_c : bool
        ``c`` takes no part in the alignment: the products' block result (with ``subblocks``,
        the chain of sub-block FMAs started from zero) is rounded to ``acc`` first and ``c``
        added to it with one more rounding to nearest even in ``acc`` (``late_partial_sum`` of
        ``Generic_BFMA_TC.m``).
    subblocks : tuple of tuple of int
        Empty (default): the ``block`` products form one block FMA.  Otherwise the positions
        (0-based, inside a block of ``block`` products) of sub-blocks that are applied one after
        another as block FMAs of their own (steps 2-5 each, same ``extra_bits``, ``rounding`` and
        ``min_exp``), each one's result the next one's ``c``; positions past the end of a short
        last block are skipped.  :data:`FP8_REGISTER_HALVES` is the split of the fp8 ``mma.sync``
        paths of H100/H200 and B200 (evidence in the module docstring).
    source : str
        Where the parameters come from.
    """

    block: int
    extra_bits: int
    rounding: str = "rz"
    min_exp: int = -133
    acc: str = "float32"
    late_c: bool = False
    subblocks: tuple[tuple[int, ...], ...] = ()
    source: str = ""


@dataclass(frozen=True)
class TensorCoreModel:
    """The datapaths of one GPU architecture (one row of :data:`TENSOR_CORES`).

    Attributes
    ----------
    arch : str
        Name (``"a100"``).
    gpus : tuple of str
        GPUs whose measured outputs this model reproduces (``("A100", "A2")``).
    paths : Mapping
        ``(input kind, acc) -> BFMAPath``; input kinds ``"fp16"``, ``"bf16"``, ``"tf32"``,
        ``"fp8"`` (see :func:`input_kind`), ``acc`` ``"float32"`` or ``"float16"``.
    source : str
        Where the parameters come from.
    validated : tuple of str
        Input formats whose fp32-output GPU datasets (``reference_data/tensor_core``) the fp32
        datapath reproduces bit for bit on every row (``tests/test_tensor_core_truth.py``).
    """

    arch: str
    gpus: tuple[str, ...]
    paths: Mapping[tuple[str, str], BFMAPath]
    source: str
    validated: tuple[str, ...] = ()

    def path(self, kind: str, acc: str) -> BFMAPath:
        """The datapath for inputs of ``kind`` accumulated in ``acc``.

        Falls back to the fp16 path for fp8 inputs on architectures without fp8 (V100, A100) and
        raises a ParameterError for an fp16 accumulator the architecture lacks for ``kind``.
        """
        if kind == "fp8" and ("fp8", "float32") not in self.paths:
            kind = "fp16"
        if (kind, acc) not in self.paths:
            have = sorted({k for k, a in self.paths if a == acc})
            raise ParameterError(
                f"arch {self.arch!r} has no {kind} path with a {acc} accumulator (it has "
                f"{', '.join(have)}); use acc='float32' to convert an fp32 result instead")
        return self.paths[(kind, acc)]

    # Backwards-compatible accessors (the fp16/bf16 fp32-accumulator path).
    @property
    def block(self) -> int:
        return self.paths[("fp16", "float32")].block

    @property
    def extra_bits(self) -> int:
        return self.paths[("fp16", "float32")].extra_bits


def input_kind(p: int) -> str:
    """Input kind of operands of at most ``p`` significant bits.

    ``p <= 4``: ``"fp8"`` (e4m3, e5m2); ``p <= 8``: ``"bf16"``; ``p == 11``: ``"fp16"``; wider
    (tf32, float32): ``"tf32"`` -- float32 values are *not* rounded to tf32.
    """
    if p <= 4:
        return "fp8"
    if p <= 8:
        return "bf16"
    if p <= 11:
        return "fp16"
    return "tf32"


_KM = "Khattak & Mikaitis 2025, MATLAB-tensor-core models/"


def _model(arch: str, gpus: tuple[str, ...], source: str, *,
           b16: tuple[int, int, int], tf32: int, h16: tuple[int, int, int],
           fp8: BFMAPath | None = None, fp8_h16: BFMAPath | None = None,
           validated: tuple[str, ...] = ()) -> TensorCoreModel:
    """Build a model: ``b16 = (block, n_eab, e_min_align)`` of the fp16/bf16 fp32-accumulator
    path (RZ), ``tf32`` its block size for tf32 inputs (same ``n_eab``), ``h16`` the same triple
    for the fp16 -> fp16 path (RNE), and the fp8 paths."""
    b, n, m = b16
    paths = {
        ("fp16", "float32"): BFMAPath(b, n, "rz", m, "float32", source=source),
        ("bf16", "float32"): BFMAPath(b, n, "rz", m, "float32", source=source),
        ("tf32", "float32"): BFMAPath(tf32, n, "rz", m, "float32", source=source),
        ("fp16", "float16"): BFMAPath(h16[0], h16[1], "rne", h16[2], "float16", source=source),
    }
    if fp8 is not None:
        paths[("fp8", "float32")] = fp8
    if fp8_h16 is not None:
        paths[("fp8", "float16")] = fp8_h16
    return TensorCoreModel(arch, gpus, types.MappingProxyType(paths), source, validated)


def _fp8_only(arch: str, base: TensorCoreModel) -> TensorCoreModel:
    """``base`` with its fp8 paths used for every input kind."""
    paths = {}
    for acc in ("float32", "float16"):
        if ("fp8", acc) in base.paths:
            for kind in ("fp16", "bf16", "tf32", "fp8"):
                paths[(kind, acc)] = base.paths[("fp8", acc)]
    return TensorCoreModel(arch, base.gpus, types.MappingProxyType(paths),
                           base.source + ", fp8 inputs",
                           tuple(f for f in base.validated if f.startswith("float8")))


_FIT = ("fitted in numstd on the even rows of reference_data/tensor_core (no upstream model); "
        "odd rows reported in docs/emulators.md")

FP8_REGISTER_HALVES: tuple[tuple[int, ...], ...] = (
    tuple(k for k in range(32) if k % 4 < 2), tuple(k for k in range(32) if k % 4 >= 2))
"""Sub-blocks of the fp8 ``mma.sync`` paths of H100/H200 and B200 (:attr:`BFMAPath.subblocks`).

A block of 32 fp8 products is applied as two block FMAs of 16: first the positions ``k`` with
``k mod 4`` in {0, 1}, then those with ``k mod 4`` in {2, 3} -- the low and the high halves of
each 32-bit register of four fp8 values in the ``m16n8k32`` operand fragments -- in the
datapath of fp16 inputs of the same GPU.  Found on the even rows of the fp8 datasets and then
read in the SASS of the instruction (module docstring, ``scripts/tc_mma_fp8_sass.sh``); no
upstream model has it.
"""
_V100 = _model("v100", ("V100",), _KM + "V100TC.m", b16=(4, 0, -1024), tf32=4, h16=(4, 0, -19),
               validated=("float16",))
_A100 = _model("a100", ("A100", "A2"), _KM + "A100TC.m (A100, A2, A30)",
               b16=(8, 1, -132), tf32=4, h16=(8, 1, -20),
               validated=("float16", "bfloat16", "tf32"))
_HALVES = ("sub-blocks FP8_REGISTER_HALVES and late c " + _FIT.replace(" (no upstream model)", "")
           + "; as the SASS of scripts/tc_mma_fp8_sass.sh: block FMAs of the fp16-input path of ")
_ADA = _model("ada", ("Ada", "L40S"), _KM + "AdaTC.m, L40STC.m",
              b16=(8, 1, -132), tf32=4, h16=(8, 1, -20),
              fp8=BFMAPath(16, -10, "rz", -132, source=_KM + "AdaTC.m, L40STC.m (fp8)"),
              fp8_h16=BFMAPath(16, -10, "rne", -132, "float16",
                               source=_KM + "AdaTC.m, L40STC.m (fp8, fp16 output: frmode 'rne')"),
              validated=("float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2"))
_H100 = _model("h100", ("H100", "H200"), _KM + "H100TC.m, H200TC.m",
               b16=(16, 2, -133), tf32=8, h16=(16, 2, -21),
               fp8=BFMAPath(32, -10, "rz", -133, source=_KM + "H100TC.m (fp8)"),
               fp8_h16=BFMAPath(32, 2, "rne", -21, "float16", late_c=True,
                                subblocks=FP8_REGISTER_HALVES,
                                source=_HALVES + "H100TC.m (fp16 -> fp16)"),
               validated=("float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2"))
_B200 = _model("b200", ("B200",), _KM + "B200TC.m",
               b16=(16, 2, -133), tf32=8, h16=(16, 2, -21),
               fp8=BFMAPath(32, 2, "rz", -133, late_c=True, subblocks=FP8_REGISTER_HALVES,
                            source=_HALVES + "B200TC.m (fp16 -> fp32; n_eab = 2, RZ as its fp8 "
                            "setting)"),
               fp8_h16=BFMAPath(32, 2, "rne", -21, "float16", late_c=True,
                                subblocks=FP8_REGISTER_HALVES,
                                source=_HALVES + "B200TC.m (fp16 -> fp16)"),
               validated=("float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2"))

TENSOR_CORES: Mapping[str, TensorCoreModel] = types.MappingProxyType({
    m.arch: m for m in (_V100, _A100, _ADA, _H100, _B200,
                        _fp8_only("h100-fp8", _H100), _fp8_only("b200-fp8", _B200))
})
"""Read-only mapping architecture name -> :class:`TensorCoreModel`."""


def _round_acc(value: np.ndarray, p: int, emin: int, emax: int, mode: str) -> np.ndarray:
    """Round float64 ``value`` to ``p`` bits with exponent range ``[emin, emax]``.

    ``E = max(floor(log2|v|), emin)``, quantum ``q = 2**(E - p + 1)``: ``q * trunc(v / q)``
    (``"rz"``) or ``q * rint(v / q)`` (``"rne"``, ties to even); results of magnitude at least
    ``2**(emax + 1)`` are ``±inf`` (also for ``"rz"``, as ``Generic_BFMA_TC.m`` does: its
    biased-exponent check); NaN stays NaN.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(value) & (value != 0)
        _, e = np.frexp(np.where(finite, value, 1.0))
        q = np.maximum(e.astype(np.int64) - 1, emin) - p + 1
        scaled = np.ldexp(value, -q)
        r = np.trunc(scaled) if mode == "rz" else np.rint(scaled)
        r = np.ldexp(r, q)
        r = np.where(finite, r, value)
        big = np.isfinite(r) & (np.abs(r) >= np.ldexp(1.0, emax + 1))
        return np.where(big, np.copysign(np.inf, value), r)


def block_fma(
    c: np.ndarray, products: np.ndarray, exponent_sums: np.ndarray, extra_bits: int,
    *, rounding: str = "rz", min_exp: int = -600, acc: str = "float32", late_c: bool = False,
) -> np.ndarray:
    """One block FMA ``d = c + sum_i p_i`` of the tensor-core model, vectorised over outputs.

    Parameters
    ----------
    c : numpy.ndarray
        Accumulator values (values of ``acc``, as float32 or float64), output shape.
    products : numpy.ndarray
        Exact products, shape ``(b, *output shape)``.
    exponent_sums : numpy.ndarray
        ``e(a_i) + e(b_i)`` per product (int64, same shape; zero products very negative).
    extra_bits : int
        ``n_eab``.
    rounding : {"rz", "rne"}
        Rounding of the normalised sum to ``acc``.
    min_exp : int
        Floor of the alignment exponent ``E``.
    acc : {"float32", "float16"}
        Accumulator format.
    late_c : bool
        Align and round the products alone, then ``RN_acc(c + that)``.

    Returns
    -------
    numpy.ndarray
        float64 values ``R_p(2**q * (trunc(c / 2**q) + sum_i trunc(p_i / 2**q)))`` with
        ``E = max(min_exp, e(c), max_i e_i)``, ``q = E - 23 - n_eab``, ``p = min(p_acc, 24 +
        n_eab)`` and ``R`` the path's rounding (module docstring, steps 2-5); with ``late_c``
        the same with ``c = 0``, then ``RN_acc(c + ...)``.
    """
    p_acc, emin, emax = _ACCS[acc]
    c64 = np.asarray(c, dtype=np.float64)
    if late_c:
        s = block_fma(np.zeros_like(c64), products, exponent_sums, extra_bits,
                      rounding=rounding, min_exp=min_exp, acc=acc)
        with np.errstate(invalid="ignore", over="ignore"):
            return _round_acc(c64 + s, p_acc, emin, emax, "rne")  # exact sum, rounded once
    E = np.maximum(exponent_sums.max(axis=0), exponents(c64, -126))
    np.maximum(E, max(min_exp, -600), out=E)  # -600: blocks of zeros keep 2**-q finite
    inv_grid = np.ldexp(1.0, 23 + extra_bits - E)  # 2**-q, exact powers of two
    with np.errstate(invalid="ignore", over="ignore"):
        aligned = np.trunc(products * inv_grid)  # exact scaling, truncation toward zero
        total = aligned.sum(axis=0) + np.trunc(c64 * inv_grid)  # integers < 2**40: exact
        value = total / inv_grid
    p = min(p_acc, 24 + extra_bits)  # the aligned sum has 24 + n_eab bits above the grid
    return _round_acc(value, p, emin, emax, rounding)


def _path_fma(d: np.ndarray, terms: ProductTerms, j0: int, j1: int, path: BFMAPath,
              extra_bits: int, acc: str) -> np.ndarray:
    """One block of ``path`` (products ``j0 .. j1-1``) applied to the accumulator ``d``.

    Without sub-blocks this is :func:`block_fma`; with them (:attr:`BFMAPath.subblocks`) each
    sub-block is a block FMA of its own, chained from ``d`` -- or from zero with ``late_c``,
    ``d`` then being added to the chain's result with round to nearest even in ``acc``.
    """
    kw = {"rounding": path.rounding, "min_exp": path.min_exp, "acc": acc}
    if not path.subblocks:
        return block_fma(d, terms.terms(j0, j1), terms.exponent_sums(j0, j1), extra_bits,
                         late_c=path.late_c, **kw)
    prods, sums = terms.terms(j0, j1), terms.exponent_sums(j0, j1)
    x = np.zeros_like(np.asarray(d, dtype=np.float64)) if path.late_c else d
    for sub in path.subblocks:
        pos = [i for i in sub if i < j1 - j0]
        if pos:
            x = block_fma(x, prods[pos], sums[pos], extra_bits, **kw)
    if not path.late_c:
        return x
    p_acc, emin, emax = _ACCS[acc]
    with np.errstate(invalid="ignore", over="ignore"):  # exact sum rounded once (see late_c)
        return _round_acc(np.asarray(d, dtype=np.float64) + x, p_acc, emin, emax, "rne")


def tensor_core_matmul(
    A: Any,
    B: Any,
    *,
    arch: str = "a100",
    out: Any = "float32",
    acc: Any = None,
    split_k: int = 1,
    promote_every: int | None = None,
    extra_bits: int | None = None,
    block: int | None = None,
    c: Any = None,
    out_rounding: str = "rne",
    seed: int | None = None,
) -> np.ndarray:
    """Emulate ``A @ B (+ c)`` on an NVIDIA tensor core.

    Each output is accumulated block by block, ``d_j = BFMA(d_{j-1}; products of block j)``
    (see :func:`block_fma` and the module docstring for the formula and sources), starting from
    ``c`` (default 0) rounded to the accumulator.  With ``split_k = s`` the K blocks are split into
    ``s`` contiguous slices of nearly equal numbers of blocks, each accumulated from zero (the
    first from ``c``), and the slice results are added in the accumulator format with round to
    nearest in slice order (split-K GEMM).  ``promote_every = n`` instead cuts K every ``n``
    elements and adds each chunk's tensor-core result into an accumulator with round to nearest
    (the "promotion" of fp8 GEMMs to CUDA cores every 128 elements, DeepSeek-V3 report §3.3.2);
    both are the same computation with different slice boundaries.  The result is finally
    converted to ``out`` (a no-op when ``out`` is the accumulator).

    Parameters
    ----------
    A, B : array-like
        Operands (numpy matmul shapes), at most 26 significant bits.  The datapath follows the
        inputs (:func:`input_kind` of the wider operand): fp16, bf16, fp8 (h100, b200, ada; the
        fp16 path on v100/a100), float32/tf32 the tf32 block size -- float32 values are *not*
        rounded to tf32 first (round them with ``numstd.round_to(x, "tf32")`` to model TF32 mode).
    arch : str
        A key of :data:`TENSOR_CORES`: ``"v100"``, ``"a100"`` (A100, A2), ``"ada"`` (Ada, L40S),
        ``"h100"`` (H100, H200), ``"b200"``, ``"h100-fp8"``, ``"b200-fp8"``.
    out : format-like
        Output format (default float32).  ``"float16"`` selects the fp16-accumulator datapath
        where the inputs have one (fp16 and fp8 inputs): every block FMA rounds to fp16.
    acc : {None, "float32", "float16"}
        Accumulator; None: ``"float16"`` when ``out`` is float16 and the path exists, else
        ``"float32"``.  ``acc="float32", out="float16"`` is an fp32 GEMM converted at the end.
    split_k, promote_every : int
        Slicing of K (at most one of them differs from its default).
    extra_bits, block : int, optional
        Override ``n_eab`` and the block size of the datapath (a path with sub-blocks, the fp8
        ``mma.sync`` paths, only takes its own block size: ParameterError otherwise).
    c : array-like, optional
        Initial accumulator, broadcast to the output shape, rounded (RNE) to the accumulator.
    out_rounding : {"rne", "rtz", "stochastic"}
        Rounding of the final conversion to ``out``; stochastic needs ``seed``.
    seed : int, optional
        Seed for stochastic output rounding.

    Returns
    -------
    numpy.ndarray
        Result in the dtype of ``out``.
    """
    if arch not in TENSOR_CORES:
        raise ParameterError(f"unknown arch {arch!r}; use one of {', '.join(TENSOR_CORES)}")
    terms = ProductTerms(A, B)
    model = TENSOR_CORES[arch]
    out_name = get_format(out).name
    kind = input_kind(max(terms.a.p, terms.b.p))
    if acc is None:
        acc_name = "float16" if out_name == "float16" and (
            (kind, "float16") in model.paths or (kind == "fp8" and ("fp8", "float32")
                                                 not in model.paths)) else "float32"
    else:
        acc_name = get_format(acc).name
        if acc_name not in _ACCS:
            raise ParameterError(f"acc must be 'float32' or 'float16' (tensor-core accumulators), "
                                 f"got {acc!r}")
    path = model.path(kind, acc_name)
    b, neab = path.block, path.extra_bits
    if block is not None:
        b = check_order_parameter("block", block)
        if path.subblocks and b != path.block:
            raise ParameterError(
                f"arch {arch!r}: the {kind} path with a {acc_name} accumulator splits blocks of "
                f"{path.block} products into sub-blocks; block={b} does not fit that split")
    if extra_bits is not None:
        if isinstance(extra_bits, bool) or not isinstance(extra_bits, (int, np.integer)) \
                or not -20 <= extra_bits <= 8:
            raise ParameterError(f"extra_bits must be an integer in [-20, 8], got {extra_bits!r}")
        neab = int(extra_bits)
    split_k = check_order_parameter("split_k", split_k)
    if promote_every is not None:
        if split_k != 1:
            raise ParameterError("give either split_k or promote_every, not both")
        promote_every = check_order_parameter("promote_every", promote_every)
        ranges = [(k, min(k + promote_every, terms.K)) for k in range(0, terms.K, promote_every)]
    else:
        nblocks = -(-terms.K // b)
        ranges = [(lo * b, min(hi * b, terms.K))
                  for lo, hi in contiguous_slices(nblocks, split_k)]
    acc_fmt = get_format(acc_name)
    c0 = np.zeros(terms.shape)
    if c is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            c0 = np.broadcast_to(round_to(np.asarray(c, dtype=np.float64), acc_fmt)
                                 .astype(np.float64), terms.shape).copy()
    parts = []
    for i, (k0, k1) in enumerate(ranges):
        d = c0 if i == 0 else np.zeros(terms.shape)
        for j0 in range(k0, k1, b):
            d = _path_fma(d, terms, j0, min(j0 + b, k1), path, neab, acc_name)
        parts.append(d)
    total = c0 if not parts else parts[0]
    if len(parts) > 1:
        ar = Accumulator(acc_fmt)
        total = ar.round(total)
        for p in parts[1:]:
            total = ar.add(total, ar.round(p))
    rng = np.random.default_rng(seed) if seed is not None else None
    return terms.finish(to_output(np.asarray(total, dtype=np.float64), out, out_rounding, rng))
