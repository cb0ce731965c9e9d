"""The module standard ``NS-MODULE-<FORMAT>`` of :func:`numstd.grade`: errors and criteria.

For each quantile ``q`` in :data:`QUANTILES` the candidate's ``q``-quantile of ``|ULP error|``
against the float64 truth may not exceed ``factor · base_q + rho`` (``base_q``: the baseline's,
the reference run in the working dtype).  The bias criterion depends on the standard's
``[criteria] bias_mode``: ``"paired"`` (NS-MODULE-*@1) bounds ``|m_c − m_b|``, the difference of
the candidate's and the baseline's sign-adjusted mean ULP errors (:func:`paired_bias`);
``"one_sided"`` (@2) bounds only how much ``|m_c|`` exceeds the larger of ``|m_b|`` and the
correctly rounded output's own ``|m_r|`` (:func:`one_sided_bias`), so a candidate no more biased
than the baseline never fails it.  Both errors are measured against the same float64 truth, as
FlashAttention's tests compare a kernel and the same-precision PyTorch implementation against
one higher-precision reference (``err ≤ 2·err_ref + noise floor``).  See ``docs/grading.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .._version import __version__
from ..core.arrays import to_numpy
from ..core.errors import ParameterError
from ..judge.verdict import CriterionResult, Offender, Verdict

__all__ = ["QUANTILES", "module_standard", "describe_module_standard", "quantiles", "ModuleErrors", "module_errors",
           "judge_module", "paired_bias", "one_sided_bias", "accumulation_floor", "reduction_length"]

#: quantiles of |ULP error| the module standard compares (1.0 is the maximum)
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999, 1.0)
_WORST_K = 10


def module_standard(fmt: Any, standard: Any = None) -> Any:
    """The NS-MODULE standard for the working format ``fmt`` (or ``standard``: ``ID@N`` or a Standard)."""
    from ..core.formats import get_format
    from ..catalog.registry import find_standard, get_standard

    if standard is not None:
        std = get_standard(standard)
        if std.op != "module":
            raise ParameterError(f"standard {std.key} is for op {std.op!r}; grade needs an NS-MODULE-* standard")
        return std
    f = get_format(fmt)
    return find_standard("module", inputs=[f], output=f, accumulate="float32")


def describe_module_standard(std: Any) -> list[str]:
    """Lines stating what an NS-MODULE standard's fields mean (for ``numstd show`` and the docs catalog)."""
    c = std.criteria
    qs = ", ".join("max" if q == 1 else f"{q:g}" for q in QUANTILES)
    return [
        f"  errors: e_i = (y_i − t_i) / ulp_out(max(|t_i|, F)), F = max|t| · u_acc/u_out "
        f"(= {std.accumulate.u / std.output.u:g}·max|t|), t the module in float64",
        f"  quantiles ({qs}) of |e|: candidate ≤ {std.model.error.text} + {std.model.rho:g} with base = the "
        "reference's quantile in the working format",
        f"          constants: {', '.join(f'{k} = {v:g}' for k, v in sorted(std.model.constants.items()))}",
        *([f"          below {c.quantile_min_n} output elements {std.model.rho:g} becomes the accumulation floor "
           f"{std.model.rho:g}·max(1, sqrt(L)·u_acc/u_out), L = the largest float input's elements per output element"]
          if c.quantile_min_n else []),
        (f"  bias: |m_candidate| − max(|m_reference|, |m_rounded|) ≤ {c.bias_tau:g} + {c.bias_z:g}·se (one-sided: a "
         "candidate no more biased than the reference or than the correctly rounded output passes; se the larger "
         "of the element-wise and row-wise standard errors; not tested on a single element)"
         if c.bias_mode == "one_sided" else
         f"  bias: |m_candidate − m_reference| ≤ {c.bias_tau:g} + {c.bias_z:g}·se (paired differences; se the larger "
         "of the element-wise and row-wise standard errors)"),
        "  specials: non-finite only where the exact result rounds to non-finite or the reference is non-finite",
        "  also: shape and dtype of the reference; inputs unchanged; the candidate runs",
    ]


