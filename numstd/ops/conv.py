"""Convolutions: ``conv`` (1-, 2- or 3-D by the input's rank; cross-correlation as in torch) and
``conv_transpose`` (its adjoint, torch's conv_transpose1d/2d/3d; :func:`transposed`).

``conv(x, weight, bias)`` with ``x`` ``(N, C_in, *spatial)``, ``weight`` ``(C_out, C_in/groups,
*kernel)`` and ``bias`` ``(C_out,)`` or omitted is ``torch.nn.functional.conv1d/2d/3d``: every
output element is a dot product of length ``K = C_in/groups × prod(kernel)`` (plus the bias), so
the op is a contraction and its error model is linear's with that K.

This module holds the geometry every layer shares: :func:`geometry` (the per-dimension stride,
padding, dilation and output size, with the parameter checks torch makes) and :func:`im2col`
(the rows of the implicit GEMM, for a range of output positions).  The reference
(:mod:`numstd.reference.conv`), the corpus (:mod:`numstd.corpus.conv`) and the numpy backend all
compute ``im2col(x) @ weight_g.T`` per group.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.errors import ParameterError, ShapeError
from .entry import OpInfo, entry

__all__ = ["ENTRIES", "Geometry", "geometry", "im2col", "group_weight", "pad_input", "transposed", "dilate_input",
           "transpose_weight", "transposed_problem", "col2im_taps"]

_PADDING_MODES = ("valid", "same")


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _int_or_tuple(name: str, least: int, what: str) -> Any:
    """A param check: an int ``>= least`` or a tuple of them (normalised to int / tuple of int)."""

    def check(op: str, value: Any) -> Any:
        if _is_int(value):
            if int(value) < least:
                raise ParameterError(f"{op}: {name}={value!r} is not allowed; {name} must be {what} "
                                     f"(an int >= {least} or one per spatial dimension)")
            return int(value)
        if isinstance(value, (tuple, list)) and value and all(_is_int(v) for v in value):
            bad = [v for v in value if int(v) < least]
            if bad:
                raise ParameterError(f"{op}: {name}={tuple(value)!r} is not allowed; every entry of {name} "
                                     f"must be {what} (>= {least})")
            return tuple(int(v) for v in value)
        raise ParameterError(f"{op}: {name}={value!r} is not allowed; {name} must be an int >= {least} or a "
                             "tuple of ints, one per spatial dimension")

    return check


def _padding(op: str, value: Any) -> Any:
    if isinstance(value, str):
        if value not in _PADDING_MODES:
            raise ParameterError(f"{op}: padding={value!r} is not allowed; use an int >= 0, a tuple of "
                                 "ints >= 0 (one per spatial dimension), 'valid' or 'same'")
        return value
    return _int_or_tuple("padding", 0, "non-negative (zero padding on both sides)")(op, value)


def _groups(op: str, value: Any) -> int:
    if not _is_int(value) or int(value) < 1:
        raise ParameterError(f"{op}: groups={value!r} is not allowed; groups must be an int >= 1 that "
                             "divides both C_in and C_out")
    return int(value)


def _check_params(op: str, p: dict) -> None:
    if p["padding"] == "same":
        s = p["stride"]
        if (s != 1) if _is_int(s) else any(v != 1 for v in s):
            raise ParameterError(f"{op}: padding='same' needs stride=1 (got stride={s!r}), as in torch; "
                                 "give the padding as numbers for a strided convolution")


@dataclass(frozen=True)
class Geometry:
    """The per-dimension layout of one convolution (every tuple has one entry per spatial dim)."""

    nd: int
    groups: int
    c_in: int
    c_out: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pad_lo: tuple[int, ...]
    pad_hi: tuple[int, ...]
    in_size: tuple[int, ...]
    out_size: tuple[int, ...]

    @property
    def K(self) -> int:
        """Length of each dot product: ``C_in/groups × prod(kernel)`` (the bias not counted)."""
        return (self.c_in // self.groups) * math.prod(self.kernel)

    @property
    def positions(self) -> int:
        """Output positions per image, ``prod(out_size)``."""
        return math.prod(self.out_size)


def _per_dim(op: str, name: str, value: Any, nd: int) -> tuple[int, ...]:
    if _is_int(value):
        return (int(value),) * nd
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * nd
    if len(value) != nd:
        raise ParameterError(f"{op}: {name}={value!r} has {len(value)} entries but the input has {nd} spatial "
                             f"dimension(s); allowed: one int or {nd} ints")
    return value


def geometry(x_shape: Sequence[int], w_shape: Sequence[int], params: Mapping[str, Any],
             op: str = "conv") -> Geometry:
    """The :class:`Geometry` of ``conv(x, weight)``; raises what torch would reject.

    Raises
    ------
    ShapeError
        ``x`` is not ``(N, C_in, *spatial)`` with 1 to 3 spatial dims, or ``weight`` not
        ``(C_out, C_in/groups, *kernel)`` of the same rank.
    ParameterError
        ``groups`` does not divide ``C_in`` and ``C_out``, a per-dimension tuple has the wrong
        length, or a spatial output size is below 1.
    """
    x_shape, w_shape = tuple(int(s) for s in x_shape), tuple(int(s) for s in w_shape)
    if not 3 <= len(x_shape) <= 5:
        raise ShapeError(f"{op}: inputs[0] (x) has shape {x_shape}; it must be (N, C_in, *spatial) with 1, 2 "
                         "or 3 spatial dimensions (conv1d/2d/3d); add a batch axis of 1 for a single image")
    nd = len(x_shape) - 2
    if len(w_shape) != len(x_shape):
        raise ShapeError(f"{op}: inputs[1] (weight) has shape {w_shape}; for a {nd}-D convolution it must be "
                         f"(C_out, C_in/groups, {', '.join(['k'] * nd)}) ({nd + 2} dims)")
    groups = int(params["groups"])
    c_in, c_out = x_shape[1], w_shape[0]
    if c_in % groups or c_out % groups:
        raise ParameterError(f"{op}: groups={groups} must divide both C_in={c_in} and C_out={c_out}; allowed: "
                             f"a common divisor of {c_in} and {c_out}")
    if w_shape[1] * groups != c_in:
        raise ShapeError(f"{op}: weight {w_shape} has {w_shape[1]} input channels per group but x has C_in={c_in} "
                         f"and groups={groups}: weight.shape[1] must be C_in/groups = {c_in // groups}")
    kernel = w_shape[2:]
    if min(kernel) < 1 or c_out < 1:
        raise ShapeError(f"{op}: weight {w_shape} is empty; every kernel size and C_out must be >= 1")
    stride = _per_dim(op, "stride", params["stride"], nd)
    dilation = _per_dim(op, "dilation", params["dilation"], nd)
    pad = params["padding"]
    if pad == "valid":
        lo = hi = (0,) * nd
    elif pad == "same":  # torch: total d(k-1), the odd one on the right
        tot = tuple(d * (k - 1) for d, k in zip(dilation, kernel))
        lo = tuple(t // 2 for t in tot)
        hi = tuple(t - t // 2 for t in tot)
    else:
        lo = hi = _per_dim(op, "padding", pad, nd)
    in_size = x_shape[2:]
    out = tuple((n + a + b - d * (k - 1) - 1) // s + 1
                for n, a, b, d, k, s in zip(in_size, lo, hi, dilation, kernel, stride))
    if min(out) < 1:
        i = int(np.argmin(out))
        raise ParameterError(
            f"{op}: the output would have size {out[i]} along spatial dim {i} (input {in_size[i]}, padding "
            f"{lo[i]}+{hi[i]}, kernel {kernel[i]}, dilation {dilation[i]}); allowed: padding, kernel and "
            f"dilation with input + padding >= dilation*(kernel-1) + 1 (here >= {dilation[i] * (kernel[i] - 1) + 1})")
    return Geometry(nd, groups, c_in, c_out, kernel, stride, dilation, lo, hi, in_size, out)


def pad_input(x: np.ndarray, g: Geometry) -> np.ndarray:
    """``x`` with the geometry's zero padding (same dtype); a negative padding crops (the
    equivalent convolution of a transposed one, :func:`transposed`)."""
    if not any(g.pad_lo) and not any(g.pad_hi):
        return x
    xp = np.pad(x, [(0, 0), (0, 0)] + [(max(a, 0), max(b, 0)) for a, b in zip(g.pad_lo, g.pad_hi)])
    crop = tuple(slice(max(-a, 0), n - max(-b, 0)) for a, b, n in zip(g.pad_lo, g.pad_hi, xp.shape[2:]))
    return xp[(slice(None), slice(None)) + crop]


def transposed(x_shape: Sequence[int], w_shape: Sequence[int], params: Mapping[str, Any],
               op: str = "conv_transpose") -> tuple[Geometry, int]:
    """The stride-1 convolution that equals ``conv_transpose(x, weight)`` on the zero-dilated input.

    ``conv_transpose`` (torch.nn.functional.conv_transpose1d/2d/3d; weight ``(C_in, C_out/groups,
    *kernel)``) is the convolution of :func:`dilate_input` ``(x)`` (``stride − 1`` zeros between
    neighbours) with :func:`transpose_weight` ``(weight)`` (kernel flipped, in/out channels swapped
    per group), stride 1, the same dilation, padding ``d(k−1) − p`` before and ``d(k−1) − p +
    output_padding`` after (negative: cropped).  Returns that geometry and the largest number of
    nonzero products of one output element, ``C_in/groups × prod(ceil(k / (s / gcd(s, d))))``
    (the K of the error model: the inserted zeros are exact).

    Raises what torch rejects: ``ShapeError`` for the layouts, ``ParameterError`` for groups not
    dividing the channels, ``output_padding >= max(stride, dilation)`` and an output size below 1.
    """
    x_shape, w_shape = tuple(int(v) for v in x_shape), tuple(int(v) for v in w_shape)
    if not 3 <= len(x_shape) <= 5:
        raise ShapeError(f"{op}: inputs[0] (x) has shape {x_shape}; it must be (N, C_in, *spatial) with 1, 2 or 3 "
                         "spatial dimensions (conv_transpose1d/2d/3d); add a batch axis of 1 for a single image")
    nd = len(x_shape) - 2
    if len(w_shape) != len(x_shape):
        raise ShapeError(f"{op}: inputs[1] (weight) has shape {w_shape}; for a {nd}-D transposed convolution it must "
                         f"be (C_in, C_out/groups, {', '.join(['k'] * nd)}) ({nd + 2} dims)")
    groups = int(params["groups"])
    c_in = x_shape[1]
    if w_shape[0] != c_in:
        raise ShapeError(f"{op}: weight {w_shape} has {w_shape[0]} input channels but x has C_in={c_in}; the weight "
                         "of a transposed convolution is (C_in, C_out/groups, *kernel)")
    c_out = w_shape[1] * groups
    if c_in % groups:
        raise ParameterError(f"{op}: groups={groups} must divide C_in={c_in}; allowed: a divisor of {c_in}")
    kernel = w_shape[2:]
    if min(kernel) < 1 or c_out < 1:
        raise ShapeError(f"{op}: weight {w_shape} is empty; every kernel size and C_out/groups must be >= 1")
    stride = _per_dim(op, "stride", params["stride"], nd)
    dilation = _per_dim(op, "dilation", params["dilation"], nd)
    pad = _per_dim(op, "padding", params["padding"], nd)
    opad = _per_dim(op, "output_padding", params["output_padding"], nd)
    for i, (q, s_, d_) in enumerate(zip(opad, stride, dilation)):
        if q >= max(s_, d_):
            raise ParameterError(f"{op}: output_padding={q} along spatial dim {i} is not allowed; it must be smaller "
                                 f"than stride or dilation (< {max(s_, d_)}), as in torch")
    lo = tuple(d_ * (k - 1) - q for d_, k, q in zip(dilation, kernel, pad))
    hi = tuple(a + q for a, q in zip(lo, opad))
    size = tuple((n - 1) * s_ + 1 for n, s_ in zip(x_shape[2:], stride))
    out = tuple((n - 1) * s_ - 2 * q + d_ * (k - 1) + o + 1
                for n, s_, q, d_, k, o in zip(x_shape[2:], stride, pad, dilation, kernel, opad))
    if min(out) < 1:
        i = int(np.argmin(out))
        raise ParameterError(f"{op}: the output would have size {out[i]} along spatial dim {i} (input "
                             f"{x_shape[2 + i]}, stride {stride[i]}, padding {pad[i]}, kernel {kernel[i]}); allowed: "
                             "padding with (input-1)*stride + dilation*(kernel-1) + output_padding + 1 > 2*padding")
    g = Geometry(nd, groups, c_in, c_out, kernel, (1,) * nd, dilation, lo, hi, size, out)
    terms = (c_in // groups) * math.prod(-(-k // (s_ // math.gcd(s_, d_))) for k, s_, d_ in zip(kernel, stride, dilation))
    return g, terms


def dilate_input(x: np.ndarray, stride: Sequence[int]) -> np.ndarray:
    """``x`` with ``stride − 1`` zeros between neighbours along each spatial axis (same dtype)."""
    stride = tuple(int(s) for s in stride)
    if all(s == 1 for s in stride):
        return x
    shape = x.shape[:2] + tuple((n - 1) * s + 1 for n, s in zip(x.shape[2:], stride))
    out = np.zeros(shape, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)] = x
    return out


def transpose_weight(w: np.ndarray, groups: int) -> np.ndarray:
    """``(C_in, C_out/g, *k)`` -> the equivalent convolution's ``(C_out, C_in/g, *k)``, kernel flipped."""
    ci, co = w.shape[0] // groups, w.shape[1]
    k = w.shape[2:]
    wt = w.reshape((groups, ci, co) + k).swapaxes(1, 2).reshape((groups * co, ci) + k)
    return np.ascontiguousarray(wt[(slice(None), slice(None)) + (slice(None, None, -1),) * len(k)])


