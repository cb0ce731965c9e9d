"""Variants of the exact reductions ``amax`` and ``amin`` (over ``axis``: None, an int or a tuple),
and of their indices ``argmax`` and ``argmin`` (the second half of this module).

The result is one of the inputs, so every legitimate kernel returns it exactly, whatever its order
of comparisons.  Legitimate: ``numpy.max``/``numpy.min`` on the inputs widened to float64; a blocked
tree (maxima of blocks of :data:`BLOCK` by a pairwise tree, then a tree over the block maxima: a
GPU block reduction with warp shuffles); a sequential loop that propagates NaN by explicit
``isnan`` checks (the comparison alone drops NaN); torch on CPU.  Bugs: the running maximum
initialised to 0 instead of ``-inf`` (wrong for every all-negative slice; ``amin``: initialised to
0 instead of ``+inf``, wrong for all-positive slices), NaN ignored (``numpy.nanmax``), a reduction
over the wrong axis (the kept and reduced axes swapped in the buffer: output ``i`` is the extremum
of ``x.flat[i::R]`` instead of row ``i``), the extremum of ``|x|``, the result rounded through
bfloat16 (for wider outputs; rounding is monotone, so this is also the extremum of the inputs
rounded to bfloat16), zeros.

A bug is observable where its output differs from the exact extremum somewhere (NaN compared as
NaN; the sign of a zero not compared, as the standards do not judge it): an exact op has no
legitimate variation to stay above.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..core.formats import FORMATS, Format
from . import with_causes
from ._common import FP32_ONLY, f64, finish, from_torch, registrar, rnd, to_torch, torch_same_format

__all__ = ["VARIANTS", "BLOCK", "OPS", "ARG_OPS"]

#: the ops of this module whose output is a value (amax, amin) and those whose output is an index
OPS: tuple[str, ...] = ("amax", "amin")
ARG_OPS: tuple[str, ...] = ("argmax", "argmin")

#: elements per block of the blocked tree
BLOCK = 128

_V: list = []
variant = registrar(_V)


def _axes(ndim: int, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(axis) if isinstance(axis, tuple) else (int(axis),)


def _rows(x: Any, axis: Any) -> np.ndarray:
    """``x`` (float64, C order) with the kept axes flattened into rows and the reduced ones into columns."""
    x = f64(x)
    axes = _axes(x.ndim, axis)
    keep = [i for i in range(x.ndim) if i not in axes]
    rows = math.prod(x.shape[i] for i in keep)
    return np.ascontiguousarray(np.transpose(x, keep + list(axes))).reshape(rows, math.prod(x.shape[i] for i in axes))


def _shaped(y: np.ndarray, x: Any, params: Mapping[str, Any]) -> np.ndarray:
    """Row results ``y`` in the op's output shape (``keepdims`` honoured)."""
    shape = np.shape(x)
    axes = _axes(len(shape), params["axis"])
    if params["keepdims"]:
        return y.reshape([1 if i in axes else n for i, n in enumerate(shape)])
    return y.reshape([n for i, n in enumerate(shape) if i not in axes])


def _pick(op: str) -> Callable:
    """``numpy.maximum`` for amax, ``numpy.minimum`` for amin (both propagate NaN)."""
    return np.maximum if op == "amax" else np.minimum


def _register(name: str, family: str, legit: bool, description: str, applies: Callable | None = None,
              acc_formats: tuple[str, ...] | None = None) -> Callable:
    """Register ``core(op, t (rows x K float64), params) -> row results`` for amax and amin."""

    def deco(core: Callable) -> Callable:
        for op in OPS:
            def run(inputs, params, out, acc, seed, op=op):
                with np.errstate(all="ignore"):
                    y = core(op, _rows(inputs[0], params["axis"]), params)
                    return finish(_shaped(f64(y), inputs[0], params), out)

            run.__name__ = f"{core.__name__}_{op}"
            run.__doc__ = core.__doc__
            observable = None if legit else _differs(op, run)
            variant(op, name, family, legit, description.format(op=op, **_WORDS[op]), applies, observable,
                    acc_formats)(run)
        return core

    return deco


_WORDS = {"amax": {"fn": "max", "ext": "maximum", "inf": "-inf", "sign": "negative", "ext_word": "larger"},
          "amin": {"fn": "min", "ext": "minimum", "inf": "+inf", "sign": "positive", "ext_word": "smaller"}}


def _exact(op: str, x: Any, params: Mapping[str, Any]) -> np.ndarray:
    from ..reference.exact import extremum

    return extremum(op, [x], dict(params))[0]


