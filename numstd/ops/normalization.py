"""Normalizations: ``layer_norm`` and ``rms_norm`` over the last axis, and the channel norms
``group_norm``, ``instance_norm`` and ``batch_norm`` of ``(N, C, *spatial)`` inputs.

Reference: :mod:`numstd.reference.normalization`; variants: :mod:`numstd.corpus.normalization`
(last-axis norms) and :mod:`numstd.corpus.channel_norms`.  The framework calls are not
mechanical (``normalized_shape``, ``num_groups``): the backends keep them.

The channel norms normalise groups of ``K`` elements with layer_norm's statistics (biased
variance, ``eps`` inside the square root) and apply a per-channel affine ``weight``/``bias`` of
shape ``(C,)``; parameter names are torch.nn.functional's:

=================  ==========================================  ==================================
op                 one normalised group                        ``K``
=================  ==========================================  ==================================
``group_norm``     ``(n, g)``: ``C / num_groups`` channels      ``C / num_groups * prod(spatial)``
                   and all spatial positions
``instance_norm``  ``(n, c)``: the spatial positions            ``prod(spatial)``
``batch_norm``     ``c``: all samples and spatial positions     ``N * prod(spatial)``
                   (``training=True``); eval mode normalises
                   with ``running_mean``/``running_var``        (eval: 1, no statistics)
=================  ==========================================  ==================================
"""

from __future__ import annotations

from typing import Any, Mapping

import math
import numbers

from ..core.errors import ParameterError, ShapeError
from ._shapes import check_vector, need_ndim
from .entry import REQUIRED, OpInfo, entry

__all__ = ["ENTRIES"]


def _normalized_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x = a[0]
    need_ndim(spec, 0, x, 1, "(the normalised axis is the last one)")
    n = x.shape[-1]
    for pos in range(1, len(a)):
        check_vector(spec, pos, a[pos], n, f"matching the last axis of x {x.shape}")
    return x.shape


def _channel_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    """(N, C, *spatial) inputs; every other input a (C,) vector; K > 1 where statistics are taken."""
    x = a[0]
    least = 3 if spec.name == "instance_norm" else 2
    need_ndim(spec, 0, x, least, "(N, C, *spatial)" + (" with at least one spatial axis" if least == 3 else ""))
    n, c = x.shape[0], x.shape[1]
    for pos in range(1, len(a)):
        check_vector(spec, pos, a[pos], c, f"one value per channel of x {x.shape} (axis 1)")
    spatial = math.prod(x.shape[2:])
    if spec.name == "group_norm" and c % p["num_groups"]:
        raise ShapeError(f"group_norm: num_groups={p['num_groups']} does not divide the {c} channels of x {x.shape}; "
                         "use a divisor of C (torch: 'Expected number of channels in input to be divisible by "
                         "num_groups')")
    if spec.name == "batch_norm" and not p["training"]:
        missing = [spec.inputs[i] for i in (1, 2) if a[i] is None]
        if missing:
            raise ParameterError(f"batch_norm: training=False normalises with the running statistics; pass "
                                 f"{' and '.join(missing)} (shape ({c},)) or set training=True")
        return x.shape
    K = spatial if spec.name == "instance_norm" else n * spatial
    if spec.name != "group_norm" and x.size and K < 2:
        raise ShapeError(f"{spec.name}: x {x.shape} has {K} value per normalised group; the statistics need more "
                         "than 1 value (torch: 'Expected more than 1 value per channel when training')")
    return x.shape


