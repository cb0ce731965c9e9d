"""Emulators: numpy models of how hardware and libraries accumulate and round.

Used as *legitimate implementations* where the hardware is absent (calibration of standards and
the discrimination benchmark).  All models take the exact products of the inputs (float64, exact
for operands of at most 26 significant bits) and differ in the order and format of the partial
sums and in the final rounding:

- :func:`accumulate`, :func:`matmul` -- generic summation orders (sequential, pairwise, tree,
  blocked, split-K, Kahan, exact, random) with every partial sum rounded to an accumulation format;
- :func:`tensor_core_matmul` -- NVIDIA tensor-core block FMA (Fasi et al. 2021; Khattak &
  Mikaitis 2025), replayed bit for bit against measured GPU outputs by
  :mod:`numstd.emulate.tensor_core_truth`;
- :func:`trainium_matmul`, :func:`scalar_engine` -- AWS NeuronCore TensorE + fp32 PSUM and
  ScalarE (AWS Neuron documentation);
- :data:`VARIANTS` -- named matmul implementations ``(A, B, *, out, acc, seed) -> array``.

See ``docs/emulators.md`` for the models, their assumptions and what differs from hardware.
"""

from __future__ import annotations

from .matmul import matmul
from .summation import ORDERS, accumulate
from .tensor_core import TENSOR_CORES, BFMAPath, TensorCoreModel, block_fma, tensor_core_matmul
from .trainium import ACTIVATIONS, scalar_engine, trainium_matmul
from .variants import VARIANTS

__all__ = [
    "accumulate",
    "matmul",
    "ORDERS",
    "tensor_core_matmul",
    "block_fma",
    "TENSOR_CORES",
    "TensorCoreModel",
    "BFMAPath",
    "trainium_matmul",
    "scalar_engine",
    "ACTIVATIONS",
    "VARIANTS",
]