def accumulation_floor(std: Any, n: int, reduction_length: float) -> float:
    """The ULP floor added to ``error(base)`` at every quantile: ``rho``, or the accumulation floor.

    With ``n`` compared output elements below the standard's ``[criteria] quantile_min_n`` the
    baseline's quantiles are no estimate of the error distribution (the maximum of one sample is
    that sample: torch's cascade sum of a scalar loss can land 0.003 ULP from the exact value,
    another legitimate order 2 ULP).  There the floor is the a-priori bound of a reduction of
    ``L = reduction_length`` terms in any order,

        floor = rho · max(1, sqrt(L) · u_acc / u_out),

    a random-walk bound on a reduction of same-sign terms in any order: Higham & Mary (2019, Thm 3.1)
    bound the relative error of recursive summation by ``λ·sqrt(L)·u + O(u²)`` with probability at
    least ``1 − 2·exp(−λ²/2)``, and for iid same-sign terms the error's standard deviation is about
    ``u·sqrt(L)/3`` (partial sums ``S_k ≈ k·μ``, each rounded by an independent ``δ_k``, |δ_k| ≤ u),
    so ``sqrt(L)`` ULP is three of those standard deviations (Higham 2002, §4.2).  ``L`` is the largest float input's element count per output element
    (:func:`reduction_length`).  With ``n ≥ quantile_min_n`` (or ``quantile_min_n = 0``,
    versions 1 and 2) the floor is ``rho``.
    """
    rho = float(std.model.rho)
    if n >= std.criteria.quantile_min_n:
        return rho
    return rho * max(1.0, math.sqrt(max(float(reduction_length), 1.0)) * std.accumulate.u / std.output.u)


def reduction_length(input_elements: int, outputs: Sequence[Any]) -> float:
    """``L``: the largest floating-point input's element count over the float outputs' total count (≥ 1).

    A scalar loss over a (64, 1024) batch has ``L = 65536``: its one output is a sum of that many
    terms.  An elementwise module has ``L = 1``.
    """
    n_out = sum(int(np.size(y)) for y in outputs if np.asarray(y).dtype.kind in "fV")
    return max(1.0, int(input_elements) / max(n_out, 1))


def _allowed(std: Any, base_q: np.ndarray, floor: float | None = None) -> np.ndarray:
    """``error(base = base_q) + floor`` for each quantile (the standard's ``[model]``; ``floor`` = ``rho``
    unless :func:`accumulation_floor` widens it)."""
    e = np.broadcast_to(std.model.pre_rounding({"base": np.asarray(base_q, dtype=np.float64)}), np.shape(base_q))
    return np.asarray(e, dtype=np.float64) + (std.model.rho if floor is None else floor)


# ---------------------------------------------------------------------------------- judging
def quantiles(abs_errors: np.ndarray) -> np.ndarray:
    """The :data:`QUANTILES` of ``abs_errors``: the ``ceil(q·n)``-th smallest value (0 when empty)."""
    a = np.asarray(abs_errors, dtype=np.float64).reshape(-1)
    if a.size == 0:
        return np.zeros(len(QUANTILES))
    ks = sorted({max(1, math.ceil(q * a.size)) - 1 for q in QUANTILES})
    part = np.partition(a, ks)
    return np.array([part[max(1, math.ceil(q * a.size)) - 1] for q in QUANTILES])


