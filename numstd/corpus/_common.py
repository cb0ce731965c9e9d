"""Working-precision arithmetic shared by the corpus modules, and their registration helper.

Conventions (see :mod:`numstd.corpus`):

- values travel as float64 arrays holding values of a format, or as float32 arrays when the
  working format is float32 (numpy float32 arithmetic *is* IEEE round-to-nearest fp32);
- :class:`Work` is the working ("accumulation/compute") format ``acc``: :meth:`Work.load` brings
  an input into it, :meth:`Work.q` rounds an intermediate result into it (a no-op for float32 and
  float64, whose numpy arithmetic already rounds there);
- :func:`finish` is the one final rounding into the output format (:func:`numstd.formats.round_to`).

Predicates for :attr:`Variant.applies` assume what the standards declare by default: a float32
accumulator, so "narrower than the accumulator" means fewer than 24 significand bits.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..core.formats import Format, round_to
from . import Variant

__all__ = [
    "Work", "f64", "finish", "rnd", "registrar", "to_last", "from_last", "row_sum", "at_sum16",
    "narrow_out", "float32_inputs", "low_precision_inputs", "torch_available",
    "torch_inputs", "torch_same_format", "to_torch", "from_torch", "corrupt_one",
    "truncation_visible", "ACC_P", "FP32_ONLY", "ARITH16", "XLA_SCAN_BASE", "xla_scan", "running_scan",
]

#: significand bits of the float32 accumulator the standards declare by default.
ACC_P = 24

#: ``acc_formats`` of variants that model float32 accumulation only (hardware, libraries).
FP32_ONLY: tuple[str, ...] = ("float32",)

#: ``acc_formats`` of variants that model 16-bit arithmetic only (XLA CPU's 16-bit kernels: the arith16 policy).
ARITH16: tuple[str, ...] = ("bfloat16", "float16")

#: block length of XLA's reduce-window rewrite of a scan (``ReduceWindowRewriter``, base length 16).
XLA_SCAN_BASE = 16


def f64(x: Any) -> np.ndarray:
    """``x`` as a float64 array (exact for every format of the table)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x, dtype=np.float64)


def rnd(x: Any, fmt: Format, mode: str = "rne", seed: int | None = None) -> np.ndarray:
    """``x`` rounded into ``fmt`` (RNE unless ``mode``), returned as float64 values."""
    with np.errstate(invalid="ignore", over="ignore"):
        if fmt.name == "float64" and mode == "rne":
            return f64(x)
        if fmt.name == "float32" and mode == "rne":
            return f64(f64(x).astype(np.float32))
        return f64(round_to(f64(x), fmt, mode, seed=seed if mode == "stochastic" else None))


def finish(y: Any, out: Format, mode: str = "rne", seed: int | None = None) -> np.ndarray:
    """The final rounding of ``y`` into the output format: an array of ``out.dtype``."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(f64(y), out, mode, seed=seed if mode == "stochastic" else None)


class Work:
    """The working format ``acc`` of a variant's elementwise arithmetic.

    ``dtype`` is the numpy container of intermediate values (float32 for float32 and narrower
    formats, float64 for float64); numpy functions applied to such arrays compute in that
    precision and :meth:`q` rounds their results into ``acc`` when it is narrower.
    """

    def __init__(self, acc: Format, mode: str = "rne") -> None:
        self.fmt = acc
        self.mode = mode  # rounding of every intermediate ("rtz": arithmetic that truncates)
        self.dtype = np.float64 if acc.p > ACC_P else np.float32
        self.native = acc.name in ("float32", "float64") and mode == "rne"

    def load(self, x: Any) -> np.ndarray:
        """An input in the working format (exact when the input is not wider)."""
        with np.errstate(invalid="ignore", over="ignore"):
            if self.native:
                return np.asarray(f64(x), dtype=self.dtype)
            return rnd(x, self.fmt).astype(self.dtype)

    def q(self, y: Any) -> np.ndarray:
        """An intermediate result rounded into the working format."""
        with np.errstate(invalid="ignore", over="ignore"):
            if self.native:
                return np.asarray(y, dtype=self.dtype)
            return rnd(y, self.fmt, self.mode).astype(self.dtype)

    def c(self, value: float) -> Any:
        """A constant rounded into the working format."""
        return self.q(np.asarray(value, dtype=np.float64))[()]


def to_last(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` with ``axis`` moved to the end."""
    return np.moveaxis(x, axis, -1)


def from_last(y: np.ndarray, axis: int) -> np.ndarray:
    """Inverse of :func:`to_last`."""
    return np.moveaxis(y, -1, axis)


def row_sum(t: Any, acc: Format, order: str = "sequential", **kw: Any) -> np.ndarray:
    """Sum of ``t`` over its last axis in ``order``, every partial sum rounded to ``acc`` (float64).

    :func:`numstd.emulate.accumulate` with keepdims; ``kw`` are its ``block``/``splits``.
    """
    from ..emulate import accumulate

    t = f64(t)
    if t.shape[-1] == 0:
        return np.zeros(t.shape[:-1] + (1,))
    return accumulate(t, -1, order=order, acc=acc, **kw)[..., None]


