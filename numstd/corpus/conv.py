"""Convolution variants (``conv``, ``conv_transpose``): implicit GEMMs in other orders and hardware,
and the bugs.  A conv_transpose variant computes its equivalent stride-1 convolution of the
zero-dilated input (:func:`numstd.ops.conv.transposed`) with the same models, except torch CPU and
the GEMM + col2im formulation (``col2im-fp32``), which compute it directly; on it the
``flipped-kernel`` bug is the missing flip of the adjoint, and ``stride-off-by-one`` is conv's only.

Every variant forms, per group, the im2col rows of the input (:func:`numstd.ops.conv.im2col`;
products exact, padding zeros exact) and accumulates ``cols @ W_g.T`` in the accumulation format
with a model of :mod:`numstd.emulate`, then runs a GEMM epilogue: the bias added in fp32 and one
rounding to the output format.

Legitimate: im2col + FMA chain (sequential), pairwise, blocked(32) and split-K(4) orders; a direct
loop nest in the other order (kernel offset outermost, input channel inner: the K columns
permuted, then one FMA chain); float32 BLAS on the im2col matrix; XLA CPU's 16-bit convolution
(``xla-arith16``: the fp32 convolution rounded to the 16-bit type before the bias, the arith16 policy's only); NVIDIA tensor-core block FMA
(A100, Ada, H100/H200, B200 models of :mod:`numstd.emulate.tensor_core`) on the im2col GEMM for
the 16-bit input formats they reproduce bit for bit; torch CPU (``F.conv1d/2d/3d``).

Bugs: a window shifted by one (padding one larger on the left), a stride one too small (where
stride > 1), the kernel flipped (true convolution instead of cross-correlation), the bias
missing, groups ignored (every group reads the first group's input channels), accumulation in the
output format or in bfloat16, TF32 rounding of float32 inputs (cuDNN's default in torch),
output truncation, zeros.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..core.formats import FORMATS, Format
from ..ops.conv import Geometry, geometry, group_weight, im2col, pad_input, transposed_problem
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, f64, finish, float32_inputs, from_torch, low_precision_inputs, narrow_out, registrar, rnd, to_torch,
    torch_same_format,
)

__all__ = ["VARIANTS", "torch_conv_transpose_col2im16"]

_V: list = []
variant = registrar(_V)

OPS = ("conv", "conv_transpose")


def _gemm(inputs: list, params: dict, core: Callable, *, keep_dtype: bool = False,
          g: Geometry | None = None, x: Any = None, w: Any = None, group_src: Callable | None = None
          ) -> tuple[np.ndarray, Geometry]:
    """The accumulator ``(N, C_out, *out)`` (float64 values) of ``core(cols, W_g)`` per group.

    ``keep_dtype``: the operands keep their format (tensor-core models read it); else float64
    copies (exact).  ``group_src(grp)``: the group whose input channels are read (bug models).
    """
    x = inputs[0] if x is None else x
    w = inputs[1] if w is None else w
    g = _geom([x, w], params) if g is None else g
    if not keep_dtype:
        x, w = f64(x), f64(w)
    xp = pad_input(np.asarray(x), g)
    N = np.shape(x)[0]
    rows = np.arange(N * g.positions)
    co = g.c_out // g.groups
    acc = np.empty((len(rows), g.c_out))
    for grp in range(g.groups):
        src = grp if group_src is None else group_src(grp)
        cols = im2col(xp, g, src, rows)
        acc[:, grp * co:(grp + 1) * co] = f64(core(cols, np.ascontiguousarray(group_weight(np.asarray(w), g, grp))))
    return np.moveaxis(acc.reshape((N,) + g.out_size + (g.c_out,)), -1, 1), g


_GEOMETRY = "_geometry"  # the equivalent convolution's geometry of a conv_transpose (run())


def _geom(inputs: list, params: dict) -> Geometry:
    """The convolution geometry the variant computes: conv's own, or the equivalent stride-1
    convolution of a conv_transpose (whose dilated input and weight ``run`` passes as ``inputs``)."""
    g = params.get(_GEOMETRY)
    return g if g is not None else geometry(np.shape(inputs[0]), np.shape(inputs[1]), params)


def _epilogue(S: np.ndarray, bias: Any, out: Format, acc: Format, mode: str, seed: int) -> np.ndarray:
    """``RN_out(RN_acc(S + bias))``."""
    y = S if bias is None else rnd(S + f64(bias).reshape((1, -1) + (1,) * (S.ndim - 2)), acc)
    return finish(y, out, mode, seed)


def _ordered(acc: Format, order: str = "sequential", **kw: Any) -> Callable:
    from ..emulate import matmul

    return lambda A, B: matmul(A, B, order=order, acc=acc, out=acc, **kw)


def _conv_variant(name: str, family: str, legit: bool, description: str, *, applies: Callable | None = None,
                  observable: Callable | None = None, mode: str = "rne", drop_bias: bool = False,
                  acc_formats: tuple[str, ...] | None = None, ops: tuple[str, ...] = OPS) -> Callable:
    """Register ``body(inputs, params, acc, seed, out) -> accumulator`` with the GEMM epilogue, for
    conv and (as the equivalent convolution of :func:`numstd.ops.conv.transposed`) conv_transpose."""

    def deco(body: Callable) -> Callable:
        for op in ops:
            def run(inputs, params, out, acc, seed, _op=op):
                with np.errstate(all="ignore"):
                    bias = None if drop_bias or len(inputs) < 3 else inputs[2]
                    if _op == "conv_transpose":
                        xd, wt, g, _ = transposed_problem(inputs[0], inputs[1], params)
                        inputs, params = [xd, wt] + list(inputs[2:]), {**params, _GEOMETRY: g}
                    S = body(inputs, params, acc, seed, out)
                    return _epilogue(S, bias, out, acc, mode, seed)

            variant(op, name, family, legit, description, applies, observable, acc_formats)(run)
        return body

    return deco


# ---------------------------------------------------------------------------------------------
# legitimate
# ---------------------------------------------------------------------------------------------


@_conv_variant("im2col-sequential", "accumulation-order", True,
               "im2col + one FMA chain over K = C_in/groups × kernel volume in the accumulation format")
def _sequential(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc))[0]


@_conv_variant("im2col-pairwise", "accumulation-order", True,
               "im2col + recursive halving of the K products, every partial sum rounded")
def _pairwise(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc, "pairwise"))[0]


@_conv_variant("im2col-blocked32", "accumulation-order", True,
               "im2col + blocked GEMM: FMA chains over blocks of 32 products, block sums added in order "
               "(implicit-GEMM kernels with BLOCK_K = 32)")
def _blocked(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32))[0]


@_conv_variant("im2col-splitk4", "accumulation-order", True,
               "split-K implicit GEMM: K in 4 contiguous slices accumulated separately, then added")
def _splitk(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc, "splitk", splits=4))[0]


def _direct_order(g: Geometry) -> np.ndarray:
    """K columns in direct-loop order: kernel offset outermost, input channel inner."""
    cg, kv = g.c_in // g.groups, int(np.prod(g.kernel))
    return (np.arange(cg)[None, :] * kv + np.arange(kv)[:, None]).ravel()


@_conv_variant("direct-kernel-outer", "accumulation-order", True,
               "direct convolution loops: for each kernel offset, for each input channel, one FMA into "
               "the fp32 accumulator (the K products in the other order than im2col's)")
def _direct(inputs, params, acc, seed, out):
    g = _geom(inputs, params)
    perm = _direct_order(g)
    seq = _ordered(acc)
    return _gemm(inputs, params, lambda A, B: seq(A[:, perm], B[perm]), g=g)[0]


@_conv_variant("im2col-blas-fp32", "library", True,
               "numpy.matmul (OpenBLAS sgemm) on float32 copies of the im2col matrix and the weight")
def _blas(inputs, params, acc, seed, out):
    if acc.name != "float32":
        return _gemm(inputs, params, _ordered(acc))[0]
    return _gemm(inputs, params, lambda A, B: np.matmul(A.astype(np.float32), B.astype(np.float32)))[0]


@_conv_variant("xla-arith16", "library", True,
               "XLA CPU's 16-bit convolution (jax 0.10.2 lax.conv_general_dilated + bias): the 16-bit operands "
               "converted to fp32, convolved in fp32 (YNNPACK or XLA's f32 convolution), the result rounded to the 16-bit type, then the "
               "bias added in fp32 and rounded again, RN16(RN16(conv) + b); conv_transpose the same on the "
               "zero-dilated input; 16-bit arithmetic only", acc_formats=ARITH16)
def _xla_conv(inputs, params, acc, seed, out):
    return rnd(_gemm(inputs, params, lambda A, B: np.matmul(A.astype(np.float32), B.astype(np.float32)))[0], acc)


def _validated(arch: str) -> Callable:
    """16-bit x and weight in a format ``TENSOR_CORES[arch]`` reproduces bit for bit."""

    def applies(out: Format, fmts: list, params: Any) -> bool:
        from ..emulate import TENSOR_CORES

        ok = TENSOR_CORES[arch].validated
        fl = [f for f in fmts[:2] if f is not None]
        return low_precision_inputs(out, fmts, params) and all(f.name in ok and f.bits == 16 for f in fl)

    return applies


def _tensor_core(arch: str) -> Callable:
    def body(inputs, params, acc, seed, out):
        from ..emulate import VARIANTS

        fn = VARIANTS[f"matmul/tc-{arch}"]
        return _gemm(inputs, params, lambda A, B: fn(A, B, out="float32", acc=acc, seed=seed), keep_dtype=True)[0]

    return body


for _arch, _what in (("a100", "A100/A2: blocks of 8 products, 1 extra alignment bit"),
                     ("ada", "Ada/L40S: blocks of 8 products, 1 extra bit"),
                     ("h100", "H100/H200: blocks of 16 products, 2 extra bits"),
                     ("b200", "B200: blocks of 16 products, 2 extra bits")):
    _conv_variant(f"tc-{_arch}", "hardware", True,
                  f"im2col GEMM on NVIDIA tensor cores ({_what}, truncated alignment; Khattak & Mikaitis "
                  "2025), cuDNN's implicit-GEMM path for 16-bit inputs", applies=_validated(_arch),
                  acc_formats=FP32_ONLY)(_tensor_core(_arch))
del _arch, _what


def _torch_conv(inputs, params, out, acc, seed):
    import torch
    import torch.nn.functional as F

    fn = (F.conv1d, F.conv2d, F.conv3d)[np.ndim(inputs[0]) - 3]
    ts = [None if a is None else to_torch(a) for a in inputs]
    with torch.no_grad():
        y = fn(ts[0], ts[1], ts[2] if len(ts) > 2 else None, stride=params["stride"], padding=params["padding"],
               dilation=params["dilation"], groups=params["groups"])
    return finish(from_torch(y), out)


variant("conv", "torch-cpu", "library", True,
        "torch CPU F.conv1d/2d/3d (oneDNN / im2col + BLAS, fp32 accumulation for 16-bit inputs) in the "
        "inputs' dtype", torch_same_format, acc_formats=FP32_ONLY)(_torch_conv)


def _torch_conv_transpose(inputs, params, out, acc, seed):
    import torch
    import torch.nn.functional as F

    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[np.ndim(inputs[0]) - 3]
    ts = [None if a is None else to_torch(a) for a in inputs]
    with torch.no_grad():
        y = fn(ts[0], ts[1], ts[2] if len(ts) > 2 else None, stride=params["stride"], padding=params["padding"],
               output_padding=params["output_padding"], groups=params["groups"], dilation=params["dilation"])
    return finish(from_torch(y), out)


@functools.lru_cache(maxsize=None)
def torch_conv_transpose_col2im16(fmt: str) -> bool:
    """Whether this machine's torch CPU ``conv_transpose2d`` in ``fmt`` (``"bfloat16"``/``"float16"``)
    is a col2im scatter-add in ``fmt`` itself: per-tap channel sums rounded to ``fmt``, added into a
    ``fmt`` output tap by tap, then the bias added in ``fmt``.

    Decided by running it on a fixed 2×8×5×5 case and comparing, bit for bit, with that model and
    with fp32 accumulation rounded once.  float16 is col2im on every CPU measured; bfloat16 is
    col2im where oneDNN has no bf16 kernel (an AVX2-only AMD EPYC, torch 2.13:
    ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` is False there) and fp32-accumulating where it
    has one (known_library_defects.toml, torch-cpu-conv-transpose-fp16-col2im).
    """
    import itertools

    import torch
    import torch.nn.functional as F

    from ..core.formats import get_format

    dt = get_format(fmt).dtype
    g = np.random.default_rng(13)
    x = g.standard_normal((2, 8, 5, 5)).astype(dt)
    w = (g.standard_normal((8, 4, 3, 3)) / 5).astype(dt)
    b = g.standard_normal(4).astype(dt)
    tt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[fmt]
    with torch.no_grad():
        y = F.conv_transpose2d(*(torch.tensor(a.astype(np.float32)).to(tt) for a in (x, w, b)), stride=2,
                               padding=1, output_padding=1).float().numpy()
    acc = np.zeros((2, 4, 12, 12), dt)
    for i, j in itertools.product(range(3), range(3)):
        part = np.einsum("nchw,co->nohw", x.astype(np.float32), w[:, :, i, j].astype(np.float32)).astype(dt)
        acc[:, :, i:i + 9:2, j:j + 9:2] = (acc[:, :, i:i + 9:2, j:j + 9:2].astype(np.float32)
                                           + part.astype(np.float32)).astype(dt)
    model = (acc[:, :, 1:11, 1:11].astype(np.float32) + b[None, :, None, None].astype(np.float32)).astype(dt)
    return bool(np.array_equal(model.astype(np.float32), y))


def _torch_fp32_path(out: Format, fmts: list, params: Any) -> bool:
    """torch CPU in the inputs' format, except a 16-bit format whose conv_transpose scatter-adds in that
    format on this machine (:func:`torch_conv_transpose_col2im16`; known_library_defects.toml,
    torch-cpu-conv-transpose-fp16-col2im): not an fp32-accumulating kernel."""
    if not torch_same_format(out, fmts, params):
        return False
    return out.name not in ("float16", "bfloat16") or not torch_conv_transpose_col2im16(out.name)


variant("conv_transpose", "torch-cpu", "library", True,
        "torch CPU F.conv_transpose1d/2d/3d (GEMM then col2im scatter-add in fp32) in the inputs' dtype; "
        "not a 16-bit format torch scatter-adds in (float16; bfloat16 on CPUs without oneDNN bf16)", _torch_fp32_path, acc_formats=FP32_ONLY)(_torch_conv_transpose)


def _col2im(inputs, params, out, acc, seed):
    """conv_transpose as GEMM + col2im: per kernel tap, the channel sums in fp32 (BLAS), scattered
    into the fp32 output in tap order, then the bias and one rounding."""
    from ..ops.conv import transposed

    x, w = np.asarray(inputs[0]), np.asarray(inputs[1])
    g, _ = transposed(x.shape, w.shape, params)
    nd, G = g.nd, g.groups
    per = lambda v: (v,) * nd if isinstance(v, int) else (tuple(v) * nd if len(v) == 1 else tuple(v))  # noqa: E731
    s, d, p = per(params["stride"]), per(params["dilation"]), per(params["padding"])
    ci, co = w.shape[0] // G, w.shape[1]
    wide = tuple((n - 1) * ss + dd * (k - 1) + 1 + o for n, ss, dd, k, o in
                 zip(x.shape[2:], s, d, g.kernel, per(params["output_padding"])))
    y = np.zeros((x.shape[0], g.c_out) + wide, dtype=np.float32)
    x32, w32 = f64(x).astype(np.float32), f64(w).astype(np.float32)
    with np.errstate(all="ignore"):
        for j in np.ndindex(*g.kernel):
            sl = tuple(slice(j[i] * d[i], j[i] * d[i] + (x.shape[2 + i] - 1) * s[i] + 1, s[i]) for i in range(nd))
            for grp in range(G):
                part = np.einsum("nc...,co->no...", x32[:, grp * ci:(grp + 1) * ci],
                                 w32[(slice(grp * ci, (grp + 1) * ci), slice(None)) + j]).astype(np.float32)
                y[(slice(None), slice(grp * co, (grp + 1) * co)) + sl] += part
        crop = tuple(slice(q, q + o) for q, o in zip(p, g.out_size))
        S = f64(y[(slice(None), slice(None)) + crop])
        return _epilogue(S, inputs[2] if len(inputs) > 2 else None, out, acc, "rne", seed)


variant("conv_transpose", "col2im-fp32", "library", True,
        "GEMM + col2im (torch's and cuDNN's backward-data formulation): per kernel tap the channel sums "
        "in float32, scattered into a float32 output in tap order, the bias added in float32",
        acc_formats=FP32_ONLY)(_col2im)


def _col2im16(inputs, params, out, acc, seed):
    """conv_transpose as torch CPU's 16-bit GEMM + col2im: per kernel tap (kernel-index order) the
    channel sums in fp32 rounded to the 16-bit output format, scatter-added into a 16-bit output
    (``RN16(acc + part)``), then ``RN16(acc + bias)``; bit for bit torch's fp16 (and, without
    oneDNN bf16, bf16) conv_transpose (tests/test_conv.py)."""
    from ..ops.conv import col2im_taps

    x, w = np.asarray(inputs[0]), np.asarray(inputs[1])
    wide, crop, taps = col2im_taps(x.shape, w.shape, params)
    G = int(params["groups"])
    ci, co = w.shape[0] // G, w.shape[1]
    x32, w32 = f64(x).astype(np.float32), f64(w).astype(np.float32)
    y = np.zeros((x.shape[0], G * co) + wide)
    with np.errstate(all="ignore"):
        for j, sl in taps:
            view = (slice(None), slice(None)) + sl
            part = np.concatenate([np.einsum("nc...,co->no...", x32[:, grp * ci:(grp + 1) * ci],
                                             w32[(slice(grp * ci, (grp + 1) * ci), slice(None)) + j])
                                   for grp in range(G)], axis=1)
            y[view] = rnd(y[view] + rnd(f64(part), out), out)
        y = y[(slice(None), slice(None)) + crop]
        if len(inputs) > 2 and inputs[2] is not None:
            y = y + f64(inputs[2]).reshape((1, -1) + (1,) * (y.ndim - 2))
        return finish(y, out, "rne", seed)


variant("conv_transpose", "col2im16", "rounding", True,
        "GEMM + col2im with the scatter-add in the 16-bit output format (PyTorch CPU's fp16 conv_transpose, "
        "and its bf16 one without oneDNN bf16 kernels): per-tap fp32 channel sums rounded to 16 bits, added "
        "tap by tap into a 16-bit output, then the bias: evidence for the stored16 standards (fp32 accumulation "
        "declared) and the arith16 ones (16-bit arithmetic declared: a 16-bit scatter-add is such arithmetic)",
        lambda out, f, p: out.name in ("bfloat16", "float16"), acc_formats=FP32_ONLY + ARITH16)(_col2im16)


def _torch_col2im16_path(out: Format, fmts: list, params: Any) -> bool:
    """torch CPU in a 16-bit format that it scatter-adds in (:func:`torch_conv_transpose_col2im16`)."""
    return (torch_same_format(out, fmts, params) and out.name in ("float16", "bfloat16")
            and torch_conv_transpose_col2im16(out.name))


variant("conv_transpose", "torch-cpu-col2im16", "library", True,
        "torch CPU F.conv_transpose1d/2d/3d in a 16-bit format it scatter-adds in on this machine (float16; "
        "bfloat16 without oneDNN bf16): the col2im16 arithmetic, evidence for the stored16 standards only",
        _torch_col2im16_path, acc_formats=FP32_ONLY)(_torch_conv_transpose)


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


def _shifted(g: Geometry, stride: tuple | None = None) -> Geometry:
    """The geometry with the left padding one larger (or another stride), g's output size kept
    (every index it reads stays inside the padded input)."""
    from dataclasses import replace

    if stride is not None:
        return replace(g, stride=stride)
    return replace(g, pad_lo=tuple(p + 1 for p in g.pad_lo))


@_conv_variant("window-shift", "indexing", False,
               "the padding offset is one too large on the left (window start i·stride − padding − 1): "
               "every window reads one input position early")
def _window_shift(inputs, params, acc, seed, out):
    g = _geom(inputs, params)
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32), g=_shifted(g))[0]


def _strided(inputs, params, out) -> bool:
    g = _geom(inputs, params)
    return any(s > 1 and o > 1 for s, o in zip(g.stride, g.out_size))


@_conv_variant("stride-off-by-one", "indexing", False,
               "the window step is stride − 1 (an off-by-one in the output-to-input index map); only "
               "observable where stride > 1", observable=_strided, ops=("conv",))
def _stride_bug(inputs, params, acc, seed, out):
    g = _geom(inputs, params)
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32),
                 g=_shifted(g, tuple(max(1, s - 1) for s in g.stride)))[0]


def _has_kernel(inputs, params, out) -> bool:
    return max(np.shape(inputs[1])[2:]) > 1


@_conv_variant("flipped-kernel", "indexing", False,
               "the kernel is flipped along every spatial axis: a true convolution instead of torch's "
               "cross-correlation (observable for kernels larger than 1)", observable=_has_kernel)
def _flipped(inputs, params, acc, seed, out):
    w = np.asarray(inputs[1])
    wf = w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)]
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32), w=wf)[0]


def _has_bias(inputs, params, out) -> bool:
    return len(inputs) > 2 and inputs[2] is not None and bool(np.any(f64(inputs[2]) != 0))


@_conv_variant("missing-bias", "formula-error", False, "the bias is never added", observable=_has_bias,
               drop_bias=True)
def _no_bias(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32))[0]


def _grouped(inputs, params, out) -> bool:
    return int(params["groups"]) > 1


@_conv_variant("groups-ignored", "indexing", False,
               "the group's input-channel offset is never applied: every group reads the first group's "
               "channels (observable where groups > 1)", observable=_grouped)
def _groups_ignored(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32), group_src=lambda grp: 0)[0]


@_conv_variant("acc-output-format", "accumulation-precision", False,
               "the implicit GEMM accumulates in the output format (bf16/fp16) instead of fp32",
               applies=narrow_out)
def _acc_out(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(out))[0]


@_conv_variant("acc-bf16", "accumulation-precision", False,
               "the implicit GEMM accumulates in bfloat16 whatever the output format",
               applies=lambda out, f, p: out.name != "bfloat16")
def _acc_bf16(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(FORMATS["bfloat16"]))[0]


@_conv_variant("truncation", "truncation", False,
               "fp32 accumulation, then the output conversion truncates (round toward zero)",
               applies=narrow_out, mode="rtz")
def _truncation(inputs, params, acc, seed, out):
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32))[0]


@_conv_variant("tf32-inputs", "input-rounding", False,
               "float32 x and weight rounded to TF32 (10-bit mantissa) before an fp32-accumulated GEMM: "
               "torch's default for cuDNN convolutions (torch.backends.cudnn.allow_tf32 = True), for a "
               "standard that does not allow TF32", applies=float32_inputs)
def _tf32(inputs, params, acc, seed, out):
    tf32 = FORMATS["tf32"]
    return _gemm(inputs, params, _ordered(acc, "blocked", block=32), x=rnd(f64(inputs[0]), tf32),
                 w=rnd(f64(inputs[1]), tf32))[0]


@_conv_variant("zeros", "zeros", False, "returns zeros of the right shape and dtype", drop_bias=True)
def _zeros(inputs, params, acc, seed, out):
    g = _geom(inputs, params)
    return np.zeros((np.shape(inputs[0])[0], g.c_out) + g.out_size)


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"window-shift": None, "stride-off-by-one": None, "flipped-kernel": None,
                 "groups-ignored": None, "missing-bias": None}

VARIANTS: tuple = with_causes(_V, _CAUSES)
