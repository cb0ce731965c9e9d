"""Contraction variants: ``matmul`` (``A @ B``) and ``linear`` (``x @ W.T + b``).

Every variant first computes the accumulator ``S = sum_k A[.., m, k] B[.., k, n]`` in the
accumulation format (float32) with one of the models of :mod:`numstd.emulate` -- products exact,
partial sums rounded in the model's order -- then runs the epilogue real GEMMs run: the bias added
in fp32 (``RN_32(S + b)``, linear only) and one conversion to the output format.

Legitimate: the summation orders of :mod:`numstd.emulate.summation` (sequential FMA chain,
pairwise, blocked(32), split-K(4), Kahan), float32 BLAS (``numpy.matmul`` on float32 operands:
OpenBLAS/MKL sgemm), AWS Trainium TensorE tiles of 128 rows with fp32 PSUM (round-to-nearest or
stochastic output conversion, exact or per-PE tile sums), NVIDIA tensor-core block FMA
(V100, A100/A2, Ada/L40S, H100/H200, B200 parameters of Khattak & Mikaitis 2025, each applied to the
input formats it reproduces bit for bit on the GPUs' measured outputs; H100 and Ada fp8 with fp32
promotion every 128 products as in DeepSeek-V3), and torch CPU.

Bugs: accumulating in the output format or in bfloat16, a dropped last K tile of 128, the first
K tile accumulated twice, a dropped ``K mod 64`` remainder, truncation of the output, one
corrupted output element, a 1 % scale error, TF32 or bfloat16 rounding of float32 inputs, B read
transposed, zeros.

Not covered here: dequantisation scales (missing, doubled, inverted, misaligned) -- those are bugs of
``scaled_matmul`` (:mod:`numstd.corpus.scaled`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, corrupt_one, f64, finish, float32_inputs, from_torch, low_precision_inputs,
    narrow_out, registrar, rnd, to_torch, torch_same_format,
)

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

OPS = ("matmul", "linear")
TILE = 128  # K tile of the dropped/duplicated-tile bugs (Trainium partitions, common GEMM BLOCK_K)
TAIL = 64  # K step of the dropped-remainder bug


def _operands(op: str, inputs: list) -> tuple[Any, Any, Any]:
    """``(A, B, bias)`` of the contraction: linear is ``x @ W.T`` (+ bias)."""
    if op == "matmul":
        return inputs[0], inputs[1], None
    bias = inputs[2] if len(inputs) > 2 else None
    return inputs[0], np.swapaxes(inputs[1], -1, -2), bias


def _k(B: Any) -> int:
    return int(np.shape(B)[0] if np.ndim(B) == 1 else np.shape(B)[-2])


def _k_slice(A: Any, B: Any, idx: Any) -> tuple[Any, Any]:
    """Columns ``idx`` of A and the matching rows of B (numpy matmul layouts)."""
    return A[..., idx], (B[idx] if np.ndim(B) == 1 else B[..., idx, :])


def _k_concat(A: Any, B: Any, extra: slice) -> tuple[np.ndarray, np.ndarray]:
    """A and B with the K range ``extra`` appended once more (a tile added twice)."""
    a2, b2 = _k_slice(A, B, extra)
    b_axis = 0 if np.ndim(B) == 1 else -2
    return np.concatenate([A, a2], axis=-1), np.concatenate([B, b2], axis=b_axis)


def _ordered(A: Any, B: Any, acc: Format, order: str = "sequential", **kw: Any) -> np.ndarray:
    """The accumulator in ``acc`` (float64 values) for a generic summation order."""
    from ..emulate import matmul

    return f64(matmul(A, B, order=order, acc=acc, out=acc, **kw))


def _named(name: str, A: Any, B: Any, acc: Format, seed: int) -> np.ndarray:
    """The accumulator from :data:`numstd.emulate.VARIANTS` (hardware models: fp32 only)."""
    from ..emulate import VARIANTS

    return f64(VARIANTS[name](A, B, out="float32", acc=acc, seed=seed))


def _epilogue(S: np.ndarray, bias: Any, out: Format, acc: Format, mode: str, seed: int,
              post: Callable | None = None) -> np.ndarray:
    """``RN_out(RN_acc(S + bias))`` (``mode`` for the final conversion), ``post`` before it."""
    y = S if bias is None else rnd(S + f64(bias), acc)
    if post is not None:
        y = post(y, acc, seed)
    return finish(y, out, mode, seed)


def _adapt(observable: Callable, op: str) -> Callable:
    """``observable(A, B, out)`` as a predicate on the op's inputs."""

    def obs(inputs, params, out):
        A, B, _ = _operands(op, inputs)
        return observable(A, B, out)

    return obs


