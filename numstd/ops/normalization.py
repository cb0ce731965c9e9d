"""Normalizations over the last axis: ``layer_norm`` and ``rms_norm``.

Reference: :mod:`numstd.reference.normalization`; variants: :mod:`numstd.corpus.normalization`.
The framework calls are not mechanical (``normalized_shape``): the backends keep them.
"""

from __future__ import annotations

from typing import Any, Mapping

from ._shapes import check_vector, need_ndim
from .entry import OpInfo, entry

__all__ = ["ENTRIES"]


def _normalized_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x = a[0]
    need_ndim(spec, 0, x, 1, "(the normalised axis is the last one)")
    n = x.shape[-1]
    for pos in range(1, len(a)):
        check_vector(spec, pos, a[pos], n, f"matching the last axis of x {x.shape}")
    return x.shape


ENTRIES: tuple[OpInfo, ...] = (
    entry("layer_norm", "normalization", ("x", "weight", "bias"), 2, {"eps": 1e-5}, (
        'y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis, var the biased '
        'variance mean((x - mean)^2) (torch.nn.functional.layer_norm with normalized_shape = '
        'x.shape[-1:]); weight and bias have shape (x.shape[-1],) and default to 1 and 0.'
    ),
          shape=_normalized_shape, reference="normalization:layer_norm", corpus="normalization",
          terms=("mean", "sigma", "xhat", "absw", "absb", "absx", "absmean", "K")),
    entry("rms_norm", "normalization", ("x", "weight"), 1, {"eps": None}, (
        'y = x / sqrt(mean(x^2) + eps) * weight over the last axis '
        '(torch.nn.functional.rms_norm with normalized_shape = x.shape[-1:]). eps=None is '
        'what torch uses: the machine epsilon of the computation type, 2^-52 for float64 '
        "inputs and float32's 2^-23 for all narrower formats (torch computes 16-bit inputs in"
        ' float32); validate() fills in the number.'
    ),
          shape=_normalized_shape, reference="normalization:rms_norm", corpus="normalization",
          terms=("rms", "xhat", "absw", "K")),
)
