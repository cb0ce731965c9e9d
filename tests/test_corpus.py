"""The variant corpus (numstd.corpus): legitimate variants stay within analytic error bounds of a
float64 reference, bug variants leave them, hand-derived spot checks, determinism, metadata.

Independent truth: the references below are float64 formulas written here (not numstd.reference),
and the bounds are textbook ones (Higham 2002: |error| <= gamma_K |A||B| for a length-K dot
product, gamma_K ~ K u) with generous constants -- they only have to separate the legitimate
variants from the bugs, not be tight.  A bug is "detected" on a case when some element leaves the
legitimate bound, an output is non-finite where the reference is finite, or (16-bit outputs) the
sign-adjusted mean ULP error is beyond 0.3 + 1/sqrt(n) (truncation, scale errors).  Every bug
must be observable (its ``observable`` predicate) and detected on at least one stress case, and
detected on every case where it is observable.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import special

from numstd.corpus import FAMILIES, VARIANTS, Variant, input_formats, variants_for
from numstd.formats import get_format
from numstd.ops import validate
from numstd.suites import make_case
from numstd.ulp import ulp

FP32 = get_format("float32")
U = FP32.u
ELEMENTWISE = ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt", "softplus",
               "leaky_relu", "elu", "selu", "celu", "hardsigmoid", "hardswish", "softsign", "mish", "new_gelu", "swish", "hardtanh", "clamp")
#: exact reductions: any output off the exact extremum is a detection, non-finite ones of another class too
EXTREMA = ("amax", "amin")
#: the channel norms and the pooling ops (issue 18 items 2 and 3)
CHANNEL_NORMS = ("group_norm", "instance_norm", "batch_norm")
MAX_POOLS = ("max_pool1d", "max_pool2d", "max_pool3d")
AVG_POOLS = ("avg_pool1d", "avg_pool2d", "avg_pool3d")
BRIEF_OPS = ("matmul", "linear", "conv", "conv_transpose", "sum", "mean", *EXTREMA, "cumsum", "cumprod", "softmax", "log_softmax", "layer_norm",
             "rms_norm", *ELEMENTWISE, "attention", "cross_entropy", "mse_loss", "huber_loss", "smooth_l1_loss", "kl_div",
             "nll_loss", "hinge_embedding_loss", *CHANNEL_NORMS, *MAX_POOLS, *AVG_POOLS)

# (shape, params, input formats, output format) per op; distributions per op.
BF, F32 = "bfloat16", "float32"
_ROWS = [((24, 300), {}, BF, BF), ((24, 300), {}, F32, F32)]
CASES: dict[str, list] = {
    "matmul": [((24, 200, 20), {}, BF, BF), ((24, 200, 20), {}, F32, F32),
               ((2, 8, 136, 12), {}, "float16", "float16"), ((16, 256, 16), {}, "float8_e4m3fn", BF)],
    "linear": [((24, 200, 20), {}, BF, BF), ((24, 200, 20), {}, F32, F32)],
    # conv shapes: [N, C_in, C_out, groups, stride, padding, dilation, *kernel, *spatial]
    "conv": [((2, 16, 16, 2, 2, 1, 1, 3, 3, 12, 12), {}, BF, BF), ((2, 8, 16, 1, 1, 2, 2, 5, 40), {}, F32, F32),
             ((1, 4, 4, 4, 1, 1, 1, 3, 3, 3, 5, 5, 5), {}, "float16", "float16")],
    # [N, C_in, C_out, groups, stride, padding, output_padding, dilation, *kernel, *spatial]
    "conv_transpose": [((2, 8, 8, 2, 2, 1, 1, 1, 3, 3, 6, 6), {}, BF, BF), ((2, 8, 4, 1, 3, 1, 2, 1, 4, 20), {}, F32, F32),
                       ((1, 4, 4, 1, 2, 0, 0, 1, 2, 2, 2, 3, 3, 3), {}, "float16", "float16")],
    "sum": [((256, 150), {"axis": -1}, BF, BF), ((64, 300), {"axis": -1}, F32, F32),
            ((4, 16, 20), {"axis": (1, 2), "keepdims": True}, BF, BF), ((16, 50), {}, F32, F32)],
    "mean": [((256, 150), {"axis": -1}, BF, BF), ((64, 300), {"axis": -1}, F32, F32),
             ((48, 40), {"axis": -1}, BF, BF), ((4, 16, 20), {"axis": (0, 2)}, F32, F32)],
    "cumsum": [((24, 300), {"axis": -1}, BF, BF), ((300, 8), {"axis": 0}, F32, F32),
               ((24, 300), {"axis": -1, "reverse": True}, F32, F32), ((300, 8), {"axis": 0, "exclusive": True}, BF, BF)],
    **{op: [((64, 200), {"axis": -1}, BF, BF), ((64, 200), {"axis": -1}, F32, F32),
            ((8, 16, 16), {"axis": (0, 2), "keepdims": True}, "float16", "float16"), ((300,), {}, F32, F32)]
       for op in EXTREMA},
    "cumprod": [((24, 300), {"axis": -1}, BF, BF), ((300, 8), {"axis": 0}, F32, F32),
                ((8, 300), {"axis": -1}, "float16", "float16")],
    "softmax": _ROWS + [((200, 12), {"axis": 0}, BF, BF)],
    "log_softmax": _ROWS,
    "layer_norm": [((24, 256), {}, BF, BF), ((24, 256), {}, F32, F32), ((32, 40), {}, BF, BF)],
    "rms_norm": [((24, 256), {}, BF, BF), ((24, 256), {}, F32, F32), ((24, 256), {"eps": 1e-3}, BF, BF)],
    "attention": [((2, 24, 100, 32), {}, BF, BF), ((2, 24, 100, 32), {"causal": True}, BF, BF),
                  ((1, 40, 40, 16), {"causal": True}, F32, F32)],
    "cross_entropy": [((64, 300), {}, BF, BF), ((64, 300), {}, F32, F32),
                      ((64, 100), {"reduction": "none"}, BF, BF),
                      ((64, 100), {"reduction": "sum"}, F32, F32)],
    "mse_loss": [((64, 100), {}, BF, BF), ((16, 20), {}, F32, F32), ((64, 100), {"reduction": "sum"}, F32, F32),
                 ((16, 300), {"reduction": "sum"}, BF, BF), ((48, 40), {"reduction": "none"}, BF, BF),
                 ((8, 50), {}, "float16", "float16")],
    "huber_loss": [((16, 300), {}, F32, F32), ((16, 20), {"delta": 0.25, "reduction": "sum"}, F32, F32),
                   ((48, 40), {"reduction": "none", "delta": 2.0}, F32, F32)],
    "smooth_l1_loss": [((16, 300), {"beta": 0.5}, F32, F32), ((16, 20), {"reduction": "sum"}, F32, F32),
                       ((48, 40), {"reduction": "none", "beta": 0.0}, F32, F32)],
    "kl_div": [((16, 20), {"reduction": "batchmean"}, F32, F32), ((16, 20), {}, F32, F32),
               ((16, 300), {"reduction": "sum", "log_target": True}, F32, F32),
               ((8, 30), {"reduction": "none"}, F32, F32)],
    "nll_loss": [((64, 30), {}, F32, F32), ((64, 30), {"reduction": "sum", "ignore_index": 3}, F32, F32),
                 ((40, 10), {"reduction": "none"}, F32, F32)],
    "hinge_embedding_loss": [((16, 20), {}, F32, F32), ((16, 300), {"reduction": "sum", "margin": 0.5}, F32, F32),
                             ((40, 10), {"reduction": "none", "margin": 2.0}, F32, F32)],
    **{op: [((2048,), {}, BF, BF), ((2048,), {}, F32, F32)] for op in ELEMENTWISE},
}
_MAXP = {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}
_AVGP = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}
_POOL_SHAPES = {1: (4, 6, 23), 2: (2, 4, 11, 10), 3: (1, 3, 9, 8, 7)}
CASES.update({
    "group_norm": [((8, 16, 6, 6), {"num_groups": 4}, BF, BF), ((8, 16, 6, 6), {"num_groups": 4}, F32, F32)],
    "instance_norm": [((8, 8, 10, 10), {}, BF, BF), ((8, 8, 10, 10), {}, F32, F32)],
    "batch_norm": [((32, 8, 4, 4), {"training": True}, BF, BF), ((32, 8, 4, 4), {"training": True}, F32, F32),
                   ((32, 8, 4, 4), {"training": False}, F32, F32)],
    **{op: [(_POOL_SHAPES[int(op[-2])], _MAXP, f, f) for f in (BF, F32, "float16")] for op in MAX_POOLS},
    **{op: [(_POOL_SHAPES[int(op[-2])], _AVGP, f, f) for f in (BF, F32)] for op in AVG_POOLS},
})
# torch.autocast's lower-precision list: float32 inputs, 16-bit output (numstd/corpus/autocast.py)
for _op in ("matmul", "linear", "conv", "conv_transpose", "attention"):
    _shape = CASES[_op][0][0]
    # (matmul's F32 -> BF case is left out: its TF32-input bug cannot show under a bf16 output)
    CASES[_op] = CASES[_op] + [(_shape, {}, F32, o) for o in ((BF, "float16") if _op != "matmul" else ("float16",))]
CASES["gelu"] = CASES["gelu"] + [((2048,), {"approximate": "tanh"}, f, f) for f in (BF, F32)]
CASES["clamp"] = [((2048,), {"min": -0.5, "max": 1.0}, f, f) for f in (BF, F32)] + [((2048,), {"min": 0.1}, BF, BF)]
for _op, _p in (("elu", {"alpha": 0.5}), ("celu", {"alpha": 2.5}), ("leaky_relu", {"negative_slope": 0.2}),
                ("hardtanh", {"min_val": -2.0, "max_val": 0.5})):
    CASES[_op] = CASES[_op] + [((2048,), _p, f, f) for f in (BF, F32)]

_SOFTMAX_DISTS = ("normal", "offset", "large", "rowscale")
DISTS: dict[str, tuple[str, ...]] = {
    "matmul": ("normal", "offset", "large"), "linear": ("normal", "offset"), "conv": ("normal", "heavy"), "conv_transpose": ("normal", "heavy"),
    "sum": ("normal", "offset"), "mean": ("normal", "offset"), "cumsum": ("normal", "offset"),
    "cumprod": ("smallvar", "normal"),
    **{op: ("normal", "offset", "ties", "nonfinite") for op in EXTREMA},
    "softmax": _SOFTMAX_DISTS, "log_softmax": _SOFTMAX_DISTS,
    "cross_entropy": ("normal", "offset", "large"),
    "mse_loss": ("normal", "offset", "heavy"),
    "huber_loss": ("normal", "offset", "heavy"), "smooth_l1_loss": ("normal", "offset", "heavy"),
    "kl_div": ("normal", "offset", "heavy", "wide"),
    "nll_loss": ("normal", "offset", "heavy"),
    "hinge_embedding_loss": ("normal", "offset", "heavy"),
    "layer_norm": ("normal", "offset", "smallvar", "rowscale"),
    "rms_norm": ("normal", "offset", "rowscale"),
    "attention": ("normal", "large"),
    **{op: ("normal", "large", "wide") for op in ELEMENTWISE},
    **{op: ("normal", "offset", "smallvar") for op in CHANNEL_NORMS},
    **{op: ("normal", "offset", "ties", "nonfinite") for op in MAX_POOLS},
    **{op: ("normal", "offset") for op in AVG_POOLS},
}

# Legitimate variants whose error is of another kind than the generic bound below (with the reason).
EXTRA_ABS = {
    # torch CPU rounds the row sum (or the log-probabilities) to the 16-bit input format
    ("log_softmax", "torch-cpu"): "u_in",
    ("cross_entropy", "torch-cpu"): "u_in",
    # torch CPU stores d = a - b and d² in the 16-bit input format (two roundings per term)
    ("mse_loss", "torch-cpu"): "u_in",
    # torch CPU stores the batch statistics of 16-bit tensors in 16 bits (the stored16 standards)
    ("batch_norm", "torch-cpu"): "u_in", ("instance_norm", "torch-cpu"): "u_in",
    ("batch_norm", "stored16-stats"): "u_in", ("instance_norm", "stored16-stats"): "u_in",
    # the stored16 models of torch's 16-bit mse_loss and conv_transpose (col2im scatter-add in 16 bits)
    ("mse_loss", "stored16"): "u_in", ("conv_transpose", "col2im16"): "u_in",
    # torch CPU on a machine where its 16-bit conv_transpose is that col2im (bit for bit:
    # numstd.corpus.conv.torch_conv_transpose_col2im16; fp16 on an AVX2-only AMD EPYC, torch 2.13)
    ("conv_transpose", "torch-cpu-col2im16"): "u_in",
}


def _fmt(name):
    return get_format(name)


# ---------------------------------------------------------------------------------------------
# float64 references and legitimate-error bounds
# ---------------------------------------------------------------------------------------------


def _f64(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def _conv64(x, w, b, p):
    """conv by kernel offsets (not im2col): each offset's shifted input slice times that weight tap,
    summed in float64; with the same sum of |x||w| (+|b|) and K."""
    nd = x.ndim - 2
    per = lambda v: (v,) * nd if isinstance(v, int) else tuple(v)  # noqa: E731
    s, d, pad, groups = per(p["stride"]), per(p["dilation"]), per(p["padding"]), p["groups"]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in pad])
    O, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(n + 2 * q - dd * (k - 1) - 1) // ss + 1 for n, q, dd, k, ss in zip(x.shape[2:], pad, d, ks, s)]
    r = np.zeros((x.shape[0], O, *outs))
    absd = np.zeros_like(r)
    og = O // groups
    for j in itertools.product(*(range(k) for k in ks)):
        sl = tuple(slice(j[i] * d[i], j[i] * d[i] + s[i] * (outs[i] - 1) + 1, s[i]) for i in range(nd))
        for g in range(groups):
            xs = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            wj = w[(slice(g * og, (g + 1) * og), slice(None)) + j]
            r[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", xs, wj)
            absd[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", np.abs(xs), np.abs(wj))
    if b is not None:
        r += b.reshape((1, -1) + (1,) * nd)
        absd += np.abs(b).reshape((1, -1) + (1,) * nd)
    return r, absd, cg * math.prod(ks)


def _conv_transpose64(x, w, b, p):
    """conv_transpose by scattering each kernel tap's channel sums (float64), with |x||w| likewise;
    K: every product of a channel group (an upper bound on the nonzero ones)."""
    nd = x.ndim - 2
    per = lambda v: (v,) * nd if isinstance(v, int) else tuple(v)  # noqa: E731
    s, d, pad, opad, groups = per(p["stride"]), per(p["dilation"]), per(p["padding"]), per(p["output_padding"]), p["groups"]
    ci, co = x.shape[1] // groups, w.shape[1]
    ks = w.shape[2:]
    wide = [(n - 1) * ss + dd * (k - 1) + 1 + o for n, ss, dd, k, o in zip(x.shape[2:], s, d, ks, opad)]
    r = np.zeros((x.shape[0], co * groups, *wide))
    absd = np.zeros_like(r)
    for j in itertools.product(*(range(k) for k in ks)):
        sl = tuple(slice(j[i] * d[i], j[i] * d[i] + (x.shape[2 + i] - 1) * s[i] + 1, s[i]) for i in range(nd))
        for g in range(groups):
            xs = x[:, g * ci:(g + 1) * ci]
            wj = w[(slice(g * ci, (g + 1) * ci), slice(None)) + j]
            r[(slice(None), slice(g * co, (g + 1) * co)) + sl] += np.einsum("nc...,co->no...", xs, wj)
            absd[(slice(None), slice(g * co, (g + 1) * co)) + sl] += np.einsum("nc...,co->no...", np.abs(xs), np.abs(wj))
    crop = (slice(None), slice(None)) + tuple(slice(q, n - q) for q, n in zip(pad, wide))
    r, absd = r[crop], absd[crop]
    if b is not None:
        r += b.reshape((1, -1) + (1,) * nd)
        absd += np.abs(b).reshape((1, -1) + (1,) * nd)
    return r, absd, ci * math.prod(ks)


def _softmax64(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return m, e, s


def reference(op, arr, p, out, name=""):
    """(float64 reference, bound of a legitimate variant); references beyond the output format's
    range are replaced by the infinity (or NaN) they round to. For torch.autocast's variants
    (``autocast-*``) the truth is the op on the float32 inputs rounded to the 16-bit output format,
    which is what autocast computes."""
    from numstd.formats import round_to

    if name.startswith("autocast-"):
        arr = [round_to(x, out) if isinstance(x, np.ndarray) and x.dtype == np.float32 else x for x in arr]
    r, bound = _reference(op, arr, p, out, name)
    with np.errstate(all="ignore"):
        rounded = round_to(r, out).astype(np.float64)
    return np.where(np.isfinite(rounded) | np.isnan(r), r, rounded), bound


def _reference(op, arr, p, out, name=""):
    a = [_f64(x) for x in arr]
    rho = 2.0  # final rounding: RNE, stochastic, double rounding (<= 2 ULPs)
    if op in ("matmul", "linear"):
        A, B = a[0], (a[1] if op == "matmul" else a[1].T)
        r, absd = A @ B, np.abs(A) @ np.abs(B)
        if op == "linear" and len(a) > 2 and a[2] is not None:
            r, absd = r + a[2], absd + np.abs(a[2])
        K = A.shape[-1]
        u = 2.0 ** -12 if "fp8" in name else U  # the H100 fp8 path keeps 13 bits per 128-chunk
        return r, 2 * (K + 2) * u * absd + rho * ulp(r, out)
    if op == "conv":
        r, absd, K = _conv64(a[0], a[1], a[2] if len(a) > 2 else None, p)
        return r, 2 * (K + 2) * U * absd + rho * ulp(r, out)
    if op == "conv_transpose":
        r, absd, K = _conv_transpose64(a[0], a[1], a[2] if len(a) > 2 else None, p)
        # col2im in 16 bits: every tap's channel sum and every running sum rounded (each at most absd):
        # worst case 2 T u16 absd with T <= prod(kernel) taps, u16 the storage (output) format's: the
        # same as the inputs' for 16-bit inputs, and what autocast's rounded inputs are stored in
        u_in = out.u if (op, name.removeprefix("autocast-")) in EXTRA_ABS else 0.0
        taps = int(np.prod(np.shape(a[1])[2:]))
        return r, 2 * (K + 2) * U * absd + 2 * taps * u_in * absd + rho * ulp(r, out)
    if op in ("sum", "mean"):
        x = a[0]
        r = (np.sum if op == "sum" else np.mean)(x, axis=p["axis"], keepdims=p["keepdims"])
        absr = np.sum(np.abs(x), axis=p["axis"], keepdims=p["keepdims"])
        K = x.size // max(r.size, 1)
        if op == "mean":
            absr = absr / K
        return r, (K + 3) * U * absr + rho * ulp(r, out)
    if op in EXTREMA:  # exact: any other value is at least one ulp away
        r = (np.max if op == "amax" else np.min)(a[0], axis=p["axis"], keepdims=p["keepdims"])
        return r, 0.25 * ulp(r, out)
    if op == "cumsum":  # (reverse: the suffix sums; exclusive: the strict prefix, x shifted by one)
        x = np.moveaxis(np.asarray(a[0], np.float64), p["axis"], -1)
        if p.get("reverse"):
            x = x[..., ::-1]
        if p.get("exclusive"):
            x = np.concatenate([np.zeros_like(x[..., :1]), x[..., :-1]], axis=-1)
        r, absr = np.cumsum(x, axis=-1), np.cumsum(np.abs(x), axis=-1)
        if p.get("reverse"):
            r, absr = r[..., ::-1], absr[..., ::-1]
        r, absr, x = (np.moveaxis(t, -1, p["axis"]) for t in (r, absr, x))
        K = x.shape[p["axis"]]
        return r, 2 * (K + 2) * U * absr + rho * ulp(r, out)
    if op == "cumprod":  # K - 1 roundings of a relative error <= u each (Higham 2002 §3.1)
        x = a[0]
        r = np.cumprod(x, axis=p["axis"])
        K = x.shape[p["axis"]]
        return r, 2 * (K + 2) * U * np.abs(r) + rho * ulp(r, out) + FP32.smallest_normal
    if op in ("softmax", "log_softmax"):
        x = a[0]
        ax = p["axis"]
        m, e, s = _softmax64(x, ax)
        K = x.shape[ax]
        if op == "softmax":
            r = e / s
            tol = 2 * U * (K + np.abs(x) + np.abs(m) + 8) * r
            return r, tol + rho * ulp(r, out) + out.smallest_subnormal
        r = (x - m) - np.log(s)
        extra = 4 * _fmt(arr[0].dtype.name).u if (op, name) in EXTRA_ABS else 0.0
        tol = 2 * U * (K + np.abs(x) + np.abs(m) + np.abs(np.log(s)) + 8)
        return r, tol + rho * ulp(r, out) + extra
    if op == "cross_entropy":
        x, t = a[0], np.asarray(arr[1])
        m, e, s = _softmax64(x, -1)
        lse = (m + np.log(s))[:, 0]
        loss = lse - x[np.arange(len(t)), t]
        per = 2 * U * (x.shape[-1] + np.abs(x).max(-1) + np.abs(lse) + 8)
        if (op, name) in EXTRA_ABS:
            per = per + 4 * _fmt(arr[0].dtype.name).u * (np.abs(loss) + 1)
        N = len(t)
        if p["reduction"] == "none":
            return loss, per + rho * ulp(loss, out)
        r = loss.sum() if p["reduction"] == "sum" else loss.mean()
        b = per.sum() + (N + 2) * U * np.abs(loss).sum()
        b = b if p["reduction"] == "sum" else b / N
        return np.asarray(r), np.asarray(b + rho * ulp(r, out))
    if op == "mse_loss":  # d and d² rounded (3u per term), K - 1 additions, a division; one final RNE
        q = (a[0] - a[1]) ** 2
        u_in = _fmt(arr[0].dtype.name).u if (op, name) in EXTRA_ABS else 0.0
        if p["reduction"] == "none":
            return q, 4 * U * q + 3.01 * u_in * q + 0.5 * ulp(q, out) + FP32.smallest_normal
        K = q.size
        scale = 1.0 if p["reduction"] == "sum" else 1.0 / K
        r = np.asarray(q.sum() * scale)
        # stored 16-bit terms: independent errors of at most 3.01 u_in q_i, 6 standard deviations (Hoeffding)
        extra = 6 * 3.01 * u_in * math.sqrt(float((q * q).sum())) * scale
        return r, np.asarray((K + 3) * U * q.sum() * scale + extra + 0.5 * ulp(r, out))
    if op in ("huber_loss", "smooth_l1_loss"):  # about 4u per term, K - 1 additions, a division; one final RNE
        z = np.abs(a[0] - a[1])
        t = p["delta"] if op == "huber_loss" else p["beta"]
        if op == "huber_loss":
            q = np.where(z < t, 0.5 * z * z, t * (z - 0.5 * t))
        else:
            q = z if t == 0 else np.where(z < t, 0.5 * z * z / t, z - 0.5 * t)
        if p["reduction"] == "none":
            return q, 6 * U * q + 0.5 * ulp(q, out) + FP32.smallest_normal
        K = q.size
        scale = 1.0 if p["reduction"] == "sum" else 1.0 / K
        r = np.asarray(q.sum() * scale)
        # probabilistic form (Higham & Mary 2019), 8 (sqrt(K) + 5) u: the corpus's observability
        # threshold of these bugs (numstd.corpus.losses._hub_differs); worst case (K + 5) u would hide
        # a K - 1 denominator once K u > 1 / K
        return r, np.asarray(8 * (math.sqrt(K) + 5) * U * q.sum() * scale + 0.5 * ulp(r, out))
    if op == "hinge_embedding_loss":  # x exact, margin - x rounded once; K - 1 additions; one division
        x, y = a
        h = np.maximum(p["margin"] - x, 0.0)
        loss = np.where(y == 1, x, h)
        m = np.abs(loss) + np.where((y != 1) & (h > 0), abs(p["margin"]), 0.0)
        if p["reduction"] == "none":
            return loss, 2 * U * m + 0.5 * ulp(loss, out) + FP32.smallest_normal
        K = loss.size
        div = K if p["reduction"] == "mean" else 1
        r = np.asarray(loss.sum() / div)
        # probabilistic, 8 (sqrt(K) + 3) u times mag: the corpus's observability threshold
        return r, np.asarray(8 * (math.sqrt(K) + 3) * U * m.sum() / div + 0.5 * ulp(r, out))
    if op == "nll_loss":  # exact negations; K - 1 additions of the rows kept; one division
        x, t = a[0], np.asarray(arr[1]).astype(np.int64)
        keep = t != p["ignore_index"]
        loss = np.where(keep, -np.take_along_axis(x, np.where(keep, t, 0)[:, None], axis=-1)[:, 0], 0.0)
        if p["reduction"] == "none":
            return loss, 0.5 * ulp(loss, out) + FP32.smallest_normal
        K = int(keep.sum())
        div = K if p["reduction"] == "mean" else 1
        r = np.asarray(loss.sum() / div)
        return r, np.asarray((K + 2) * U * np.abs(loss).sum() / div + 0.5 * ulp(r, out))
    if op == "kl_div":  # log or exp, products and a subtraction per term; K - 1 additions; one division
        x, t = a
        if p["log_target"]:
            q, m = np.exp(t) * (t - x), np.exp(t) * (np.abs(t) + np.abs(x))
        else:
            lt = np.log(np.where(t > 0, t, 1.0))
            q, m = np.where(t > 0, t * lt, 0.0) - t * x, t * (np.abs(lt) + np.abs(x))
        if p["reduction"] == "none":
            return q, 8 * 7 * U * m + 0.5 * ulp(q, out) + FP32.smallest_normal
        K = q.size
        div = {"sum": 1, "mean": K, "batchmean": x.shape[0]}[p["reduction"]]
        r = np.asarray(q.sum() / div)
        # probabilistic, 8 (sqrt(K) + 6) u times the parts' magnitude: the corpus's observability threshold
        return r, np.asarray(8 * (math.sqrt(K) + 6) * U * m.sum() / div + 0.5 * ulp(r, out))
    if op in ("layer_norm", "rms_norm"):
        x, eps = a[0], p["eps"]
        w = a[1] if len(a) > 1 and a[1] is not None else 1.0
        K = x.shape[-1]
        if op == "layer_norm":
            b = a[2] if len(a) > 2 and a[2] is not None else 0.0
            mean = x.mean(-1, keepdims=True)
            rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + eps)
            r = (x - mean) * rstd * w + b
            cond = (np.abs(x) + np.abs(mean)) * rstd * np.abs(w) + np.abs(b)
        else:
            rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
            r = x * rstd * w
            cond = np.abs(r)
        # probabilistic form (Higham & Mary 2019): legitimate kernels stay near 1.1 sqrt(K) u cond
        return r, 8 * (math.sqrt(K) + 4) * U * cond + (rho + 0.5) * ulp(r, out)
    if op in CHANNEL_NORMS:  # layer_norm's analysis over each normalised group, per-channel affine
        x, eps = a[0], p["eps"]
        n, c = x.shape[:2]
        ws = a[3:] if op == "batch_norm" else a[1:]
        shape = (1, c) + (1,) * (x.ndim - 2)
        w = 1.0 if len(ws) < 1 or ws[0] is None else ws[0].reshape(shape)
        b = 0.0 if len(ws) < 2 or ws[1] is None else ws[1].reshape(shape)
        if op == "batch_norm" and not p["training"]:
            mean, var, K = a[1].reshape(shape), a[2].reshape(shape), 1
        else:
            t = np.moveaxis(x, 1, 0) if op == "batch_norm" else x
            rows = t.reshape(c if op == "batch_norm" else n * (p.get("num_groups") or c), -1)
            K = rows.shape[-1]
            full = lambda v: np.broadcast_to(v, rows.shape).reshape(t.shape)  # noqa: E731
            mean, var = full(rows.mean(-1, keepdims=True)), full(rows.var(-1, keepdims=True))
            if op == "batch_norm":
                mean, var = np.moveaxis(mean, 0, 1), np.moveaxis(var, 0, 1)
        rstd = 1.0 / np.sqrt(var + eps)
        r = (x - mean) * rstd * w + b
        cond = (np.abs(x) + np.abs(mean)) * rstd * np.abs(w) + np.abs(b)
        # stored 16-bit mean, variance and 1/sigma: u_in (|mean| rstd + 1.5 |xhat|) |w|
        extra = _fmt(arr[0].dtype.name).u * (np.abs(mean) * rstd + 1.5 * np.abs(x - mean) * rstd) * np.abs(w) \
            if (op, name) in EXTRA_ABS and _fmt(arr[0].dtype.name).bits == 16 else 0.0
        return r, 8 * (math.sqrt(K) + 4) * U * cond + (rho + 0.5) * ulp(r, out) + 2 * extra
    if op in MAX_POOLS or op in AVG_POOLS:  # torch.nn.functional in float64 (torch's own semantics)
        torch = pytest.importorskip("torch")  # (pooling's truth is torch's float64 kernel: these cases are torch-marked)

        f = getattr(torch.nn.functional, op)
        r = f(torch.from_numpy(a[0]), **p).numpy()
        if op in MAX_POOLS:  # exact: any other value is at least one ulp away
            return r, 0.25 * ulp(r, out)
        absmean = f(torch.from_numpy(np.abs(a[0])), **p).numpy()
        K = math.prod(p["kernel_size"])
        return r, (K + 3) * U * absmean + rho * ulp(r, out)
    if op == "attention":
        q, k, v = a
        s = q @ np.swapaxes(k, -1, -2) * p["scale"]
        if p["causal"]:
            L, S = s.shape[-2:]
            s = np.where(np.arange(S)[None, :] > np.arange(L)[:, None], -np.inf, s)
        m, e, ssum = _softmax64(s, -1)
        P = e / ssum
        r, cond = P @ v, P @ np.abs(v)
        E, S = q.shape[-1], k.shape[-2]
        fv = _fmt(arr[2].dtype.name)
        u_p = fv.u if fv.bits == 16 else 0.0  # FlashAttention rounds P to v's format
        score = np.abs(s[np.isfinite(s)]).max() if np.isfinite(s).any() else 0.0
        return r, (2 * (E + S + score + 8) * U + 2 * u_p) * cond + rho * ulp(r, out)
    # elementwise
    from numstd.corpus.elementwise import EXACT

    x = a[0]
    with np.errstate(all="ignore"):
        r = EXACT[op](x, p)
    # relative: libm errors (a few fp32 ULPs) and exp2's argument rounding (|x| u); absolute floors
    # where legitimate formulas lose relative accuracy: x/2 (1 + erf) and x sigmoid(x) cancel
    # (error ~ u |x|), sigmoid's tanh form and torch's erf lose everything below u; FTZ below the
    # smallest normal (sigmoid/silu/exp underflow in fp32 before the output format does).
    floor = {"gelu": 8 * U * np.abs(x), "silu": 8 * U * np.abs(x), "sigmoid": 4 * U, "erf": 4 * U,
             "new_gelu": 8 * U * np.abs(x), "swish": 8 * U * np.abs(x)}  # (gelu tanh and silu)
    bound = rho * ulp(r, out) + 8 * U * (1 + np.abs(x)) * np.abs(r) + floor.get(op, 0.0) \
        + FP32.smallest_normal
    return r, bound


# ---------------------------------------------------------------------------------------------
# running variants over the stress cases (cached per module)
# ---------------------------------------------------------------------------------------------


class Judged:
    """A variant's output on one case against the reference and the legitimate bound."""

    def __init__(self, y, r, bound, out, exact=False):
        y = np.asarray(y, dtype=np.float64)
        fin = np.isfinite(r)
        self.nonfinite = bool((~np.isfinite(y) & fin).any())
        if exact:  # (amax, amin) a NaN or infinity of the reference must come back as itself
            self.nonfinite |= bool((~fin & ~((y == r) | (np.isnan(y) & np.isnan(r)))).any())
        with np.errstate(all="ignore"):
            err = np.abs(y - r)
            ratio = np.where(fin, err / bound, 0.0)
            ratio = np.where(np.isnan(ratio), np.inf, ratio)
            self.ratio = float(ratio.max()) if ratio.size else 0.0
            signed = (y - r) / ulp(r, out) * np.sign(r)
            ok = fin & np.isfinite(y) & (r != 0)
        self.n = int(ok.sum())
        self.bias = float(signed[ok].mean()) if self.n else 0.0
        self.narrow = out.p < 24

    def detected(self) -> bool:
        if self.nonfinite or self.ratio > 1.0:
            return True
        return self.narrow and self.n >= 16 and abs(self.bias) > 0.3 + 1.0 / math.sqrt(self.n)


