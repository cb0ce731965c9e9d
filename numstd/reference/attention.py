"""Reference for attention: ``softmax(q k^T scale + mask) v`` with a bound through both products.

``scale`` is the float64 number in the parameters (``validate`` fills ``1/sqrt(E)`` rounded to
float64 when none is given; the reference takes that number as exact).  With ``u = 2**-53``,
``S`` keys and ``i`` a query row:

1. Scores in double-double: ``q @ k^T = hi + lo`` by :func:`~numstd.reference.contraction.dot_dd`
   (error ``err``), ``(sh, e) = two_prod(hi, scale)``, ``sl = fl(e + fl(lo scale))``:
   ``|sh + sl - s| <= a_s = |scale| err + 1.01 u (|lo scale| + |sl|) + 4 * 2**-1074``.  Causal
   masking (key ``j > i``, top-left aligned, as ``is_causal`` in torch) makes ``s_ij = -inf``.
2. Shifted scores ``d_j = fl(fl(sh_j - m) + sl_j)``, ``m`` the row maximum of ``sh``:
   ``|d_j - (s_j - m)| <= a_j = u |sh_j - m| + u |d_j| + a_s,j`` — an error relative to the
   *shifted* score, so large logits cost nothing where the probabilities are not negligible.
3. ``P = softmax(d)`` by :func:`numstd.reference.softmax.exp_rows` (relative error ``rho_j`` w.r.t.
   the softmax of the computed ``d``).  Perturbing the scores by ``delta_j`` (``|delta_j| <= a_j``)
   multiplies ``P_j`` by ``e^{delta_j} / sum_k P_k e^{delta_k}``, so
   ``|softmax(d)_j / P_j - 1| <= eta_j = e^{2 A} (a_j + sum_k P_k a_k)``, ``A = max_k a_k``, and
   ``|P^_j - P_j| <= P^_j w_j / (1 - max w)`` with ``w_j = rho_j + eta_j + rho_j eta_j``.
4. ``out = P^ @ v`` by :func:`~numstd.reference.contraction.dot` (bound ``b_PV``):

       |out_i - exact| <= b_PV,i + ((P^ w) @ |v|)_i / (1 - max w) + 2 (S + 2) 2**-1074 e^{2A} sum_j |v_j|

   the last term for probabilities that underflow.  Both ``P^`` and the exact ``P`` are probability
   vectors, so ``sum_j |P^_j - P_j| <= 2 (1 + 2**-40)`` and the probability term is capped at
   ``2 (1 + 2**-40) max_j |v_j|`` per coordinate (with the underflow term, also an error of ``P``): the bound stays finite for any finite scores
   (where ``w`` is too large for the first-order bound, e.g. ``|q| = 1e30``).

aux: ``absout = P @ |v|``, ``K = S``, ``E`` = head dimension, ``scoremag = |scale| max_j (|q| @
|k|^T)_ij`` over the unmasked keys of each query (shape ``(..., L, 1)``, broadcastable to the
output; the full ``L x S`` matrix would not be); per coordinate over all keys (shape ``(..., 1,
E)``): ``vmax = max_j |v_j|``, ``vlo = min_j v_j`` and ``vhi = max_j v_j`` (the convex hull of v's
rows, :func:`numstd.criteria.hull_violations`); ``spillmag = max(1, |scale|) max_j (|q| @ |k|^T)_ij``
per query (shape ``(..., L, 1)``): no partial sum or product of a score, scaled before or after
the product, in any order, exceeds it, so a kernel's score can overflow its accumulation format
only where ``spillmag`` reaches that format's overflow threshold (criterion
``intermediate_overflow``, :func:`numstd.criteria.spill_mask`).
"""

from __future__ import annotations

import numpy as np

from .contraction import ROW0_KEY, padded_matmul, dot, dot_dd
from .elementwise import C_EXP
from .softmax import exp_rows
from ..core.summation import U, two_prod

__all__ = ["attention"]

_TINY = 2.0**-1074
_SUM_DP = 2.0 * (1.0 + 2.0**-40)  # ≥ sum_j |P^_j - P_j| for two probability vectors (P^ sums to 1 within S u)


def attention(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``attention(q, k, v, scale, causal)``; see the module docstring for the bound."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in arrays)
    scale = float(params["scale"])
    L, S = q.shape[-2], k.shape[-2]
    row0 = params.get(ROW0_KEY, 0)  # absolute number of the first query row (chunked callers)
    hi, lo, err, absqk = dot_dd(q, np.swapaxes(k, -1, -2), row0)
    sh, e = two_prod(hi, np.full_like(hi, scale))
    p = lo * scale
    sl = e + p
    a_s = abs(scale) * err + 1.01 * U * (np.abs(p) + np.abs(sl)) + 4 * _TINY
    scoremag = abs(scale) * absqk
    spillmag = max(1.0, abs(scale)) * absqk
    if params["causal"]:
        masked = np.arange(S)[None, :] > np.arange(L)[:, None]
        sh = np.where(masked, -np.inf, sh)
        sl = np.where(masked, 0.0, sl)
        scoremag = np.where(masked, 0.0, scoremag)
        spillmag = np.where(masked, 0.0, spillmag)
    t = sh - np.max(sh, axis=-1, keepdims=True)
    d = t + sl
    r = exp_rows(d, with_lse=False)
    live = r.e > 0
    a = np.where(live, U * np.abs(t) + U * np.abs(d) + a_s, 0.0)
    grow = np.exp(2.0 * np.max(a, axis=-1, keepdims=True))
    eta = grow * (a + np.sum(r.y * a, axis=-1, keepdims=True))
    w = np.where(live, r.rel + eta + r.rel * eta, 0.0)
    wmax = np.max(w, axis=-1, keepdims=True)
    corr = np.where(wmax < 0.5, 1.0 / (1.0 - np.minimum(wmax, 0.5)), np.inf)
    out, b_pv, absout = dot(r.y, v, rel_slack=(2 * C_EXP + 3) * U, row0=row0)
    absv = np.abs(v)
    floor = 2 * (S + 2) * _TINY * grow * np.sum(absv, axis=-2, keepdims=True)
    vmax = np.max(absv, axis=-2, keepdims=True)
    with np.errstate(invalid="ignore"):  # (inf · 0 where w is infinite: NaN, which fmin drops)
        perr = np.fmin(corr * padded_matmul(r.y * w, absv, row0) + floor, _SUM_DP * vmax)
    bound = b_pv + perr
    aux = {"absout": absout, "K": np.asarray(float(S)), "E": np.asarray(float(q.shape[-1])),
           "scoremag": np.max(scoremag, axis=-1, keepdims=True), "vmax": vmax,
           "spillmag": np.max(spillmag, axis=-1, keepdims=True),
           "vlo": np.min(v, axis=-2, keepdims=True), "vhi": np.max(v, axis=-2, keepdims=True)}
    return out, bound, aux