def _num_groups(op: str, value: Any) -> int:
    if isinstance(value, (bool, float)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ParameterError(f"group_norm: num_groups must be a positive int dividing the channels, got {value!r}")
    return int(value)


def _training(op: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(f"batch_norm: training must be True or False, got {value!r}")
    return value


def _norm_stored16(values: Any, aux: Mapping[str, Any], fmt: Any) -> Any:
    """layer_norm / rms_norm with the row statistics XLA CPU's 16-bit kernel stores (the mean ``m16`` and
    ``r16 = RN16(rsqrt(·))``, numstd.reference.normalization's ``stored16``): the bias test's
    ``stored_shift`` allowance."""
    return aux.get("stored16", values)


_CHANNEL_TERMS = ("mean", "sigma", "xhat", "absw", "absb", "absx", "absmean", "K")

ENTRIES: tuple[OpInfo, ...] = (
    entry("layer_norm", "normalization", ("x", "weight", "bias"), 2, {"eps": 1e-5}, (
        'y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis, var the biased '
        'variance mean((x - mean)^2) (torch.nn.functional.layer_norm with normalized_shape = '
        'x.shape[-1:]); weight and bias have shape (x.shape[-1],) and default to 1 and 0.'
    ),
          shape=_normalized_shape, reference="normalization:layer_norm", corpus="normalization",
          terms=("mean", "sigma", "xhat", "absw", "absb", "absx", "absmean", "K", "shift16", "xhat16"),
          stored=_norm_stored16),
    entry("rms_norm", "normalization", ("x", "weight"), 1, {"eps": None}, (
        'y = x / sqrt(mean(x^2) + eps) * weight over the last axis '
        '(torch.nn.functional.rms_norm with normalized_shape = x.shape[-1:]). eps=None is '
        'what torch uses: the machine epsilon of the computation type, 2^-52 for float64 '
        "inputs and float32's 2^-23 for all narrower formats (torch computes 16-bit inputs in"
        ' float32); validate() fills in the number.'
    ),
          shape=_normalized_shape, reference="normalization:rms_norm", corpus="normalization",
          terms=("rms", "xhat", "absw", "K"), stored=_norm_stored16),
    entry("group_norm", "normalization", ("x", "weight", "bias"), 2, {"num_groups": REQUIRED, "eps": 1e-5}, (
        'torch.nn.functional.group_norm: x of shape (N, C, *spatial); the C channels split into num_groups '
        'groups of C/num_groups consecutive channels; each (sample, group) is normalised by its mean and '
        'biased variance, y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c]; weight and bias have shape '
        '(C,) and default to 1 and 0.'
    ),
          shape=_channel_shape, reference="normalization:group_norm", corpus="channel_norms",
          terms=_CHANNEL_TERMS, param_checks={"num_groups": _num_groups}),
    entry("instance_norm", "normalization", ("x", "weight", "bias"), 2, {"eps": 1e-5}, (
        'torch.nn.functional.instance_norm with use_input_stats=True: x of shape (N, C, *spatial) with at '
        'least one spatial axis; each (sample, channel) is normalised over its spatial positions by its '
        'mean and biased variance, y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c] (weight, bias of '
        'shape (C,), default 1 and 0). Running statistics are not an input (eval-mode instance norm is '
        'batch_norm with training=False).'
    ),
          shape=_channel_shape, reference="normalization:instance_norm", corpus="channel_norms",
          terms=_CHANNEL_TERMS),
    entry("batch_norm", "normalization", ("x", "running_mean", "running_var", "weight", "bias"), 4,
          {"training": False, "eps": 1e-5}, (
        'torch.nn.functional.batch_norm on x of shape (N, C, *spatial). training=True: each channel is '
        'normalised by the mean and biased variance of all its N * prod(spatial) values (batch statistics; '
        'running_mean and running_var are ignored: numstd judges the output, not the in-place update of the '
        'running statistics). training=False (the default, as in torch): y = (x - running_mean[c]) / '
        'sqrt(running_var[c] + eps) * weight[c] + bias[c], an elementwise affine map; running_mean and '
        'running_var are required. weight and bias have shape (C,) and default to 1 and 0.'
    ),
          shape=_channel_shape, reference="normalization:batch_norm", corpus="channel_norms",
          terms=_CHANNEL_TERMS, param_checks={"training": _training}),
)
