"""Pooling (torch.nn.functional semantics): ``max_pool1d/2d/3d`` and ``avg_pool1d/2d/3d``.

Reference: :mod:`numstd.reference.pooling`; variants: :mod:`numstd.corpus.pooling`.

``x`` has shape ``(N, C, *spatial)`` or ``(C, *spatial)`` with ``d`` spatial axes (the op's digit);
the window slides over the last ``d`` axes.  Parameters are torch's: ``kernel_size``, ``stride``
(``None``: the kernel size), ``padding``, ``dilation`` (max pooling only), ``ceil_mode`` and
``count_include_pad`` (average pooling only), each an int or a tuple of ``d`` ints.  Output size
per axis (torch's ``pooling_output_shape``)::

    out = floor_or_ceil((L + 2 p - dil (k - 1) - 1) / s) + 1
    if ceil_mode and (out - 1) s >= L + p: out -= 1     # the last window must start inside x

Max pooling pads with ``-inf`` and is exact: the result is one of the inputs (judged bit for bit,
NaN propagates as in torch).  Average pooling divides the window sum by the window clipped to the
padded input ``[-p, L + p)`` when ``count_include_pad`` (torch's default), else by the number of
in-bounds elements.  ``divisor_override`` and ``return_indices`` are not supported.

Parameters torch rejects raise :class:`~numstd.core.errors.ParameterError` naming the parameter:
``kernel_size``, ``stride``, ``dilation`` < 1, negative ``padding``, ``padding > kernel_size / 2``
and an output size below 1.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core.errors import ParameterError, ShapeError
from .entry import REQUIRED, Call, OpInfo, entry

__all__ = ["ENTRIES", "output_size", "spatial_params", "windows", "divisor"]


def _ints(op: str, name: str, value: Any, d: int) -> tuple[int, ...]:
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value,) * d
    if len(vals) == 1:
        vals = vals * d
    if len(vals) != d or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in vals):
        raise ParameterError(f"{op}: {name} must be an int or a tuple of {d} ints, got {value!r}")
    return tuple(int(v) for v in vals)


def output_size(L: int, k: int, s: int, p: int, dil: int, ceil_mode: bool) -> int:
    """torch's ``pooling_output_shape`` for one axis (module docstring)."""
    span = L + 2 * p - dil * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= L + p:
        out -= 1
    return out


def spatial_params(op: str, params: Mapping[str, Any]) -> tuple[tuple[int, ...], ...]:
    """(kernel, stride, padding, dilation) tuples of a validated call."""
    d = int(op[-2])
    return (params["kernel_size"], params["stride"], params["padding"], params.get("dilation", (1,) * d))


def windows(x: np.ndarray, op: str, params: dict, fill: float) -> np.ndarray:
    """The windows of ``x``: shape ``x.shape[:-d] + out + kernel_size`` (a view of a padded copy)."""
    d = int(op[-2])
    k, s, p, dil = spatial_params(op, params)
    lead = x.ndim - d
    spatial = x.shape[lead:]
    out = [output_size(spatial[i], k[i], s[i], p[i], dil[i], params["ceil_mode"]) for i in range(d)]
    pads = [(0, 0)] * lead
    for i in range(d):
        need = (out[i] - 1) * s[i] + dil[i] * (k[i] - 1) + 1
        pads.append((p[i], max(0, need - p[i] - spatial[i])))
    w = np.pad(x, pads, constant_values=fill)
    for i in range(d):
        ax = lead + i
        w = sliding_window_view(w, dil[i] * (k[i] - 1) + 1, axis=ax)[..., ::dil[i]]
        w = w[(slice(None),) * ax + (slice(0, (out[i] - 1) * s[i] + 1, s[i]),)]
    return w


def divisor(op: str, spatial: tuple, params: dict) -> np.ndarray:
    """The divisor of each output window of avg pooling (broadcastable over the spatial output axes)."""
    d = int(op[-2])
    k, s, p, dil = spatial_params(op, params)
    div = np.ones(())
    for i in range(d):
        n = output_size(spatial[i], k[i], s[i], p[i], dil[i], params["ceil_mode"])
        start = np.arange(n) * s[i] - p[i]
        end = np.minimum(start + k[i], spatial[i] + p[i])
        size = end - start if params["count_include_pad"] else np.minimum(end, spatial[i]) - np.maximum(start, 0)
        div = np.multiply.outer(div, size.astype(np.float64))
    return div