def _differs(op: str, bug: Callable) -> Callable:
    """``observable``: the bug's output differs from the exact result somewhere (NaN equals NaN,
    ``-0`` equals ``+0``), in the output format."""

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        with np.errstate(all="ignore"):
            exact = rnd(_exact(op, inputs[0], params), out)
            got = f64(bug(inputs, params, out, FORMATS["float32"], 0))
        same = (got == exact) | (np.isnan(got) & np.isnan(exact))
        return bool((~same).any())

    return observable


# ---------------------------------------------------------------------------------------------
# legitimate
# ---------------------------------------------------------------------------------------------


@_register("numpy", "library", True, "numpy.{fn} over the reduced axes (NaN propagates)")
def _numpy(op, t, params):
    return (np.max if op == "amax" else np.min)(t, axis=-1)


def _tree(t: np.ndarray, pick: Callable) -> np.ndarray:
    """The last axis reduced by a pairwise tree (adjacent pairs level by level; an odd one passes)."""
    while t.shape[-1] > 1:
        n = t.shape[-1]
        head = pick(t[..., 0:n - n % 2:2], t[..., 1:n - n % 2:2])
        t = np.concatenate([head, t[..., n - 1:]], axis=-1) if n % 2 else head
    return t[..., 0]


@_register("blocked-tree", "accumulation-order", True,
           f"the {{ext}} of each block of {BLOCK} by a pairwise tree, then a tree over the block results (a GPU "
           "block reduction: warp shuffles, then shared memory); numpy.{fn}imum propagates NaN")
def _blocked_tree(op, t, params):
    pick = _pick(op)
    K = t.shape[-1]
    blocks = [_tree(t[:, k0:k0 + BLOCK], pick) for k0 in range(0, K, BLOCK)]
    return _tree(np.stack(blocks, axis=-1), pick)


@_register("isnan-checked", "formula", True,
           "a sequential loop from m = {inf} with m = x_k when x_k is NaN or beyond m, and m kept once it is NaN: "
           "NaN propagated by explicit isnan checks (a comparison alone is false for NaN)")
def _isnan_checked(op, t, params):
    m = np.full(t.shape[:-1], -np.inf if op == "amax" else np.inf)
    for k in range(t.shape[-1]):
        xk = t[:, k]
        beyond = xk > m if op == "amax" else xk < m
        m = np.where(np.isnan(m), m, np.where(np.isnan(xk) | beyond, xk, m))
    return m


def _torch(op: str, inputs: list, params: Mapping[str, Any], out: Format, acc: Format, seed: int) -> np.ndarray:
    from ..backends.base import framework_call

    return finish(from_torch(framework_call(op, "torch")([to_torch(inputs[0])], params)), out)


for _op in OPS:
    variant(_op, "torch-cpu", "library", True, f"torch.{_op} on CPU in the input's dtype, only where torch is installed",
            torch_same_format, acc_formats=FP32_ONLY)(
        lambda inputs, params, out, acc, seed, op=_op: _torch(op, inputs, params, out, acc, seed))


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------


@_register("init-zero", "formula-error", False,
           "the running {ext} initialised to 0 instead of {inf}: 0 for every all-{sign} slice")
def _init_zero(op, t, params):
    return _pick(op)(_numpy(op, t, params), 0.0)


@_register("nan-ignored", "missing-branch", False,
           "NaN ignored (numpy.nan{fn}): a slice holding a NaN gives the {ext} of its other values instead of NaN")
def _nan_ignored(op, t, params):
    return (np.nanmax if op == "amax" else np.nanmin)(t, axis=-1)


@_register("wrong-axis", "indexing", False,
           "the reduction over the wrong axis of the buffer: the kept and reduced axes swapped (output i is the "
           "{ext} of x.flat[i::R] with R the number of outputs, not of slice i)")
def _wrong_axis(op, t, params):
    rows, K = t.shape
    return _numpy(op, t.reshape(K, rows).T, params)


@_register("abs", "formula-error", False, "the {ext} of |x| returned for the {ext} of x")
def _abs(op, t, params):
    return _numpy(op, np.abs(t), params)


@_register("bf16-rounded", "input-rounding", False,
           "the result rounded through bfloat16 (equivalently, the {ext} of the inputs rounded to bfloat16: "
           "rounding is monotone); a bug for float32 and float16 outputs", applies=lambda out, f, p: out.p > 8)
def _bf16_rounded(op, t, params):
    return rnd(_numpy(op, t, params), FORMATS["bfloat16"])


@_register("zeros", "zeros", False, "returns zeros of the right shape and dtype")
def _zeros(op, t, params):
    return np.zeros(t.shape[:-1])


