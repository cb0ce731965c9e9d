"""Matrix products evaluated in a chosen summation order and accumulation format.

``matmul(A, B)`` follows :func:`numpy.matmul` semantics (batched, broadcast batch dimensions,
1-D operands promoted).  Each output element is ``RN_out(reduce(order, acc; t_1..t_K))`` with
the exact products ``t_k = A[..., m, k] * B[..., k, n]`` (exact in float64 for operands of at most
26 significant bits; see :mod:`numstd.emulate._terms`) reduced by one of the orders of
:mod:`numstd.emulate.summation`, then converted once to the output format.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ParameterError
from ..core.formats import round_to
from ._terms import CHUNK_ELEMENTS, ProductTerms
from .summation import reduce_terms

__all__ = ["matmul", "to_output"]


def to_output(
    values: np.ndarray, out: Any, mode: str, rng: np.random.Generator | None
) -> np.ndarray:
    """Convert accumulator values (float64 or float32) to the output format, rounded once.

    ``mode`` is ``"rne"``, ``"rtz"`` or ``"stochastic"`` (:func:`numstd.formats.round_to`;
    stochastic rounding needs ``rng``).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if mode == "stochastic":
            return round_to(values, out, mode, rng=rng)
        return round_to(values, out, mode)


def matmul(
    A: Any,
    B: Any,
    *,
    order: str = "sequential",
    acc: Any = "float32",
    out: Any = "float32",
    block: int = 32,
    splits: int = 4,
    out_rounding: str = "rne",
    seed: int | None = None,
) -> np.ndarray:
    """Emulate ``A @ B`` with a given summation order and accumulation format.

    ``C[..., m, n] = RN_out(S_order,acc(A[..., m, k] * B[..., k, n], k = 0..K-1))`` where every
    partial sum of ``S`` is rounded to ``acc`` (formulas in :mod:`numstd.emulate.summation`) and
    ``RN_out`` is the final conversion with ``out_rounding``.

    Parameters
    ----------
    A, B : array-like
        Operands (numpy incl. ml_dtypes, torch or jax arrays) of at most 26 significant bits;
        numpy matmul shapes ``(..., M, K)`` and ``(..., K, N)``.
    order : str
        ``"sequential"``, ``"pairwise"``, ``"tree"``, ``"blocked"``, ``"splitk"``, ``"kahan"``,
        ``"exact"`` or ``"random"`` (the last needs ``seed``).
    acc : format-like
        Accumulation format (default float32).
    out : format-like
        Output format (default float32).
    block, splits : int
        Parameters of the ``"blocked"`` and ``"splitk"`` orders.
    out_rounding : {"rne", "rtz", "stochastic"}
        Rounding of the final conversion to ``out``; ``"stochastic"`` needs ``seed``.
    seed : int, optional
        Seed of ``np.random.default_rng`` for ``order="random"`` and stochastic rounding.

    Returns
    -------
    numpy.ndarray
        The product in the dtype of ``out`` (ml_dtypes dtypes for bfloat16/fp8; tf32 as float32).

    Raises
    ------
    ShapeError, DtypeError, ParameterError, FormatError
        Incompatible shapes, operands wider than 26 bits, unknown order/format, missing seed.
    """
    terms = ProductTerms(A, B)
    rng = np.random.default_rng(seed) if seed is not None else None
    if order == "random" and rng is None:
        raise ParameterError("order='random' needs seed=<int> (numstd never uses a global RNG)")
    if order in ("pairwise", "tree"):
        # these orders hold all K products of the rows they reduce: bound that memory
        m = terms.shape[-2]
        per_row = max(1, terms.K * int(np.prod(terms.shape, dtype=np.int64)) // max(m, 1))
        rows = max(1, CHUNK_ELEMENTS // per_row)
        parts = [
            reduce_terms(terms.rows(r, min(r + rows, m)), order=order, acc=acc, block=block,
                         splits=splits, rng=rng)
            for r in range(0, m, rows)
        ]
        values = np.concatenate(parts, axis=-2) if parts else np.zeros(terms.shape)
    else:
        values = reduce_terms(terms, order=order, acc=acc, block=block, splits=splits, rng=rng)
    return terms.finish(to_output(values, out, out_rounding, rng))
