"""Named implementations of matmul (legitimate ones, and ``trainium-autocast``, legitimate only
where a standard allows fp32 operands cast to bf16), for calibration and the discrimination
benchmark.

Every entry of :data:`VARIANTS` is a callable ``variant(A, B, *, out, acc="float32", seed=0)``
returning ``A @ B`` in the dtype of ``out``, computed the way one real implementation would:

======================  ========================================================================
name                    implementation
======================  ========================================================================
matmul/sequential       one fp32 FMA chain over K (CPU BLAS inner kernel, naive GPU kernel)
matmul/pairwise         recursive halving (numpy-style pairwise reduction)
matmul/tree             level-by-level pairs (warp-shuffle reduction)
matmul/blocked32        sequential inside blocks of 32, block sums sequential (tiled kernels)
matmul/blocked128       the same with blocks of 128
matmul/splitk4          K in 4 slices reduced in order (split-K GEMM)
matmul/splitk16         K in 16 slices
matmul/kahan            compensated summation in the accumulation format
matmul/exact            correctly rounded sum (an ideal kernel)
matmul/random           sequential in a seeded random order (nondeterministic atomics)
matmul/trainium         NeuronCore PE tiles of 128 (exact per tile) + fp32 PSUM, RNE output
matmul/trainium-sr      the same with stochastic output rounding (seeded)
matmul/trainium-pe32    NeuronCore with fp32 rounding after every PE (sequential tiles)
matmul/trainium-autocast  neuronx-cc's default ``--auto-cast=matmult --auto-cast-type=bf16``:
                        float32 operands rounded to bf16, then the matmul/trainium model
matmul/tc-v100          tensor-core block FMA with fp32 accumulator, one per architecture of
matmul/tc-a100          :data:`numstd.emulate.TENSOR_CORES` (V100; A100, A2; Ada, L40S;
matmul/tc-ada           H100, H200; B200), bit-exact against the GPUs for the input formats in
matmul/tc-h100          its ``validated`` (``reference_data/tensor_core``)
matmul/tc-b200
matmul/tc-h100-fp8      H100 fp8 datapath (13-bit accumulator), any inputs
matmul/tc-b200-fp8      B200 fp8 datapath (2 x 16 products, c last), any inputs
matmul/tc-h100-fp8-promote128  H100 fp8 with fp32 promotion every 128 elements (DeepSeek-V3)
matmul/tc-ada-fp8-promote128   Ada/L40S fp8 (16-product 13-bit blocks), the same promotion
matmul/tc-a100-splitk4  A100 block FMA with split-K 4 and an fp32 in-order reduction
======================  ========================================================================

The hardware variants model fp32 accumulation only (cuBLAS/CUTLASS GEMMs with an fp32 compute
type, the output converted at the end): ``acc`` must be ``"float32"`` for them.
:func:`hardware_provenance` names the architectures (and GPUs) behind a set of variant names.
Formulas and sources: :mod:`numstd.emulate.summation`, :mod:`numstd.emulate.tensor_core`,
:mod:`numstd.emulate.trainium`.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import ParameterError
from ..core.formats import get_format
from .matmul import matmul
from .tensor_core import TENSOR_CORES, tensor_core_matmul
from .trainium import trainium_matmul

__all__ = ["VARIANTS", "hardware_provenance"]


def _ordered(A: Any, B: Any, *, out: Any, acc: Any = "float32", seed: int = 0,
             order: str, **params: Any) -> np.ndarray:
    return matmul(A, B, order=order, acc=acc, out=out, seed=seed, **params)


def _fp32_only(name: str, acc: Any) -> None:
    if get_format(acc).name != "float32":
        raise ParameterError(
            f"variant {name!r} models hardware that accumulates in float32; got acc={acc!r}"
        )


def _trainium(A: Any, B: Any, *, out: Any, acc: Any = "float32", seed: int = 0,
              name: str, **params: Any) -> np.ndarray:
    _fp32_only(name, acc)
    return trainium_matmul(A, B, out=out, seed=seed, **params)


def _tensor_core(A: Any, B: Any, *, out: Any, acc: Any = "float32", seed: int = 0,
                 name: str, **params: Any) -> np.ndarray:
    _fp32_only(name, acc)
    return tensor_core_matmul(A, B, out=out, acc="float32", seed=seed, **params)


def _variant(fn: Callable[..., np.ndarray], name: str, **params: Any) -> Callable[..., np.ndarray]:
    v = functools.partial(fn, **params) if fn is _ordered else functools.partial(
        fn, name=name, **params)
    functools.update_wrapper(v, fn)
    v.__name__ = name
    v.__doc__ = f"{name}: {params}"
    return v


_TABLE: tuple[tuple[Callable[..., np.ndarray], str, dict[str, Any]], ...] = (
    (_ordered, "matmul/sequential", {"order": "sequential"}),
    (_ordered, "matmul/pairwise", {"order": "pairwise"}),
    (_ordered, "matmul/tree", {"order": "tree"}),
    (_ordered, "matmul/blocked32", {"order": "blocked", "block": 32}),
    (_ordered, "matmul/blocked128", {"order": "blocked", "block": 128}),
    (_ordered, "matmul/splitk4", {"order": "splitk", "splits": 4}),
    (_ordered, "matmul/splitk16", {"order": "splitk", "splits": 16}),
    (_ordered, "matmul/kahan", {"order": "kahan"}),
    (_ordered, "matmul/exact", {"order": "exact"}),
    (_ordered, "matmul/random", {"order": "random"}),
    (_trainium, "matmul/trainium", {}),
    (_trainium, "matmul/trainium-sr", {"out_rounding": "stochastic"}),
    (_trainium, "matmul/trainium-pe32", {"tile_accumulation": "sequential"}),
    (_trainium, "matmul/trainium-autocast", {"auto_cast": "matmult", "auto_cast_type": "bf16"}),
    (_tensor_core, "matmul/tc-v100", {"arch": "v100"}),
    (_tensor_core, "matmul/tc-a100", {"arch": "a100"}),
    (_tensor_core, "matmul/tc-ada", {"arch": "ada"}),
    (_tensor_core, "matmul/tc-h100", {"arch": "h100"}),
    (_tensor_core, "matmul/tc-b200", {"arch": "b200"}),
    (_tensor_core, "matmul/tc-h100-fp8", {"arch": "h100-fp8"}),
    (_tensor_core, "matmul/tc-b200-fp8", {"arch": "b200-fp8"}),
    (_tensor_core, "matmul/tc-h100-fp8-promote128", {"arch": "h100-fp8", "promote_every": 128}),
    (_tensor_core, "matmul/tc-ada-fp8-promote128", {"arch": "ada", "promote_every": 128}),
    (_tensor_core, "matmul/tc-a100-splitk4", {"arch": "a100", "split_k": 4}),
)

VARIANTS: Mapping[str, Callable[..., np.ndarray]] = types.MappingProxyType(
    {name: _variant(fn, name, **params) for fn, name, params in _TABLE}
)
"""Read-only mapping name -> ``variant(A, B, *, out, acc="float32", seed=0)``."""


def hardware_provenance(names: Any) -> list[str]:
    """The tensor-core architectures behind variant names, one line each, for provenance.

    A name containing ``tc-<arch>`` (``"matmul/tc-h100"``, ``"tc-h100-fp8-promote128"`` of the
    corpus) counts for ``<arch>`` (``-fp8`` suffixes map to the base architecture).  Each line
    names the GPUs and the input formats validated bit for bit against them, e.g.
    ``"h100 (H100, H200): tensor-core block FMA, bit-exact on reference_data/tensor_core for
    float16, bfloat16, ..."``.
    """
    archs = set()
    for n in names:
        tail = str(n).rsplit("/", 1)[-1]
        if tail.startswith("tc-"):
            base = tail[3:].split("-")[0]
            if base in TENSOR_CORES:
                archs.add(base)
    lines = []
    for arch in sorted(archs, key=list(TENSOR_CORES).index):
        m = TENSOR_CORES[arch]
        lines.append(f"{arch} ({', '.join(m.gpus)}): tensor-core block FMA ({m.source}), "
                     f"bit-exact on reference_data/tensor_core for {', '.join(m.validated)}")
    return lines