def _check(op: str, full: dict) -> None:
    """Normalise the window parameters to tuples of ``d`` ints and apply torch's rules."""
    d = int(op[-2])
    k = _ints(op, "kernel_size", full["kernel_size"], d)
    empty = full["stride"] is None or (isinstance(full["stride"], (tuple, list)) and not full["stride"])
    s = k if empty else _ints(op, "stride", full["stride"], d)
    p = _ints(op, "padding", full["padding"], d)
    dil = _ints(op, "dilation", full.get("dilation", 1), d)
    for name, vals, least in (("kernel_size", k, 1), ("stride", s, 1), ("dilation", dil, 1), ("padding", p, 0)):
        if min(vals) < least:
            raise ParameterError(f"{op}: {name}={vals if d > 1 else vals[0]} is not allowed; every value must be "
                                 f"{'>= 1' if least else '>= 0'} (torch rejects it)")
    bad = [i for i in range(d) if 2 * p[i] > k[i]]
    if bad:
        i = bad[0]
        raise ParameterError(f"{op}: padding={p[i]} is more than half of kernel_size={k[i]} (axis {i} of the "
                             f"window); torch allows padding <= kernel_size / 2")
    for name in ("ceil_mode", "count_include_pad"):
        if name in full and not isinstance(full[name], bool):
            raise ParameterError(f"{op}: {name} must be True or False, got {full[name]!r}")
    full["kernel_size"], full["stride"], full["padding"] = k, s, p
    if "dilation" in full:
        full["dilation"] = dil


def _shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x = a[0]
    d = int(spec.name[-2])
    if x.ndim not in (d + 1, d + 2):
        raise ShapeError(f"{spec.name}: inputs[0] (x) has shape {x.shape}; it must be (N, C, *spatial) or "
                         f"(C, *spatial) with {d} spatial axis(es)")
    k, s, pad, dil = spatial_params(spec.name, p)
    spatial = x.shape[-d:]
    out = tuple(output_size(spatial[i], k[i], s[i], pad[i], dil[i], p["ceil_mode"]) for i in range(d))
    if min(out) < 1:
        raise ParameterError(f"{spec.name}: kernel_size={k}, stride={s}, padding={pad}, dilation={dil} give an "
                             f"output size of {out} for the spatial shape {spatial}; every output size must be >= 1 "
                             "(a smaller kernel or more padding)")
    return x.shape[:-d] + out


_MAX_PARAMS = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
_AVG_PARAMS = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")


def _max(d: int) -> OpInfo:
    return entry(f"max_pool{d}d", "reduction", ("x",), 0,
                 {"kernel_size": REQUIRED, "stride": None, "padding": 0, "dilation": 1, "ceil_mode": False}, (
        f"torch.nn.functional.max_pool{d}d: y[..., o] = max of x over window o (kernel_size, stride, padding "
        "with -inf, dilation, ceil_mode) over the last {d} axes. Exact: the result is one of the inputs; NaN in a "
        "window gives NaN; the sign of a zero result is not judged."
    ).replace("{d}", str(d)), shape=_shape, reference="pooling:max_pool", corpus="pooling", check_params=_check,
                 exact=True, calls={"torch": Call(f"torch.nn.functional.max_pool{d}d", {k: k for k in _MAX_PARAMS})})


def _avg(d: int) -> OpInfo:
    return entry(f"avg_pool{d}d", "reduction", ("x",), 0,
                 {"kernel_size": REQUIRED, "stride": None, "padding": 0, "ceil_mode": False,
                  "count_include_pad": True}, (
        f"torch.nn.functional.avg_pool{d}d: y[..., o] = sum of x over window o / D_o (kernel_size, stride, "
        "zero padding, ceil_mode), D_o the window clipped to the padded input when count_include_pad "
        "(the default), else its number of in-bounds elements."
    ), shape=_shape, reference="pooling:avg_pool", corpus="pooling", check_params=_check,
                 terms=("absmean", "K"),
                 calls={"torch": Call(f"torch.nn.functional.avg_pool{d}d", {k: k for k in _AVG_PARAMS})})


ENTRIES: tuple[OpInfo, ...] = tuple(_max(d) for d in (1, 2, 3)) + tuple(_avg(d) for d in (1, 2, 3))
