"""Pass criteria: per-element judging of one chunk and the final criterion results.

The criteria of a standard (DESIGN.md "Criteria"):

``shape`` / ``dtype``
    the output has the op's shape and the standard's output format.
``specials``
    non-finite outputs exactly where the correctly rounded reference is non-finite (same class:
    NaN, +inf, −inf); a NaN where the reference is finite fails with its own count.  Signed zeros
    are compared only when the standard sets ``signed_zero``.
``bound``
    ``|a_i − r_i| ≤ B_i`` (the error model, :mod:`numstd.models`) for all but
    ``bound_max_fraction`` of the finite elements.
``bias``
    over the elements where the final rounding dominates the error model (``E_i ≤ κ·ulp(r_i)``,
    ``bias_kappa`` κ = 8 by default: where the accumulation allowance is many ULPs, legitimate
    hardware such as truncating tensor-core block FMA has a systematic drift of a fraction of it,
    and a bias in ULPs says nothing about rounding) and the references in the normal range
    (``|r_i| ≥`` the smallest normal; below it flushing may be allowed and the ULP is constant),
    the sign-adjusted mean ULP error ``m = mean(sign(r_i)·e_i)`` satisfies
    ``|m| ≤ τ + z·max(s, ρ/√3)/√n_eff`` with ``s`` the sample standard deviation and ``ρ/√3`` the
    standard deviation of a uniform rounding error of ±ρ ULP (a floor, so tiny samples are never
    rejected for noise).  ``n_eff`` (:func:`effective_sample_size`) is the number of elements,
    capped by the number of distinct output values among them (counted in a fixed 2^20-bin hashed
    bitmap, so never over-counted: equal outputs have equal rounding errors).  Truncation instead of rounding gives ``m ≈ −0.5``; a 1 % scale error
    gives ``|m|`` of several ULPs; both fail on a few hundred elements while RNE and stochastic
    rounding (mean 0) pass.

    With ``rounded_constants`` (criteria), the op's declared constants (``OpInfo.constants``:
    parameters such as ``negative_slope`` and formula constants such as SELU's scale or 1/6) may be
    held in the standard's compute format, as torch and XLA hold them.  Rounding constant ``c``
    moves the value of the function by a systematic ``r_i(fl(c)) − r_i``; its mean over the bias
    sample in sign-adjusted ULPs, ``s_c`` (:func:`constant_shifts`), is computed exactly from the
    reference.  A kernel holds each constant either exact (or computes with it exactly: ``x / 6``)
    or rounded, so (to first order, the shifts add) its mean signed error is one of the
    ``Σ_{c∈S} s_c`` over the subsets ``S`` of the constants, ``0`` among them; ``|m − nearest| ≤
    τ + z·max(s, ρ/√3)/√n_eff`` (:func:`bias_excess`).  Not an interval between them: a truncating
    kernel with exact constants (``m ≈ −0.5`` on the rounded elements) lies between ``0`` and a
    negative shift and is still rejected.  The mean is taken relative to the correctly rounded
    output's own mean over the same elements (``ROUNDED``): equal reference values repeat one
    rounding error, which no kernel can avoid.

    With ``bias_rows`` (criteria), the standard error is row-clustered (:func:`bias_standard_error`):
    the larger of the element-wise ``max(s, ρ/√3)/√n_eff`` and the row-wise ``s_R/√R``, ``s_R`` the
    sample standard deviation of the ``R`` row means of the bias sample (:func:`scan_rows`: a row is
    a slice along the scan axis; rows without a bias-sample element do not count).  In a scan the
    elements of a row share their prefix's rounding errors (``y_k = y_{k−1}·x_k·(1 + δ_k)``: the
    relative error of ``y_k`` is ``Σ_{j≤k} δ_j``, nested), so they are not independent draws and
    only the rows are; an order other than the sequential one (a tree, XLA's ``reduce_window``)
    spreads the row means further without any systematic sign.  The per-row sums are exact
    integers of 2^-24 ulp (each element's error clipped to ±2^16 ulp), so chunking does not change
    them.
``row_bias``
    (only standards whose ``[criteria]`` sets ``row_bias = true``) the systematic error that a whole
    group of outputs shares, judged where the element-level ``bias`` cannot run (every allowance
    ``E_i`` above ``κ`` ulp: fp32 reductions).  Each finite element with a nonzero reference gives
    ``t_i = sign(r_i)·(a_i − r_i)/B_i`` clipped to ``[−1, 1]`` (``B_i`` the bound, so ``|t_i| ≤ 1``
    wherever the bound holds); a group (:func:`row_groups`: a softmax/log_softmax/layer_norm row,
    one output element of sum/mean/matmul) averages them to ``t_g``; over the ``R`` groups the mean
    ``T`` and the observed sample standard deviation ``s`` of ``t_g`` give the test
    ``|T| ≤ τ_row + ρ_row·D + z_R·s/√R`` with ``τ_row`` (``row_bias_tau``) the legitimate drift
    calibrated from the legitimate variants, ``D`` the same mean of ``u_acc·|r_i|/B_i`` (what a
    relative error of one ``u_acc`` shared by the group gives) times the declared ``ρ_row``
    (``row_bias_rel``: the systematic relative error that the group's shared operations — a
    reciprocal, rsqrt or log, faithfully rounded — may have), and ``z_R`` the Student-t critical value with ``R − 1`` degrees of
    freedom at the two-sided tail probability of ``row_bias_z`` standard normal deviations
    (:func:`row_bias_limit`).  All sums are exact integers of ``2^-30`` (chunk-size invariant).
    The element-level ``bias`` criterion stays beside it.
``ulp_max`` / ``ulp_quantiles``
    optional ULP budgets for elementwise functions.
"""

from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import ml_dtypes
import numpy as np

from ..core.distribution import BLOCK, DistributionAccumulator, UlpDistribution
from ..core.native import DISTINCT_BITS, WORST_K
from ..models import Environment
from .verdict import CriterionResult, Offender

__all__ = ["Judge", "JudgeResult", "evaluate", "rounded_specials", "judge_chunk", "effective_sample_size", "chunk_pieces", "tail_factor",
           "hull_violations", "spill_mask", "exit_mask", "exit_split", "constant_shifts", "bias_excess", "ROUNDED", "STORED", "row_groups",
           "row_bias_limit", "RowBias", "scan_rows", "BiasRows", "bias_standard_error", "bias_rows_z"]

_DISTINCT_BITS = DISTINCT_BITS  # WORST_K and DISTINCT_BITS are shared with the compiled judge (numstd.core.native)
_DISTINCT_BINS = 1 << _DISTINCT_BITS
#: resolution of the summed constant shifts: 2^-32 ulp, summed as integers (exact, so the mean
#: does not depend on the chunking); a single element's shift is clipped to ±2^24 ulp
_SHIFT_SCALE = 2.0**32
_SHIFT_CLIP = 2.0**24
#: the key of :func:`constant_shifts` for the correctly rounded output's own error (the baseline)
ROUNDED = "(correctly rounded)"
#: the key of :func:`constant_shifts` for the stored intermediates' shift (criteria ``stored_shift``)
STORED = "stored intermediates"
#: resolution of the row-bias statistic: t_i (in [-1, 1]) and group means t_g as integers of 2^-30;
#: their squares from 2^-20 (so a block of 2^22 squares sums exactly in int64)
_ROW_BITS = 30
_ROW_SQ_SHIFT = 10
_ISUM_BLOCK = 1 << 22
#: resolution of the per-row bias-sample sums (``bias_rows``): integers of 2^-24 ulp, each element's
#: signed error clipped to ±2^16 ulp (|q| ≤ 2^40: a row of up to 2^23 bias-sample elements sums exactly)
_BROW_SCALE = 2.0**24
_BROW_CLIP = 2.0**16


def judge_chunk(judge: "Judge", std: Any, env: Any, ref: Any, actual: np.ndarray, chunk_index: tuple) -> None:
    """Judge one chunk under standard ``std``: :func:`chunk_pieces`, then :meth:`Judge.add` for each."""
    for piece in chunk_pieces(std, env, ref, actual, chunk_index):
        judge.add(**piece)


def tail_factor(tail_n: int, n: int) -> float:
    """The growth ``t(N) = max(1, ln N / ln tail_n)`` of a probabilistic bound judged on ``N`` elements.

    A bound such as Higham & Mary's ``λ·√K·u·|A||B|`` holds for *one* element with high
    probability; a verdict requires it of every element, so what it really bounds is the maximum
    of ``|e_i|/E_i`` over the ``N`` elements of the output, which grows with ``N``.  Its constants
    were calibrated on outputs of at most ``tail_n`` elements.  Measured (``benchmarks/bound_tail.py``,
    torch CPU bmm and numpy models on 4,096 to 1,048,576 elements): the maximum grows like
    ``ln N`` (an exponential tail of ``|e_i|/E_i``: the scale of each element's error varies with
    its terms), faster than the ``√(2 ln N)`` of a Gaussian union bound.  So ``E_i`` is scaled by
    ``t(N)``; at ``N ≤ tail_n`` (every calibration case) nothing changes.  ``tail_n = 0``: off (1.0).
    """
    if tail_n <= 1 or n <= tail_n:
        return 1.0
    return math.log(n) / math.log(tail_n)