def _cases(op):
    for shape, params, fin, fout in CASES[op]:
        for dist in DISTS[op]:
            case = make_case(op, shape, dist, 3, [fin], params)
            _, arr, full = validate(op, case.inputs, case.params)
            yield f"{case.id}/{fin}->{fout}{params or ''}", arr, full, _fmt(fout)


@pytest.fixture(scope="module")
def runs():
    cache = {}

    def get(op):
        if op not in cache:
            rows = []
            for cid, arr, full, out in _cases(op):
                fmts = input_formats(arr)
                for v in VARIANTS[op]:
                    if v.applies is not None and not v.applies(out, fmts, full):
                        continue
                    if v.acc_formats is not None and FP32.name not in v.acc_formats:
                        continue  # a model of 16-bit arithmetic (xla-arith16): judged by the arith16 standards
                    y = v.fn(arr, full, out, FP32, 11)
                    r, bound = reference(op, arr, full, out, v.name)
                    obs = None if v.legit else v.applicable(arr, full, out)
                    rows.append((v, cid, y, Judged(y, r, bound, out, op in EXTREMA or op in MAX_POOLS), obs, out,
                                 np.shape(r)))
            cache[op] = rows
        return cache[op]

    return get


#: the corpus tests' parameters: the pooling ops' truth is torch's float64 kernel, so they are torch-marked
#: (they skip in CI's first phase, without torch, and run in its second)
CORPUS_OPS = [pytest.param(o, marks=pytest.mark.torch) if o in MAX_POOLS or o in AVG_POOLS else o for o in BRIEF_OPS]


