"""References for the losses: cross_entropy with class-index targets and mse_loss.

cross_entropy: ``loss_n = logsumexp(x_n) - x_n[t_n]``.

Per row this is ``-log_softmax(x_n)[t_n] = L_n + |d_n|`` with ``L_n = log1p(sum_{j != argmax}
exp(d_j))`` and ``d_n = x_n[t_n] - max x_n <= 0`` (no cancellation), so the bound of
:mod:`numstd.reference.softmax` applies: ``|loss_n - exact| <= u |loss_n| + u |d_n| + e_L,n``.
``reduction="sum"`` adds the losses (all ``>= 0``) in double-double:
``|values - exact| <= |lo| + DD_C d u^2 sum_n loss_n + sum_n bound_n``; ``"mean"`` divides that
double-double by ``N`` (:func:`~numstd.reference.summation.dd_div_int`, ``+ DIV_C u^2 |values|``, the
other terms divided by ``N``).

The row statistics (``max x_n``, ``L_n`` and the terms of ``e_L,n``) come from
:func:`numstd.reference.softmax.row_stats`, which widens a group of rows of about 2^16 logits at a
time (or one block of a longer row), so the reference of a batch of long rows (a vocabulary of
2^17 classes) stays in bounded memory whatever the chunk, with the bits of the one-pass rows.

aux: ``lse`` (``L_n``) and ``dev`` (``|d_n|``) reduced like the values (so they broadcast to them),
``K = C`` and ``devmean`` (softmax's ``sum_j y_j |d_j|`` of each row, reduced like the values: how far a 16-bit ``RN16(x − m)`` of
every logit moves ``log s``, the arith16 standards), ``R`` the row losses an output adds (``N`` for sum, 1 for mean and
none: the per-row constants of the arith16 model, summed), ``N``, the rows of the whole batch: a caller that computes the reference in chunks of
rows (``check`` with ``reduction="none"``) passes the batch's row count as ``params[BATCH_KEY]``, so
that a model term in ``N`` does not depend on the chunk size; ``s16``, ``a16``, ``h16``: nll_loss's 16-bit cascade over the row losses (see nll_loss below; the
stored16 cross_entropy standards); ``M``, the number of row losses
each output averages or sums (``N`` for mean and sum, 1 for ``"none"``, where an output is one
row's loss: a ``sqrt(N)`` averaging term there grew with the batch and switched the bias test off).

mse_loss: ``q_i = fl(fl(a_i - b_i)^2)`` in float64 (``u = 2**-53``): rounding the difference errs
by ``u |d_i|`` relative, squaring by ``u`` again, so ``|q_i - d_i^2| <= MSE_TERM_C u q_i`` with
``MSE_TERM_C = 3.01`` (``(1 + u)^3 / (1 - u) - 1 <= 3.01 u``).  ``reduction="none"`` returns the
``q_i`` with that bound; ``"sum"`` adds them (all ``>= 0``) in double-double,
``|values - exact| <= |lo| + DD_C d u^2 S + MSE_TERM_C u S`` with ``S = sum q_i`` and ``d`` the
pairwise depth; ``"mean"`` divides that double-double by ``K = numel`` (+ ``DIV_C u^2 |values|``,
the other terms divided by ``K``).  aux: ``K`` the number of squared differences each output sums
(``numel`` for mean and sum, 1 for none, so one error formula covers every reduction).
Non-finite inputs give numpy's IEEE result and an infinite bound for the reduced outputs.

huber_loss / smooth_l1_loss: the terms ``q_i`` in float64 from ``d = fl(a_i - b_i)``, ``z = |d|``:
huber ``0.5 z z`` (``z < delta``) or ``delta (z - 0.5 delta)``; smooth_l1 ``0.5 z z / beta`` (``z < beta``)
or ``z - 0.5 beta`` (``z`` for ``beta = 0``).  Each is within ``HUBER_TERM_C u q_i``,
``HUBER_TERM_C = 4.01``: the quadratic branches round d, the square and (smooth_l1) the division; the
linear ones round d (relative ``u z <= 2u (z - 0.5 delta)`` as ``z >= delta``), the subtraction and
the product by delta.  A branch picked on the rounded ``z`` near the threshold costs
``0.5 (z - delta)^2 <= 0.5 u^2 z^2`` (the two branches meet with equal slope), inside the slack.
The terms are non-negative and reduced like mse_loss's (double-double sum, aux ``K``).

kl_div: ``q_i = xlogy(t_i, t_i) - t_i x_i`` (torch's formula; 0 where ``t_i = 0``) or, with
``log_target``, ``q_i = exp(t_i) (t_i - x_i)``, in float64.  The product ``t_i x_i`` of two inputs of
at most 24 significant bits is exact; ``log`` and ``exp`` are within one float64 ulp (glibc's), so
each term is within ``KL_TERM_C u m_i``, ``KL_TERM_C = 4.01``, of its value with
``m_i = w_i (|l_i| + |x_i|)`` (``w = t, l = log t``; log_target ``w = exp(t), l = t``), the magnitude of
the term's parts.  The terms have both signs: the double-double sum errs by ``|lo| + DD_C d u^2
sum |q_i|``.  aux: ``K`` (numel, 1 for none), ``N`` (input.shape[0], 1 for a 0-d input) and ``mag``,
the ``m_i`` reduced like the values (sum / K for mean, sum / N for batchmean).

nll_loss: ``loss_n = -x[n, t_n]`` (exact), 0 where ``t_n = ignore_index``; summed in double-double,
the mean divided by the rows kept.  aux: ``K`` the rows kept (1 for none) and ``mag`` the ``|loss_n|``
reduced like the values.

hinge_embedding_loss: ``l_i = x_i`` (target 1, exact) or ``max(0, margin - x_i)`` (target -1, the
difference rounded once: ``u |l_i|``); summed in double-double.  aux: ``K`` (numel, 1 for none) and
``mag``, ``|l_i| + |margin|`` on the active margin terms and ``|l_i|`` elsewhere, reduced like the
values (an fp32 kernel also rounds the margin).

stored16 aux (mse_loss, huber_loss, smooth_l1_loss, hinge_embedding_loss; docs/methodology.md §11):
a 16-bit kernel that stores intermediates of term i in the 16-bit type moves the term by at most
``u16 c_i``: mse ``c_i = 3.02 q_i`` (``RN16(d)`` moves ``d^2`` by ``2 u16 d^2``, ``RN16(d^2)`` by
``u16 d^2``; ``(1 + u16)^3 - 1 <= 3.02 u16`` for ``u16 <= 2^-8``); huber / smooth_l1: every
primitive of the term rounded to 16 bits (torch's bf16 huber and fp16 smooth_l1: ``d``, the
threshold ``t = RN16(delta)``, ``RN16(0.5 t)``, the product / subtraction / division).  The per-term
roundings give ``c_i`` (huber: quadratic 3 q_i, linear 4 q_i: d 2, subtraction 1, product 1;
smooth_l1: quadratic 4 q_i: d 2, product 1, division 1, linear 3 q_i: d 2, subtraction 1); the
threshold's two roundings are shared by every term, so they add up, not at random: aux ``h16``,
``sum h_i / div`` with huber ``h_i = 3 q_i`` on the linear branch (t 2, t/2 1), smooth_l1 ``q_i``
(quadratic, t) and ``2 q_i`` (linear, t and t/2); all times 1.01 for the second-order terms.
hinge ``c_i = h_i`` on the margin terms (the stored ``RN16(margin - x_i)``).  aux ``s16 = sqrt(sum c_i^2) / div`` and
``a16 = sum c_i / div`` (``div`` the mean's denominator, 1 for sum; ``c_i`` itself for none).

huber / smooth_l1 once-rounded stored terms (torch's fp16 huber and bf16 smooth_l1: the term computed
in fp32, stored rounded once to the 16-bit type, ``apply_loss_reduction`` then reducing the stored
terms in fp32): ``c_i = 1.01 q_i``, aux ``s16t = sqrt(sum c_i^2) / div`` and ``a16t = sum c_i / div``;
both 0 for ``reduction="none"``, where the stored term is the output and its one rounding the output
rounding, not an intermediate's.

at::sum's chunk sums (mse_loss, huber_loss, smooth_l1_loss, hinge_embedding_loss with ``reduction="sum"``):
``apply_loss_reduction`` sums the stored 16-bit loss tensor with ``at::sum`` in its own dtype, which
above ``GRAIN_SIZE`` elements stores one chunk sum per intra-op thread in the 16-bit type: aux
``g16`` (:func:`numstd.reference.reduction.chunk_sums16`, ``1.01 sum_j |S_j|`` over pieces of
``GRAIN_SIZE`` terms), 0 for mean (at::mean accumulates in fp32 and rounds once) and none.

kl_div stored16 aux (docs/methodology.md §11; torch's composite ``xlogy(t, t) - t * x`` /
``exp(t) * (t - x)``, every primitive rounded to the 16-bit input type): ``c_i = 1.01 (2 t_i |log t_i| +
t_i |x_i| + |q_i|)`` (the stored ``log t``, ``t log t``, ``t x`` and their difference) or, with
``log_target``, ``c_i = 3.02 |q_i|`` (``exp t``, ``t - x``, the product).  The reduction is ``at::sum``
(sum, batchmean) or ``at::mean`` (mean, accumulated in fp32: no stored partial) of the 16-bit terms:
``at::sum`` of more than ``GRAIN_SIZE = 32768`` elements reduces ``P <= ceil(numel / 32768)`` chunks
(one per intra-op thread, ``at::parallel_for``'s grain) whose partial sums are stored in the 16-bit
type and added in it: ``P`` stored partials and ``P - 2`` stored running sums, each within ``u16`` of
at most ``sum |q_i|``, so a deterministic ``(P - 1) sum |q_i|``; batchmean then divides the stored
16-bit sum (one more rounding, ``|loss|``).  Both go into ``h16`` (a shared, deterministic aux).

nll_loss stored16 aux: ``nll_loss_out_frame`` (``aten/src/ATen/native/LossNLL.cpp``) sums the kept
``-x[n, t_n]`` in a cascade of ``scalar_t`` partial sums (8 levels; level ``j`` flushed into ``j + 1``
whenever the row index is a multiple of ``16^(j+1)``, i.e. blocks of 16, for fewer than 2^32 rows),
then adds the 8 levels in order, every addition rounded to the 16-bit type: ``c_j = |P_j|``, the
exact value of every partial sum the cascade stores (:func:`nll_cascade_partials`); the mean divides
by the row count stored in the 16-bit type (exact up to 256 rows in both formats): ``h16 = |loss|``
above 256 kept rows.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .reduction import GRAIN_SIZE, chunk_sums16
from .softmax import lse_error, row_stats
from ..core.formats import round_to
from ..core.summation import DD_C, DIV_C, U, dd_div_int, pairwise_sum

__all__ = ["cross_entropy", "mse_loss", "huber_loss", "smooth_l1_loss", "kl_div", "nll_loss", "hinge_embedding_loss", "BATCH_KEY", "MSE_TERM_C", "HUBER_TERM_C",
           "KL_TERM_C", "stored16_aux", "stored_shift", "GRAIN_SIZE", "NLL_LEVELS", "nll_cascade", "nll_cascade_partials"]


#: cascade_sum_num_levels of nll_loss_out_frame (aten/src/ATen/native/LossNLL.cpp)
NLL_LEVELS = 8

#: relative bound, in units of u = 2**-53, of one squared difference rounded twice (difference, square)
MSE_TERM_C = 3.01

#: relative bound, in units of u, of one huber / smooth_l1 term (module docstring)
HUBER_TERM_C = 4.01

#: bound, in units of u times the term's magnitude m_i, of one kl_div term (module docstring)
KL_TERM_C = 4.01

#: params key of the whole batch's row count when the reference is computed in chunks of rows
BATCH_KEY = "_batch"


def cross_entropy(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``cross_entropy(logits, target, reduction)``; see the module docstring."""
    x = np.asarray(arrays[0])  # (widened to float64 a group of rows at a time by row_stats)
    target = np.asarray(arrays[1]).astype(np.intp)
    n, c = x.shape
    reduction = params["reduction"]
    if n == 0:
        z = np.zeros(0) if reduction == "none" else np.asarray(0.0)
        return z, z, {"lse": z, "dev": z, "devmean": z, "R": np.asarray(0.0 if reduction == "sum" else 1.0),
                      "K": np.asarray(float(c)), "N": np.asarray(0.0), "M": np.asarray(0.0)}
    st = row_stats(x)
    # d_t = fl(x_t - max): the element of softmax's d = fl(x - max) at the target
    d_t = np.asarray(np.take_along_axis(x, target[:, None], axis=-1), dtype=np.float64)[:, 0] - st.m[:, 0]
    lse = st.lse[:, 0]
    losses = lse - d_t
    per_row = U * np.abs(losses) + U * np.abs(d_t) + lse_error(st)[:, 0]
    batch = float(params.get(BATCH_KEY, n))
    devmean = st.devmean[:, 0]
    aux = {"lse": lse, "dev": np.abs(d_t), "devmean": devmean, "K": np.asarray(float(c)), "N": np.asarray(batch),
           "M": np.asarray(1.0 if reduction == "none" else batch), "R": np.asarray(float(n) if reduction == "sum" else 1.0)}
    if reduction == "none":
        z = np.zeros_like(losses)  # (no stored partial sum: one row's loss per output)
        return losses, per_row, {**aux, **stored16_aux(z, None), "h16": z}
    with np.errstate(all="ignore"):  # nll_loss's 16-bit cascade over the row losses (module docstring)
        aux.update(stored16_aux(np.abs(nll_cascade_partials(losses, np.ones(n, bool))), n if reduction == "mean" else 1))
        aux["h16"] = np.asarray(abs(float(np.sum(losses))) / n if reduction == "mean" and n > 256 else 0.0)
    if not np.all(np.isfinite(losses)):  # IEEE propagation of inf/NaN logits
        total = np.sum(losses) if reduction == "sum" else np.mean(losses)
        red = np.sum if reduction == "sum" else np.mean
        return np.asarray(total), np.asarray(np.inf), dict(aux, lse=red(lse), dev=red(np.abs(d_t)), devmean=red(devmean))
    hi, lo, depth = pairwise_sum(losses, -1)
    spread = DD_C * depth * U * U * np.sum(losses) + np.sum(per_row)
    if reduction == "sum":
        return hi, np.abs(lo) + spread, dict(aux, lse=np.sum(lse), dev=np.sum(np.abs(d_t)), devmean=np.sum(devmean))
    qh, ql = dd_div_int(hi, lo, n)
    bound = np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / n
    return qh, bound, dict(aux, lse=np.mean(lse), dev=np.mean(np.abs(d_t)), devmean=np.mean(devmean))