def chunk_pieces(std: Any, env: Any, ref: Any, actual: np.ndarray, chunk_index: tuple,
                 params: Mapping[str, Any] | None = None, tail: float = 1.0) -> list[dict]:
    """The :meth:`Judge.add` arguments of one chunk under standard ``std``: the model's bound and
    bias term per element.

    The one place where a standard's model meets the judge (``check`` and ``calibrate`` both use
    it): ``B_i`` from :meth:`~numstd.models.ErrorModel.bound`, and ``E_i`` (the pre-rounding error)
    with ``κ`` for the bias sample ``E_i ≤ κ·ulp(r_i)``.  A chunk larger than
    :data:`numstd.chunks.CONTRACTION_CHUNK` elements (callers may ask for larger chunks) is cut into
    pieces of rows of about that size, which bounds the model's temporaries; pieces come in C order,
    so totals are unchanged.  ``tail`` is :func:`tail_factor` of the whole output: the bound becomes
    ``B_i + (tail − 1)·E_i`` (the bias sample, ``E_i ≤ κ·ulp(r_i)``, keeps the unscaled ``E_i``).
    ``params`` are the op's parameters for the whole output (the groups
    of ``row_bias``, :func:`row_groups`, are groups of the whole output); default: the chunk
    reference's own, which differ where the chunk is a piece of a row (its ``axis`` is the piece's).
    (Pieces of ``DEFAULT_CHUNK`` kept the temporaries in cache, but the
    eight calls per contraction chunk cost more than that saved: a 2048³ bf16 matmul check took
    0.203–0.215 s in whole chunks vs 0.212–0.218 s in pieces, medians of 7 in 3 alternating
    processes each†, docs/benchmarks.md.)
    """
    from .chunks import CONTRACTION_CHUNK

    shape = np.shape(ref.values)
    rows = shape[0] if shape else 1
    step = max(1, CONTRACTION_CHUNK // max(1, math.prod(shape[1:])))
    shifts = constant_shifts(std, ref)
    groups = None
    brows = None
    if getattr(std.criteria, "bias_rows", False):
        brows = (std.op, dict((getattr(ref, "params", {}) or {}) if params is None else params))
    if std.criteria.row_bias:
        groups = (std.op, dict((getattr(ref, "params", {}) or {}) if params is None else params))
        rel = row_bias_rel(std, ref)
        if rel:
            groups += (std.accumulate.u, rel)
    if rows <= step:
        return [_piece(std, env, ref.values, ref.error_bound, actual, chunk_index, shifts, groups, brows, tail)]
    p = next(k for k, sl in enumerate(chunk_index) if isinstance(sl, slice))  # chunk axis 0 in the output
    first = chunk_index[p].start or 0

    def rows_of(x: Any, sl: slice) -> Any:  # per-row terms are cut, broadcast ones pass as they are
        return x[sl] if np.ndim(x) == len(shape) and np.shape(x)[0] == rows else x

    pieces = []
    for i0 in range(0, rows, step):
        sl = slice(i0, min(i0 + step, rows))
        idx = chunk_index[:p] + (slice(first + sl.start, first + sl.stop),) + chunk_index[p + 1:]
        pieces.append(_piece(std, {k: rows_of(v, sl) for k, v in env.items()}, ref.values[sl],
                             rows_of(ref.error_bound, sl), actual[sl], idx,
                             None if shifts is None else {k: rows_of(v, sl) for k, v in shifts.items()}, groups,
                             brows, tail))
    return pieces


def _piece(std: Any, env: Any, values: np.ndarray, ref_error: Any, actual: np.ndarray, chunk_index: tuple,
           shifts: dict | None = None, groups: tuple | None = None, brows: tuple | None = None,
           tail: float = 1.0) -> dict:
    e, bound = std.model.evaluate(env, std.output, ref_error)
    if tail != 1.0:
        bound = bound + (tail - 1.0) * e
    # ulp(r) in the output format where the model computed it already (else the judge does)
    u = env.computed("ulp") if isinstance(env, Environment) else env.get("ulp")
    piece = {"actual": actual, "ref": values, "bound": bound, "chunk_index": chunk_index, "ulp": u,
             "pre_rounding": e, "bias_kappa": std.criteria.bias_kappa}
    if shifts is not None:
        piece["shifts"] = shifts
    spill = spill_mask(std, env)
    if spill is not None:
        piece["spill"] = spill
    exited = exit_mask(std, env)
    if exited is not None:
        piece["range_exit"] = exited
    if groups is not None:
        piece["row_groups"] = groups
    if brows is not None:
        piece["bias_rows"] = brows
    return piece


def spill_mask(std: Any, env: Any) -> np.ndarray | None:
    """Where a legitimate kernel's intermediates may overflow the accumulate format (criterion
    ``intermediate_overflow``), as a bool array broadcastable to the output; None when the standard
    does not set the criterion or no element can overflow.

    The op's reference gives ``spillmag``, a bound on the magnitude of every intermediate that any
    legitimate evaluation order forms (attention: ``max(1, |scale|)·max_j Σ_e |q_e||k_je|``, the
    largest partial score); an intermediate can reach ±inf in the accumulate format only where
    ``spillmag`` is at least that format's overflow threshold (the midpoint above its largest
    finite value under RNE).  There, a non-finite output is the specials policy's answer for the
    kernel's arithmetic (the score is ±inf and the softmax NaN), so it is not a mismatch; a finite
    output is judged by the bound as everywhere else.
    """
    if not getattr(std.criteria, "intermediate_overflow", False):
        return None
    try:
        mag = env["spillmag"]
    except KeyError:
        return None
    mask = np.asarray(mag, dtype=np.float64) >= _overflow_threshold(std.accumulate)
    return mask if mask.any() else None


def exit_mask(std: Any, env: Any) -> np.ndarray | None:
    """Where a legitimate evaluation's running product may have left the accumulate format's range
    (criterion ``range_exit``), as a bool array broadcastable to the output; None when the standard
    does not set the criterion or no element is concerned.

    The op's reference gives ``spillmag`` and ``sinkmag`` (:mod:`numstd.reference.scan`): the
    largest and smallest magnitude of a product of contiguous factors ending at or before the
    element, which covers every intermediate of any scan order.  Such a product ``P`` is computed
    with a relative error of at most ``γ_{K−1} <= s = 1.01·K·u_acc`` while it stays in the normal
    range, so it can round to ±inf only where ``|P|·(1 + s)`` reaches the accumulate format's
    overflow threshold ``T``, and to 0 only where ``|P|·(1 − s)`` is below the smallest subnormal
    (the exact underflow point is half of it; a computed factor that passed through the subnormal
    range may be off by a whole subnormal spacing) — or, with the model's ``ftz`` (subnormal results
    flushed), below the smallest normal.  After that the product is 0, ±inf or NaN (``inf·0``) and
    stays so in a sequential scan, and is any of them in a blocked or tree scan, whatever the
    exact prefix does later: such an element may be 0 or non-finite (:meth:`Judge.add` counts it
    as ``exited``, not judged); a finite nonzero output there is judged by the bound as everywhere.
    """
    if not getattr(std.criteria, "range_exit", False):
        return None
    try:
        hi, lo, k = env["spillmag"], env["sinkmag"], env["K"]
    except KeyError:
        return None
    acc = std.accumulate
    s = 1.01 * np.asarray(k, dtype=np.float64) * acc.u
    floor = acc.smallest_normal if std.model.ftz else acc.smallest_subnormal
    with np.errstate(over="ignore", invalid="ignore"):
        mask = (np.asarray(hi, dtype=np.float64) * (1.0 + s) >= _overflow_threshold(acc)) | \
            (np.asarray(lo, dtype=np.float64) * (1.0 - s) < floor)
    return mask if mask.any() else None


def exit_split(mask: np.ndarray, actual: np.ndarray, ref: np.ndarray, out_fmt: Any) -> tuple[np.ndarray, np.ndarray]:
    """Of the elements after a range exit (``mask``, :func:`exit_mask`, shaped like ``actual``):
    ``free``, a 0 or non-finite output (the arithmetic's answer there, not judged), and ``edge``, a
    finite nonzero output whose finite reference rounds beyond ``out_fmt``'s range — legitimate if it
    is within its bound (the judge tests that; calibration solves for it)."""
    with np.errstate(invalid="ignore", over="ignore"):
        fin = np.isfinite(actual)
        zero = actual == 0
        free = mask & (zero | ~fin)
        edge = mask & fin & ~zero & np.isfinite(ref) & (np.abs(ref) >= _overflow_threshold(out_fmt))
    return free, edge


def row_bias_rel(std: Any, ref: Any) -> float:
    """The systematic relative error, in ``u_acc``, that the ``row_bias`` test allows a group:
    ``row_bias_rel`` (the group's shared operations) plus ``row_bias_drift`` evaluated at ``K``, the
    reference's reduction length (its aux ``K``, the largest where it varies; 1 without one).

    ``row_bias_drift`` models the drift of a legitimate summation order itself: a sequential
    round-to-nearest sum of one-signed terms drifts negative as it grows, measured by
    ``benchmarks/seq_sum_drift.py`` (docs/methodology.md §2.4)."""
    rel = float(std.criteria.row_bias_rel)
    if std.criteria.row_bias_drift:
        k = (getattr(ref, "aux", None) or {}).get("K")
        kmax = float(np.max(k)) if k is not None and np.size(k) else 1.0
        rel += float(_drift_formula(std.criteria.row_bias_drift).evaluate({"K": kmax}))
    return rel


@functools.lru_cache(maxsize=None)
def _drift_formula(text: str) -> Any:
    """``row_bias_drift`` parsed once per text (the registry checked it when it loaded the standard)."""
    from ..models.formula import Formula

    return Formula.parse(text, {"K"}, "row_bias_drift")


def _allowed_rel(rb: "RowBias", rel: float) -> float:
    """The shared relative error the row-bias test allows: the groups' own (``row_bias_rel`` with the
    drift at their K, :func:`row_bias_rel`) where they carry one, else the standard's ``rel``."""
    return rel if math.isnan(rb.rel) else rb.rel


def row_groups(op: str, params: Mapping[str, Any], shape: tuple) -> tuple[int, int]:
    """The groups of outputs that share an error, for the ``row_bias`` criterion: ``(L, inner)``,
    so that output element with flat (C-order) index ``f`` belongs to group
    ``(f // (L·inner))·inner + f % inner`` (``L`` elements each, ``inner`` apart).

    A softmax or log_softmax row (``L`` the length of ``axis``) shares its normaliser ``S``: the
    rounding of ``S`` scales the whole row.  A layer_norm or rms_norm row shares its mean and
    deviation.  Every other op (sum, mean, matmul, linear, cross_entropy with ``reduction="none"``)
    is judged with each output element its own group (``L = 1``): one output is one reduction."""
    nd = len(shape)
    if nd == 0:
        return 1, 1
    if op in ("softmax", "log_softmax"):
        a = params.get("axis", -1)
        a = int(a) % nd if not isinstance(a, (tuple, list)) else nd - 1
        return int(shape[a]), int(math.prod(shape[a + 1:]))
    if op in ("layer_norm", "rms_norm"):
        return int(shape[-1]), 1
    return 1, 1


@dataclass(frozen=True)
class RowBias:
    """Totals of the ``row_bias`` statistic: ``rows`` groups with a mean ``mean`` and sample standard
    deviation ``sd`` (``nan`` for fewer than 2 groups) of their mean normalised signed errors ``t_g``;
    ``length`` elements per group; ``unit`` the mean over groups of ``u_acc·|r_i|/B_i`` (``nan``
    when the standard declares no ``row_bias_rel``)."""

    rows: int
    mean: float
    sd: float
    length: int
    unit: float = math.nan
    rel: float = math.nan  # the allowed shared relative error in u_acc (criteria.row_bias_rel); nan: the standard's


def scan_rows(op: str, params: Mapping[str, Any], shape: tuple) -> tuple[int, int]:
    """The rows of the ``bias_rows`` standard error, as :func:`row_groups` gives groups: ``(L,
    inner)``, output element ``f`` (flat, C order) in row ``(f // (L·inner))·inner + f % inner``.

    A row is a slice along the op's ``axis`` (the scan axis of cumsum and cumprod; the last axis
    where the op has none): the elements that share a prefix and so its rounding errors."""
    nd = len(shape)
    if nd == 0:
        return 1, 1
    a = params.get("axis", params.get("dim", -1))  # (normalize: torch's dim, the vectors sharing a norm)
    a = int(a) % nd if not isinstance(a, (tuple, list)) else nd - 1
    return int(shape[a]), int(math.prod(shape[a + 1:]))


@dataclass(frozen=True)
class BiasRows:
    """Totals of the ``bias_rows`` standard error: ``rows`` rows with at least one bias-sample element
    and the sample standard deviation ``sd`` (ulp; ``nan`` for fewer than 2 rows) of their means of
    the sign-adjusted ULP error over the bias sample; ``length`` elements per row."""

    rows: int
    sd: float
    length: int


def bias_standard_error(std: Any, res: "JudgeResult", n_eff: int) -> tuple[float, float, float]:
    """``(se, element-wise, row-wise)`` standard errors of the bias sample's mean signed ULP error.

    Element-wise: ``max(s, ρ/√3)/√n_eff``.  Row-wise (standards with ``bias_rows``, at least 2 rows):
    ``s_R/√R`` (:class:`BiasRows`), else 0.  ``se`` is the larger (the module standard's rule,
    :func:`numstd.grade.module_standard.paired_bias`, applied to the rows of a scan)."""
    el = max(res.ulp.std_signed, std.model.rho / math.sqrt(3.0)) / math.sqrt(max(1, n_eff))
    br = res.bias_rows
    row = br.sd / math.sqrt(br.rows) if (getattr(std.criteria, "bias_rows", False) and br is not None
                                         and br.rows >= 2 and math.isfinite(br.sd)) else 0.0
    return max(el, row), el, row


def bias_rows_z(c: Any, rows: int) -> float:
    """The critical value of the row-clustered bias test on ``rows`` row means: ``bias_z``, or with
    ``bias_rows_t`` the Student-t value on ``rows − 1`` degrees of freedom at ``bias_z``'s two-sided
    tail probability (the standard error is estimated from the rows themselves: with few rows the
    estimate is noisy, and a normal critical value rejects legitimate kernels for that noise —
    torch's own ``F.normalize`` on 1-4 vectors of 64-128 elements, 13 of 20 draws on one vector)."""
    if not getattr(c, "bias_rows_t", False) or rows < 2:
        return c.bias_z
    from scipy.special import stdtrit

    return float(-stdtrit(rows - 1, math.erfc(c.bias_z / math.sqrt(2.0)) / 2.0))


def row_bias_limit(tau: float, z: float, rb: RowBias, rel: float = 0.0) -> tuple[float, float]:
    """``(limit, z_R)`` of the ``row_bias`` test: ``τ + rel·D + z_R·s/√R`` (``D`` = ``rb.unit``, only
    when ``rel`` is nonzero; ``rel`` is ``rb.rel`` where the groups carry one, with ``row_bias_drift``),
    with ``z_R`` the Student-t
    critical value with ``R − 1`` degrees of freedom at the two-sided tail probability
    ``erfc(z/√2)`` of ``z`` standard normal deviations (``s`` is estimated from the ``R`` groups
    themselves, so a small ``R`` widens the limit instead of rejecting for noise)."""
    from scipy.special import stdtrit

    p = math.erfc(z / math.sqrt(2.0))
    zr = float(-stdtrit(rb.rows - 1, p / 2.0))
    rel = _allowed_rel(rb, rel)
    drift = rel * rb.unit if rel else 0.0
    return tau + drift + zr * rb.sd / math.sqrt(rb.rows), zr


def _isum(x: np.ndarray) -> int:
    """Exact sum of an int64 array whose blocks of :data:`_ISUM_BLOCK` elements fit int64."""
    return sum(int(x[i:i + _ISUM_BLOCK].sum()) for i in range(0, x.size, _ISUM_BLOCK))


def _flat_indices(chunk_index: tuple, full: tuple, piece: tuple) -> np.ndarray | int:
    """Flat C-order indices in the output ``full`` of a chunk's elements (``piece`` the chunk's own
    shape, ``chunk_index`` ints and slices): the first one when the chunk is one contiguous block
    (the usual case: axes after its first slice are whole), else every one."""
    idx = tuple(chunk_index) + (slice(None),) * (len(full) - len(chunk_index))
    if not full:
        return 0
    starts = [sl if not isinstance(sl, slice) else (sl.start or 0) for sl in idx]
    first = next((k for k, sl in enumerate(idx) if isinstance(sl, slice)), len(full))
    whole = all(isinstance(sl, slice) and (sl.start or 0) == 0 and (sl.stop is None or sl.stop >= full[k])
                for k, sl in enumerate(idx) if k > first)
    f0 = int(np.ravel_multi_index([min(int(s), d - 1) for s, d in zip(starts, full)], full))
    if whole:
        return f0
    axes = [np.arange(int(sl.start or 0), int(sl.start or 0) + piece[m]) for m, sl in
            enumerate(x for x in idx if isinstance(x, slice))]
    grids = np.meshgrid(*axes, indexing="ij") if axes else []
    it = iter(grids)
    multi = [next(it).reshape(-1) if isinstance(sl, slice) else np.full(max(1, math.prod(piece)), int(sl))
             for sl in idx]
    return np.ravel_multi_index(multi, full).reshape(-1)


def constant_shifts(std: Any, ref: Any) -> dict[str, np.ndarray] | None:
    """Per element and constant, how far rounding the constant to the standard's compute format moves
    the correctly rounded result: ``RN_out(r_i(fl(c))) − RN_out(r_i)``, and under :data:`ROUNDED`
    the error of the correctly rounded result itself, ``RN_out(r_i) − r_i`` (``None`` where the
    standard does not set ``rounded_constants``; constants exact in the format are left out; 0
    where a value overflows).

    The correctly rounded result is the baseline of the bias test of such standards: where many
    elements share one reference value (SELU of inputs near −100 is ``−scale·alpha`` on half the
    elements) their common rounding error is one draw repeated thousands of times, and the
    correctly rounded output itself has a mean error far from 0 (measured: −0.084 ulp on
    KernelBench-style "offset" rows, beyond the ±0.074 allowed).  The candidate's mean is judged
    relative to that of ``RN_out(r)`` over the same elements.

    ``fl`` is round-to-nearest-even into ``std.accumulate`` (torch's ``Scalar.to<opmath_t>()``,
    XLA's weak-typed Python constants); ``r_i(fl(c))`` is the op's own float64 ``ref`` with that one
    constant replaced (:attr:`numstd.ops.OpInfo.constants`).  Rounded to the output, not the raw
    ``r_i(fl(c)) − r_i``: where ``r_i`` is representable (hardsigmoid's saturated ``6 fl(1/6) ≈ 1 +
    u/2`` rounds back to 1) the raw difference would predict a shift no kernel shows; for values
    spread over many ULPs both have the same mean (E[RN(r + δ) − RN(r)] = δ).

    With ``stored_shift`` (criteria), the key :data:`STORED` holds ``RN_out(r'_i) − RN_out(r_i)`` with
    ``r'`` the reference recomputed with the intermediates the op's 16-bit kernel stores rounded to the
    output format (:attr:`numstd.ops.OpInfo.stored`: normalize's norm): one stored value shared by a
    row moves every element of the row the same way, and rows alike (KernelBench-style "offset"
    inputs) share its sign, so torch's own bf16 normalize has a mean error of +0.59 ulp there (16
    rows of 2048: beyond the row-clustered allowance ±0.49, whose rows are not independent draws of
    that shift).  The candidate's mean may lie at 0 or at that shift (a kernel that stores or one
    that does not), relative to the correctly rounded output's.  Standards with a 16-bit accumulate
    (policy arith16) use :attr:`numstd.ops.OpInfo.stored16_arith` where the op has one (XLA CPU's
    16-bit normalize rounds its row sum, square root, clamp and reciprocal: four shared roundings).
    """
    stored = getattr(std.criteria, "stored_shift", False)
    constants = getattr(std.criteria, "rounded_constants", False)
    if not constants and not stored:
        return None
    from ..core.formats import round_to
    from ..ops import get_op

    with np.errstate(all="ignore"):
        base = round_to(ref.values, std.output)
        d0 = base - ref.values
    out: dict[str, np.ndarray] = {ROUNDED: np.where(np.isfinite(d0), d0, 0.0)}
    op = get_op(std.op)
    fn = op.stored
    if getattr(std.accumulate, "p", 24) < 24 and op.stored16_arith is not None:  # arith16: XLA's shared roundings
        fn = op.stored16_arith
    if stored and fn is not None:  # the intermediates a 16-bit kernel stores (OpInfo.stored)
        with np.errstate(all="ignore"):
            d = round_to(np.asarray(fn(ref.values, ref.aux, std.output), dtype=np.float64), std.output) - base
        out[STORED] = np.where(np.isfinite(d), d, 0.0)
    if not constants or not op.constants or op.ref is None or "x" not in ref.aux:
        return out
    params = dict(ref.params)
    exact = op.constant_values(params)
    for name, c in exact.items():
        rc = float(round_to(np.float64(c), std.accumulate))
        if rc == c or not math.isfinite(rc):
            continue
        with np.errstate(all="ignore"):
            v = op.ref(np.asarray(ref.aux["x"], dtype=np.float64), {**params, **exact, name: rc})[0]
            d = round_to(np.asarray(v, dtype=np.float64), std.output) - base
        out[name] = np.where(np.isfinite(d), d, 0.0)
    return out


def bias_excess(mean: float, shifts: Mapping[str, float] | None) -> float:
    """Signed distance of the mean signed ULP error ``mean`` from the nearest legitimate systematic
    error: the correctly rounded output's mean ``shifts[ROUNDED]`` (0 when absent) plus
    ``Σ_{c∈S} s_c`` over the subsets ``S`` of the constants a kernel rounds (the mean shifts ``s_c``
    of :func:`constant_shifts`; to first order they add), the empty subset (exact constants) among
    them.  Without shifts this is ``mean`` itself."""
    shifts = dict(shifts or {})
    mean = mean - shifts.pop(ROUNDED, 0.0)
    means = [0.0]
    for v in shifts.values():
        means = sorted(set(means) | {m + v for m in means})
    return min((mean - m for m in means), key=abs)


def hull_violations(std: Any, ref: Any, actual: Any) -> int:
    """Outputs of an attention chunk outside the convex hull of v's rows, within rounding (0 when the
    standard has no ``convex_hull`` criterion).

    Every output is ``sum_j P_j v_j`` with ``P`` a probability vector, so each coordinate lies in
    ``[min_j v_je, max_j v_je]`` (``vlo``, ``vhi`` of the reference's aux, over all keys: a causal
    row's hull is inside it).  A kernel's weights sum to 1 only within its normalisation and
    accumulation errors, so the interval is widened by ``t = ((K + 3) u_acc + u_in) vmax +
    ulp_out(vmax)``: the worst-case error of a length-``K`` sum (``gamma_K``, Higham 2002 eq. 3.5),
    exp and the normalisation (3 u), the rounding of ``P`` to the input format, and the final rounding.
    Non-finite outputs are left to the ``specials`` criterion.
    """
    aux = ref.aux
    if not std.criteria.convex_hull or "vlo" not in aux:
        return 0
    from ..core.ulp import ulp as ulp_of

    vmax = np.asarray(aux["vmax"], dtype=np.float64)
    k = float(np.asarray(aux["K"]))
    tol = ((k + 3.0) * std.accumulate.u + std.inputs[0].u) * vmax + ulp_of(vmax, std.output)
    a = np.asarray(actual, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = (a > aux["vhi"] + tol) | (a < aux["vlo"] - tol)
    return int(np.count_nonzero(bad & np.isfinite(a)))


def rounded_specials(r: np.ndarray, fmt: Any) -> np.ndarray:
    """``r`` with the values that overflow ``fmt`` replaced by their rounding (±inf or NaN).

    Only huge or non-finite references can round to a non-finite value, so only those are rounded;
    the finite rest is returned unchanged (and unrounded).
    """
    from ..core.formats import round_to

    big = ~(np.abs(r) < fmt.max_finite)
    if not big.any():
        return r
    out = np.array(r, dtype=np.float64)
    out[big] = np.asarray(round_to(r[big], fmt), dtype=np.float64)
    return out


def _flat(x: Any, shape: tuple, scalar: bool = False) -> np.ndarray:
    """``x`` broadcast to ``shape`` as a contiguous 1-D float64 array (one element when ``scalar``
    and ``x`` is a single value: the judge broadcasts it)."""
    x = np.asarray(x, dtype=np.float64)
    if scalar and x.size == 1:
        return x.reshape(1)
    if x.shape == shape and x.flags.c_contiguous:  # (the usual case: no broadcast, no copy)
        return x.reshape(-1)
    return np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1)


def _measure(a: np.ndarray, r: np.ndarray, b: np.ndarray, u: np.ndarray, may_spill: bool) -> tuple:
    """``(|a − r| / b, (a − r) / u)`` of finite elements: the normalised error (0/0 → 0, a NaN bound
    → inf) and the signed ULP error (``u = ulp(r)``, a power of two, so the division is exact)."""
    from ..core.ulp import _scaled_error

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = a - r  # (overflows to ±inf only in float64 formats: see the spill in _scaled_error)
        err = np.abs(d)
        norm = err / b  # NaN only for 0/0 (no error: 0) or a NaN bound (no bound: inf)
    nan = np.isnan(norm)
    if nan.any():
        norm[nan] = np.where(err[nan] == 0, 0.0, np.inf)
    e_ulp = _scaled_error(a, r, u) if may_spill else np.divide(d, u, out=d)
    return norm, e_ulp


#: output dtypes the compiled judge reads as stored: (its kind code, the dtype it views them as)
_NATIVE_KINDS = {np.dtype(np.float64): (0, np.float64), np.dtype(np.float32): (1, np.float32),
                 np.dtype(ml_dtypes.bfloat16): (2, np.uint16)}

_THRESHOLD_CACHE: dict = {}


def _overflow_threshold(fmt: Any) -> float:
    """The smallest float64 magnitude ``T`` whose rounding to ``fmt`` is not finite (``inf`` when
    none is): an element is compared exactly when its output is finite and ``|r| < T``.

    Rounding to nearest carries values up to the midpoint between ``max_finite`` and the next
    (unrepresentable) step ``2^(emax+1)`` to ``max_finite``; whether the midpoint itself overflows
    depends on the format's tie rule, so both candidates are probed with :func:`numstd.formats.round_to`.
    """
    t = _THRESHOLD_CACHE.get(fmt.name)
    if t is None:
        from ..core.formats import round_to

        def finite(x: float) -> bool:
            return bool(np.isfinite(np.asarray(round_to(np.array([x]), fmt), dtype=np.float64))[0])

        mid = fmt.max_finite + math.ldexp(1.0, fmt.emax - fmt.p)
        if math.isinf(mid):
            t = math.inf
        elif not finite(mid):
            t = mid
        elif not finite(math.nextafter(mid, math.inf)):
            t = math.nextafter(mid, math.inf)
        elif finite(1e308):
            t = math.inf  # a saturating rounding: nothing overflows
        else:  # pragma: no cover - every format of the table is one of the cases above (tested)
            from ..core.errors import FormatError

            raise FormatError(f"{fmt.name}: rounding overflows neither at the midpoint above max_finite nor "
                              "just past it; add the format's overflow rule to criteria._overflow_threshold")
        _THRESHOLD_CACHE[fmt.name] = t
    return t


@dataclass
class JudgeResult:
    """Totals over all chunks, ready for the criteria."""

    ulp: UlpDistribution
    n_elements: int
    n_nonfinite: int
    n_compared: int
    violations: int
    normalized_max: float
    special_mismatch: int
    nan_where_finite: int
    signed_zero_mismatch: int
    worst: list = field(default_factory=list)
    n_distinct: int = -1  # distinct output values in the bias statistic (-1: not counted)
    rows: int = -1  # output rows (all axes but the last; -1: unknown)
    hull_violations: int = 0  # outputs outside the convex hull of v's rows (attention; see hull_violations)
    spilled: int = 0  # non-finite outputs allowed where intermediates overflow (see spill_mask)
    exited: int = 0  # 0 or non-finite outputs after a range exit, not judged (see exit_mask)
    constant_shifts: dict = field(default_factory=dict)  # constant -> mean shift over the bias sample, ulp
    row_bias: "RowBias | None" = None  # the row_bias statistic (standards that declare it; see row_groups)
    bias_rows: "BiasRows | None" = None  # the bias sample's row means (standards with bias_rows; see scan_rows)


class Judge:
    """Per-element judging, chunk by chunk (chunks must arrive in C order of the output).

    Parameters
    ----------
    out_fmt : numstd.formats.Format
        The standard's output format (ULPs and overflow are in it).
    out_shape : tuple
    signed_zero : bool
    native : bool, optional
        Use the compiled fused loop (:mod:`numstd.native`); default: when it is built and
        ``NUMSTD_NATIVE=0`` is not set.  Both paths give bit-identical results.
    """

    def __init__(self, out_fmt: Any, out_shape: tuple, signed_zero: bool = False, native: bool | None = None) -> None:
        self.fmt = out_fmt
        self.shape = out_shape
        self.signed_zero = signed_zero
        self.dist = DistributionAccumulator()
        self.n = 0
        self.nonfinite = 0
        self.compared = 0
        self.violations = 0
        self.norm_max = 0.0
        self.special = 0
        self.nan_finite = 0
        self.sz = 0
        self.hull = 0  # outputs outside the convex hull of the values (add_hull)
        self.spilled = 0  # non-finite outputs where the accumulate format's intermediates overflow (spill_mask)
        self._spill: np.ndarray | None = None  # the current chunk's spill mask, flat
        self.exited = 0  # 0 or non-finite outputs after a range exit (exit_mask): not judged
        self._exit_finite = 0  # (of them, finite outputs: NaN for the specials path, left out of n_nonfinite)
        self._shift_sum: dict[str, int] = {}  # constant -> Σ sign(r)·shift/ulp(r) · 2^32 over the bias sample
        self._shift_n = 0
        # row_bias (standards that declare it): groups (L, inner), open groups {g: [seen, kept, Σq]},
        # closed groups: count, Σ t_g (2^-30), Σ t_g (2^-20) and Σ t_g² (2^-40), exact integers
        self._groups: tuple[int, int] | None = None
        self._rel = False  # the groups carry u_acc·|r|/B (row_bias_rel)
        self._row_rel = math.nan  # the allowed shared relative error with row_bias_drift's K (criteria.row_bias_rel)
        self._rws = np.empty((2, 0))  # row_bias temporaries, reused across chunks
        self._open: dict[int, list] = {}
        self._rows = [0, 0, 0, 0, 0]  # (+ Σ of the groups' mean u_acc·|r|/B, 2^-30, with row_bias_rel)
        # bias_rows: rows (L, inner) and per row the bias sample's count and Σ sign(r)·e/ulp (2^-24), exact
        self._brows: tuple[int, int] | None = None
        self._bsum = np.zeros(0, dtype=np.int64)
        self._bcnt = np.zeros(0, dtype=np.int64)
        self._worst: list = []  # heap of (normalized, -flat_index, payload)
        # (a - r) / ulp(r) of finite values can overflow float64 only where the format's range
        # spans nearly all of float64's: the error of a value near max_finite in ulps of the tiniest
        self._may_spill = out_fmt.emax + 3 - (out_fmt.emin - out_fmt.p + 1) >= 1023
        from ..core.native import compiled

        self._native = compiled() if native is None or native else None
        if native and self._native is None:
            raise RuntimeError("numstd._native is not built (pip install needs a C compiler); use native=None")
        self._ws: dict = {}
        # hashed bitmap of the bias sample's output values: one bool per hash (numpy path) or packed,
        # bit h & 7 of byte h >> 3 (compiled judge)
        self._seen = (np.zeros(_DISTINCT_BINS // 8, dtype=np.uint8) if self._native is not None
                      else np.zeros(_DISTINCT_BINS, dtype=bool))

    @property
    def native(self) -> bool:
        """Whether this judge uses the compiled loop (which releases the GIL while it runs)."""
        return self._native is not None

    def add_hull(self, count: int) -> None:
        """Count outputs outside the convex hull of the values (:func:`hull_violations` of a chunk)."""
        self.hull += int(count)

    def add(self, actual: np.ndarray, ref: np.ndarray, bound: np.ndarray, chunk_index: tuple,
            ulp: np.ndarray | None = None, pre_rounding: Any = None, bias_kappa: float = 8.0,
            shifts: dict | None = None, spill: Any = None, row_groups: tuple | None = None,
            bias_rows: tuple | None = None, range_exit: Any = None) -> None:
        """Judge one chunk: ``actual`` (the output's values in any float dtype, widened exactly),
        ``ref`` (float64 exact values), ``bound`` (B_i, broadcastable), ``chunk_index`` (the output
        index of the chunk), ``ulp`` (``ulp(ref)`` in the output format when the caller has it; the
        compiled judge computes it from ``ref``'s exponent bits instead).  The elements that enter the
        bias statistic are those with a normal reference and, when ``pre_rounding`` (``E_i``,
        broadcastable) is given, ``E_i <= bias_kappa * ulp(r_i)`` (see :func:`judge_chunk`);
        ``shifts`` (:func:`constant_shifts`) are averaged over the same elements; ``spill``
        (:func:`spill_mask`, broadcastable) marks where a non-finite output is allowed; ``row_groups``
        (``(op, params)``) adds the chunk to the ``row_bias`` statistic (:func:`row_groups`);
        ``bias_rows`` (``(op, params)``) sums the bias sample per row (:func:`scan_rows`); ``range_exit``
        (:func:`exit_mask`, broadcastable) marks where a running product may have left the accumulate
        format's range: a 0 or non-finite output there is counted as ``exited`` and not judged (its
        output and reference enter the judge as NaN, a matching special, and leave every statistic;
        :meth:`_drop_exited`)."""
        from ..core.ulp import ulp as ulp_of

        shape = np.shape(actual)
        raw = np.asarray(actual)
        native = self._native is not None
        if native and raw.dtype in _NATIVE_KINDS and not self.signed_zero:
            a = np.ascontiguousarray(raw).reshape(-1)  # widened exactly inside the compiled loop
        else:
            a = np.ascontiguousarray(raw, dtype=np.float64).reshape(-1)
        r = _flat(ref, shape)
        # (the compiled judge computes ulp(r) itself from r's exponent bits: reading it costs more)
        u = None if native else ulp_of(r, self.fmt) if ulp is None else _flat(ulp, shape, scalar=True)
        self.n += a.size
        if a.size == 0:
            return
        if self.signed_zero:
            z = (a == 0) & (r == 0)
            self.sz += int((np.signbit(a[z]) != np.signbit(r[z])).sum())
        b = _flat(bound, shape, scalar=True)
        if range_exit is not None:
            a, r = self._drop_exited(a, r, b, range_exit, shape)
        pre = None if pre_rounding is None else _flat(pre_rounding, shape, scalar=True)
        self._spill = None if spill is None else np.broadcast_to(np.asarray(spill, dtype=bool), shape).reshape(-1)
        if shifts is not None:
            self._add_shifts(a, r, ulp_of(r, self.fmt) if u is None else u, pre, bias_kappa, shifts, shape)
        if bias_rows is not None:
            self._add_bias_rows(a, r, ulp_of(r, self.fmt) if u is None else u, pre, bias_kappa, chunk_index, shape,
                                bias_rows)
        before = (self.compared, self.violations)
        rows = None if row_groups is None or not native else self._native_rows(chunk_index, shape, row_groups, a.size)
        if native:
            self._add_native(a, r, b, pre, bias_kappa, chunk_index, shape, rows)
        else:
            self._add_numpy(a, r, b, u, pre, bias_kappa, chunk_index, shape)
        if rows is not None:  # the compiled judge summed the row_bias terms in the same pass
            self._finish_native_rows(rows, a.size)
        elif row_groups is not None:
            # a clean chunk (every element compared, none beyond its bound) needs no mask and no clip
            clean = self.compared - before[0] == a.size and self.violations == before[1]
            self._add_rows(a, r, b, chunk_index, shape, row_groups, clean)

    def _drop_exited(self, a: np.ndarray, r: np.ndarray, b: np.ndarray, mask: Any,
                     shape: tuple) -> tuple[np.ndarray, np.ndarray]:
        """``(a, r)`` with the elements after a range exit (``mask``, :func:`exit_mask`) set to NaN in both (copies;
        :meth:`add`) and counted in ``exited`` where the output is 0 or non-finite, or finite within
        its bound ``b`` of a reference that rounds beyond the output format's range (the allowance
        there, ``subabs``, can straddle the overflow threshold: a finite output is then a legitimate
        rounding, which the specials comparison alone would reject)."""
        m = np.broadcast_to(np.asarray(mask, dtype=bool), shape).reshape(-1)
        free, edge = exit_split(m, a, r, self.fmt)
        fin = np.isfinite(a)
        with np.errstate(invalid="ignore", over="ignore"):
            if edge.any():
                at = np.asarray(a[edge], dtype=np.float64)
                edge[edge] = np.abs(at - r[edge]) <= np.broadcast_to(b, a.shape)[edge]
                free |= edge
        n = int(np.count_nonzero(free))
        if not n:
            return a, r
        self.exited += n
        self._exit_finite += int(np.count_nonzero(free & fin))
        a, r = a.copy(), r.copy()
        a[free] = np.nan
        r[free] = np.nan
        return a, r

    def _add_numpy(self, a, r, b, u, pre, kappa, chunk_index, shape) -> None:
        n = a.size
        b, u = np.broadcast_to(b, n), np.broadcast_to(u, n)
        ar = np.abs(r)
        both = np.isfinite(a) & (ar < _overflow_threshold(self.fmt))  # NaN references: False
        idx = None
        if not both.all():
            off = np.flatnonzero(~both)
            self._specials(a[off], r[off], off)
            idx = np.flatnonzero(both)
            a, r, ar, b, u = a[idx], r[idx], ar[idx], b[idx], u[idx]
            if pre is not None and pre.size > 1:
                pre = pre[idx]
        if a.size == 0:
            return
        self.compared += a.size
        norm, e_ulp = _measure(a, r, b, u, self._may_spill)
        self.violations += int(np.count_nonzero(norm > 1.0))
        chunk_max = float(norm.max())
        self.norm_max = max(self.norm_max, chunk_max)
        # bias is a statement about rounding in the normal range: references below the smallest
        # normal (where flushing may be allowed and the ULP is constant) do not enter the signed mean
        keep = ar >= self.fmt.smallest_normal
        if pre is not None:
            keep &= pre <= kappa * u
        self.dist.add(e_ulp, r, keep)
        sample = a[keep]
        if sample.size:
            h = (sample.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - _DISTINCT_BITS)
            self._seen[h.astype(np.intp)] = True
        if len(self._worst) < WORST_K or chunk_max > self._worst[0][0]:
            k = min(WORST_K, norm.size)
            # the k largest, ties broken toward the earlier element (as the heap does): an
            # argpartition alone picks among tied values arbitrarily, which made the reported
            # offenders depend on the chunk size
            thr = np.partition(norm, norm.size - k)[norm.size - k]
            above = np.flatnonzero(norm > thr)
            top = np.concatenate([above, np.flatnonzero(norm == thr)[: k - above.size]])
            self._push_worst(top if idx is None else idx[top], norm[top], a[top], r[top], e_ulp[top], b[top],
                             chunk_index, shape)

    def _add_native(self, a, r, b, pre, kappa, chunk_index, shape, rows: tuple | None = None) -> None:
        from ..core.ulp import _spacing_params, ulp as ulp_of

        n = a.size
        ws = self._workspace(n)
        d = self.dist
        f = self.fmt
        kind, view = _NATIVE_KINDS[a.dtype]
        (compared, violations, norm_max, max_abs, scount, afill, nab, sfill, nsb, nskip, ntop) = self._native.judge(
            a.view(view), kind, r, b, pre, float(kappa), float(f.smallest_normal), _overflow_threshold(f),
            self._may_spill, self._seen, d._hist, d._abs.buf, d._abs.fill, d._signed.buf, d._signed.fill,
            ws["ablk"], ws["sblk"], ws["skip"], ws["top"], *_spacing_params(f), None if rows is None else rows[0])
        cap = ws["ablk"].size
        d._abs.fill, d._signed.fill = afill, sfill
        d._abs.extend(ws["ablk"][:nab].reshape(1, -1))
        d._signed.extend(ws["sblk"].reshape(2, cap)[:, :nsb])
        if nskip:
            pos = ws["skip"][:nskip]
            self._specials(a[pos].astype(np.float64), r[pos], pos)
        if not compared:
            return
        d.count += compared
        d.signed_count += scount
        d.max = max(d.max, max_abs)
        self.compared += compared
        self.violations += violations
        self.norm_max = max(self.norm_max, norm_max)
        if len(self._worst) < WORST_K or norm_max > self._worst[0][0]:
            pos = ws["top"][:ntop].copy()
            bt = b[pos] if b.size > 1 else np.broadcast_to(b, ntop)
            ut = np.asarray(ulp_of(r[pos], f), dtype=np.float64)
            at = a[pos].astype(np.float64)
            norm, e_ulp = _measure(at, r[pos], bt, ut, self._may_spill)
            self._push_worst(pos, norm, at, r[pos], e_ulp, bt, chunk_index, shape)

    def _bias_sample(self, a, r, u, pre, kappa) -> tuple[np.ndarray, np.ndarray]:
        """``(u, keep)``: ``ulp(r)`` broadcast to the chunk and the mask of its bias sample (the elements
        ``_add_numpy`` and the compiled judge keep: finite output, finite normal reference,
        ``E_i <= κ ulp(r_i)``)."""
        u = np.broadcast_to(np.asarray(u, dtype=np.float64).reshape(-1) if np.ndim(u) else u, a.shape)
        ar = np.abs(r)
        with np.errstate(invalid="ignore"):
            keep = np.isfinite(a) & (ar < _overflow_threshold(self.fmt)) & (ar >= self.fmt.smallest_normal)
            if pre is not None:
                keep &= np.broadcast_to(pre, a.shape) <= kappa * u
        return u, keep

    def _add_shifts(self, a, r, u, pre, kappa, shifts, shape) -> None:
        """Sum the constant shifts over this chunk's bias sample (the elements ``_add_numpy`` and the
        compiled judge keep: finite output, finite normal reference, ``E_i <= κ ulp(r_i)``), exactly
        in integers of 2^-32 ulp."""
        u, keep = self._bias_sample(a, r, u, pre, kappa)
        self._shift_n += int(np.count_nonzero(keep))
        sign = np.sign(r[keep])
        for name, d in shifts.items():
            s = sign * _flat(d, shape)[keep] / u[keep]
            q = np.rint(np.clip(s, -_SHIFT_CLIP, _SHIFT_CLIP) * _SHIFT_SCALE).astype(np.int64)
            self._shift_sum[name] = self._shift_sum.get(name, 0) + int(q.sum())

    def _add_bias_rows(self, a, r, u, pre, kappa, chunk_index, shape, brows) -> None:
        """Sum this chunk's bias sample per row (``bias_rows``): the elements ``_add_numpy`` and the
        compiled judge keep (as :meth:`_add_shifts` selects them), each ``sign(r)·(a − r)/ulp(r)``
        clipped to ±2^16 ulp, in integers of 2^-24 ulp (exact, so the totals do not depend on the
        chunking nor on the path)."""
        if self._brows is None:
            self._brows = scan_rows(brows[0], brows[1], self.shape)
            groups = max(1, math.prod(self.shape)) // max(1, self._brows[0])
            self._bsum = np.zeros(groups, dtype=np.int64)
            self._bcnt = np.zeros(groups, dtype=np.int64)
        length, inner = self._brows
        af = a if a.dtype == np.float64 else a.astype(np.float64)
        u, keep = self._bias_sample(af, r, u, pre, kappa)
        idx = np.flatnonzero(keep)
        if idx.size == 0:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            e = (af[idx] - r[idx]) / u[idx]
        e = np.where(r[idx] < 0, -e, e)
        q = np.rint(np.clip(e, -_BROW_CLIP, _BROW_CLIP) * _BROW_SCALE).astype(np.int64)
        f0 = _flat_indices(chunk_index, self.shape, shape)
        f = f0 + idx if np.ndim(f0) == 0 else np.asarray(f0, dtype=np.int64)[idx]
        g = (f // (length * inner)) * inner + f % inner
        np.add.at(self._bsum, g, q)
        self._bcnt += np.bincount(g, minlength=self._bcnt.size)

    def _bias_rows_result(self) -> "BiasRows | None":
        if self._brows is None:
            return None
        ok = self._bcnt > 0
        rows = int(np.count_nonzero(ok))
        if rows < 2:
            return BiasRows(rows, math.nan, self._brows[0])
        means = self._bsum[ok] / _BROW_SCALE / self._bcnt[ok]  # (exact integers: the same whatever the chunking)
        return BiasRows(rows, float(np.std(means, ddof=1)), self._brows[0])

    def _add_rows(self, a, r, b, chunk_index, shape, groups, clean: bool = False) -> None:
        """Add a chunk to the ``row_bias`` statistic: ``t_i = sign(r_i)·(a_i − r_i)/B_i`` clipped to
        [−1, 1] in integers of 2^-30 over the finite elements with a nonzero finite reference,
        summed per group; a group is closed (its mean ``t_g``, floored to 2^-30, added to the totals)
        once all its ``L`` elements have been seen, in this chunk or across chunks."""
        if self._groups is None:
            self._groups = row_groups(groups[0], groups[1], self.shape)
            self._row_rel = float(groups[3]) if len(groups) > 3 else math.nan
        length, inner = self._groups
        n = a.size
        if a.dtype not in (np.float32, np.float64):  # (16-bit outputs: widened exactly)
            a = a.astype(np.float64)
        bb = np.broadcast_to(b, a.shape)
        if self._rws.shape[1] < n:  # reused float64 temporaries (fresh ones cost more in page faults)
            self._rws = np.empty((2, n))
        t, ar = self._rws[0, :n], self._rws[1, :n]
        positive = False
        if clean:  # every output finite and within its bound: only zero references are left out
            lo = float(r.min())
            positive = lo > 0
            every = positive or bool(r.all())
        if not clean or not every:
            np.abs(r, out=ar)
            keep = ar < _overflow_threshold(self.fmt)  # (False for NaN references)
            keep &= r != 0
            keep &= np.isfinite(a)
            every = bool(keep.all())
        else:
            keep = None
        zero_bound = not bb.min() > 0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            np.subtract(a, r, out=t)
            np.divide(t, bb, out=t)
        if not every:
            t[~keep] = 0.0
        if not every or zero_bound:  # 0/0 (an exact element with a zero bound): no error
            t[np.isnan(t)] = 0.0
        if not positive:
            np.negative(t, out=t, where=r < 0)
        if not clean or zero_bound:  # (|t| ≤ 1 already where every element meets its bound)
            np.clip(t, -1.0, 1.0, out=t)
        t *= 2.0**_ROW_BITS
        q = np.rint(t, out=t)  # integers |q| ≤ 2^30, held in float64
        dq = None
        if len(groups) > 2:  # row_bias_rel: u_acc·|r_i|/B_i, the t_i of a relative error of one u_acc
            dq = np.abs(r, out=ar)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                dq *= groups[2]
                np.divide(dq, bb, out=dq)
            if not every:
                dq[~keep] = 0.0
            if not every or not bb.min() > 0:
                dq[np.isnan(dq)] = 0.0
            np.clip(dq, 0.0, 1.0, out=dq)
            dq *= 2.0**_ROW_BITS
            np.rint(dq, out=dq)
        if length == 1 and inner == 1:  # every element its own group: closed at once
            sel = slice(None) if every else keep
            self._close(q[sel].astype(np.int64), None if dq is None else dq[sel].astype(np.int64))
            return
        f0 = _flat_indices(chunk_index, self.shape, shape)
        if inner == 1 and np.ndim(f0) == 0:  # a contiguous run of whole or partial rows: boundaries at multiples of L
            first = (-int(f0)) % length
            starts = np.arange(first, n, length, dtype=np.int64)
            if first:
                starts = np.concatenate([[0], starts])
            ids = (int(f0) + starts) // length
        else:
            f = f0 + np.arange(n, dtype=np.int64) if np.ndim(f0) == 0 else np.asarray(f0, dtype=np.int64)
            g = (f // (length * inner)) * inner + f % inner
            if inner > 1:
                order = np.argsort(g, kind="stable")
                g, q = g[order], q[order]
                keep = None if keep is None else keep[order]
                dq = None if dq is None else dq[order]
            starts = np.concatenate([[0], np.flatnonzero(np.diff(g)) + 1])
            ids = g[starts]
        seen = np.diff(np.append(starts, n))
        kept = seen if every else np.add.reduceat(keep.astype(np.int64), starts)
        # group sums of integers |q| ≤ 2^30: exact in float64 while a group's run in this chunk is at most
        # 2^22 elements (every partial sum an integer below 2^53, whatever the summation order)
        exact = (lambda x: np.add.reduceat(x, starts).astype(np.int64)) if length <= 1 << 22 else \
            (lambda x: np.add.reduceat(x.astype(np.int64), starts))
        sums = exact(q)
        dsums = np.zeros_like(sums) if dq is None else exact(dq)
        self._add_segments(ids, seen, kept, sums, dsums, dq is not None)

    def _native_rows(self, chunk_index: tuple, shape: tuple, groups: tuple, n: int) -> tuple | None:
        """The compiled judge's ``row_bias`` arguments for a chunk, or None where :meth:`_add_rows`
        must do it: groups of ``length`` consecutive elements (``inner == 1``) and a chunk that is one
        contiguous run of the output.  ``(args, starts, f0, rel)``: the judge's
        ``(length, first, urel, sums, kept, dsums)`` (the same per-element integers ``q``, ``dq`` and
        the same exact sums as :meth:`_add_rows`, per segment: ``[0, first)``, then runs of
        ``length``), the segments' first positions, the chunk's first flat index."""
        if self._groups is None:
            self._groups = row_groups(groups[0], groups[1], self.shape)
            self._row_rel = float(groups[3]) if len(groups) > 3 else math.nan
        length, inner = self._groups
        if inner != 1:
            return None
        f0 = 0 if length == 1 else _flat_indices(chunk_index, self.shape, shape)
        if np.ndim(f0) != 0:
            return None
        f0 = int(f0)
        first = (-f0) % length
        if length == 1:
            starts = None
            m = n
        else:
            starts = np.arange(first, n, length, dtype=np.int64)
            if first:
                starts = np.concatenate([[0], starts])
            m = starts.size
        out = np.empty((3, m), dtype=np.int64)
        urel = groups[2] if len(groups) > 2 else None
        return ((length, first, -1.0 if urel is None else float(urel), out[0], out[1], out[2]), starts, f0,
                urel is not None)

    def _finish_native_rows(self, rows: tuple, n: int) -> None:
        """Close or keep open the groups of the segment sums the compiled judge wrote (:meth:`_native_rows`)."""
        (length, _first, _urel, sums, kept, dsums), starts, f0, rel = rows
        if length == 1:  # every element its own group: closed at once
            ok = kept > 0
            self._close(sums[ok], dsums[ok] if rel else None)
            return
        seen = np.diff(np.append(starts, n))
        self._add_segments((f0 + starts) // length, seen, kept, sums, dsums, rel)

    def _add_segments(self, ids: np.ndarray, seen: np.ndarray, kept: np.ndarray, sums: np.ndarray,
                      dsums: np.ndarray, rel: bool) -> None:
        """Close the groups that a chunk's segments (group ids ``ids``, ``seen`` elements of which
        ``kept`` kept, integer sums ``sums``/``dsums``) complete; keep the rest open across chunks."""
        length = self._groups[0]
        whole = seen == length
        ok = whole & (kept > 0)
        self._close(np.floor_divide(sums[ok], kept[ok]), np.floor_divide(dsums[ok], kept[ok]) if rel else None)
        for k in np.flatnonzero(~whole):
            acc = self._open.setdefault(int(ids[k]), [0, 0, 0, 0])
            acc[0] += int(seen[k])
            acc[1] += int(kept[k])
            acc[2] += int(sums[k])
            acc[3] += int(dsums[k])
            if acc[0] >= length:
                del self._open[int(ids[k])]
                self._close_open(acc, rel)

    def _close_open(self, acc: list, rel: bool) -> None:
        """Close a group gathered across chunks (``[seen, kept, Σq, Σdq]``)."""
        if acc[1]:
            self._close(np.array([acc[2] // acc[1]], dtype=np.int64),
                        np.array([acc[3] // acc[1]], dtype=np.int64) if rel else None)

    def _close(self, tg: np.ndarray, dg: np.ndarray | None = None) -> None:
        """Add closed groups' means ``tg`` (and ``dg`` of ``u_acc·|r|/B``; integers of 2^-30) to the
        exact totals."""
        if tg.size == 0:
            return
        t20 = tg >> _ROW_SQ_SHIFT
        self._rows[0] += int(tg.size)
        self._rows[1] += _isum(tg)
        self._rows[2] += _isum(t20)
        self._rows[3] += _isum(t20 * t20)
        if dg is not None:
            self._rows[4] += _isum(dg)
            self._rel = True

    def _row_result(self) -> "RowBias | None":
        if self._groups is None:
            return None
        for acc in sorted(self._open.values()):  # groups never completed (a partial output): as they are
            self._close_open(acc, self._rel)
        self._open.clear()
        n, s30, s20, q20, d30 = self._rows
        if n == 0:
            return RowBias(0, math.nan, math.nan, self._groups[0], rel=self._row_rel)
        mean = s30 / n / 2.0**_ROW_BITS
        sd = math.sqrt(max(0, n * q20 - s20 * s20) / (n * (n - 1))) / 2.0**(_ROW_BITS - _ROW_SQ_SHIFT) \
            if n > 1 else math.nan
        return RowBias(n, mean, sd, self._groups[0], d30 / n / 2.0**_ROW_BITS if self._rel else math.nan,
                       self._row_rel)

    def _workspace(self, n: int) -> dict:
        """Output arrays of the compiled judge, reused across chunks (grown when a chunk is larger)."""

        if self._ws.get("n", -1) < n:
            cap = n // BLOCK + 1
            self._ws = {"n": n, "ablk": np.empty(cap), "sblk": np.empty(2 * cap),
                        "skip": np.empty(n, dtype=np.int64), "top": np.empty(WORST_K, dtype=np.int64)}
        return self._ws

    def _specials(self, av: np.ndarray, r: np.ndarray, pos: np.ndarray) -> None:
        """Account for elements (at positions ``pos`` of the chunk) whose output ``av`` (float64) or
        rounded reference is not finite; a non-finite output where the chunk's ``spill`` mask allows
        it (:func:`spill_mask`) counts as ``spilled``, not as a mismatch."""
        self.nonfinite += av.size
        ev = rounded_specials(r, self.fmt)
        same = (np.isnan(av) & np.isnan(ev)) | (av == ev)
        if self._spill is not None:
            allowed = self._spill[pos] & ~np.isfinite(av) & np.isfinite(ev)
            self.spilled += int(np.count_nonzero(allowed))
            same |= allowed
        self.special += int((~same).sum())
        self.nan_finite += int((np.isnan(av) & np.isfinite(ev) & ~same).sum())

    def _push_worst(self, local, norm, a, r, e_ulp, b, chunk_index, chunk_shape) -> None:
        """Offer the elements at positions ``local`` of the chunk (values given) to the worst-K heap."""
        multi = np.unravel_index(local, chunk_shape) if chunk_shape else ()
        offs = [sl.start or 0 if isinstance(sl, slice) else sl for sl in chunk_index]
        for t in range(len(local)):
            full: list[int] = []
            mi = 0
            for sl, off in zip(chunk_index, offs):
                if isinstance(sl, slice):
                    full.append(int(multi[mi][t]) + int(off))
                    mi += 1
                else:
                    full.append(int(sl))
            flat = int(np.ravel_multi_index(full, self.shape)) if self.shape else 0
            item = (float(norm[t]), -flat, tuple(full), float(a[t]), float(r[t]), float(e_ulp[t]), float(b[t]))
            if len(self._worst) < WORST_K:
                heapq.heappush(self._worst, item)
            elif item[:2] > self._worst[0][:2]:
                heapq.heapreplace(self._worst, item)

    def result(self) -> JudgeResult:
        worst = sorted(self._worst, key=lambda t: (-t[0], -t[1]))
        return JudgeResult(
            ulp=self.dist.result(), n_elements=self.n, n_nonfinite=self.nonfinite - self._exit_finite,
            n_compared=self.compared, violations=self.violations, normalized_max=self.norm_max,
            special_mismatch=self.special, nan_where_finite=self.nan_finite, signed_zero_mismatch=self.sz,
            n_distinct=int(np.count_nonzero(np.unpackbits(self._seen) if self.native else self._seen)),
            rows=int(np.prod(self.shape[:-1])) if len(self.shape) >= 2 else -1,
            hull_violations=self.hull, spilled=self.spilled, exited=self.exited,
            constant_shifts={k: v / _SHIFT_SCALE / self._shift_n for k, v in sorted(self._shift_sum.items())}
            if self._shift_n else {},
            row_bias=self._row_result(),
            bias_rows=self._bias_rows_result(),
            worst=[Offender(index=w[2], actual=w[3], reference=w[4], ulp_error=w[5], normalized=w[0], bound=w[6])
                   for w in worst],
        )


def effective_sample_size(op: str, n: int, n_distinct: int = -1, rows: int = -1) -> int:
    """How many independent rounding errors a bias sample of ``n`` elements holds.

    Equal outputs have equal errors, so ``n`` is capped by the number of distinct output values.
    (Correlation through shared row computation is kept out of the sample by ``bias_kappa``: only
    elements whose final rounding dominates the model enter it.  Where that is not enough — the
    elements of a scan's row share their prefix's errors — a standard sets ``bias_rows`` and the
    standard error is row-clustered instead, :func:`bias_standard_error`; ``op`` and ``rows`` are
    unused, kept for callers.)
    """
    n_eff = n if n_distinct < 0 else min(n, n_distinct)
    return max(1, n_eff)


def evaluate(std: Any, res: JudgeResult, actual_format: str | None) -> list[CriterionResult]:
    """The criterion results of standard ``std`` for the totals ``res``."""
    c = std.criteria
    out: list[CriterionResult] = []
    dtype_ok = actual_format == std.output.name
    out.append(CriterionResult("dtype", dtype_ok, 0.0 if dtype_ok else 1.0, 0.0,
                               f"output format {actual_format} " + ("matches" if dtype_ok else f"is not the standard's {std.output.name}")))
    bad = res.special_mismatch + res.signed_zero_mismatch
    msg = (f"{res.special_mismatch} non-finite mismatch(es) ({res.nan_where_finite} NaN where the reference is finite)"
           if res.special_mismatch else "non-finite values where the reference has them")
    if c.signed_zero:
        msg += f"; {res.signed_zero_mismatch} signed-zero mismatch(es)"
    if res.spilled:
        msg += (f"; {res.spilled:,} non-finite output(s) where the {std.accumulate.name} intermediates overflow "
                "(allowed: intermediate_overflow)")
    exited = ""
    if res.exited:
        exited = (f"; {res.exited:,} element(s) after a product of contiguous factors may have left the "
                  f"{std.accumulate.name} range not judged as specials: 0 or non-finite outputs, or finite within the "
                  "bound of a reference beyond the output's range (range_exit)")
        msg += exited
    out.append(CriterionResult("specials", bad == 0, float(bad), 0.0, msg))
    allowed = math.floor(c.bound_max_fraction * res.n_compared)
    out.append(CriterionResult(
        "bound", res.violations <= allowed, float(res.violations), float(allowed),
        f"{res.violations:,} of {res.n_compared:,} elements exceed the error bound (allowed {allowed:,}); "
        f"max |error|/bound = {res.normalized_max:.3g}" + exited))
    u = res.ulp
    n_few = effective_sample_size(std.op, u.signed_count, res.n_distinct, res.rows) if u.signed_count else 0
    br = res.bias_rows
    if u.signed_count and c.bias_rows and c.bias_rows_t and (br is None or br.rows < 2):
        out.append(CriterionResult(
            "bias", True, 0.0, math.inf,
            f"not tested: the bias sample lies in {0 if br is None else br.rows} row(s), whose elements share the "
            "row's rounding (bias_rows); the spread of that shared error needs at least 2 rows to estimate "
            "(the bound judges them)"))
    elif u.signed_count and n_few < c.bias_min_n:
        out.append(CriterionResult(
            "bias", True, 0.0, math.inf,
            f"not tested at the element level: {n_few:,} independent element(s) in the bias sample, fewer than "
            f"bias_min_n = {c.bias_min_n} (a mean of so few rounding errors says nothing about the rounding; "
            "the bound judges them)"))
    elif u.signed_count:
        sd = max(u.std_signed, std.model.rho / math.sqrt(3.0))
        n_eff = effective_sample_size(std.op, u.signed_count, res.n_distinct, res.rows)
        limit = c.bias_tau + c.bias_z * sd / math.sqrt(n_eff)
        se, se_el, se_row = bias_standard_error(std, res, n_eff)
        if c.bias_rows_t and se_row:  # the larger of the two tests' allowances (bias_rows_z)
            limit = max(limit, c.bias_tau + bias_rows_z(c, res.bias_rows.rows) * se_row)
        elif se_row > se_el:  # (bias_rows: the rows, not the elements, are the independent draws)
            limit = c.bias_tau + c.bias_z * se_row
        distinct = f", {n_eff:,} distinct values" if n_eff < u.signed_count else ""
        if getattr(c, "bias_rows", False) and res.bias_rows is not None and se_row:
            br = res.bias_rows
            distinct += (f", {br.rows:,} rows (row-clustered standard error {se:.3g}: the larger of the element-wise "
                         f"{se_el:.3g} and the row means' sd {br.sd:.3g}/√{br.rows:,} = {se_row:.3g})")
        shifts = res.constant_shifts
        if shifts:
            excess = bias_excess(u.mean_signed, shifts)
            ok = abs(excess) <= limit
            named = ", ".join(f"{k} {v:+.3f}" for k, v in shifts.items() if k not in (ROUNDED, STORED))
            allowed = (f"{excess:+.3f} from the nearest legitimate mean: the correctly rounded output's "
                       f"{shifts.get(ROUNDED, 0.0):+.3f}" + (f", plus the mean shift of any of the constants rounded to "
                                                             f"{std.accumulate.name} ({named})" if named else "")
                       + (f", plus the stored intermediates' mean shift {shifts[STORED]:+.3f} (a kernel that stores "
                          f"them in {std.output.name})" if STORED in shifts else "")
                       + f"; allowed ±{limit:.3f}")
            value = excess
        else:
            ok = abs(u.mean_signed) <= limit
            allowed, value = f"allowed ±{limit:.3f}", u.mean_signed
        out.append(CriterionResult(
            "bias", ok, value, limit,
            f"mean signed error {u.mean_signed:+.3f} ulp over {u.signed_count:,} elements{distinct} ({allowed})"))
    elif res.n_compared and u.count:
        out.append(CriterionResult(
            "bias", True, 0.0, math.inf,
            f"not tested at the element level: none of the {u.count:,} compared elements has both a normal "
            f"reference and an accumulation allowance E_i within bias_kappa = {c.bias_kappa:g} ulp (where E_i "
            "is larger the final rounding does not dominate, and a mean in ULPs says nothing about it)"))
    else:
        out.append(CriterionResult("bias", True, 0.0, math.inf, "no nonzero finite reference values to test bias on"))
    if c.row_bias:
        out.append(_row_bias_result(c, res.row_bias))
    if c.convex_hull:
        out.append(CriterionResult(
            "hull", res.hull_violations == 0, float(res.hull_violations), 0.0,
            f"{res.hull_violations:,} output(s) outside the convex hull of v's rows (per coordinate, within rounding)"))
    if c.ulp_max is not None:
        out.append(CriterionResult("ulp_max", u.max <= c.ulp_max, u.max, c.ulp_max,
                                   f"max |ULP error| {u.max:.3g} (allowed {c.ulp_max:g})"))
    for q, limit in sorted(c.ulp_quantiles.items()):
        if q in u.quantiles:
            v = u.quantiles[q]
        else:
            v = u.max if q >= 1 else math.nan
        ok = not (v > limit)
        out.append(CriterionResult(f"ulp_q{q:g}", ok, v, limit, f"{q:g}-quantile of |ULP error| ≤ {v:.3g} (allowed {limit:g})"))
    return out


def _row_bias_result(c: Any, rb: "RowBias | None") -> CriterionResult:
    """The ``row_bias`` criterion of the totals ``rb`` under criteria ``c``."""
    if rb is None or rb.rows < 2:
        n = 0 if rb is None else rb.rows
        return CriterionResult("row_bias", True, 0.0, math.inf,
                               f"not tested at the row level: {n} group(s) with a finite nonzero reference "
                               "(the across-group spread needs at least 2)")
    limit, zr = row_bias_limit(c.row_bias_tau, c.row_bias_z, rb, c.row_bias_rel)
    r = _allowed_rel(rb, c.row_bias_rel)  # (with row_bias_drift: the drift at this K added)
    what = f"rows of {rb.length:,}" if rb.length > 1 else "outputs (one reduction each)"
    rel = (f" + {r:.3g}·{rb.unit:.3g}, a shared relative error of {r:.3g} u_acc" if r else "")
    return CriterionResult(
        "row_bias", abs(rb.mean) <= limit, rb.mean, limit,
        f"mean normalised signed error (a − r)·sign(r)/B {rb.mean:+.4f} over {rb.rows:,} {what}, across-group sd "
        f"{rb.sd:.3g}; allowed ±{limit:.4f} (legitimate drift {c.row_bias_tau:g}{rel} + {zr:.3g}·sd/√{rb.rows:,})")