def _contraction(name: str, family: str, legit: bool, description: str, *,
                 applies: Callable | None = None, observable: Callable | None = None,
                 mode: str = "rne", post: Callable | None = None,
                 acc_formats: tuple[str, ...] | None = None) -> Callable:
    """Register ``core(A, B, acc, out, seed) -> accumulator`` for matmul and linear.

    ``observable(A, B, out)`` (if given) is adapted to each op's inputs.
    """

    def deco(core: Callable) -> Callable:
        for op in OPS:
            def run(inputs, params, out, acc, seed, _op=op):
                A, B, bias = _operands(_op, inputs)
                with np.errstate(all="ignore"):
                    return _epilogue(core(A, B, acc, out, seed), bias, out, acc, mode, seed, post)

            obs = None if observable is None else _adapt(observable, op)
            variant(op, name, family, legit, description, applies, obs, acc_formats)(run)
        return core

    return deco


# ---------------------------------------------------------------------------------------------
# legitimate
# ---------------------------------------------------------------------------------------------


@_contraction("sequential", "accumulation-order", True,
              "one FMA chain over K in the accumulation format, s = RN(s + a_k b_k) (CPU BLAS "
              "inner kernel, naive GPU kernel)")
def _sequential(A, B, acc, out, seed):
    return _ordered(A, B, acc)


@_contraction("pairwise", "accumulation-order", True,
              "recursive halving of the K products (numpy-style pairwise reduction), every "
              "partial sum rounded to the accumulation format")
def _pairwise(A, B, acc, out, seed):
    return _ordered(A, B, acc, "pairwise")


@_contraction("blocked32", "accumulation-order", True,
              "sequential FMA chains over blocks of 32 products, block sums added in order (tiled "
              "GPU/CPU kernels with BLOCK_K = 32)")
def _blocked(A, B, acc, out, seed):
    return _ordered(A, B, acc, "blocked", block=32)


@_contraction("splitk4", "accumulation-order", True,
              "split-K GEMM: K in 4 contiguous slices accumulated separately, the slice results "
              "added in slice order")
def _splitk(A, B, acc, out, seed):
    return _ordered(A, B, acc, "splitk", splits=4)


@_contraction("kahan", "accumulation-order", True,
              "Kahan compensated summation in the accumulation format (more accurate than any "
              "plain order)")
def _kahan(A, B, acc, out, seed):
    return _ordered(A, B, acc, "kahan")


@_contraction("blas-fp32", "library", True,
              "numpy.matmul on float32 copies of the operands (OpenBLAS/MKL sgemm: vectorised FMA "
              "kernels in their own blocking order), then the epilogue")
def _blas(A, B, acc, out, seed):
    if acc.name == "float64":
        return np.matmul(f64(A), f64(B))
    if acc.name != "float32":
        return _ordered(A, B, acc)
    with np.errstate(all="ignore"):
        return f64(np.matmul(np.asarray(A, dtype=np.float32), np.asarray(B, dtype=np.float32)))


@_contraction("xla-arith16", "library", True,
              "XLA CPU's 16-bit dot (jax 0.10.2): the 16-bit operands multiplied and accumulated in fp32 "
              "(YNNPACK), the dot rounded to the 16-bit type, then RN16(RN16(x·Wᵀ) + b) for linear; 16-bit "
              "arithmetic only", acc_formats=ARITH16)
def _xla_dot(A, B, acc, out, seed):
    with np.errstate(all="ignore"):
        return rnd(np.matmul(np.asarray(A, dtype=np.float32), np.asarray(B, dtype=np.float32)), acc)