def transposed_problem(x: Any, w: Any, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, Geometry, int]:
    """``(dilated x, equivalent weight, geometry, K)`` of ``conv_transpose(x, w)`` (:func:`transposed`)."""
    g, terms = transposed(np.shape(x), np.shape(w), params)
    stride = _per_dim("conv_transpose", "stride", params["stride"], g.nd)
    return dilate_input(np.asarray(x), stride), transpose_weight(np.asarray(w), g.groups), g, terms


def col2im_taps(x_shape: Sequence[int], w_shape: Sequence[int], params: Mapping[str, Any]
                ) -> tuple[tuple[int, ...], tuple[slice, ...], list[tuple[tuple[int, ...], tuple[slice, ...]]]]:
    """The col2im (GEMM + scatter-add) form of ``conv_transpose``: ``(wide, crop, taps)``.

    Kernel tap ``j`` (in kernel-index order, the order of torch's ``col2im`` / ``vol2col`` loops)
    adds ``x[n, :, i] . weight[:, o, j]`` (a sum over the group's input channels) into the
    uncropped output of spatial size ``wide`` at ``i * stride + j * dilation``: ``taps`` lists
    ``(j, slices of wide)``; the op's output is ``wide[crop]`` (``crop`` removes ``padding``).
    """
    g, _ = transposed(x_shape, w_shape, params)
    nd = g.nd
    s = _per_dim("conv_transpose", "stride", params["stride"], nd)
    d = _per_dim("conv_transpose", "dilation", params["dilation"], nd)
    p = _per_dim("conv_transpose", "padding", params["padding"], nd)
    o = _per_dim("conv_transpose", "output_padding", params["output_padding"], nd)
    n_in = tuple(int(v) for v in x_shape[2:])
    wide = tuple((n - 1) * ss + dd * (k - 1) + 1 + oo for n, ss, dd, k, oo in zip(n_in, s, d, g.kernel, o))
    taps = [(j, tuple(slice(j[i] * d[i], j[i] * d[i] + (n_in[i] - 1) * s[i] + 1, s[i]) for i in range(nd)))
            for j in np.ndindex(*g.kernel)]
    crop = tuple(slice(q, q + m) for q, m in zip(p, g.out_size))
    return wide, crop, taps


