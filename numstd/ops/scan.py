"""Scans beyond cumsum: ``cumprod``.

``cumsum`` stays in :mod:`numstd.ops.reduction` (its published standards name it there).
"""

from __future__ import annotations

from ._shapes import at_least_1d
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES"]

ENTRIES: tuple[OpInfo, ...] = (
    entry("cumprod", "scan", ("x",), 0, {"axis": -1}, (
        "y[..., k, ...] = prod_{j <= k} x[..., j, ...] along axis (inclusive; the default is the last axis, "
        "torch.cumprod's dim and numpy.cumprod's axis)"),
          shape=at_least_1d, reference="scan:cumprod", corpus="scan", terms=("K", "spillmag", "sinkmag", "subabs", "subabs_bf16", "subabs_fp16"),
          calls={"torch": Call("torch.cumprod", {"dim": "axis"}), "jax": Call("jax.numpy.cumprod", {"axis": "axis"})}),
)