@_contraction("trainium-psum", "hardware", True,
              "AWS Trainium TensorE: K in tiles of 128 partitions, each tile's column sum rounded "
              "to fp32, tiles accumulated in fp32 PSUM, round-to-nearest output conversion",
              acc_formats=FP32_ONLY)
def _trainium(A, B, acc, out, seed):
    return _named("matmul/trainium", A, B, acc, seed)


@_contraction("trainium-sr", "hardware", True,
              "Trainium PSUM accumulation with stochastic rounding of the output conversion "
              "(NEURON_RT_STOCHASTIC_ROUNDING_EN=1; seeded): unbiased, up to 1 ULP",
              mode="stochastic", acc_formats=FP32_ONLY)
def _trainium_sr(A, B, acc, out, seed):
    return _named("matmul/trainium", A, B, acc, seed)


@_contraction("trainium-pe32", "hardware", True,
              "Trainium with every PE of a 128-row tile rounding its partial sum to fp32 (the "
              "other limit of the undocumented within-tile accumulation)", acc_formats=FP32_ONLY)
def _trainium_pe32(A, B, acc, out, seed):
    return _named("matmul/trainium-pe32", A, B, acc, seed)


def _validated(arch: str, fp8: bool | None = None) -> Callable:
    """Applies when both operands are in an input format of ``TENSOR_CORES[arch].validated``
    (bit-exact against that GPU's measured outputs); ``fp8`` restricts to fp8 (True) or to the
    16-bit formats (False)."""

    def applies(out: Format, fmts: list, params: Any) -> bool:
        from ..emulate import TENSOR_CORES

        ok = TENSOR_CORES[arch].validated
        fl = [f for f in fmts[:2] if f is not None]
        return (low_precision_inputs(out, fmts, params) and all(f.name in ok for f in fl)
                and (fp8 is None or all((f.bits == 8) == fp8 for f in fl)))

    return applies


@_contraction("tc-v100", "hardware", True,
              "NVIDIA V100 tensor cores: block FMA of 4 products aligned to the largest exponent, "
              "no extra bit, truncated (Khattak & Mikaitis 2025; bit-exact on the V100's "
              "measured outputs); fp16 inputs", applies=_validated("v100"), acc_formats=FP32_ONLY)
def _tc_v100(A, B, acc, out, seed):
    return _named("matmul/tc-v100", A, B, acc, seed)


@_contraction("tc-a100", "hardware", True,
              "NVIDIA A100/A2 tensor cores: block FMA of 8 products aligned to the largest exponent "
              "with 1 extra bit, truncated (Khattak & Mikaitis 2025); 16-bit inputs",
              applies=_validated("a100"), acc_formats=FP32_ONLY)
def _tc_a100(A, B, acc, out, seed):
    return _named("matmul/tc-a100", A, B, acc, seed)


@_contraction("tc-ada", "hardware", True,
              "NVIDIA Ada/L40S tensor cores: block FMA of 8 products with 1 extra alignment bit, "
              "truncated; 16-bit inputs", applies=_validated("ada", fp8=False),
              acc_formats=FP32_ONLY)
def _tc_ada(A, B, acc, out, seed):
    return _named("matmul/tc-ada", A, B, acc, seed)


@_contraction("tc-h100", "hardware", True,
              "NVIDIA H100/H200 tensor cores: block FMA of 16 products with 2 extra alignment "
              "bits, truncated; 16-bit inputs", applies=_validated("h100", fp8=False),
              acc_formats=FP32_ONLY)
def _tc_h100(A, B, acc, out, seed):
    return _named("matmul/tc-h100", A, B, acc, seed)


@_contraction("tc-b200", "hardware", True,
              "NVIDIA B200 tensor cores: block FMA of 16 products with 2 extra bits, truncated "
              "(fp8: two such blocks per 32 products, c added last); 16-bit and fp8 inputs",
              applies=_validated("b200"), acc_formats=FP32_ONLY)
def _tc_b200(A, B, acc, out, seed):
    return _named("matmul/tc-b200", A, B, acc, seed)


@_contraction("tc-h100-fp8-promote128", "hardware", True,
              "H100 fp8 GEMM: 32-product blocks into the 13-bit truncating tensor-core "
              "accumulator, promoted to an fp32 accumulator every 128 products (DeepSeek-V3 §3.3.2, "
              "cuBLAS split accumulator); fp8 inputs", applies=_validated("h100", fp8=True),
              acc_formats=FP32_ONLY)