def im2col(xp: np.ndarray, g: Geometry, group: int, rows: np.ndarray) -> np.ndarray:
    """The implicit-GEMM rows of one group: ``(len(rows), C_in/groups × prod(kernel))``.

    ``xp`` is the padded input (:func:`pad_input`); ``rows`` are flat output rows ``n × P + p``
    (``P`` output positions per image, ``p`` in C order).  Column ``c × kvol + j`` holds input
    channel ``c`` of the group at kernel offset ``j`` (C order), the layout of
    ``weight[g].reshape(C_out/groups, -1)``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    cg = g.c_in // g.groups
    n, p = np.divmod(rows, g.positions)
    oc = np.unravel_index(p, g.out_size)
    kc = np.unravel_index(np.arange(math.prod(g.kernel)), g.kernel)
    idx = [n[:, None, None], (group * cg + np.arange(cg))[None, :, None]]
    for i in range(g.nd):
        idx.append((oc[i][:, None] * g.stride[i] + kc[i][None, :] * g.dilation[i])[:, None, :])
    return xp[tuple(idx)].reshape(len(rows), -1)


def group_weight(w: np.ndarray, g: Geometry, group: int) -> np.ndarray:
    """``weight`` of one group as the GEMM's right operand, ``(K, C_out/groups)``."""
    co = g.c_out // g.groups
    return w[group * co:(group + 1) * co].reshape(co, -1).T