# ---------------------------------------------------------------------------------------------
# argmax / argmin (index outputs, int64 unless the library returns int32)
#
# Legitimate: numpy.argmax/argmin; a blocked tree that keeps (value, index) pairs and breaks ties
# by the smaller index (a GPU block reduction that keeps torch's first-index rule); a sequential
# loop from the first element with strict comparisons and an explicit NaN check; torch and jax on
# CPU.  Bugs: the last index on ties (``>=`` in the loop), the reduction over the wrong axis of the
# buffer, NaN ignored (numpy.nanargmax), the extremum of |x|, the argmax of x rounded to bfloat16
# (float32 and float16 inputs: the first index of a bf16 tie is not the fp32 extremum's),
# off-by-one (index + 1, clipped to the last index), the value returned instead of the index,
# indices returned as float32.
# ---------------------------------------------------------------------------------------------


def _arg_rows(x: Any, axis: Any) -> np.ndarray:
    """``x`` (float64) as rows of the reduced axis (axis None: one row of all elements)."""
    x = f64(x)
    if axis is None:
        return x.reshape(1, -1)
    return np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])


def _arg_shaped(i: np.ndarray, x: Any, params: Mapping[str, Any]) -> np.ndarray:
    """Row indices ``i`` in argmax's output shape."""
    shape, axis = np.shape(x), params["axis"]
    if axis is None:
        out = (1,) * len(shape) if params["keepdims"] else ()
    else:
        out = tuple(1 if k == axis else n for k, n in enumerate(shape)) if params["keepdims"] else \
            tuple(n for k, n in enumerate(shape) if k != axis)
    return np.asarray(i).reshape(out)


def _first(op: str, t: np.ndarray) -> np.ndarray:
    """numpy's first index of the extremum of each row (NaN first)."""
    return (np.argmax if op == "argmax" else np.argmin)(t, axis=-1)


def _arg_differs(op: str, bug: Callable) -> Callable:
    """``observable`` of an argmax bug: its output is not the first index of the extremum somewhere."""

    def observable(inputs: list, params: Mapping[str, Any], out: Format) -> bool:
        from ..reference.exact import first_index

        with np.errstate(all="ignore"):
            got = np.asarray(bug(inputs, params, out, FORMATS["float32"], 0))
        want = first_index(op, inputs[0], params["axis"], params["keepdims"])
        return got.dtype.kind not in "iu" or got.shape != want.shape or bool((got != want).any())

    return observable


def _register_arg(name: str, family: str, legit: bool, description: str, applies: Callable | None = None,
                  raw: bool = False) -> Callable:
    """Register ``core(op, t (rows x K float64), params) -> row indices`` for argmax and argmin
    (``raw``: the core's result is returned as it is, not as int64 indices)."""

    def deco(core: Callable) -> Callable:
        for op in ARG_OPS:
            def run(inputs, params, out, acc, seed, op=op):
                with np.errstate(all="ignore"):
                    i = core(op, _arg_rows(inputs[0], params["axis"]), params)
                return _arg_shaped(i if raw else np.asarray(i, dtype=np.int64), inputs[0], params)

            run.__name__ = f"{core.__name__}_{op}"
            run.__doc__ = core.__doc__
            observable = None if legit else _arg_differs(op, run)
            variant(op, name, family, legit, description.format(op=op, **_WORDS["a" + op[3:]]), applies, observable)(run)
        return core

    return deco


@_register_arg("numpy", "library", True, "numpy.arg{fn} (the first index of the {ext}; the first NaN)")
def _arg_numpy(op, t, params):
    return _first(op, t)


def _pair_tree(v: np.ndarray, i: np.ndarray, op: str) -> tuple:
    """The last axis reduced by a pairwise tree of (value, index) pairs: NaN beats everything, then the
    larger (argmin: smaller) value, and on equal values (or two NaN) the smaller index."""
    while v.shape[-1] > 1:
        n = v.shape[-1]
        a, b = v[..., 0:n - n % 2:2], v[..., 1:n - n % 2:2]
        ia, ib = i[..., 0:n - n % 2:2], i[..., 1:n - n % 2:2]
        na, nb = np.isnan(a), np.isnan(b)
        beyond = (b > a) if op == "argmax" else (b < a)
        take_b = (nb & ~na) | (~na & ~nb & beyond) | (((a == b) | (na & nb)) & (ib < ia))
        hv, hi = np.where(take_b, b, a), np.where(take_b, ib, ia)
        if n % 2:
            hv, hi = np.concatenate([hv, v[..., n - 1:]], -1), np.concatenate([hi, i[..., n - 1:]], -1)
        v, i = hv, hi
    return v[..., 0], i[..., 0]


@_register_arg("blocked-tree", "accumulation-order", True,
               f"(value, index) pairs of each block of {BLOCK} reduced by a pairwise tree, then a tree over the "
               "block results, ties broken by the smaller index (a GPU block reduction keeping the first-index rule)")