def _tc_h100_fp8(A, B, acc, out, seed):
    return _named("matmul/tc-h100-fp8-promote128", A, B, acc, seed)


@_contraction("tc-ada-fp8-promote128", "hardware", True,
              "Ada/L40S fp8 GEMM: 16-product blocks into the 13-bit truncating tensor-core "
              "accumulator, promoted to fp32 every 128 products; fp8 inputs",
              applies=_validated("ada", fp8=True), acc_formats=FP32_ONLY)
def _tc_ada_fp8(A, B, acc, out, seed):
    return _named("matmul/tc-ada-fp8-promote128", A, B, acc, seed)


def _torch_contraction(op: str) -> Callable:
    def run(inputs, params, out, acc, seed):
        import torch
        import torch.nn.functional as F

        ts = [None if x is None else to_torch(x) for x in inputs]
        with torch.no_grad():
            y = torch.matmul(ts[0], ts[1]) if op == "matmul" else F.linear(*ts)
        return finish(from_torch(y), out)

    return run


for _op in OPS:
    variant(_op, "torch-cpu", "library", True,
            "torch CPU (oneDNN/BLAS, fp32 accumulation for 16-bit inputs) in the inputs' dtype; "
            "only where torch is installed and the output format is the inputs' format",
            torch_same_format, acc_formats=FP32_ONLY)(_torch_contraction(_op))
del _op


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


@_contraction("acc-output-format", "accumulation-precision", False,
              "the FMA chain accumulates in the output format (e.g. bf16) instead of fp32: every "
              "partial sum rounded to 8 or 11 bits", applies=narrow_out)
def _acc_out(A, B, acc, out, seed):
    return _ordered(A, B, out)


@_contraction("acc-bf16", "accumulation-precision", False,
              "the FMA chain accumulates in bfloat16 whatever the output format",
              applies=lambda out, f, p: out.name != "bfloat16")
def _acc_bf16(A, B, acc, out, seed):
    return _ordered(A, B, FORMATS["bfloat16"])


@_contraction("dropped-last-tile", "dropped-tile", False,
              "the K loop stops one tile of 128 early (off-by-one in the tile count): the last "
              "(possibly partial) K tile is never accumulated")
