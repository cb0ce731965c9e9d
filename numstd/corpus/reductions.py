"""Reduction and scan variants: ``sum``, ``mean`` and ``cumsum``.

``sum``/``mean`` reduce over ``axis`` (None: all axes; a tuple: those axes, flattened in C order,
as a contiguous kernel reads them).  Legitimate: the summation orders of
:mod:`numstd.emulate.summation` (sequential, pairwise, tree, blocked(128), split-K(4), Kahan) with
every partial sum rounded to the accumulation format, numpy's own float32 ``np.sum`` (pairwise
over unrolled blocks), torch CPU; ``mean`` as ``RN(s / K)`` or ``RN(s * RN(1/K))``.
Bugs: accumulating in the output format or in bfloat16, a dropped last block of 128, truncation,
a 1 % scale error, a mean divided by ``K - 1`` or by the length of one axis only, zeros.

``cumsum`` (inclusive, along ``axis``).  Legitimate: the sequential running sum, a blocked scan
(chunks of 128 scanned sequentially, chunk totals scanned, carries added: the structure of CUB's
decoupled look-back and of Triton/NKI chunked scans), Hillis & Steele's log-step scan, Blelloch's
work-efficient up-/down-sweep scan, torch CPU.  Bugs: running sum in the output format or in
bfloat16, an exclusive scan, chunks scanned without their carries, a reversed (suffix) scan, the
last chunk left unscanned, truncation, a 1 % scale error, zeros.  The variants (``reverse``,
``exclusive``, ``mask``; numstd.ops.reduction) run every scan above on the variant's input (masked,
flipped, shifted by one: exact) and flip the result back; one more bug ignores the variant.

References: Higham, *Accuracy and Stability of Numerical Algorithms* (2002), ch. 4; Hillis &
Steele, "Data parallel algorithms", CACM 29(12), 1986; Blelloch, "Prefix sums and their
applications", CMU-CS-90-190, 1990; Merrill & Garland, "Single-pass parallel prefix scan with
decoupled look-back", NVIDIA NVR-2016-002.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import (
    ARITH16, FP32_ONLY, at_sum16, running_scan, xla_scan, f64, finish, from_last, from_torch, narrow_out, registrar, rnd, to_last, to_torch,
    torch_same_format, Work,
)

__all__ = ["VARIANTS"]

_V: list = []
variant = registrar(_V)

BLOCK = 128  # chunk of the blocked orders and of the tile bugs


# ---------------------------------------------------------------------------------------------
# sum / mean
# ---------------------------------------------------------------------------------------------


def _axes(x: np.ndarray, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    return tuple(axis) if isinstance(axis, tuple) else (int(axis),)


def _rows(x: Any, axis: Any) -> np.ndarray:
    """``x`` (float64) with the reduced axes moved last and flattened into one axis of length K."""
    x = f64(x)
    axes = _axes(x, axis)
    keep = [i for i in range(x.ndim) if i not in axes]
    xt = np.transpose(x, keep + list(axes))
    K = math.prod(x.shape[i] for i in axes)
    return xt.reshape([x.shape[i] for i in keep] + [K])


def _shape_back(y: np.ndarray, x: Any, params: Mapping[str, Any]) -> np.ndarray:
    """The reduced result in the op's output shape (``keepdims`` honoured)."""
    if params.get("keepdims", False):
        axes = _axes(np.asarray(x), params.get("axis"))
        return y.reshape([1 if i in axes else n for i, n in enumerate(np.shape(x))])
    return y


def _reduce(t: np.ndarray, acc: Format, order: str, **kw: Any) -> np.ndarray:
    """Sum of the last axis of ``t`` in ``order`` (float64 values of ``acc``)."""
    from ..emulate import accumulate

    if t.shape[-1] == 0:
        return np.zeros(t.shape[:-1])
    return accumulate(t, -1, order=order, acc=acc, **kw)


_ORDERS: dict[str, tuple[str, dict, str]] = {
    "sequential": ("sequential", {}, "one running sum s = RN(s + x_k) in the accumulation format"),
    "pairwise": ("pairwise", {}, "recursive halving, every partial sum rounded"),
    "tree": ("tree", {}, "adjacent pairs level by level (a warp-shuffle / block tree reduction)"),
    "blocked128": ("blocked", {"block": BLOCK},
                   "sequential sums of blocks of 128, block sums added in order (tiled kernels)"),
    "splitk4": ("splitk", {"splits": 4},
                "4 contiguous slices summed separately (one per thread block), slices added in order"),
    "kahan": ("kahan", {}, "Kahan compensated summation in the accumulation format"),
}