def _classes(v: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +inf, 3 −inf."""
    c = np.zeros(v.shape, dtype=np.int8)
    c[np.isnan(v)] = 1
    c[v == np.inf] = 2
    c[v == -np.inf] = 3
    return c


def _leaves(out: Any) -> list[np.ndarray]:
    """The arrays of a module's output (a tensor, a tuple/list/dict of them, or a scalar) as numpy."""
    if isinstance(out, Mapping):
        return [leaf for k in sorted(out) for leaf in _leaves(out[k])]
    if isinstance(out, (list, tuple)):
        return [leaf for x in out for leaf in _leaves(x)]
    return [to_numpy(out, name="output")]


@dataclass
class ModuleErrors:
    """Scaled ULP errors of baseline and candidate on the elements all three runs have finite.

    ``e_i = (y_i − t_i) / ulp_out(max(|t_i|, F))`` with ``F = max|t| · u_acc / u_out`` per output
    array (the magnitude floor: an error of one accumulation-format rounding of the output's
    largest value is about one ULP at the floor).  Above ``F`` this is the ordinary ULP error.

    Attributes
    ----------
    truth, candidate : float64 arrays of the compared elements
    baseline_err, candidate_err : signed scaled ULP errors
    rounded_err : signed scaled ULP errors of the correctly rounded output ``RN(t_i)``
    spacing : the ULP each error is measured in
    position : index of each compared element in the concatenated flattened output
    row : the row (slice along the last axis, numbered across output arrays) of each compared element
    floors : F of each output array
    n_total, n_nonfinite, special_mismatch, nan_where_finite : counts
    row_width : the last axis' length where ``row`` is ``arange(n) // row_width`` (a single output
        array, every element compared), else 0
    """

    truth: np.ndarray
    candidate: np.ndarray
    baseline_err: np.ndarray
    candidate_err: np.ndarray
    spacing: np.ndarray
    position: np.ndarray
    row: np.ndarray
    floors: list
    n_total: int
    n_nonfinite: int
    special_mismatch: int
    nan_where_finite: int
    rounded_err: np.ndarray | None = None
    row_width: int = 0


def module_errors(truth: Sequence[np.ndarray], baseline: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                  std: Any) -> ModuleErrors:
    """:class:`ModuleErrors` of float output arrays of equal shapes (see :func:`judge_module`)."""
    from ..core.formats import round_to
    from ..core.ulp import ulp

    fmt = std.output
    ratio = std.accumulate.u / fmt.u
    parts: dict[str, list] = {k: [] for k in ("t", "c", "eb", "ec", "er", "sp", "pos", "row")}
    floors, offset, row_offset, nonfinite, bad, nan_fin = [], 0, 0, 0, 0, 0
    whole_rows = 0  # (the row width when every element of the one output is compared)
    for T, B, C in zip(truth, baseline, candidate):
        t = np.asarray(T, dtype=np.float64).reshape(-1)
        b = np.asarray(B, dtype=np.float64).reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            c = np.asarray(C, dtype=np.float64).reshape(-1)
        abs_t = np.abs(t)
        big = ~(abs_t < fmt.max_finite)  # what the exact result rounds to: only huge t can overflow
        if not big.any() and np.isfinite(b).all() and np.isfinite(c).all():
            # every element is compared (the classes below would all be 0 "finite"): no masks, no copies
            # but of an array that is still the caller's
            tc = t.copy() if np.may_share_memory(t, T) else t
            cc_ = c.copy() if np.may_share_memory(c, C) else c
            bc, abs_tc, where = b, abs_t, np.arange(t.size)
            whole_rows = max(int(np.shape(T)[-1]) if np.ndim(T) else 1, 1)
        else:
            whole_rows = 0
            rt = t.copy()
            if big.any():
                rt[big] = np.asarray(round_to(t[big], fmt), dtype=np.float64)
            cc, ct, cb = _classes(c), _classes(rt), _classes(b)
            mism = (cc != ct) & (cc != cb)  # non-finite only where the exact result or the baseline is
            bad += int(mism.sum())
            nan_fin += int((mism & (cc == 1)).sum())
            comp = (cc == 0) & (ct == 0) & (cb == 0)
            nonfinite += int(t.size - comp.sum())
            tc, cc_, bc = t[comp], c[comp], b[comp]
            abs_tc, where = np.abs(tc), np.flatnonzero(comp)
        floor = float(np.max(abs_tc)) * ratio if tc.size else 0.0
        sp = ulp(np.maximum(abs_tc, floor), fmt) if tc.size else np.empty(0)
        parts["t"].append(tc)
        parts["c"].append(cc_)
        parts["eb"].append((bc - tc) / sp if tc.size else np.empty(0))
        parts["ec"].append((cc_ - tc) / sp if tc.size else np.empty(0))
        parts["er"].append((np.asarray(round_to(tc, fmt), dtype=np.float64) - tc) / sp if tc.size else np.empty(0))
        parts["sp"].append(sp)
        parts["pos"].append(where + offset)
        width = max(int(np.shape(T)[-1]) if np.ndim(T) else 1, 1)
        parts["row"].append(where // width + row_offset)
        floors.append(floor)
        offset += t.size
        row_offset += max(t.size // width, 1)
    cat = {k: (v[0] if len(v) == 1 else np.concatenate(v) if v else np.empty(0)) for k, v in parts.items()}
    return ModuleErrors(cat["t"], cat["c"], cat["eb"], cat["ec"], cat["sp"], cat["pos"].astype(np.int64, copy=False),
                        cat["row"].astype(np.int64, copy=False), floors, offset, nonfinite, bad, nan_fin, cat["er"],
                        row_width=whole_rows if len(parts["t"]) == 1 else 0)


def judge_module(truth: Any, baseline: Any, candidate: Any, standard: Any, *,
                 params: Mapping[str, Any] | None = None, reduction_length: float = 1.0) -> Verdict:
    """Judge one case by a module standard (``NS-MODULE-*``).

    Parameters
    ----------
    truth, baseline, candidate : array or sequence of arrays
        The module's output(s): the reference in float64, the reference in the working format,
        the candidate.
    standard : Standard or str
    params : mapping, optional
        Recorded in the verdict (trial, distribution, seed, …).
    reduction_length : float, optional
        ``L`` of :func:`accumulation_floor` (:func:`reduction_length` of the case's inputs and
        outputs); used only with fewer than ``quantile_min_n`` output elements.

    Returns
    -------
    Verdict
        Criteria ``shape``, ``dtype``, ``specials`` (the candidate is non-finite only where the
        exact result rounds to a non-finite value or the baseline is non-finite, same class),
        ``ulp_q0.5`` … ``ulp_q1`` (the candidate's quantile of |scaled ULP error|, see
        :class:`ModuleErrors`, ≤ the standard's ``error`` at ``base`` = the baseline's quantile,
        plus ``rho``, or the accumulation floor below ``quantile_min_n`` elements) and ``bias``: with ``bias_mode = "paired"`` ``|m_c − m_b| ≤ τ + z·se``
        (:func:`paired_bias`), with ``"one_sided"`` ``|m_c| − max(|m_b|, |m_r|) ≤ τ + z·se``
        (:func:`one_sided_bias`; not tested on a single element).  Non-float outputs
        must equal the truth or the baseline exactly (criterion ``exact``).
    """
    from ..core.distribution import DistributionAccumulator

    from ..catalog.registry import get_standard

    std = get_standard(standard)
    rec = dict(params or {})
    T, B, C = (_as_list(x) for x in (truth, baseline, candidate))
    shape = T[0].shape if len(T) == 1 else (sum(t.size for t in T),)
    problem = _structure_problem(T, B, C)
    if problem:
        return _early(std, shape, None, rec, "shape", problem)
    c_fmts = sorted({str(c.dtype) for c in C if c.dtype.kind in "fV"})
    dtype_ok = all(c.dtype == b.dtype for c, b in zip(C, B))
    crit = [CriterionResult("dtype", dtype_ok, 0.0 if dtype_ok else 1.0, 0.0,
                            f"output dtype {', '.join(str(c.dtype) for c in C)} "
                            + ("matches the reference's" if dtype_ok else
                               f"is not the reference's {', '.join(str(b.dtype) for b in B)}"))]
    fl = [i for i in range(len(T)) if B[i].dtype.kind in "fV"]
    ints = [i for i in range(len(T)) if i not in fl]
    if ints:
        wrong = sum(int(((C[i] != T[i]) & (C[i] != B[i])).sum()) for i in ints)
        crit.append(CriterionResult("exact", wrong == 0, float(wrong), 0.0,
                                    f"{wrong} non-float output element(s) differ from the reference"))
    m = module_errors([T[i] for i in fl], [B[i] for i in fl], [C[i] for i in fl], std)
    crit.append(CriterionResult("specials", m.special_mismatch == 0, float(m.special_mismatch), 0.0,
                                f"{m.special_mismatch} non-finite mismatch(es) ({m.nan_where_finite} NaN where the "
                                "reference is finite)" if m.special_mismatch else
                                "non-finite values only where the reference has them"))
    base_q, cand_q = quantiles(np.abs(m.baseline_err)), quantiles(np.abs(m.candidate_err))
    floor = accumulation_floor(std, int(m.baseline_err.size), reduction_length)
    allowed = _allowed(std, base_q, floor)
    why = (f"{std.model.rho:g}" if floor == std.model.rho else
           f"{floor:.3g}, the accumulation floor rho·sqrt(L)·u_acc/u_out of L = {reduction_length:.6g} terms: "
           f"{m.baseline_err.size} element(s) < quantile_min_n = {std.criteria.quantile_min_n}")
    for q, v, lim, bq in zip(QUANTILES, cand_q, allowed, base_q):
        crit.append(CriterionResult(
            f"ulp_q{q:g}", bool(v <= lim), float(v), float(lim),
            f"{'max' if q == 1 else f'{q:g}-quantile of'} |ULP error| {v:.3g} (allowed {lim:.3g} = "
            f"{std.model.error.text} + {why} with base = the reference's {bq:.3g})"))
    crit.append(_bias(std, m))
    acc = DistributionAccumulator()
    acc.add(m.candidate_err, m.truth)
    dist = acc.result()
    ratios = np.divide(cand_q, allowed, out=np.zeros_like(cand_q), where=cand_q > 0)
    worst = _worst(T if not ints else [T[i] for i in fl], m, float(allowed[-1]))
    rec.update(dtype=std.output.name, magnitude_floor=[float(f) for f in m.floors],
               baseline={**{f"q{q:g}": float(v) for q, v in zip(QUANTILES, base_q)},
                         "mean_signed": _signed_mean(m.baseline_err, m.truth)},
               allowed={f"q{q:g}": float(v) for q, v in zip(QUANTILES, allowed)})
    if floor != std.model.rho:
        rec.update(reduction_length=float(reduction_length), accumulation_floor=float(floor))
    passed = all(x.passed for x in crit)
    n_int = sum(T[i].size for i in ints)
    return Verdict(passed=passed, standard_id=std.key, standard_sha256=std.sha256, op="module", shape=tuple(shape),
                   formats=dict(std.formats, actual=",".join(c_fmts) or None), params=rec, criteria=tuple(crit),
                   ulp=dist, normalized_max=float(ratios.max()) if ratios.size else 0.0, worst=tuple(worst),
                   n_elements=m.n_total + n_int, n_nonfinite=m.n_nonfinite,
                   message=_module_message(std, passed, crit, dist, base_q, cand_q, allowed, worst, m.n_total + n_int),
                   numstd_version=__version__)


def _as_list(x: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in (x if isinstance(x, (list, tuple)) else [x])]


def _signed_mean(err: np.ndarray, t: np.ndarray) -> float:
    nz = t != 0
    if nz.all():  # (the common case: no masked copies)
        return float(np.mean(np.where(t > 0, err, -err))) if nz.size else 0.0
    return float(np.mean(np.where(t[nz] > 0, err[nz], -err[nz]))) if nz.any() else 0.0


def _nonzero_part(nz: np.ndarray, n: int) -> Any:
    """``a -> a[nz]``, or the identity where every element is selected (the same values, no copy)."""
    return (lambda a: a) if n == nz.size else (lambda a: a[nz])


def _standard_error(d: np.ndarray, row: np.ndarray, rho: float, width: int = 0) -> tuple[float, int]:
    """``(se, R)``: standard error of ``mean(d)``, the larger of the element-wise
    ``max(sd(d), ρ/√3)/√n`` and the row-wise ``sd(row means of d)/√R`` (R rows ≥ 2).

    A row's mean is its elements' sum in element order (left to right, from +0: ``np.bincount``'s
    weighted sum) over its count.  ``width`` > 0 says that ``row`` is ``arange(n) // width`` (every
    element of one output compared, :attr:`ModuleErrors.row_width`): the sums are then the last
    column of a row-wise ``cumsum`` — the same additions in the same order — without the bins.
    """
    se = max(float(np.std(d)), rho / math.sqrt(3.0)) / math.sqrt(d.size)
    if width > 0 and d.size % width == 0:
        rows = d.size // width
        if rows >= 2:
            sums = np.cumsum(d.reshape(rows, width), axis=1)[:, -1] + 0.0  # (+0: bincount's -0 + 0 = +0)
            se = max(se, float(np.std(sums / width, ddof=1)) / math.sqrt(rows))
        return se, rows
    step = np.diff(row)
    if np.all(step >= 0):  # (module_errors numbers rows in element order: np.unique's inverse without a sort)
        inv = np.zeros(row.size, dtype=np.int64)  # (a cumsum of the booleans casts element by element: slow)
        inv[1:] = step != 0
        np.cumsum(inv, out=inv)
    else:
        _, inv = np.unique(row, return_inverse=True)
    rows = int(inv.max()) + 1
    if rows >= 2:
        means = np.bincount(inv, weights=d) / np.bincount(inv)
        se = max(se, float(np.std(means, ddof=1)) / math.sqrt(rows))
    return se, rows


def paired_bias(m: ModuleErrors, rho: float) -> dict:
    """The bias statistic of ``bias_mode = "paired"``: mean and standard error of
    ``d_i = sign(t_i)·(e_c,i − e_b,i)``.

    The standard error is the larger of the element-wise ``max(sd(d), ρ/√3)/√n`` and the row-wise
    ``sd(row means of d)/√R`` (R rows ≥ 2): an error shared by a whole row — a softmax or layer
    norm normalizer computed in another order — shifts every element of the row together, so the
    elements are not independent samples of the bias and only the rows are.

    Returns ``{"n", "rows", "diff", "se", "candidate", "baseline"}`` (the last two: the signed means).
    """
    nz = m.truth != 0
    n = int(nz.sum())
    if n == 0:
        return {"n": 0, "rows": 0, "diff": 0.0, "se": math.inf, "candidate": 0.0, "baseline": 0.0}
    part = _nonzero_part(nz, n)
    sgn = np.where(part(m.truth) > 0, 1.0, -1.0)
    sc, sb = sgn * part(m.candidate_err), sgn * part(m.baseline_err)
    d = sc - sb
    se, rows = _standard_error(d, part(m.row), rho, m.row_width if n == nz.size else 0)
    return {"n": n, "rows": rows, "diff": float(np.mean(d)), "se": se,
            "candidate": float(np.mean(sc)), "baseline": float(np.mean(sb))}


def one_sided_bias(m: ModuleErrors, rho: float) -> dict:
    """The bias statistic of ``bias_mode = "one_sided"``: how much the candidate's bias exceeds the
    larger of the baseline's and the correctly rounded output's.

    With ``s_i = sign(t_i)``, the signed means ``m_c = mean(s_i e_c,i)``, ``m_b`` (baseline) and
    ``m_r`` (``RN(t_i)``, the most accurate output there is: its mean is not 0 where the outputs
    crowd into few binades, e.g. small-variance inputs), let ``a`` be whichever of the baseline
    and ``RN(t)`` has the larger ``|m|``.  The statistic is the mean of
    ``D_i = sign(m_c)·s_i e_c,i − sign(m_a)·s_i e_a,i``, which is exactly ``|m_c| − |m_a|``, and its
    standard error is :func:`paired_bias`'s rule applied to ``D`` (element-wise and row-wise).  A
    candidate with ``|m_c| ≤ max(|m_b|, |m_r|)`` has a statistic ≤ 0 and never fails.

    Returns ``{"n", "rows", "excess", "se", "candidate", "baseline", "rounded", "against"}``
    (``against``: ``"reference"`` or ``"rounded"``, the one whose bias bounds the candidate's).
    """
    nz = m.truth != 0
    n = int(nz.sum())
    if n == 0:
        return {"n": 0, "rows": 0, "excess": 0.0, "se": math.inf, "candidate": 0.0, "baseline": 0.0,
                "rounded": 0.0, "against": "reference"}
    part = _nonzero_part(nz, n)
    sgn = np.where(part(m.truth) > 0, 1.0, -1.0)
    rounded = m.rounded_err if m.rounded_err is not None else m.baseline_err
    sc, sb, sr = sgn * part(m.candidate_err), sgn * part(m.baseline_err), sgn * part(rounded)
    mc, mb, mr = float(np.mean(sc)), float(np.mean(sb)), float(np.mean(sr))
    against, sa, ma = ("reference", sb, mb) if abs(mb) >= abs(mr) else ("rounded", sr, mr)
    d = math.copysign(1.0, mc) * sc - math.copysign(1.0, ma) * sa
    se, rows = _standard_error(d, part(m.row), rho, m.row_width if n == nz.size else 0)
    return {"n": n, "rows": rows, "excess": float(np.mean(d)), "se": se, "candidate": mc, "baseline": mb,
            "rounded": mr, "against": against}


def _bias(std: Any, m: ModuleErrors) -> CriterionResult:
    if std.criteria.bias_mode == "one_sided":
        return _one_sided(std, m)
    b = paired_bias(m, std.model.rho)
    if b["n"] == 0:
        return CriterionResult("bias", True, 0.0, math.inf, "no nonzero finite reference values to test bias on")
    limit = std.criteria.bias_tau + std.criteria.bias_z * b["se"]
    return CriterionResult(
        "bias", abs(b["diff"]) <= limit, b["diff"], limit,
        f"mean signed error {b['candidate']:+.3f} ulp vs the reference's {b['baseline']:+.3f} over {b['n']:,} "
        f"elements in {b['rows']:,} row(s): difference {b['diff']:+.3f} (allowed ±{limit:.3f})")


def _one_sided(std: Any, m: ModuleErrors) -> CriterionResult:
    b = one_sided_bias(m, std.model.rho)
    if b["n"] == 0:
        return CriterionResult("bias", True, 0.0, math.inf, "no nonzero finite reference values to test bias on")
    if b["n"] == 1:
        return CriterionResult("bias", True, b["candidate"], math.inf,
                               f"not tested on a single element (error {b['candidate']:+.3f} ulp vs the reference's "
                               f"{b['baseline']:+.3f}): its mean is its error, which ulp_q1 judges")
    limit = std.criteria.bias_tau + std.criteria.bias_z * b["se"]
    bound = b["baseline"] if b["against"] == "reference" else b["rounded"]
    whose = "the reference's" if b["against"] == "reference" else "the correctly rounded output's"
    note = ""
    if b["against"] == "reference" and abs(b["baseline"]) > limit and b["excess"] <= limit:
        note = (f"; the reference's own bias {b['baseline']:+.3f} ulp bounds it, so a systematic error smaller "
                "than the reference's is left to the op standards")
    return CriterionResult(
        "bias", b["excess"] <= limit, b["excess"], limit,
        f"|mean signed error| {abs(b['candidate']):.3f} ulp ({b['candidate']:+.3f}) vs {whose} {abs(bound):.3f} over "
        f"{b['n']:,} elements in {b['rows']:,} row(s): excess {b['excess']:+.3f} (allowed {limit:.3f}){note}")


def _structure_problem(T: list, B: list, C: list) -> str:
    if len(C) != len(T):
        return f"the candidate returned {len(C)} array(s), the reference {len(T)}"
    for i, (t, c) in enumerate(zip(T, C)):
        where = f"output {i} " if len(T) > 1 else "output "
        if c.shape != t.shape:
            return f"{where}shape {c.shape} is not the reference's {t.shape}"
        if c.dtype.kind not in "fViub":
            return f"{where}dtype {c.dtype} is not numeric"
        if (B[i].dtype.kind in "fV") != (c.dtype.kind in "fV"):
            return f"{where}dtype {c.dtype} is not of the reference's kind ({B[i].dtype})"
    return ""


def _worst(T: list, m: ModuleErrors, allowed_max: float) -> list[Offender]:
    e = m.candidate_err
    if e.size == 0:
        return []
    a = np.abs(e)
    k = min(_WORST_K, a.size)
    top = np.argpartition(-a, k - 1)[:k]
    top = top[np.lexsort((top, -a[top]))]
    out = []
    for j in top:
        flat = int(m.position[j])
        index = tuple(int(i) for i in np.unravel_index(flat, T[0].shape)) if len(T) == 1 else (flat,)
        out.append(Offender(index=index, actual=float(m.candidate[j]), reference=float(m.truth[j]),
                            ulp_error=float(e[j]), normalized=float(a[j] / allowed_max) if allowed_max > 0 else math.inf,
                            bound=float(allowed_max * m.spacing[j])))
    return out


def _module_message(std: Any, passed: bool, crit: list, dist: Any, base_q: np.ndarray, cand_q: np.ndarray,
                    allowed: np.ndarray, worst: list, n: int) -> str:
    head = f"{'PASS' if passed else 'FAIL'} against {std.citation} ({std.title})."
    qs = ", ".join(f"{'max' if q == 1 else f'q{q:g}'} {c:.3g}/{a:.3g}" for q, c, a in zip(QUANTILES, cand_q, allowed))
    body = (f" {n:,} elements, {dist.count:,} compared; candidate |ULP error| / allowed: {qs} "
            f"(reference: {', '.join(f'{b:.3g}' for b in base_q)}); mean signed {dist.mean_signed:+.3f}.")
    failed = [c for c in crit if not c.passed]
    tail = (" Failed: " + "; ".join(f"{c.name} — {c.message}" for c in failed) + ".") if failed else ""
    if failed and worst:
        w = worst[0]
        tail += f" Worst element {list(w.index)}: {w.actual!r} vs reference {w.reference!r} ({w.ulp_error:+.3g} ulp)."
    return head + body + tail


def _early(std: Any, shape: tuple, actual_fmt: Any, params: dict, name: str, problem: str) -> Verdict:
    from ..core.distribution import UlpDistribution

    return Verdict(passed=False, standard_id=std.key, standard_sha256=std.sha256, op="module", shape=tuple(shape),
                   formats=dict(std.formats, actual=actual_fmt), params=params,
                   criteria=(CriterionResult(name, False, 1.0, 0.0, problem),), ulp=UlpDistribution(),
                   normalized_max=math.inf, worst=(), n_elements=0, n_nonfinite=0,
                   message=f"FAIL against {std.citation}: {problem}. Nothing else was judged.",
                   numstd_version=__version__)


# ------------------------------------------------------------------------------ op detection
