"""``softmax`` and ``log_softmax`` along an axis.

Reference: :mod:`numstd.reference.softmax`; variants: :mod:`numstd.corpus.softmax`.
"""

from __future__ import annotations

from ._shapes import at_least_1d
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES"]

ENTRIES: tuple[OpInfo, ...] = (
    entry("softmax", "softmax", ("x",), 0, {"axis": -1}, (
        'y_j = exp(x_j - max x) / sum_k exp(x_k - max x) along axis '
        '(torch.nn.functional.softmax with dim=axis).'
    ),
          shape=at_least_1d, reference="softmax:softmax", corpus="softmax", terms=("dev", "devmean", "K"),
          calls={"torch": Call("torch.nn.functional.softmax", {"dim": "axis"}),
                 "jax": Call("jax.nn.softmax", {"axis": "axis"})}),
    entry("log_softmax", "softmax", ("x",), 0, {"axis": -1}, (
        'y_j = (x_j - max x) - log sum_k exp(x_k - max x) along axis '
        '(torch.nn.functional.log_softmax with dim=axis).'
    ),
          shape=at_least_1d, reference="softmax:log_softmax", corpus="softmax",
          terms=("dev", "devmean", "lse", "K"),
          calls={"torch": Call("torch.nn.functional.log_softmax", {"dim": "axis"}),
                 "jax": Call("jax.nn.log_softmax", {"axis": "axis"})}),
)