def _dropped_tile(A, B, acc, out, seed):
    K = _k(B)
    keep = ((K - 1) // TILE) * TILE if K else 0
    return _ordered(*_k_slice(A, B, slice(0, keep)), acc, "blocked", block=TILE)


@_contraction("duplicated-tile", "dropped-tile", False,
              "the first K tile of 128 is accumulated twice (a tile index that restarts)")
def _duplicated_tile(A, B, acc, out, seed):
    A2, B2 = _k_concat(A, B, slice(0, TILE))
    return _ordered(A2, B2, acc, "blocked", block=TILE)


@_contraction("dropped-tail", "dropped-tile", False,
              "K is processed in steps of 64 and the K mod 64 remainder is dropped (a kernel that "
              "assumes K is a multiple of its BLOCK_K); only observable when K % 64 != 0",
              observable=lambda A, B, out: _k(B) % TAIL != 0)
def _dropped_tail(A, B, acc, out, seed):
    K = _k(B)
    return _ordered(*_k_slice(A, B, slice(0, K - K % TAIL)), acc, "blocked", block=TAIL)


@_contraction("truncation", "truncation", False,
              "fp32 accumulation, then the output conversion truncates (round toward zero) "
              "instead of rounding to nearest: within 1 ULP but biased", applies=narrow_out,
              mode="rtz")
def _truncation(A, B, acc, out, seed):
    return _ordered(A, B, acc, "blocked", block=32)


@_contraction("corrupted-element", "corruption", False,
              "one output element (seeded, of at least median magnitude) multiplied by 1 + 2^-4, "
              "as a race or a stale register would leave it",
              post=lambda y, acc, seed: corrupt_one(y, seed))
def _corrupted(A, B, acc, out, seed):
    return _ordered(A, B, acc, "blocked", block=32)


@_contraction("scale", "scale", False,
              "the accumulator multiplied by 1.01 in the epilogue (a wrong alpha or dequantisation "
              "factor): a 1 % relative error, within fixed bf16 tolerances",
              post=lambda y, acc, seed: rnd(y * 1.01, acc))
def _scale(A, B, acc, out, seed):
    return _ordered(A, B, acc, "blocked", block=32)


@_contraction("tf32-inputs", "input-rounding", False,
              "float32 operands rounded to TF32 (10-bit mantissa) and multiplied on A100 tensor "
              "cores, for a standard that does not allow TF32 (torch allow_tf32 / JAX default "
              "precision)", applies=float32_inputs, acc_formats=FP32_ONLY)
def _tf32(A, B, acc, out, seed):
    tf32 = FORMATS["tf32"]
    return _named("matmul/tc-a100", rnd(A, tf32).astype(np.float32), rnd(B, tf32).astype(np.float32),
                  acc, seed)


def _tf32_on(arch: str) -> Callable:
    """``core`` of TF32 operands on the tensor cores of ``arch`` (its tf32 path is validated)."""

    def core(A, B, acc, out, seed):
        tf32 = FORMATS["tf32"]
        return _named(f"matmul/tc-{arch}", rnd(A, tf32).astype(np.float32), rnd(B, tf32).astype(np.float32),
                      acc, seed)

    return core


# TF32 mode on the other GPUs whose tf32 path is validated bit for bit (numstd.emulate.TENSOR_CORES):
# other block sizes and alignment bits, so other accumulation errors for the TF32 standard to cover
for _arch, _gpu in (("ada", "Ada/L40S"), ("h100", "H100/H200"), ("b200", "B200")):
    _contraction(f"tf32-inputs-{_arch}", "input-rounding", False,
                 f"float32 operands rounded to TF32 and multiplied on {_gpu} tensor cores, for a standard "
                 "that does not allow TF32", applies=float32_inputs, acc_formats=FP32_ONLY)(_tf32_on(_arch))


@_contraction("bf16-inputs", "input-rounding", False,
              "float32 operands rounded to bfloat16 before an fp32-accumulated GEMM (autocast "
              "where the standard does not allow it)", applies=float32_inputs)
def _bf16_inputs(A, B, acc, out, seed):
    bf16 = FORMATS["bfloat16"]
    return _ordered(rnd(A, bf16), rnd(B, bf16), acc)


@_contraction("trainium-autocast-bf16", "input-rounding", False,
              "AWS Trainium compiled with neuronx-cc's default --auto-cast=matmult "
              "--auto-cast-type=bf16: float32 operands cast to bf16 (RNE) before TensorE, fp32 "
              "PSUM; illegitimate for a float32 standard unless it allows it (fp32 needs "
              "NEURON_CC_FLAGS=--auto-cast=none)", applies=float32_inputs, acc_formats=FP32_ONLY)
def _trainium_autocast(A, B, acc, out, seed):
    return _named("matmul/trainium-autocast", A, B, acc, seed)


def _two_d_b(A: Any, B: Any, out: Format) -> bool:
    return np.ndim(B) >= 2 and min(np.shape(B)[-2:]) > 1


def _wrong_layout(B: Any) -> np.ndarray:
    """B's buffer read as the transposed layout: ``reshape(..., N, K)`` swapped back to ``(K, N)``."""
    B = np.asarray(B)
    K, N = B.shape[-2:]
    return np.swapaxes(np.ascontiguousarray(B).reshape(*B.shape[:-2], N, K), -1, -2)


@_contraction("transposed-b", "indexing", False,
              "B's buffer read in the transposed (column-major) layout: A @ B^T for square B, "
              "a scrambled B otherwise", observable=_two_d_b)
def _transposed(A, B, acc, out, seed):
    return _ordered(A, _wrong_layout(B), acc, "blocked", block=32)


@_contraction("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _zeros(A, B, acc, out, seed):
    from ..ops.catalog import output_shape

    return np.zeros(output_shape("matmul", [A, B]))


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"transposed-b": "wrong-axis", "corrupted-element": None}

VARIANTS: tuple = with_causes(_V, _CAUSES)