def mse_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``mse_loss(input, target, reduction)``; see the module docstring."""
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.asarray(arrays[0], dtype=np.float64) - np.asarray(arrays[1], dtype=np.float64)
        q = d * d
        s16 = 3.02 * q  # stored d (2 q) and stored d^2 (q), in units of u16 (module docstring)
        fmt = _stored_format(params) if params["reduction"] != "none" else None  # (none: no shift to compute)
        stored: tuple = ()
        if fmt is not None:
            d32 = d.astype(np.float32).astype(np.float64)  # fp32 a - b (exact unless the exponents are far apart)
            d16 = round_to(d32, fmt)
            stored = (round_to(d16 * d16, fmt),  # PyTorch CPU: RN16(RN16(d)^2); d16^2 is exact in fp32
                      round_to((d32 * d32).astype(np.float32), fmt),  # the fp32 square stored once
                      d16 * d16)  # only d stored, the square kept in fp32
    result = _reduce_terms(q, MSE_TERM_C, params["reduction"], s16)
    return _with_spill(_with_shift(result, "e16", q, stored, params["reduction"]), q, params["reduction"])


#: (1 + 2^-8)^3: a 16-bit kernel's rounded d (2 roundings: fp32, then 16 bits) and its square, each a
#: relative 2^-8 at most (bf16; fp16's 2^-11 is below it)
_SPILL16_C = (1.0 + 2.0**-8) ** 3


def _with_spill(result: tuple, q: np.ndarray, reduction: str) -> tuple:
    """``result`` with the aux ``spillmag`` (the arith16 standards' criterion ``intermediate_overflow``):
    a bound on every squared difference a 16-bit kernel forms, ``_SPILL16_C·q_i``, per element for
    ``"none"`` and its maximum for a mean or sum (the loss of a reduction is inf once one term is).
    Where it reaches fp16's overflow threshold (``|d| > 256``), XLA's fp16 ``RN16(d²)`` may be inf
    although the exact loss is finite."""
    values, bound, aux = result
    with np.errstate(over="ignore", invalid="ignore"):
        spill = _SPILL16_C * np.asarray(q, dtype=np.float64)
        if reduction != "none":
            spill = np.asarray(float(np.max(spill)) if spill.size else 0.0)
    return values, bound, {**aux, "spillmag": spill}


def huber_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``huber_loss(input, target, reduction, delta)``; see the module docstring."""
    delta = float(params["delta"])
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.abs(np.asarray(arrays[0], dtype=np.float64) - np.asarray(arrays[1], dtype=np.float64))
        q = np.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
        quad = z < delta
        s16 = 1.01 * np.where(quad, 3.0 * q, 4.0 * q)  # per-term roundings of the 16-bit term (module docstring)
        h16 = 1.01 * np.where(quad, 0.0, 3.0 * q)  # the shared threshold roundings RN16(delta), RN16(delta / 2)
    return _once_rounded(_reduce_terms(q, HUBER_TERM_C, params["reduction"], s16, h16), q, params["reduction"], params)


def smooth_l1_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``smooth_l1_loss(input, target, reduction, beta)``; see the module docstring."""
    beta = float(params["beta"])
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.abs(np.asarray(arrays[0], dtype=np.float64) - np.asarray(arrays[1], dtype=np.float64))
        q = z if beta == 0 else np.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)
        quad = (z < beta) if beta else np.zeros(np.shape(z), bool)
        s16 = 1.01 * np.where(quad, 4.0 * q, 3.0 * q)  # per-term roundings of the 16-bit term (module docstring)
        h16 = 1.01 * np.where(quad, 1.0 * q, 2.0 * q)  # the shared threshold roundings RN16(beta), RN16(beta / 2)
    return _once_rounded(_reduce_terms(q, HUBER_TERM_C, params["reduction"], s16, h16), q, params["reduction"], params)


def _once_rounded(result: tuple, q: np.ndarray, reduction: str, params: dict | None = None
                  ) -> tuple[np.ndarray, np.ndarray, dict]:
    """``result`` with the aux ``s16t``, ``a16t`` of once-rounded stored terms ``c_i = 1.01 q_i`` (module
    docstring): a kernel that stores each term ``RN16(q_i)`` and reduces the stored terms in fp32; and
    ``e16t``, the exact shift of those stored terms (:func:`stored_shift`, ``q_i`` computed in fp32 as
    such a kernel does, then rounded to the 16-bit output format)."""
    values, bound, aux = result
    if reduction == "none":
        zero = np.zeros(np.shape(values))
        return values, bound, {**aux, "s16t": zero, "a16t": zero, "e16t": zero}
    once = stored16_aux(1.01 * q, q.size if reduction == "mean" else 1)
    fmt = _stored_format(params or {})
    with np.errstate(over="ignore", invalid="ignore"):
        stored = () if fmt is None else (round_to(q.astype(np.float32), fmt),)
    return _with_shift((values, bound, {**aux, "s16t": once["s16"], "a16t": once["a16"]}), "e16t", q, stored, reduction)


def _stored_format(params: dict):
    """The 16-bit format whose stored intermediates the shift aux model: the standard's output format
    (``check`` passes it as the reference's resolution); ``None`` for any other output (no shift)."""
    from ..core.formats import get_format
    from .contraction import RESOLUTION_KEY

    res = params.get(RESOLUTION_KEY)
    if res is None:
        return None
    fmt = get_format(res)
    return fmt if fmt.p < 24 else None


def stored_shift(q: np.ndarray, stored: tuple, div: float) -> float:
    """The exact shift of a mean or sum by a kernel's stored terms: ``max_p |Σ_i (t_p,i − q_i)| / div``.

    ``q`` are the exact terms, ``stored`` the values ``t_p`` that each storage pattern ``p`` of a 16-bit
    kernel really holds (computed from the inputs as that kernel does: its fp32 arithmetic, then
    ``RN16``).  Where the inputs are alike (KernelBench-style offset rows, squares of differences near
    one value) the terms' roundings share a sign and add up: their sum is not the random walk
    ``λ·sqrt(Σc_i²)`` of independent roundings (measured: torch's bf16 mse_loss of 64×10 offset rows,
    ``Σ(t − q) = −7.5e-4·Σq``, 7.4× the random walk's ``sqrt(Σe_i²)``).  The reference knows the inputs, so it
    computes the shift exactly instead of bounding it.  Patterns whose stored terms overflow (inf) are
    left out: that is a documented library defect, not a shift.
    """
    flat = np.asarray(q, dtype=np.float64).reshape(-1)
    best = 0.0
    for t in stored:
        tt = np.asarray(t, dtype=np.float64).reshape(-1)
        with np.errstate(all="ignore"):
            if not (np.all(np.isfinite(tt)) and np.all(np.isfinite(flat))):
                continue
            hi, lo, _ = pairwise_sum(tt - flat, -1)  # each difference exact: both within one binade's grid
        best = max(best, abs(float(hi) + float(lo)))
    return best / (float(div) if div else 1.0)


def _with_shift(result: tuple, key: str, q: np.ndarray, stored: tuple, reduction: str) -> tuple:
    """``result`` with the aux ``key``: :func:`stored_shift` of a mean or sum, 0 for ``"none"`` (there
    the stored term is the output, its rounding the output's)."""
    values, bound, aux = result
    if reduction == "none":
        return values, bound, {**aux, key: np.zeros(np.shape(values))}
    return values, bound, {**aux, key: np.asarray(stored_shift(q, stored, q.size if reduction == "mean" else 1))}


def stored16_aux(c: np.ndarray, div: float | None) -> dict:
    """aux of the stored16 losses from the per-term sensitivities ``c_i`` (in units of ``u16``: a
    16-bit kernel's stored intermediates move term i by at most ``u16 c_i``): ``s16 = sqrt(sum c_i^2)
    / div`` and ``a16 = sum c_i / div`` (``div``: 1 for sum, the mean's denominator; ``None`` for
    ``reduction="none"``: both are ``c_i``)."""
    if div is None:
        return {"s16": c, "a16": c}
    flat = np.asarray(c, dtype=np.float64).reshape(-1)
    fin = flat[np.isfinite(flat)]
    d = float(div) if div else 1.0
    return {"s16": np.asarray(float(np.sqrt(np.sum(fin * fin))) / d), "a16": np.asarray(float(np.sum(fin)) / d)}


def _reduce_terms(q: np.ndarray, c: float, reduction: str, s16: np.ndarray, h16: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Non-negative float64 terms ``q`` (each within ``c u q``) reduced in double-double; ``s16`` the
    terms' independent stored16 sensitivities (:func:`stored16_aux`), ``h16`` the shared ones (aux
    ``h16``: their sum reduced like the loss)."""
    if reduction == "none":
        extra = {} if h16 is None else {"h16": h16}
        return q, c * U * q, {"K": np.asarray(1.0), **stored16_aux(s16, None), **extra, "g16": np.zeros(np.shape(q))}
    k = q.size
    div = k if reduction == "mean" else 1
    aux = {"K": np.asarray(float(k)), **stored16_aux(s16, div), "g16": np.asarray(chunk_sums16(q) if reduction == "sum" else 0.0)}
    if h16 is not None:
        aux["h16"] = stored16_aux(h16, div)["a16"]
    if k == 0:  # (mean of nothing is refused by the entry's shape rule)
        return np.asarray(0.0), np.asarray(0.0), aux
    flat = q.reshape(-1)
    if not np.all(np.isfinite(flat)):  # IEEE propagation of inf/NaN inputs
        with np.errstate(invalid="ignore"):
            total = np.sum(flat) if reduction == "sum" else np.mean(flat)
        return np.asarray(total), np.asarray(np.inf), aux
    hi, lo, depth = pairwise_sum(flat, -1)
    S = np.sum(flat)
    spread = DD_C * depth * U * U * S + c * U * S
    if reduction == "sum":
        return np.asarray(hi), np.asarray(np.abs(lo) + spread), aux
    qh, ql = dd_div_int(np.asarray(hi), np.asarray(lo), k)
    return np.asarray(qh), np.asarray(np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / k), aux


def kl_div(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``kl_div(input, target, reduction, log_target)``; see the module docstring."""
    x = np.asarray(arrays[0], dtype=np.float64)
    t = np.asarray(arrays[1], dtype=np.float64)
    with np.errstate(all="ignore"):
        if params["log_target"]:
            w = np.exp(t)
            q = w * (t - x)
            m = w * (np.abs(t) + np.abs(x))
            c16 = 3.02 * np.abs(q)  # stored exp(t), t - x and their product (module docstring)
        else:
            pos = t > 0
            lt = np.log(np.where(pos, t, 1.0))
            tlogt = np.where(pos, t * lt, np.where(t == 0, 0.0, np.nan))
            q = tlogt - t * x
            m = np.abs(t) * (np.abs(lt) + np.abs(x))
            # stored log t, t log t, t x and their difference (module docstring)
            c16 = 1.01 * (2.0 * np.abs(t) * np.abs(lt) + np.abs(t) * np.abs(x) + np.abs(q))
    reduction = params["reduction"]
    n = float(params.get(BATCH_KEY, x.shape[0] if x.ndim else 1))
    if reduction == "none":
        return q, KL_TERM_C * U * m, {"K": np.asarray(1.0), "N": np.asarray(n), "mag": m,
                                      **stored16_aux(c16, None), "h16": np.zeros_like(q)}
    k = q.size
    div = {"sum": 1, "mean": k, "batchmean": int(n)}[reduction]
    flat, mflat = q.reshape(-1), m.reshape(-1)
    msum = float(np.sum(mflat)) if k else 0.0
    aux = {"K": np.asarray(float(k)), "N": np.asarray(n), "mag": np.asarray(msum / div if div else 0.0),
           **stored16_aux(c16, div), "h16": np.asarray(_kl_sum_h16(flat, reduction, div))}
    if k == 0:
        return np.asarray(0.0), np.asarray(0.0), aux
    if not np.all(np.isfinite(flat)):  # IEEE propagation of inf/NaN inputs
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(flat) / div), np.asarray(np.inf), aux
    hi, lo, depth = pairwise_sum(flat, -1)
    spread = DD_C * depth * U * U * float(np.sum(np.abs(flat))) + KL_TERM_C * U * msum
    if div == 1:
        return np.asarray(hi), np.asarray(np.abs(lo) + spread), aux
    qh, ql = dd_div_int(np.asarray(hi), np.asarray(lo), div)
    return np.asarray(qh), np.asarray(np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / div), aux


def _kl_sum_h16(flat: np.ndarray, reduction: str, div: float) -> float:
    """kl_div's shared stored16 aux ``h16`` (module docstring): at::sum's ``P - 1`` stored chunk sums
    (``P = ceil(K / GRAIN_SIZE)``) of ``sum |q_i|``, and batchmean's stored sum ``|sum q_i|``, over ``div``."""
    if reduction == "mean" or not flat.size:
        return 0.0
    with np.errstate(all="ignore"):
        chunks = -(-flat.size // GRAIN_SIZE)
        h = (chunks - 1) * float(np.sum(np.abs(flat))) + (abs(float(np.sum(flat))) if reduction == "batchmean" else 0.0)
    return h / (div or 1)


def nll_cascade(loss: np.ndarray, keep: np.ndarray, rnd: Callable[[float], float] | None = None
                ) -> tuple[list[float], float]:
    """nll_loss_out_frame's cascade over the kept ``loss_n``, in its order: each added to level 0,
    level ``j`` added into ``j + 1`` (and cleared) after row ``b`` unless ``b & (mask << 4 j)``
    (``mask = 2^lp - 1``, ``lp = max(4, ceil(log2 N) // 8)``), the ignored rows skipped before that
    test; then ``0 + level_0 + ... + level_7`` (std::accumulate).  ``rnd`` rounds every addition (a
    16-bit ``scalar_t``: the corpus model); None keeps them exact in float64.

    Returns ``(partials, total)``: every partial sum after its addition, and the last one.
    """
    r = (lambda v: v) if rnd is None else rnd
    n = int(loss.shape[0])
    lp = max(4, (int(np.ceil(np.log2(n))) if n > 1 else 0) // NLL_LEVELS)
    mask = (1 << lp) - 1
    part = [0.0] * NLL_LEVELS
    out: list[float] = []
    for b in np.flatnonzero(keep).tolist():
        part[0] = r(part[0] + float(loss[b]))  # (loss_partial_sums[0] -= data, the picked log-probability)
        out.append(part[0])
        for j in range(NLL_LEVELS - 1):
            if b & (mask << (j * lp)):
                break
            part[j + 1] = r(part[j + 1] + part[j])
            part[j] = 0.0
            out.append(part[j + 1])
    acc = 0.0
    for p in part:
        acc = r(acc + p)
        out.append(acc)
    return out, acc


def nll_cascade_partials(loss: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The exact value of every partial sum that nll_loss_out_frame's cascade stores (float64, in its
    order, :func:`nll_cascade`): the values a 16-bit kernel rounds, 1-d."""
    return np.asarray(nll_cascade(loss, keep)[0], dtype=np.float64)


def _nll_cascade_shift(loss: np.ndarray, keep: np.ndarray, reduction: str, fmt) -> float:
    """aux ``e16`` of nll_loss: how far PyTorch CPU's 16-bit reduction moves the result, computed exactly.

    ``nll_loss_out_frame`` adds the kept losses in its cascade of ``scalar_t`` partial sums
    (:func:`nll_cascade`), every addition computed in fp32 and stored in ``fmt``, and divides a mean by
    the row count stored in ``fmt``: ``e16 = |S16 / RN16(k) − Σl/k|`` (mean) or ``|S16 − Σl|`` (sum), with
    ``S16`` that cascade's value and the quotient exact (the output's own rounding is the bound's
    ``rho`` term).  The reference knows the inputs, so it computes this systematic error instead of
    bounding it by the random walk ``λ·sqrt(ΣP_j²)`` of independent roundings, which a mean that cancels
    exceeds (measured: torch's bf16 mean over 512 rows near 10⁻⁴, 1.02–1.38× that bound on 3 of 200
    grades).  0 for a format with 24 or more bits, an empty or non-finite cascade (the fp16 overflow is a
    documented library defect, not a shift), and ``reduction="none"``.
    """
    k = int(np.sum(keep))
    if fmt is None or k == 0 or not np.all(np.isfinite(loss)):
        return 0.0
    dt = np.dtype(fmt.numpy_dtype).type
    r16 = lambda v: float(dt(np.float32(v)))  # noqa: E731  (fp32 addition, stored RNE in the 16-bit type)
    with np.errstate(all="ignore"):
        total = nll_cascade(loss, keep, r16)[1]
        exact = math.fsum(loss[keep].tolist())
        if reduction == "mean":
            total, exact = total / r16(k), exact / k
    return abs(total - exact) if math.isfinite(total) else 0.0


def nll_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``nll_loss(input, target, reduction, ignore_index)``; see the module docstring."""
    x = np.asarray(arrays[0], dtype=np.float64)
    t = np.asarray(arrays[1]).astype(np.int64)
    keep = t != params["ignore_index"]
    picked = np.take_along_axis(x, np.where(keep, t, 0)[:, None], axis=-1)[:, 0] if x.size else np.zeros(t.shape)
    loss = np.where(keep, -picked, 0.0)
    reduction = params["reduction"]
    if reduction == "none":
        z = np.zeros_like(loss)  # (exact negations: nothing stored but the output)
        return loss, z, {"K": np.asarray(1.0), "mag": np.abs(loss), **stored16_aux(z, None), "h16": z, "e16": z,
                         "spillmag": z}
    k = int(np.sum(keep))
    div = k if reduction == "mean" else 1
    mag = float(np.sum(np.abs(loss)))
    with np.errstate(all="ignore"):
        c16 = np.abs(nll_cascade_partials(loss, keep)) if loss.size else np.zeros(0)
        h16 = abs(float(np.sum(loss))) / div if reduction == "mean" and k > 256 else 0.0  # RN16(row count)
    aux = {"K": np.asarray(float(max(k, 1))), "mag": np.asarray(mag / div if div else 0.0),
           **stored16_aux(c16, div or 1), "h16": np.asarray(h16),
           "e16": np.asarray(_nll_cascade_shift(loss, keep, reduction, _stored_format(params))),
           # arith16 (XLA): the mean divides the sum stored in 16 bits, RN16(S); every partial sum of any order
           # is at most Σ|loss_n| (plus fp32 slack), so RN16(S) may be inf only where that reaches the overflow
           # threshold (criterion intermediate_overflow); the sum's stored S is its output (no spill)
           "spillmag": np.asarray(_SPILL16_C * mag if reduction == "mean" else 0.0)}
    if loss.size == 0 or k == 0:
        return np.asarray(0.0), np.asarray(0.0), aux
    if not np.all(np.isfinite(loss)):
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(loss) / div), np.asarray(np.inf), aux
    hi, lo, depth = pairwise_sum(loss, -1)
    spread = DD_C * depth * U * U * mag
    if div == 1:
        return np.asarray(hi), np.asarray(np.abs(lo) + spread), aux
    qh, ql = dd_div_int(np.asarray(hi), np.asarray(lo), div)
    return np.asarray(qh), np.asarray(np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / div), aux


def hinge_embedding_loss(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``hinge_embedding_loss(input, target, margin, reduction)``; see the module docstring."""
    x = np.asarray(arrays[0], dtype=np.float64)
    y = np.asarray(arrays[1], dtype=np.float64)
    margin = float(params["margin"])
    with np.errstate(all="ignore"):
        hinge = np.maximum(margin - x, 0.0)
        loss = np.where(y == 1, x, hinge)
        per = np.where(y == 1, 0.0, U * hinge)
        m = np.abs(loss) + np.where((y != 1) & (hinge > 0), abs(margin), 0.0)
        s16 = np.where(y == 1, 0.0, hinge)  # the stored RN16(margin - x) of the margin terms
    reduction = params["reduction"]
    if reduction == "none":
        return loss, per, {"K": np.asarray(1.0), "mag": m, **stored16_aux(s16, None), "g16": np.zeros(np.shape(loss))}
    k = loss.size
    div = k if reduction == "mean" else 1
    aux = {"K": np.asarray(float(max(k, 1))), "mag": np.asarray(float(np.sum(m)) / div if div else 0.0),
           **stored16_aux(s16, div), "g16": np.asarray(chunk_sums16(loss) if reduction == "sum" else 0.0)}
    if k == 0:
        return np.asarray(0.0), np.asarray(0.0), aux
    flat = loss.reshape(-1)
    if not np.all(np.isfinite(flat)):
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(flat) / div), np.asarray(np.inf), aux
    hi, lo, depth = pairwise_sum(flat, -1)
    spread = DD_C * depth * U * U * float(np.sum(np.abs(flat))) + float(np.sum(per))
    if div == 1:
        return np.asarray(hi), np.asarray(np.abs(lo) + spread), aux
    qh, ql = dd_div_int(np.asarray(hi), np.asarray(lo), div)
    return np.asarray(qh), np.asarray(np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / div), aux