@pytest.mark.parametrize("op", CORPUS_OPS)
def test_legit_variants_within_bound(op, runs):
    bad = [f"{v.name} on {cid}: {j.ratio:.3g}x the bound{' (non-finite)' if j.nonfinite else ''}"
           for v, cid, y, j, obs, out, shape in runs(op) if v.legit and (j.ratio > 1.0 or j.nonfinite)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("op", CORPUS_OPS)
def test_outputs_have_out_dtype_and_shape(op, runs):
    bad = [f"{v.name} on {cid}: {y.dtype} {y.shape}, expected {out.dtype} {shape}"
           for v, cid, y, j, obs, out, shape in runs(op) if y.dtype != out.dtype or y.shape != shape]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("op", CORPUS_OPS)
def test_bug_variants_detected_where_observable(op, runs):
    rows = [row for row in runs(op) if not row[0].legit]
    seen: dict[str, bool] = {}
    bad = []
    for v, cid, y, j, obs, out, shape in rows:
        if obs:
            seen[v.name] = True
            if not j.detected():
                bad.append(f"{v.name} on {cid} is observable but within the legitimate bound "
                           f"({j.ratio:.3g}x, bias {j.bias:+.3f} ULP over {j.n})")
        else:
            seen.setdefault(v.name, False)
    never = [n for n, s in seen.items() if not s]
    assert not bad, "\n".join(bad)
    assert not never, f"bug variants never observable on the stress cases: {never}"
    unexercised = {v.name for v in variants_for(op, legit=False)
                   if v.acc_formats is None or FP32.name in v.acc_formats} - set(seen)
    assert not unexercised, f"bug variants that apply to no stress case: {sorted(unexercised)}"


# ---------------------------------------------------------------------------------------------
# hand-derived spot checks
# ---------------------------------------------------------------------------------------------


def _v(op, name) -> Variant:
    return next(v for v in VARIANTS[op] if v.name == name)


def _run(op, name, inputs, params=None, out="float32"):
    return np.asarray(_v(op, name)(inputs, params or {}, out=out), dtype=np.float64)


def test_scan_bugs_by_hand():
    x = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    assert _run("cumsum", "sequential", [x]).tolist() == [[1, 3, 6, 10]]
    assert _run("cumsum", "exclusive", [x]).tolist() == [[0, 1, 3, 6]]
    assert _run("cumsum", "reversed", [x]).tolist() == [[10, 9, 7, 4]]
    ones = np.ones((1, 300), dtype=np.float32)
    assert _run("cumsum", "blocked-scan", [ones])[0, 299] == 300
    no_carry = _run("cumsum", "missing-carries", [ones])[0]
    assert no_carry[127] == 128 and no_carry[128] == 1 and no_carry[299] == 300 - 256
    dropped = _run("cumsum", "dropped-tail-block", [ones])[0]
    assert dropped[255] == 256 and dropped[256] == 0


def test_contraction_tile_bugs_by_hand():
    def ones(k):
        return [np.ones((1, k), dtype=np.float32), np.ones((k, 1), dtype=np.float32)]

    assert _run("matmul", "dropped-tail", ones(100))[0, 0] == 64  # 100 mod 64 = 36 dropped
    assert _run("matmul", "dropped-last-tile", ones(300))[0, 0] == 256  # tiles 128, 128, (44)
    assert _run("matmul", "dropped-last-tile", ones(256))[0, 0] == 128
    assert _run("matmul", "duplicated-tile", ones(200))[0, 0] == 328  # 200 + first 128 again
    A = np.arange(6, dtype=np.float32).reshape(2, 3)
    B = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(_run("matmul", "transposed-b", [A, B]), A.astype(float) @ B.T)
    np.testing.assert_array_equal(_run("matmul", "sequential", [A, B]), A.astype(float) @ B)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    W = np.ones((2, 3), dtype=np.float32)
    b = np.array([10.0, 20.0], dtype=np.float32)
    np.testing.assert_array_equal(_run("linear", "sequential", [x, W, b]), [[13, 23], [22, 32]])


def test_elementwise_bugs_by_hand():
    x = np.array([-2.0, -0.5, 0.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(_run("relu", "identity", [x]), x)  # returns negatives
    np.testing.assert_allclose(_run("relu", "leaky", [x]), [-0.02, -0.005, 0.0, 3.0], rtol=1e-6)
    np.testing.assert_array_equal(_run("relu", "fp32-math", [x]), [0, 0, 0, 3])
    silu = _run("silu", "positive-only", [x])
    assert silu[0] == 0 and silu[1] == 0
    assert silu[3] == pytest.approx(3 * special.expit(3.0), rel=1e-6)
    big = np.array([100.0, -100.0], dtype=np.float32)
    assert np.isnan(_run("sigmoid", "unclamped-exp", [big])[0])  # inf / inf
    expected = [1.0, pytest.approx(special.expit(-100.0), rel=1e-6)]
    assert _run("sigmoid", "recip-exp", [big]).tolist() == expected
    assert np.isnan(_run("tanh", "dropped-clamp", [np.array([50.0], dtype=np.float32)])[0])
    # Abramowitz-Stegun 7.1.26 has absolute error ~1e-7: relative error near 0 is large
    tiny = np.array([1e-6], dtype=np.float32)
    as_erf = _run("erf", "abramowitz-stegun", [tiny])[0]
    assert abs(as_erf - special.erf(1e-6)) > 1e-3 * special.erf(1e-6)
    gx = np.array([1.0], dtype=np.float32)
    tanh_gelu = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert _run("gelu", "tanh-under-exact", [gx])[0] == pytest.approx(tanh_gelu, rel=1e-6)
    exact_gelu = 0.5 * (1 + math.erf(2 ** -0.5))
    assert _run("gelu", "fp32-math", [gx])[0] == pytest.approx(exact_gelu, rel=1e-6)


def test_reduction_and_row_bugs_by_hand():
    x = np.ones((1, 4), dtype=np.float32)
    assert _run("mean", "by-k-minus-1", [x], {"axis": -1})[0] == pytest.approx(4 / 3, rel=1e-6)
    assert _run("mean", "sequential", [x], {"axis": -1})[0] == 1.0
    x3 = np.ones((2, 3, 4), dtype=np.float32)
    assert _run("mean", "wrong-count", [x3], {"axis": (1, 2)}).tolist() == [3.0, 3.0]  # 12 / 4
    logits = np.array([[0.0, 1.0, 2.0]], dtype=np.float32)
    np.testing.assert_allclose(_run("softmax", "uniform", [logits])[0], [1 / 3] * 3, rtol=1e-7)
    unnormalised = _run("softmax", "missing-normalisation", [logits])[0]
    np.testing.assert_allclose(unnormalised, np.exp([-2.0, -1.0, 0.0]), rtol=1e-6)
    t = np.array([0])
    lse = math.log(1 + math.e + math.e ** 2)
    assert _run("cross_entropy", "logsumexp", [logits, t])[()] == pytest.approx(lse, rel=1e-6)
    assert _run("cross_entropy", "label-off-by-one", [logits, t])[()] == pytest.approx(lse - 1, rel=1e-6)
    p0 = 1 / (1 + math.e + math.e ** 2)
    assert _run("cross_entropy", "missing-log", [logits, t])[()] == pytest.approx(-p0, rel=1e-6)
    underflow = np.array([[0.0, -200.0]], dtype=np.float32)
    assert np.isinf(_run("log_softmax", "log-of-softmax", [underflow])[0, 1])  # log(0)


def test_mse_loss_variants_by_hand():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    b = np.array([[0.0, 0.0], [1.0, 7.0]], dtype=np.float32)  # d = 1, 2, 2, -3: d² = 1, 4, 4, 9
    assert _run("mse_loss", "sequential", [a, b])[()] == 4.5
    assert _run("mse_loss", "sequential", [a, b], {"reduction": "sum"})[()] == 18.0
    assert _run("mse_loss", "fma", [a, b], {"reduction": "none"}).tolist() == [[1, 4], [4, 9]]
    assert _run("mse_loss", "sum-not-mean", [a, b])[()] == 18.0
    assert _run("mse_loss", "mean-not-sum", [a, b], {"reduction": "sum"})[()] == 4.5
    assert _run("mse_loss", "missing-square", [a, b])[()] == 2.0  # mean |d| = 8 / 4
    assert _run("mse_loss", "by-k-minus-1", [a, b])[()] == 6.0  # 18 / 3
    assert _run("mse_loss", "squared-mean", [a, b])[()] == 0.25  # (2 / 4)²
    assert _run("mse_loss", "half", [a, b])[()] == 2.25
    ones = np.ones((1, 300), dtype=np.float32)
    assert _run("mse_loss", "dropped-tail-block", [ones, 0 * ones], {"reduction": "sum"})[()] == 256
    # a bf16 running sum of 1000 ones stagnates at 256 (256 + 1 rounds back to 256)
    big = np.ones(1000, dtype=np.float32)
    assert _run("mse_loss", "acc-bf16", [big, 0 * big], {"reduction": "sum"})[()] == 256


def test_normalization_bugs_by_hand():
    x = np.array([[1.0, -1.0]], dtype=np.float32)
    # biased variance 1, unbiased 2: outputs +-1 and +-1/sqrt(2) (eps = 0)
    np.testing.assert_allclose(_run("layer_norm", "two-pass", [x], {"eps": 0.0})[0], [1, -1], rtol=1e-6)
    np.testing.assert_allclose(_run("layer_norm", "unbiased-variance", [x], {"eps": 0.0})[0],
                               [2 ** -0.5, -(2 ** -0.5)], rtol=1e-6)
    w = np.array([2.0, 2.0], dtype=np.float32)
    b = np.array([0.5, 0.5], dtype=np.float32)
    twice = _run("layer_norm", "bias-twice", [x, w, b], {"eps": 0.0})[0]
    np.testing.assert_allclose(twice, [3, -1], rtol=1e-6)
    xr = np.array([[3.0, 4.0]], dtype=np.float32)  # mean square 12.5
    np.testing.assert_allclose(_run("rms_norm", "fp32-internal", [xr], {"eps": 0.0})[0],
                               np.array([3, 4]) / math.sqrt(12.5), rtol=1e-6)
    np.testing.assert_allclose(_run("rms_norm", "sqrt-instead-of-rsqrt", [xr], {"eps": 0.0})[0],
                               np.array([3, 4]) * math.sqrt(12.5), rtol=1e-6)
    np.testing.assert_allclose(_run("rms_norm", "mean-abs", [xr], {"eps": 0.0})[0],
                               np.array([3, 4]) / math.sqrt(3.5), rtol=1e-6)


def test_truncation_rounds_toward_zero():
    x = np.linspace(-3, 3, 1001).astype(np.float32)
    got = _run("exp", "truncation", [x], out="bfloat16")
    ref = np.exp(x.astype(np.float64))
    assert (got <= ref).all()  # positive results: toward zero is downward
    rne = _run("exp", "fp32-math", [x], out="bfloat16")
    assert (got <= rne).all() and (got < rne).any()


def test_attention_mask_bugs_by_hand():
    # one query, two keys, causal: query 0 sees key 0 only; the off-by-one mask lets it see key 1
    q = np.zeros((1, 1, 2), dtype=np.float32)
    k = np.zeros((1, 2, 2), dtype=np.float32)
    v = np.array([[[1.0, 0.0], [0.0, 1.0]]], dtype=np.float32)
    p = {"causal": True}
    np.testing.assert_array_equal(_run("attention", "two-gemm", [q, k, v], p)[0, 0], [1, 0])
    np.testing.assert_array_equal(_run("attention", "flash", [q, k, v], p)[0, 0], [1, 0])
    np.testing.assert_allclose(_run("attention", "causal-off-by-one", [q, k, v], p)[0, 0], [0.5, 0.5])


# ---------------------------------------------------------------------------------------------
# determinism, metadata, counts, import hygiene
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", BRIEF_OPS)
def test_deterministic_given_seed(op):
    shape, params, fin, fout = CASES[op][0]
    case = make_case(op, shape, "normal", 5, [fin], params)
    _, arr, full = validate(op, case.inputs, case.params)
    out = _fmt(fout)
    for v in VARIANTS[op]:
        if v.applies is not None and not v.applies(out, input_formats(arr), full):
            continue
        a, b = v.fn(arr, full, out, FP32, 7), v.fn(arr, full, out, FP32, 7)
        assert a.tobytes() == b.tobytes(), v.key


def test_stochastic_variant_uses_its_seed():
    case = make_case("matmul", (16, 64, 16), "normal", 0, ["bfloat16"])
    v = _v("matmul", "trainium-sr")
    out = _fmt("bfloat16")
    a, b = (v.fn(case.inputs, {}, out, FP32, s) for s in (1, 2))
    assert a.tobytes() != b.tobytes()
    c = _v("matmul", "corrupted-element")
    assert c.fn(case.inputs, {}, out, FP32, 1).tobytes() != c.fn(case.inputs, {}, out, FP32, 2).tobytes()


def test_metadata_and_counts():
    legit = [v for vs in VARIANTS.values() for v in vs if v.legit]
    bugs = [v for vs in VARIANTS.values() for v in vs if not v.legit]
    assert len(legit) >= 40 and len(bugs) >= 60, (len(legit), len(bugs))
    for op in BRIEF_OPS:
        assert variants_for(op, legit=True) and variants_for(op, legit=False), op
    from numstd.ops import OPS

    for op, vs in VARIANTS.items():
        assert op in OPS
        names = [v.name for v in vs]
        assert len(names) == len(set(names)), op
        for v in vs:
            assert v.op == op and v.family in FAMILIES and v.description.strip(), v.key
            assert callable(v.fn)
    from numstd.errors import UnknownOpError

    with pytest.raises(UnknownOpError):
        variants_for("conv3d")


def test_call_validates_and_fills_defaults():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = _v("softmax", "two-pass")([x], out="bfloat16")  # axis defaults to -1
    assert y.dtype == _fmt("bfloat16").dtype
    np.testing.assert_allclose(y.astype(np.float64).sum(-1), 1.0, atol=2e-2)
    from numstd.errors import ParameterError

    with pytest.raises(ParameterError):
        _v("softmax", "two-pass")([x], {"dim": 0}, out="float32")


def test_import_hygiene():
    code = ("import sys, numstd, numstd.corpus; assert 'torch' not in sys.modules; "
            "from numstd.corpus import VARIANTS; n = sum(len(v) for v in VARIANTS.values()); "
            "assert 'torch' not in sys.modules, 'torch imported'; print(n)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    code = "import sys, numstd; assert 'numstd.corpus' not in sys.modules"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