def _mean_of(s: np.ndarray, K: int, acc: Format) -> np.ndarray:
    return rnd(s / K, acc) if K else np.full(s.shape, np.nan)


def _register_reduction(op: str) -> None:
    """The legitimate orders and the bugs of ``sum`` or ``mean``."""

    def make(core: Callable, mode: str = "rne") -> Callable:
        def run(inputs, params, out, acc, seed):
            t = _rows(inputs[0], params.get("axis"))
            with np.errstate(all="ignore"):
                s = core(t, acc, out, seed)
                if op == "mean" and getattr(core, "is_sum", True):
                    s = _mean_of(s, t.shape[-1], acc)
                y = finish(s, out, mode, seed)
            return _shape_back(y, inputs[0], params)

        return run

    def core_of(order: str, kw: dict) -> Callable:
        return lambda t, acc, out, seed: _reduce(t, acc, order, **kw)

    what = "sum" if op == "sum" else "sum, then RN(s / K),"
    for name, (order, kw, desc) in _ORDERS.items():
        variant(op, name, "accumulation-order", True, f"{what} by {desc}")(make(core_of(order, kw)))

    def numpy_sum(t, acc, out, seed):
        if acc.name not in ("float32", "float64"):
            return _reduce(t, acc, "pairwise")
        return f64(np.sum(t.astype(Work(acc).dtype), axis=-1))

    variant(op, "numpy", "library", True,
            f"{what} by numpy.sum on a float32 array (pairwise over 8-way unrolled blocks of 128)")(
        make(numpy_sum))

    if op == "mean":
        def recip(t, acc, out, seed):
            K = t.shape[-1]
            s = _reduce(t, acc, "blocked", block=BLOCK)
            return rnd(s * rnd(np.float64(1.0) / K, acc), acc) if K else np.full(s.shape, np.nan)

        recip.is_sum = False
        variant(op, "reciprocal-multiply", "formula", True,
                "blocked(128) sum times RN(1/K) (a multiply instead of a division, as GPU kernels "
                "do): one extra rounding")(make(recip))

    def torch_run(inputs, params, out, acc, seed):
        import torch

        x = to_torch(inputs[0])
        axes = _axes(inputs[0], params.get("axis"))
        fn = torch.sum if op == "sum" else torch.mean
        y = fn(x, dim=axes, keepdim=bool(params.get("keepdims", False))) if axes else x.clone()
        return finish(from_torch(y), out)

    variant(op, "torch-cpu", "library", True,
            f"torch.{op} on CPU in the input's dtype (16-bit inputs accumulate in float32)",
            torch_same_format, acc_formats=FP32_ONLY)(torch_run)

    if op == "sum":
        for threads in (2, 8):
            def chunks(t, acc, out, seed, _n=threads):
                if t.ndim == 1 or math.prod(t.shape[:-1]) == 1:  # one output: at::sum's two passes
                    return np.asarray(at_sum16(t, Work(acc), out, _n)).reshape(t.shape[:-1])
                return _reduce(t, acc, "pairwise")  # several outputs: each reduced in fp32 by one thread

            variant(op, f"stored16-chunks{threads}", "rounding", True,
                    f"PyTorch CPU's 16-bit sum to one output with {threads} intra-op threads: above 32768 "
                    "elements one contiguous chunk per thread summed in fp32 and stored in the 16-bit "
                    "output format, the chunk sums added in it (at::sum's two_pass_reduction); several "
                    "outputs: fp32 sums rounded once. Evidence for the stored16 standards only",
                    narrow_out)(make(chunks))

    # bugs --------------------------------------------------------------------------------
    variant(op, "acc-output-format", "accumulation-precision", False,
            "the running sum kept in the output format (e.g. bfloat16): stagnates once the sum "
            "is large", narrow_out)(make(lambda t, acc, out, seed: _reduce(t, out, "sequential")))
    variant(op, "acc-bf16", "accumulation-precision", False,
            "the running sum kept in bfloat16 whatever the output format",
            lambda out, f, p: out.name != "bfloat16")(
        make(lambda t, acc, out, seed: _reduce(t, FORMATS["bfloat16"], "sequential")))

    def dropped(t, acc, out, seed):
        K = t.shape[-1]
        keep = ((K - 1) // BLOCK) * BLOCK if K else 0
        return _reduce(t[..., :keep], acc, "blocked", block=BLOCK)

    variant(op, "dropped-tail-block", "dropped-tile", False,
            "the last block of 128 (or the partial remainder) is never added (off-by-one in the "
            "block count)")(make(dropped))
    variant(op, "truncation", "truncation", False,
            "blocked fp32 sum converted to the output format by truncation instead of rounding",
            narrow_out)(make(lambda t, acc, out, seed: _reduce(t, acc, "blocked", block=BLOCK), "rtz"))

    def scaled(t, acc, out, seed):
        s = _reduce(t, acc, "blocked", block=BLOCK)
        if op == "mean":
            s = _mean_of(s, t.shape[-1], acc)
        return rnd(s * 1.01, acc)

    scaled.is_sum = False
    variant(op, "scale", "scale", False, "the result multiplied by 1.01 (a wrong scale factor)")(
        make(scaled))
    variant(op, "zeros", "zeros", False, "returns zeros of the right shape and dtype")(
        make(lambda t, acc, out, seed: np.zeros(t.shape[:-1])))

    if op == "mean":
        def by_k_minus_1(t, acc, out, seed):
            K = t.shape[-1]
            s = _reduce(t, acc, "blocked", block=BLOCK)
            return rnd(s / (K - 1), acc) if K > 1 else np.full(s.shape, np.inf)

        by_k_minus_1.is_sum = False
        variant(op, "by-k-minus-1", "scale", False,
                "the sum divided by K - 1 (a variance-style denominator): relative error 1/(K-1), "
                "observable when 1/(K-1) >= 4 u_out", observable=_k_minus_1_visible)(
            make(by_k_minus_1))

        def wrong_count_run(inputs, params, out, acc, seed):
            x = np.asarray(inputs[0])
            t = _rows(x, params.get("axis"))
            axes = _axes(x, params.get("axis"))
            n = x.shape[axes[-1]] if axes else 1
            with np.errstate(all="ignore"):
                s = _reduce(t, acc, "blocked", block=BLOCK)
                y = finish(rnd(s / n, acc) if n else s * np.nan, out)
            return _shape_back(y, x, params)

        variant(op, "wrong-count", "scale", False,
                "a mean over several axes divided by the length of the last reduced axis only; "
                "observable when more than one axis of length > 1 is reduced",
                observable=_several_axes)(wrong_count_run)


def _k_minus_1_visible(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    x = np.asarray(inputs[0])
    K = math.prod(x.shape[i] for i in _axes(x, params.get("axis")))
    return K <= 1 or 1.0 / (K - 1) >= 4.0 * out.u


def _several_axes(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    x = np.asarray(inputs[0])
    axes = _axes(x, params.get("axis"))
    return sum(1 for i in axes if x.shape[i] > 1) > 1


for _op in ("sum", "mean"):
    _register_reduction(_op)
del _op


# ---------------------------------------------------------------------------------------------
# cumsum
# ---------------------------------------------------------------------------------------------


def _running(x: np.ndarray, w: Work) -> np.ndarray:
    """Sequential inclusive scan of the last axis in the working format."""
    return running_scan(x, w, np.add)


def _blocked_scan(x: np.ndarray, w: Work, carries: bool = True) -> np.ndarray:
    """Chunks of :data:`BLOCK` scanned sequentially, each chunk's carry added to its elements.

    The carry into chunk j is the scan of the chunk totals, ``C_j = RN(C_{j-1} + T_{j-1})``,
    which is the last output of chunk j - 1 (``RN(T_{j-1} + C_{j-1})``).
    """
    y = np.empty(x.shape, dtype=w.dtype)
    carry = None
    for k0 in range(0, x.shape[-1], BLOCK):
        part = _running(x[..., k0:k0 + BLOCK], w)
        if carries and carry is not None:
            part = w.q(part + carry[..., None])
        y[..., k0:k0 + BLOCK] = part
        carry = part[..., -1]
    return y


def _hillis_steele(x: np.ndarray, w: Work) -> np.ndarray:
    """Inclusive scan by log2(K) steps ``y_i = RN(y_i + y_{i - 2^d})``."""
    y = x.copy()
    d = 1
    while d < x.shape[-1]:
        y[..., d:] = w.q(y[..., d:] + y[..., :-d])
        d *= 2
    return y


def _blelloch(x: np.ndarray, w: Work) -> np.ndarray:
    """Blelloch's up-sweep / down-sweep exclusive scan (zero-padded to a power of two) plus x."""
    K = x.shape[-1]
    n = 1 << max(0, (K - 1).bit_length())
    a = np.zeros(x.shape[:-1] + (n,), dtype=w.dtype)
    a[..., :K] = x
    d = 1
    while d < n:  # up-sweep: a[i + 2d - 1] += a[i + d - 1]
        a[..., 2 * d - 1::2 * d] = w.q(a[..., 2 * d - 1::2 * d] + a[..., d - 1::2 * d])
        d *= 2
    a[..., n - 1] = 0
    d = n // 2
    while d >= 1:  # down-sweep
        left = a[..., d - 1::2 * d].copy()
        a[..., d - 1::2 * d] = a[..., 2 * d - 1::2 * d]
        a[..., 2 * d - 1::2 * d] = w.q(a[..., 2 * d - 1::2 * d] + left)
        d //= 2
    return w.q(a[..., :K] + x)


def _variant_input(x: np.ndarray, inputs: list, params: Mapping[str, Any]) -> tuple[np.ndarray, bool]:
    """The scan axis (last) of the variant's input: ``x * mask``, flipped for ``reverse``, shifted right
    by one (a zero in front) for ``exclusive`` — all exact in the working format, as a kernel that
    loads its input masked, reversed or offset by one — and whether the result is flipped back."""
    mask = inputs[1] if len(inputs) > 1 else None
    if mask is not None:
        x = x * to_last(np.asarray(mask), params.get("axis", -1)).astype(x.dtype)
    reverse = bool(params.get("reverse", False))
    if reverse:
        x = x[..., ::-1]
    if params.get("exclusive", False):
        x = np.concatenate([np.zeros_like(x[..., :1]), x[..., :-1]], axis=-1)
    return x, reverse


def _is_variant(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    """``observable`` of the variant-ignoring bug: a variant is asked for."""
    return bool(params.get("reverse") or params.get("exclusive") or (len(inputs) > 1 and inputs[1] is not None))


def _scan(name: str, family: str, legit: bool, description: str, applies: Callable | None = None,
          mode: str = "rne", observable: Callable | None = None,
          acc_formats: tuple[str, ...] | None = None) -> Callable:
    """Register ``core(x (scan axis last, working dtype), w: Work, out) -> scan`` for cumsum."""

    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            axis = params.get("axis", -1)
            w = Work(acc)
            with np.errstate(all="ignore"):
                x, reverse = _variant_input(to_last(w.load(inputs[0]), axis), inputs, params)
                y = core(np.ascontiguousarray(x), w, out)
                y = y[..., ::-1] if reverse else y
                return finish(from_last(f64(y), axis), out, mode, seed)

        variant("cumsum", name, family, legit, description, applies, observable, acc_formats)(run)
        return core

    return deco


@_scan("sequential", "accumulation-order", True,
       "running sum s_i = RN(s_{i-1} + x_i) in the accumulation format (numpy.cumsum on float32)")
def _cs_sequential(x, w, out):
    return _running(x, w)


@_scan("blocked-scan", "accumulation-order", True,
       "chunks of 128 scanned sequentially, chunk totals scanned, each chunk's carry added to its "
       "elements (one extra rounding; CUB decoupled look-back, Triton/NKI chunked scans)")
def _cs_blocked(x, w, out):
    return _blocked_scan(x, w)


@_scan("hillis-steele", "accumulation-order", True,
       "Hillis & Steele log-step scan y_i = RN(y_i + y_{i-2^d}) in the accumulation format")
def _cs_hillis(x, w, out):
    return _hillis_steele(x, w)


@_scan("blelloch", "accumulation-order", True,
       "Blelloch work-efficient up-sweep/down-sweep exclusive scan plus x, in the accumulation "
       "format")
def _cs_blelloch(x, w, out):
    return _blelloch(x, w)


@_scan("xla-arith16", "library", True,
       "XLA CPU's 16-bit cumsum (jax.lax.cumsum, jax 0.10.2): the reduce-window tree of blocks of 16, each "
       "block a running sum rounded to the 16-bit type, the block totals scanned by the same rule, every "
       "element RN16(local + carry) (numstd.corpus._common.xla_scan); 16-bit accumulation only",
       acc_formats=ARITH16)
def _cs_xla(x, w, out):
    return xla_scan(x, w, np.add, 0.0)


def _torch_cumsum(inputs, params, out, acc, seed):
    import torch

    from ..backends.scans import torch_cumsum

    mask = inputs[1] if len(inputs) > 1 else None
    y = torch_cumsum(to_torch(inputs[0]), None if mask is None else torch.from_numpy(np.asarray(mask)),
                     dim=int(params.get("axis", -1)), reverse=bool(params.get("reverse", False)),
                     exclusive=bool(params.get("exclusive", False)))
    return finish(from_torch(y), out)


variant("cumsum", "torch-cpu", "library", True,
        "torch.cumsum on CPU in the input's dtype", torch_same_format,
        acc_formats=FP32_ONLY)(_torch_cumsum)


@_scan("acc-output-format", "accumulation-precision", False,
       "the running sum kept in the output format (e.g. bfloat16)", applies=narrow_out)
def _cs_acc_out(x, w, out):
    return _running(x, Work(out))


@_scan("acc-bf16", "accumulation-precision", False,
       "the running sum kept in bfloat16 whatever the output format",
       applies=lambda out, f, p: out.name != "bfloat16")
def _cs_acc_bf16(x, w, out):
    return _running(x, Work(FORMATS["bfloat16"]))


@_scan("exclusive", "scan", False,
       "an exclusive scan (y_i = sum_{j<i} x_j) returned for the inclusive cumsum")
def _cs_exclusive(x, w, out):
    y = np.zeros(x.shape, dtype=w.dtype)
    y[..., 1:] = _running(x, w)[..., :-1]
    return y


def _long_rows(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
    return np.shape(inputs[0])[params.get("axis", -1)] > BLOCK


@_scan("missing-carries", "scan", False,
       "chunks of 128 scanned independently, the carries from earlier chunks never added; "
       "observable when the scanned axis is longer than 128", observable=_long_rows)
def _cs_no_carries(x, w, out):
    return _blocked_scan(x, w, carries=False)


@_scan("reversed", "scan", False,
       "a suffix scan y_i = sum_{j>=i} x_j (the scan direction reversed, e.g. a reverse=True flag)")
def _cs_reversed(x, w, out):
    return _running(x[..., ::-1], w)[..., ::-1]


def _cs_variant_ignored(inputs, params, out, acc, seed):
    """The plain inclusive forward scan of x, whatever reverse, exclusive and mask ask for."""
    axis = params.get("axis", -1)
    w = Work(acc)
    with np.errstate(all="ignore"):
        y = _running(np.ascontiguousarray(to_last(w.load(inputs[0]), axis)), w)
        return finish(from_last(f64(y), axis), out)


variant("cumsum", "variant-ignored", "scan", False,
        "reverse, exclusive and mask ignored: the inclusive forward cumsum of x returned for the variant asked "
        "for (observable only where one is asked for)", observable=_is_variant)(_cs_variant_ignored)


@_scan("dropped-tail-block", "dropped-tile", False,
       "the last chunk of 128 (or the partial remainder) is never scanned: its outputs stay 0")
def _cs_dropped(x, w, out):
    y = _running(x, w)
    K = x.shape[-1]
    y[..., ((K - 1) // BLOCK) * BLOCK if K else 0:] = 0
    return y


@_scan("truncation", "truncation", False,
       "sequential fp32 scan converted to the output format by truncation", applies=narrow_out,
       mode="rtz")
def _cs_truncation(x, w, out):
    return _running(x, w)


@_scan("scale", "scale", False, "the scan multiplied by 1.01 (a wrong scale factor)")
def _cs_scale(x, w, out):
    return w.q(_running(x, w) * w.c(1.01))


@_scan("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _cs_zeros(x, w, out):
    return np.zeros(x.shape)


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"exclusive": "dropped-terms", "missing-carries": "dropped-terms", "dropped-tail-block": "dropped-terms"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