def _arg_blocked_tree(op, t, params):
    rows, K = t.shape
    idx = np.broadcast_to(np.arange(K), t.shape)
    parts = [_pair_tree(t[:, k0:k0 + BLOCK], idx[:, k0:k0 + BLOCK], op) for k0 in range(0, K, BLOCK)]
    return _pair_tree(np.stack([p[0] for p in parts], -1), np.stack([p[1] for p in parts], -1), op)[1]


@_register_arg("sequential-strict", "formula", True,
               "a loop from index 0 keeping the running {ext} and its index, replacing them only on a strictly "
               "{ext_word} value or the first NaN (then kept): torch's CPU reduction")
def _arg_sequential(op, t, params):
    m, i = t[:, 0].copy(), np.zeros(t.shape[0], dtype=np.int64)
    for k in range(1, t.shape[1]):
        xk = t[:, k]
        beyond = (xk > m) if op == "argmax" else (xk < m)
        take = ~np.isnan(m) & (np.isnan(xk) | beyond)
        m, i = np.where(take, xk, m), np.where(take, k, i)
    return i


def _lib(op: str, lib: str, inputs: list, params: Mapping[str, Any]) -> np.ndarray:
    from ..backends.base import framework_call

    x = inputs[0]
    if lib == "torch":
        return framework_call(op, "torch")([to_torch(x)], params).numpy()
    import jax.numpy as jnp

    return np.asarray(framework_call(op, "jax")([jnp.asarray(x)], params))


def _jax_inputs(out: Format, fmts: Any, params: Any) -> bool:
    import importlib.util

    return importlib.util.find_spec("jax") is not None


for _op in ARG_OPS:
    variant(_op, "torch-cpu", "library", True, f"torch.{_op} on CPU (int64), only where torch is installed",
            torch_same_format, acc_formats=FP32_ONLY)(
        lambda inputs, params, out, acc, seed, op=_op: _lib(op, "torch", inputs, params))
    variant(_op, "jax-cpu", "library", True, f"jax.numpy.{_op} on CPU (int32 without x64), only where jax is installed",
            _jax_inputs, acc_formats=FP32_ONLY)(lambda inputs, params, out, acc, seed, op=_op: _lib(op, "jax", inputs, params))


@_register_arg("last-index", "indexing", False,
               "the last index on ties (the loop replaces the running {ext} on >= instead of >)")
def _arg_last(op, t, params):
    return t.shape[1] - 1 - _first(op, t[:, ::-1])


@_register_arg("wrong-axis", "indexing", False,
               "the reduction over the wrong axis of the buffer: the kept and reduced axes swapped (output i is "
               "the index in x.flat[i::R] with R the number of outputs)", applies=None)
def _arg_wrong_axis(op, t, params):
    rows, K = t.shape
    return _first(op, t.reshape(K, rows).T)


@_register_arg("nan-ignored", "missing-branch", False,
               "NaN ignored (numpy.nanarg{fn}): a slice holding a NaN gives the index of the {ext} of its other values")
def _arg_nan_ignored(op, t, params):
    clean = np.where(np.isnan(t), -np.inf if op == "argmax" else np.inf, t)
    return _first(op, clean)


@_register_arg("abs", "formula-error", False, "the index of the {ext} of |x|")
def _arg_abs(op, t, params):
    return _first(op, np.abs(t))


@_register_arg("bf16-rounded", "input-rounding", False,
               "the index of the {ext} of x rounded to bfloat16 (fp32 and fp16 inputs: values that tie in bfloat16 "
               "give the first of them, not the index of the true {ext})", applies=lambda out, f, p: out.p > 8)
def _arg_bf16_rounded(op, t, params):
    return _first(op, rnd(t, FORMATS["bfloat16"]))


@_register_arg("off-by-one", "indexing", False, "index + 1 (clipped to the last index): a 1-based index")
def _arg_off_by_one(op, t, params):
    return np.minimum(_first(op, t) + 1, t.shape[1] - 1)


@_register_arg("value", "formula-error", False, "the {ext} itself returned instead of its index", raw=True)
def _arg_value(op, t, params):
    return (np.max if op == "argmax" else np.min)(t, axis=-1)


@_register_arg("float-indices", "formula-error", False, "the right indices returned as float32 values", raw=True)
def _arg_float(op, t, params):
    return _first(op, t).astype(np.float32)


#: diagnosis causes of the bugs whose family does not say it (numstd.corpus.FAMILY_CAUSES)
_CAUSES: dict = {"nan-ignored": "specials"}

VARIANTS: tuple = with_causes(_V, _CAUSES)
