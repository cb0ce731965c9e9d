"""Scan variants: ``cumprod`` (inclusive, along ``axis``).

Legitimate: the sequential running product in the accumulation format (``numpy.cumprod`` on
float32; torch's CPU kernel keeps it in float for 16-bit inputs and in double for float32), a
blocked scan (blocks of :data:`BLOCK` multiplied sequentially, each block's prefix times the carry
of the blocks before it: how a GPU scan splits a row), the correctly rounded value rounded twice,
and torch on CPU.  Bugs: zeros, an exclusive scan (``1, x0, x0 x1, ...``), the reversed scan, a
running product kept in bfloat16 (relative error ``~ 2^-9`` per step, for wider outputs).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.formats import FORMATS
from ._common import ARITH16, FP32_ONLY, running_scan, xla_scan, f64, finish, from_last, from_torch, registrar, rnd, to_last, to_torch, torch_inputs, Work

__all__ = ["VARIANTS", "BLOCK"]

#: elements per block of the blocked scan
BLOCK = 128

_V: list = []
variant = registrar(_V)


def _running(x: np.ndarray, w: Work) -> np.ndarray:
    """Sequential inclusive product of the last axis, each step rounded by ``w.q``."""
    return running_scan(x, w, np.multiply)


def _prod_scan(name: str, family: str, legit: bool, description: str, applies: Callable | None = None,
               acc_formats: tuple[str, ...] | None = None) -> Callable:
    """Register ``core(x (scan axis last, working dtype), w, out) -> scan`` for cumprod."""

    def deco(core: Callable) -> Callable:
        def run(inputs, params, out, acc, seed):
            axis = params.get("axis", -1)
            w = Work(acc)
            x = to_last(w.load(inputs[0]), axis)
            with np.errstate(all="ignore"):
                y = core(np.ascontiguousarray(x), w, out, params)
                return finish(from_last(f64(y), axis), out)

        run.__name__ = core.__name__
        run.__doc__ = core.__doc__
        variant("cumprod", name, family, legit, description, applies, None, acc_formats)(run)
        return core

    return deco


@_prod_scan("sequential", "accumulation-order", True,
            "running product p_k = RN(p_{k-1} x_k) in the accumulation format (numpy.cumprod on float32)")
def _cp_sequential(x, w, out, params):
    return _running(x, w)


@_prod_scan("blocked-scan", "accumulation-order", True,
            f"blocks of {BLOCK} multiplied sequentially, each block's prefixes times the carry (the product "
            "of the blocks before): a GPU scan's split of a row")
def _cp_blocked(x, w, out, params):
    y = np.empty(x.shape, dtype=w.dtype)
    carry = None
    for k0 in range(0, x.shape[-1], BLOCK):
        part = _running(x[..., k0:k0 + BLOCK], w)
        if carry is not None:
            part = w.q(part * carry[..., None])
        y[..., k0:k0 + BLOCK] = part
        carry = part[..., -1]
    return y


@_prod_scan("cr-then-round", "rounding", True,
            "the exact prefix products rounded to the accumulation format, then to the output format")
def _cp_cr(x, w, out, params):
    from ..reference.scan import cumprod

    v, _, _ = cumprod("cumprod", [f64(x)], {"axis": -1})
    return rnd(v, w.fmt)


@_prod_scan("xla-arith16", "library", True,
            "XLA CPU's 16-bit cumprod (jax.lax.cumprod, jax 0.10.2): the reduce-window tree of blocks of 16, "
            "each block a running product rounded to the 16-bit type, the block totals scanned by the same "
            "rule, every element RN16(local · carry) (numstd.corpus._common.xla_scan); 16-bit arithmetic only",
            acc_formats=ARITH16)
def _cp_xla(x, w, out, params):
    return xla_scan(x, w, np.multiply, 1.0)


@_prod_scan("torch-cpu", "library", True,
            "torch.cumprod on CPU in the input's dtype (float accumulation for 16-bit inputs, double for "
            "float32), cast to the output format; only where torch is installed",
            applies=torch_inputs, acc_formats=FP32_ONLY)
def _cp_torch(x, w, out, params):
    import torch

    t = to_torch(np.asarray(x))
    return from_torch(torch.cumprod(t.to(torch.float64 if t.dtype == torch.float64 else torch.float32), dim=-1))


@_prod_scan("zeros", "zeros", False, "returns zeros of the right shape and dtype (KernelBench #165)")
def _cp_zeros(x, w, out, params):
    return np.zeros(x.shape)


@_prod_scan("exclusive", "formula-error", False, "an exclusive scan: 1, x0, x0 x1, ... (the first factor "
            "missing from every prefix)")
def _cp_exclusive(x, w, out, params):
    y = np.ones(x.shape, dtype=w.dtype)
    y[..., 1:] = _running(x, w)[..., :-1]
    return y


@_prod_scan("reversed", "formula-error", False, "the reversed scan: prod_{j >= k} x_j")
def _cp_reversed(x, w, out, params):
    return _running(x[..., ::-1], w)[..., ::-1]


@_prod_scan("bf16-accumulator", "accumulation-precision", False,
            "the running product rounded to bfloat16 at every step (relative error ~2^-9 per step): a bug "
            "for float32 and float16 outputs", applies=lambda out, f, p: out.p > 8)
def _cp_bf16(x, w, out, params):
    return _running(x, Work(FORMATS["bfloat16"]))


VARIANTS: tuple = tuple(_V)
