"""Terms of a contraction whose operands a legitimate kernel may round first (TF32 mode, autocast).

``torch.autocast`` runs a float32 matmul or linear by rounding its operands (RNE) to bf16 or fp16
and calling the 16-bit GEMM; cuBLAS TF32 mode rounds them to TF32.  With ``â = fl(a)``, ``b̂ = fl(b)``
and the absolute rounding errors ``ea = |â − a|``, ``eb = |b̂ − b|`` (exact in float64), one product
moves by

    |â b̂ − a b| = |a (b̂ − b) + (â − a) b̂| ≤ |a| eb + ea (|b| + eb) =: w_k

so the whole dot product ``c = Σ_k a_k b_k`` (plus a bias ``β``, rounded too: ``eβ = |β̂ − β|``) moves by
``d = Σ_k (â_k b̂_k − a_k b_k) + (β̂ − β)``.  Three terms describe that move:

``indev``  ``|ĉ − c|`` with ``ĉ = Σ â b̂ + β̂``: the move of the kernel that rounds exactly as the
           standard's ``input_rounding`` format does (RNE), computed, not bounded;
``insum``  ``Σ_k w_k + eβ``: the worst case of any rounding whose error is at most this one's on every
           operand element — a finer grid that holds the coarser one (TF32 ⊃ bf16: same exponent
           range, more mantissa bits; TF32 = fp16 in fp16's normal range), or none at all;
``inrms``  ``sqrt(Σ_k w_k² + eβ²)``: for such a rounding, ``d`` is a sum of terms bounded by ``±w_k``;
           if their signs are independent, Hoeffding's inequality gives
           ``P(|d| ≥ λ·inrms) ≤ 2 exp(−λ²/2)`` (W. Hoeffding, J. Amer. Statist. Assoc. 58, 1963, Thm 2).

A model then allows ``min(insum, indev + lam_in · inrms)``: exactly the move of the standard's own
rounding, or a finer one's within ``lam_in`` of its Hoeffding scale, never more than the worst case.
Against the worst-case ``2 u_in |A||B|`` of the earlier standards this is about ``√K`` times tighter,
which is what lets a coarser rounding (fp8 operands under an autocast standard) fail at every K.

Every sum goes through :func:`~numstd.reference.contraction.padded_matmul` / ``dot`` with the
chunk's absolute row number, so the terms have the same bits whatever the row chunking.  Their own
float64 rounding (relative ``K·2⁻⁵³``) is far below any allowance they enter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..models import INPUT_ROUNDING_KEY

__all__ = ["INPUT_ROUNDING_KEY", "TERMS", "rounding_terms"]

#: the aux terms :func:`rounding_terms` returns (ops list them in their entries)
TERMS = ("indev", "insum", "inrms")


def _rounded(x: np.ndarray, fmt: Any, cache: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x in float64, fl(x) in float64, |fl(x) − x|)`` for RNE into ``fmt``; ``cache`` (the caller's
    per-call dict, as :func:`numstd.reference.contraction.operand`'s) holds it for an operand every
    chunk shares (``B``, the weight), keyed by its memory, shape, strides and dtype."""
    from ..core.formats import round_to

    key = None
    if cache is not None:
        key = ("rounded", str(fmt), x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.str)
        if key in cache:
            return cache[key]
    x64 = np.asarray(x, dtype=np.float64)
    r = np.asarray(round_to(x64, fmt), dtype=np.float64)
    out = (x64, r, np.abs(r - x64))
    if key is not None:
        cache[key] = out
    return out


def rounding_terms(A: np.ndarray, B: np.ndarray, bias: np.ndarray | None, fmt: Any, values: np.ndarray,
                   row0: int = 0, resolution: Any = "float32", cache: dict | None = None) -> dict[str, np.ndarray]:
    """The terms ``indev``, ``insum``, ``inrms`` (module docstring) of ``A @ B (+ bias)``.

    Parameters
    ----------
    A, B : numpy.ndarray
        ``(..., m, K)`` and ``(..., K, n)`` as the kernel received them (any format float64 holds).
    bias : numpy.ndarray or None
        ``(n,)``, added to every row (linear), rounded like the operands.
    fmt : format
        The rounding the standard allows (``bfloat16``, ``float16``, ``tf32``).
    values : numpy.ndarray
        The reference ``A @ B (+ bias)`` (:func:`numstd.reference.contraction.dot`).
    row0 : int
        Absolute number of the first row of ``A`` (chunked callers).
    resolution : format
        The output format: ``ĉ`` is refined beyond one float64 GEMM only where an error of
        ``2⁻¹⁰·u(resolution)·|Â||B̂|`` could show (:func:`~numstd.reference.contraction.dot`'s
        ``resolution_slack``, as for the reference itself), far below the allowance ``indev`` enters.
    cache : dict, optional
        Per-call cache: ``B``'s rounding is computed once for all chunks of rows.

    Returns
    -------
    dict of numpy.ndarray
        Shaped like ``values``.
    """
    from .contraction import dot, padded_matmul

    a, ar, ea = _rounded(A, fmt)
    b, br, eb = _rounded(np.asarray(B), fmt, cache)  # (shared by every chunk of rows)
    aa, bb = np.abs(a), np.abs(b) + eb
    bias_r, ebias = (None, 0.0) if bias is None else _rounded(bias, fmt)[1:]
    moved, _, _ = dot(ar, br, bias_r, resolution=resolution, resolution_slack=True, row0=row0)
    indev = np.abs(moved - values)
    insum = padded_matmul(aa, eb, row0) + padded_matmul(ea, bb, row0) + ebias
    sq = (padded_matmul(aa * aa, eb * eb, row0) + 2.0 * padded_matmul(aa * ea, eb * bb, row0)
          + padded_matmul(ea * ea, bb * bb, row0) + np.square(ebias))
    return {"indev": indev, "insum": insum, "inrms": np.sqrt(sq)}
