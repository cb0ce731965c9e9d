"""References for the elementwise functions: each op's float64 formula and bound from its entry.

The formulas, their bounds and the library accuracy they rest on are documented with the entries,
in :mod:`numstd.ops.elementwise` (``OpInfo.ref``); this module evaluates them on the float64
inputs.  aux: ``x`` (the float64 input) and ``cond = |x f'(x)|`` (relu: ``|x| [x > 0]``), and
``spillmag`` (the largest intermediate, ``OpInfo.spill``) for the ops that declare one.
"""

from __future__ import annotations

import numpy as np

from ..ops import get_op
from ..ops.elementwise import C_ERF, C_ERFCX, C_EXP, C_LOG, C_TANH

__all__ = ["elementwise", "C_EXP", "C_LOG", "C_TANH", "C_ERF", "C_ERFCX"]


def elementwise(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of the elementwise op ``op``: ``(values, bound, aux)`` from the entry's ``ref``."""
    x = np.asarray(arrays[0], dtype=np.float64)
    spec = get_op(op)
    v, bound, cond = spec.ref(x, params)
    aux = {"x": x, "cond": cond}
    if spec.spill is not None:
        aux["spillmag"] = spec.spill(x, params)
    return v, bound, aux