def at_sum16(q: Any, w: "Work", out: Format, threads: int = 2) -> np.ndarray:
    """at::sum of a 16-bit tensor ``q`` to one output on CPU (``two_pass_reduction``,
    ``aten/src/ATen/native/TensorIteratorReduce.cpp``): above 32768 elements ``P = min(threads,
    ceil(K / 32768))`` contiguous chunks (at::parallel_for's grain), each summed pairwise in ``w``'s
    format and stored in ``out``, the stored chunk sums added in ``w``'s format and rounded once to
    ``out``; at most 32768 elements: one pairwise sum rounded to ``out`` (bit for bit torch 2.13 with 2
    and 8 intra-op threads, tests/test_stored16.py)."""
    from ..reference.reduction import GRAIN_SIZE

    o = Work(out)
    flat = f64(q).reshape(-1)
    if not flat.size:
        return np.asarray(o.q(np.float64(0.0)))
    p = max(1, min(threads, -(-flat.size // GRAIN_SIZE)))
    size = -(-flat.size // p)
    parts = [o.q(row_sum(flat[i:i + size].reshape(1, -1), w.fmt, "pairwise")[0, 0]) for i in range(0, flat.size, size)]
    return np.asarray(o.q(row_sum(f64(np.asarray(parts)).reshape(1, -1), w.fmt, "sequential")[0, 0]))


def running_scan(v: np.ndarray, w: "Work", op: Callable = np.add) -> np.ndarray:
    """Sequential inclusive scan of the last axis in the working format, each step ``w.q(op(acc, v_k))``
    (``np.add``: a running sum, ``np.multiply``: a running product)."""
    y = np.empty(v.shape, dtype=w.dtype)
    if v.shape[-1] == 0:
        return y
    acc = w.q(v[..., 0])
    y[..., 0] = acc
    for k in range(1, v.shape[-1]):
        acc = w.q(op(acc, v[..., k]))
        y[..., k] = acc
    return y


def _xla_exclusive(t: np.ndarray, w: "Work", op: Callable, ident: float, base: int) -> np.ndarray:
    """Exclusive scan of the block totals ``t``: ``ident, t_0, t_0 ∘ t_1, ...`` (XLA's padded window)."""
    inc = running_scan(t, w, op) if t.shape[-1] <= base else xla_scan(t, w, op, ident, base)
    head = np.full(t.shape[:-1] + (1,), ident, dtype=w.dtype)
    return np.concatenate([head, inc[..., :-1]], axis=-1)


def xla_scan(x: Any, w: "Work", op: Callable = np.add, ident: float = 0.0,
             base: int = XLA_SCAN_BASE) -> np.ndarray:
    """XLA CPU's inclusive scan of the last axis (``jax.lax.cumsum``/``cumprod`` on CPU).

    jax lowers a scan to one ``reduce-window`` of the row's length (``cumred_reduce_window_impl``,
    ``jax/_src/lax/control_flow/loops.py``); XLA rewrites it into a tree (compiled HLO of jax 0.10.2,
    bf16 and fp16): a row of ``n <= base`` elements is a sequential running scan, each step rounded
    to the element type; a longer row is zero- (one-) padded to ``B·base``, each block of ``base``
    scanned sequentially (``L``), the block totals ``T_j = L_{j, base-1}`` scanned exclusively by the
    same rule (recursively), and every element is ``RN(L_{j,i} ∘ C_j)`` with its block's carry
    ``C_j`` (``C_0 = ident``, exact). Every ``∘`` rounds by ``w.q``. Bit for bit jax 0.10.2's bf16 and
    fp16 ``cumsum``/``cumprod`` on CPU (tests/test_arith16_rows.py).

    Parameters
    ----------
    x : array
        Values in ``w``'s container dtype, scan axis last.
    w : Work
        The arithmetic's format (every combine rounded into it).
    op : callable
        ``np.add`` (cumsum) or ``np.multiply`` (cumprod).
    ident : float
        The identity of ``op`` (the padding and the first block's carry).
    base : int
        The rewriter's block length (:data:`XLA_SCAN_BASE`).
    """
    x = np.asarray(x, dtype=w.dtype)
    n = x.shape[-1]
    if n <= base:
        return running_scan(x, w, op)
    nb = -(-n // base)
    pad = np.full(x.shape[:-1] + (nb * base - n,), ident, dtype=w.dtype)
    blocks = np.concatenate([x, pad], axis=-1).reshape(x.shape[:-1] + (nb, base))
    local = running_scan(blocks, w, op)
    carry = _xla_exclusive(local[..., -1], w, op, ident, base)
    out = w.q(op(local, carry[..., None]))
    return out.reshape(x.shape[:-1] + (nb * base,))[..., :n]


def registrar(store: list) -> Callable:
    """A decorator factory appending :class:`Variant` objects to ``store``.

    ``@variant(ops, name, family, legit, description, applies=None, observable=None)`` registers
    the decorated ``fn`` for each op in ``ops`` (a name or a tuple of names).  Truncation bugs
    without an ``observable`` get :func:`truncation_visible` of their own function.
    """

    def variant(ops: str | Iterable[str], name: str, family: str, legit: bool, description: str,
                applies: Callable | None = None, observable: Callable | None = None,
                acc_formats: tuple[str, ...] | None = None) -> Callable:
        def deco(fn: Callable) -> Callable:
            obs = observable
            if obs is None and family == "truncation" and not legit:
                obs = truncation_visible(fn)
            for op in ((ops,) if isinstance(ops, str) else tuple(ops)):
                store.append(Variant(op, name, family, legit, description, fn, applies, obs,
                                     acc_formats))
            return fn

        return deco

    return variant


# ---------------------------------------------------------------------------------------------
# applicability predicates: (out, input_formats, params) -> bool
# ---------------------------------------------------------------------------------------------


def narrow_out(out: Format, fmts: Sequence[Any], params: Any) -> bool:
    """The output is narrower than the float32 accumulator (a final rounding happens)."""
    return out.p < ACC_P


def float32_inputs(out: Format, fmts: Sequence[Any], params: Any) -> bool:
    """Every floating input is float32."""
    fl = [f for f in fmts if f is not None]
    return bool(fl) and all(f.name == "float32" for f in fl)


def low_precision_inputs(out: Format, fmts: Sequence[Any], params: Any) -> bool:
    """The first two inputs have at most 11 significand bits (tensor-core fp16/bf16/fp8 paths)."""
    fl = [f for f in fmts[:2] if f is not None]
    return bool(fl) and all(f.p <= 11 for f in fl)


@functools.lru_cache(maxsize=1)
def torch_available() -> bool:
    """torch is installed and imports (tried once, on the first call; never at import time)."""
    if importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch  # noqa: F401
    except Exception:  # a broken install is an absent one
        return False
    return True


_TORCH_FORMATS = ("float64", "float32", "float16", "bfloat16")


def torch_inputs(out: Format, fmts: Sequence[Any], params: Any) -> bool:
    """torch is installed and computes in every floating input's format (no fp8 math on CPU)."""
    if not torch_available():
        return False
    return all(f is None or f.name in _TORCH_FORMATS for f in fmts) and out.name in _TORCH_FORMATS


def torch_same_format(out: Format, fmts: Sequence[Any], params: Any) -> bool:
    """torch is installed and every floating input is in the output format (torch returns the
    inputs' dtype, so it is a variant only of standards whose output format is the inputs')."""
    return torch_inputs(out, fmts, params) and any(f is not None for f in fmts) and \
        all(f is None or f.name == out.name for f in fmts)


def to_torch(x: np.ndarray) -> Any:
    """A torch CPU tensor with the format of ``x`` (bfloat16 through float32, exactly)."""
    import torch

    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(x.astype(np.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def from_torch(t: Any) -> np.ndarray:
    """A torch tensor's values as float64 numpy (exact)."""
    import torch

    return t.detach().to(torch.float64).numpy()


def truncation_visible(fn: Callable, min_count: int = 32, min_fraction: float = 0.4) -> Callable:
    """``observable`` of a truncation bug: RTZ and RNE differ on enough outputs to bias the mean.

    ``fn`` run with a float32 output returns its float32 values before the conversion (rounding
    float32 values into float32 is exact in any mode).  Truncation differs from round-to-nearest
    by one ULP on the elements whose fraction of an output ULP exceeds 1/2, so the mean signed
    error moves by the fraction of elements that differ (0.5 for uniformly spread fractions, 0
    where outputs are exact): the bug is observable when that shift is at least ``min_fraction``
    ULP over at least ``min_count`` elements.
    """
    from ..core.formats import FORMATS

    def observable(inputs: Sequence[Any], params: Any, out: Format) -> bool:
        fp32 = FORMATS["float32"]
        with np.errstate(all="ignore"):
            y = f64(fn(inputs, params, fp32, fp32, 0)).reshape(-1)
            y = y[np.isfinite(y)]
            differ = int((f64(round_to(y, out)) != f64(round_to(y, out, "rtz"))).sum())
        return differ >= min_count and differ >= min_fraction * max(y.size, 1)

    return observable


def corrupt_one(y: np.ndarray, seed: int, factor: float = 1.0 + 2.0 ** -4) -> np.ndarray:
    """``y`` (float64) with one element multiplied by ``factor``.

    The element is drawn (seeded) among those of at least median magnitude, so the corruption is
    a relative error of ``factor - 1`` on a value that is not a cancellation residue.
    """
    y = np.array(y, dtype=np.float64, copy=True)
    flat = y.reshape(-1)
    if flat.size == 0:
        return y
    mag = np.abs(np.where(np.isfinite(flat), flat, 0.0))
    big = np.flatnonzero(mag >= np.median(mag))
    pos = int(big[np.random.default_rng(seed).integers(big.size)])
    flat[pos] *= factor
    return y