def _conv_transpose_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, w, b = a
    g, _ = transposed(x.shape, w.shape, p, spec.name)
    if b is not None and (b.ndim != 1 or b.shape[0] != g.c_out):
        raise ShapeError(f"{spec.name}: inputs[2] (bias) has shape {b.shape}; it must be (C_out,) = ({g.c_out},), "
                         "one bias per output channel")
    return (x.shape[0], g.c_out) + g.out_size


def _conv_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, w, b = a
    g = geometry(x.shape, w.shape, p, spec.name)
    if b is not None and (b.ndim != 1 or b.shape[0] != g.c_out):
        raise ShapeError(f"{spec.name}: inputs[2] (bias) has shape {b.shape}; it must be (C_out,) = ({g.c_out},), "
                         "one bias per output channel")
    return (x.shape[0], g.c_out) + g.out_size


ENTRIES: tuple[OpInfo, ...] = (
    entry("conv", "contraction", ("x", "weight", "bias"), 1,
          {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}, (
              'y[n, o, *i] = bias[o] + sum_{c, j} x_pad[n, g(o)·C_in/groups + c, i·stride + j·dilation] · '
              'weight[o, c, j] (torch.nn.functional.conv1d/2d/3d, chosen by the rank of x: cross-correlation, '
              'zero padding): x (N, C_in, *spatial), weight (C_out, C_in/groups, *kernel), bias (C_out,) or '
              'omitted; stride, padding, dilation an int or one per spatial dim, padding also "valid" or '
              '"same" (stride 1). K = C_in/groups × prod(kernel).'
          ),
          shape=_conv_shape, reference="conv:conv", corpus="conv",
          terms=("absdot", "K", "indev", "insum", "inrms"),  # in*: reference/rounded_operands.py
          param_checks={"stride": _int_or_tuple("stride", 1, "positive"), "padding": _padding,
                        "dilation": _int_or_tuple("dilation", 1, "positive"), "groups": _groups},
          check_params=_check_params,
          calls={}),  # (the call depends on the rank: the backends choose conv1d/2d/3d)
    entry("conv_transpose", "contraction", ("x", "weight", "bias"), 1,
          {"stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1}, (
              'torch.nn.functional.conv_transpose1d/2d/3d by the rank of x (the adjoint of conv): x (N, C_in, '
              '*spatial), weight (C_in, C_out/groups, *kernel), bias (C_out,) or omitted; output size (L-1)·stride '
              '- 2·padding + dilation·(k-1) + output_padding + 1. Computed as the stride-1 convolution of the '
              'zero-dilated input with the flipped, channel-swapped weight; K = the largest number of nonzero '
              'products of an output, C_in/groups × prod(ceil(k / (stride / gcd(stride, dilation)))).'
          ),
          shape=_conv_transpose_shape, reference="conv:conv_transpose", corpus="conv",
          terms=("absdot", "K", "s16", "a16", "indev", "insum", "inrms"),
          param_checks={"stride": _int_or_tuple("stride", 1, "positive"),
                        "padding": _int_or_tuple("padding", 0, "non-negative"),
                        "output_padding": _int_or_tuple("output_padding", 0, "non-negative"),
                        "dilation": _int_or_tuple("dilation", 1, "positive"), "groups": _groups},
          calls={}),
)
