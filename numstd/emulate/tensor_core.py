"""NVIDIA tensor cores: the block fused multiply-add model of Fasi et al. (2021) and Khattak &
Mikaitis (2025).

A tensor core computes ``d = c + sum_{i=1..b} a_i b_i`` for a block of ``b`` products and an fp32
accumulator ``c`` in one operation that is *not* IEEE 754 arithmetic.  The model (Fasi, Higham,
Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021;
Khattak & Mikaitis, "Accurate models of NVIDIA tensor cores", arXiv:2512.07004, 2025, whose
parameterised MATLAB model ``Generic_BFMA_TC.m`` this follows):

1. the products ``a_i b_i`` are exact;
2. every term (the products and ``c``) is aligned to the largest exponent of the block,
   ``E = max(e(c), max_i e(a_i) + e(b_i))`` with ``e(x) = max(floor(log2|x|), emin_x)`` the
   exponent of the encoding (products are aligned by their unnormalised exponent sum, their
   significands in [1, 4) keep one carry bit; zero terms take no part);
3. the aligned significands are *truncated* (toward zero, sign-magnitude) to the grid
   ``2**(E - 23 - n_eab)``: 24 + ``n_eab`` bits below and including the leading bit of weight
   ``2**E``, where ``n_eab`` is the number of extra alignment bits;
4. the truncated terms are added exactly (the hardware's carry bits make the addition exact);
5. the sum is normalised and rounded toward zero to fp32 (to ``24 + n_eab`` bits when
   ``n_eab < 0``: the H100 fp8 path keeps only 13 fraction bits), overflow giving ``±inf``;
6. blocks are applied in K order, each one's ``d`` becoming the next one's ``c``.

Parameters per architecture (``fma`` = block size, ``neab`` = extra alignment bits, from the
models ``V100TC.m``, ``A100TC.m``, ``H100TC.m``, ``B200TC.m`` of Khattak & Mikaitis, validated
bit-for-bit against the GPUs on 10^5 random inputs):

============  ======================  ==============  =====================================
arch          fp16 / bf16 inputs      tf32 inputs     fp8 (e4m3, e5m2) inputs
============  ======================  ==============  =====================================
v100          b = 4,  n_eab = 0       --              --
a100          b = 8,  n_eab = 1       b = 4           --
h100          b = 16, n_eab = 2       b = 8           b = 32, n_eab = -10 (13-bit accumulator)
b200          b = 16, n_eab = 2       b = 8           b = 32, n_eab = 2
============  ======================  ==============  =====================================

``h100-fp8`` and ``b200-fp8`` force the fp8 parameters whatever the inputs.  Fasi et al. found
"3 extra bits" on V100/T4/A100: those are *carry* bits of the multi-operand adder (which step 4
makes exact), not alignment bits; the alignment bits measured by Khattak & Mikaitis are 0 (V100)
and 1 (A100).  The 13 fraction bits of the H100 fp8 accumulator agree with DeepSeek-AI,
"DeepSeek-V3 technical report" (arXiv:2412.19437, 2024, §3.3.2: "around 14 bits").
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..core.errors import ParameterError
from ..core.formats import get_format
from ._accumulator import Accumulator
from ._terms import ProductTerms, check_order_parameter, exponents
from .matmul import to_output
from .summation import contiguous_slices

__all__ = ["TensorCoreModel", "TENSOR_CORES", "tensor_core_matmul", "block_fma"]


@dataclass(frozen=True)
class TensorCoreModel:
    """Block-FMA parameters of one GPU architecture (one row of :data:`TENSOR_CORES`).

    Attributes
    ----------
    arch : str
        Name (``"a100"``).
    block, extra_bits : int
        Products per block FMA and extra alignment bits for 16-bit (fp16/bf16) inputs.
    block_tf32 : int
        Products per block FMA for tf32 (and float32) inputs.
    fp8 : tuple of int or None
        ``(block, extra_bits)`` for fp8 inputs, None where the architecture has no fp8 path
        (then the 16-bit parameters are used).
    source : str
        Where the parameters come from.
    """

    arch: str
    block: int
    extra_bits: int
    block_tf32: int
    fp8: tuple[int, int] | None
    source: str

    def parameters(self, input_bits: int) -> tuple[int, int]:
        """``(block, extra_bits)`` for operands of at most ``input_bits`` significant bits."""
        if input_bits <= 4 and self.fp8 is not None:
            return self.fp8
        if input_bits > 11:
            return self.block_tf32, self.extra_bits
        return self.block, self.extra_bits


_KM = "Khattak & Mikaitis 2025, MATLAB-tensor-core models/"
TENSOR_CORES: Mapping[str, TensorCoreModel] = types.MappingProxyType({
    m.arch: m for m in (
        TensorCoreModel("v100", 4, 0, 4, None,
                        _KM + "V100TC.m (fma=4, neab=0); Fasi et al. 2021 (4-product blocks)"),
        TensorCoreModel("a100", 8, 1, 4, None, _KM + "A100TC.m (fma=8, tf32 fma=4, neab=1)"),
        TensorCoreModel("h100", 16, 2, 8, (32, -10),
                        _KM + "H100TC.m (fma=16, tf32 fma=8, neab=2; fp8 fma=32, neab=-10)"),
        TensorCoreModel("b200", 16, 2, 8, (32, 2),
                        _KM + "B200TC.m (fma=16, tf32 fma=8, neab=2; fp8 fma=32, neab=2)"),
        TensorCoreModel("h100-fp8", 32, -10, 32, (32, -10), _KM + "H100TC.m, fp8 inputs"),
        TensorCoreModel("b200-fp8", 32, 2, 32, (32, 2), _KM + "B200TC.m, fp8 inputs"),
    )
})
"""Read-only mapping architecture name -> :class:`TensorCoreModel`."""

_FP32_EMIN = -126
_TWO_128 = float(np.ldexp(1.0, 128))


def _truncate_fp32(value: np.ndarray, p: int) -> np.ndarray:
    """Round float64 ``value`` toward zero to ``p`` bits with fp32's exponent range.

    Normal range: clear the low ``53 - p`` bits of the float64 pattern (truncation of the
    significand).  Below ``2**-126`` the quantum is ``2**(-126 - p + 1)``.  Magnitudes of at least
    ``2**128`` overflow to ``±inf`` (as in ``Generic_BFMA_TC.m``); NaN stays NaN.
    """
    mask = np.uint64(~((1 << (53 - p)) - 1) & 0xFFFFFFFFFFFFFFFF)
    r = (value.view(np.uint64) & mask).view(np.float64)
    small = np.abs(value) < np.ldexp(1.0, _FP32_EMIN)
    if small.any():
        q = _FP32_EMIN - p + 1
        r = np.where(small, np.ldexp(np.trunc(np.ldexp(value, -q)), q), r)
    big = np.abs(r) >= _TWO_128
    if big.any():
        r = np.where(big & np.isfinite(r), np.copysign(np.inf, value), r)
    return np.where(np.isnan(value), value, r)


def block_fma(
    c: np.ndarray, products: np.ndarray, exponent_sums: np.ndarray, extra_bits: int
) -> np.ndarray:
    """One block FMA ``d = c + sum_i p_i`` of the tensor-core model, vectorised over outputs.

    Parameters
    ----------
    c : numpy.ndarray
        fp32 accumulator values (float32 or float64 holding fp32 values), output shape.
    products : numpy.ndarray
        Exact products, shape ``(b, *output shape)``.
    exponent_sums : numpy.ndarray
        ``e(a_i) + e(b_i)`` per product (int64, same shape; zero products very negative).
    extra_bits : int
        ``n_eab``.

    Returns
    -------
    numpy.ndarray
        float64 values ``RZ_p(2**q * (trunc(c / 2**q) + sum_i trunc(p_i / 2**q)))`` with
        ``E = max(e(c), max_i e_i)``, ``q = E - 23 - n_eab`` and ``p = 24 + min(n_eab, 0)``.
    """
    c64 = np.asarray(c, dtype=np.float64)
    E = np.maximum(exponent_sums.max(axis=0), exponents(c64, _FP32_EMIN))
    np.maximum(E, -600, out=E)  # blocks of zeros only: keep 2**-q finite
    inv_grid = np.ldexp(1.0, 23 + extra_bits - E)  # 2**-q, exact powers of two
    with np.errstate(invalid="ignore", over="ignore"):
        aligned = np.trunc(products * inv_grid)  # exact scaling, truncation toward zero
        total = aligned.sum(axis=0) + np.trunc(c64 * inv_grid)  # integers < 2**40: exact
        value = total / inv_grid
    return _truncate_fp32(value, 24 + min(extra_bits, 0))


def tensor_core_matmul(
    A: Any,
    B: Any,
    *,
    arch: str = "a100",
    out: Any = "float32",
    split_k: int = 1,
    promote_every: int | None = None,
    extra_bits: int | None = None,
    block: int | None = None,
    c: Any = None,
    out_rounding: str = "rne",
    seed: int | None = None,
) -> np.ndarray:
    """Emulate ``A @ B (+ c)`` on an NVIDIA tensor core with fp32 accumulation.

    Each output is accumulated block by block, ``d_j = BFMA(d_{j-1}; products of block j)``
    (see :func:`block_fma` and the module docstring for the formula and sources), starting from
    ``c`` (default 0).  With ``split_k = s`` the K blocks are split into ``s`` contiguous slices of
    nearly equal numbers of blocks, each accumulated from zero (the first from ``c``), and the
    slice results are added in fp32 with round to nearest in slice order (split-K GEMM).
    ``promote_every = n`` instead cuts K every ``n`` elements and adds each chunk's tensor-core
    result into an fp32 accumulator with round to nearest (the "promotion" of fp8 GEMMs to CUDA
    cores every 128 elements, DeepSeek-V3 report §3.3.2); both are the same computation with
    different slice boundaries.  The fp32 result is finally converted to ``out``.

    Parameters
    ----------
    A, B : array-like
        Operands (numpy matmul shapes), at most 26 significant bits.  fp16/bf16 inputs use the
        16-bit parameters, fp8 inputs the fp8 parameters (h100, b200), float32 inputs the tf32
        block size -- float32 values are *not* rounded to tf32 first (round them with
        ``numstd.round_to(x, "tf32")`` to model TF32 mode).
    arch : str
        A key of :data:`TENSOR_CORES`: ``"v100"``, ``"a100"``, ``"h100"``, ``"b200"``,
        ``"h100-fp8"``, ``"b200-fp8"``.
    out : format-like
        Output format (default float32: the accumulator itself).
    split_k, promote_every : int
        Slicing of K (at most one of them differs from its default).
    extra_bits, block : int, optional
        Override ``n_eab`` and the block size of the architecture.
    c : array-like, optional
        Initial fp32 accumulator, broadcast to the output shape (rounded to fp32 if needed).
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
    b, neab = model.parameters(max(terms.a.p, terms.b.p))
    if block is not None:
        b = check_order_parameter("block", block)
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
    fp32 = get_format("float32")
    c0 = np.zeros(terms.shape, dtype=np.float32)
    if c is not None:
        with np.errstate(over="ignore"):
            c0 = np.broadcast_to(np.asarray(c, dtype=np.float64).astype(np.float32),
                                 terms.shape).copy()
    parts = []
    for i, (k0, k1) in enumerate(ranges):
        d = c0.astype(np.float64) if i == 0 else np.zeros(terms.shape)
        for j0 in range(k0, k1, b):
            j1 = min(j0 + b, k1)
            d = block_fma(d, terms.terms(j0, j1), terms.exponent_sums(j0, j1), neab)
        parts.append(d.astype(np.float32))
    if not parts:
        total = c0
    else:
        ar = Accumulator(fp32)
        total = parts[0]
        for p in parts[1:]:
            total = ar.add(total, p)
    rng = np.random.default_rng(seed) if seed is not None else None
    return terms.finish(to_output(total, out, out_rounding, rng))
