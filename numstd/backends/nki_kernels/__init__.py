"""NKI kernels for the ``nki`` backend (:mod:`numstd.backends.nki_backend`).

Written against the ``nki`` package of the AWS Neuron SDK (NKI 0.3 and later: ``import nki``,
``nki.language as nl``, ``nki.isa as nisa``); importing a kernel module imports ``nki``, so this
package's ``__init__`` imports nothing and the backend loads a module only once ``nki`` is known to
be importable.

Every kernel takes 2-D HBM tensors (the backend reshapes on the host: moving an axis or a reshape
only moves data), tiles rows over the 128 SBUF partitions (``nl.tile_size.pmax``), does its math on
the engines in float32 (the Vector and Scalar engines upcast every operand to float32 and round
once to the destination's dtype) and returns an HBM tensor in the input's dtype:

==================  ===============================================  =============================
module              kernel                                           op
==================  ===============================================  =============================
``matmul``          ``matmul_kernel(lhsT, rhs)``                     ``lhsT.T @ rhs``
``softmax``         ``softmax_kernel(x)``                            softmax over the last axis
``norms``           ``layer_norm_kernel(x, w, b, eps)``,             layer norm, RMS norm over the
                    ``rms_norm_kernel(x, w, eps)``                   last axis
``elementwise``     ``activation_kernel(x, fn)``                     ``fn(x)`` on the Scalar Engine
==================  ===============================================  =============================

The numerics each kernel commits to are in its module docstring; ``docs/trainium.md`` says how to
run them on a Trn1/Trn2 instance or in ``nki.simulate``.
"""

from __future__ import annotations

import types
from typing import Mapping

__all__ = ["KERNELS"]

#: op -> (module in this package, kernel function name)
KERNELS: Mapping[str, tuple[str, str]] = types.MappingProxyType({
    "matmul": ("matmul", "matmul_kernel"),
    "softmax": ("softmax", "softmax_kernel"),
    "layer_norm": ("norms", "layer_norm_kernel"),
    "rms_norm": ("norms", "rms_norm_kernel"),
    **{op: ("elementwise", "activation_kernel") for op in (
        "exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt")},
})
