"""Reference for cross_entropy with class-index targets: ``loss_n = logsumexp(x_n) - x_n[t_n]``.

Per row this is ``-log_softmax(x_n)[t_n] = L_n + |d_n|`` with ``L_n = log1p(sum_{j != argmax}
exp(d_j))`` and ``d_n = x_n[t_n] - max x_n <= 0`` (no cancellation), so the bound of
:mod:`numstd.reference.softmax` applies: ``|loss_n - exact| <= u |loss_n| + u |d_n| + e_L,n``.
``reduction="sum"`` adds the losses (all ``>= 0``) in double-double:
``|values - exact| <= |lo| + DD_C d u^2 sum_n loss_n + sum_n bound_n``; ``"mean"`` divides that
double-double by ``N`` (:func:`~numstd.reference.summation.dd_div_int`, ``+ DIV_C u^2 |values|``, the
other terms divided by ``N``).

aux: ``lse`` (``L_n``) and ``dev`` (``|d_n|``) reduced like the values (so they broadcast to them),
``K = C`` and ``N``, the rows of the whole batch: a caller that computes the reference in chunks of
rows (``check`` with ``reduction="none"``) passes the batch's row count as ``params[BATCH_KEY]``, so
that a model term in ``N`` does not depend on the chunk size.
"""

from __future__ import annotations

import numpy as np

from .softmax import exp_rows, lse_error
from ..core.summation import DD_C, DIV_C, U, dd_div_int, pairwise_sum

__all__ = ["cross_entropy", "BATCH_KEY"]

#: params key of the whole batch's row count when the reference is computed in chunks of rows
BATCH_KEY = "_batch"


def cross_entropy(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``cross_entropy(logits, target, reduction)``; see the module docstring."""
    x = np.asarray(arrays[0], dtype=np.float64)
    target = np.asarray(arrays[1]).astype(np.intp)
    n, c = x.shape
    reduction = params["reduction"]
    if n == 0:
        z = np.zeros(0) if reduction == "none" else np.asarray(0.0)
        return z, z, {"lse": z, "dev": z, "K": np.asarray(float(c)), "N": np.asarray(0.0)}
    r = exp_rows(x)
    d_t = np.take_along_axis(r.d, target[:, None], axis=-1)[:, 0]
    lse = r.lse[:, 0]
    losses = lse - d_t
    per_row = U * np.abs(losses) + U * np.abs(d_t) + lse_error(r)[:, 0]
    aux = {"lse": lse, "dev": np.abs(d_t), "K": np.asarray(float(c)), "N": np.asarray(float(params.get(BATCH_KEY, n)))}
    if reduction == "none":
        return losses, per_row, aux
    if not np.all(np.isfinite(losses)):  # IEEE propagation of inf/NaN logits
        total = np.sum(losses) if reduction == "sum" else np.mean(losses)
        red = np.sum if reduction == "sum" else np.mean
        return np.asarray(total), np.asarray(np.inf), dict(aux, lse=red(lse), dev=red(np.abs(d_t)))
    hi, lo, depth = pairwise_sum(losses, -1)
    spread = DD_C * depth * U * U * np.sum(losses) + np.sum(per_row)
    if reduction == "sum":
        return hi, np.abs(lo) + spread, dict(aux, lse=np.sum(lse), dev=np.sum(np.abs(d_t)))
    qh, ql = dd_div_int(hi, lo, n)
    bound = np.abs(ql) + DIV_C * U * U * np.abs(qh) + spread / n
    return qh, bound, dict(aux, lse=np.mean(lse), dev=np.mean(np.abs(d_t)))
