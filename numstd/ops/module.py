"""``module``: a whole model graded by :func:`numstd.grade` (the NS-MODULE standards); not an op of
``check`` or ``reference``."""

from __future__ import annotations

from ._shapes import same_shape
from .entry import OpInfo, entry

__all__ = ["ENTRIES"]

ENTRIES: tuple[OpInfo, ...] = (
    entry("module", "module", ("inputs",), 0, {}, (
        'y = model(*inputs): a whole model (a KernelBench-style nn.Module or callable) graded'
        ' by numstd.grade against its own float64 run: the NS-MODULE standards. Not an op of '
        'numstd.check or numstd.reference.'
    ),
          shape=same_shape, reference="", corpus="", terms=("base",)),
)
