"""torch.autocast's lower-precision list as corpus variants: float32 inputs rounded to the 16-bit
output format, then a legitimate 16-bit kernel.

``torch.autocast(dtype=D)`` runs the ops of its lower-precision list (``AT_FORALL_LOWER_PRECISION_FP``
in ``aten/src/ATen/autocast_mode.h``: conv1d/2d/3d, conv_transpose1d/2d/3d, matmul, mm, bmm, linear,
addmm, scaled_dot_product_attention, ...) on float32 tensors by casting every floating input to
``D`` (``cached_cast``, round to nearest even) and calling the ``D`` kernel, whose output is ``D``.
For each op of :data:`AUTOCAST_OPS` and each of its legitimate variants that applies to ``D``
inputs and a ``D`` output, :func:`derive` builds ``autocast-<name>``: the same kernel on the
inputs rounded to ``D``. They apply only to float32 inputs with a 16-bit output (the
``NS-<OP>-FP32-TO-{BF16,FP16}`` standards); for a float32 output the same rounding is the
``bf16-inputs`` / ``tf32-inputs`` bug of the contraction corpus.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["AUTOCAST_OPS", "derive"]

#: catalog ops on torch.autocast's lower-precision list (CUDA and CPU; measured on torch 2.13 CPU)
AUTOCAST_OPS: tuple[str, ...] = ("matmul", "linear", "conv", "conv_transpose", "attention")


def _is_autocast(out: Any, fmts: Sequence[Any]) -> bool:
    fl = [f for f in fmts if f is not None]
    return bool(fl) and out.p < 24 and out.bits == 16 and all(f.name == "float32" for f in fl)


def _rounded(inputs: Sequence[Any], out: Any) -> list:
    from ..core.formats import round_to

    return [round_to(x, out) if isinstance(x, np.ndarray) and x.dtype == np.float32 else x for x in inputs]


def _wrap(v: Any) -> Any:
    def fn(inputs, params, out, acc, seed, _v=v):  # noqa: ANN001
        return _v.fn(_rounded(inputs, out), params, out, acc, seed)

    def applies(out, fmts, params, _v=v):  # noqa: ANN001
        if not _is_autocast(out, fmts):
            return False
        return _v.applies is None or bool(_v.applies(out, [out if f is not None else None for f in fmts], params))

    obs: Callable | None = None
    if v.observable is not None:
        def obs(inputs, params, out, _v=v):  # noqa: ANN001
            return _v.observable(_rounded(inputs, out), params, out)

    return replace(v, name=f"autocast-{v.name}", fn=fn, applies=applies, observable=obs,
                   description=f"torch.autocast: float32 inputs rounded (RNE) to the 16-bit output format, "
                               f"then {v.name}: {v.description}")


def _fp8(v: Any) -> Any:
    """The bug: the float32 inputs rounded to fp8 e4m3 (3 significand bits) instead of the 16-bit type."""
    def fn(inputs, params, out, acc, seed, _v=v):  # noqa: ANN001
        from ..core.formats import get_format, round_to

        e4m3 = get_format("float8_e4m3fn")
        xs = [round_to(round_to(x, e4m3), out) if isinstance(x, np.ndarray) and x.dtype == np.float32 else x
              for x in inputs]
        return _v.fn(xs, params, out, acc, seed)

    return replace(v, name="autocast-fp8-inputs", family="input-rounding", legit=False, fn=fn, cause="precision-downgrade",
                   applies=lambda out, fmts, params: _is_autocast(out, fmts), observable=None,
                   description="float32 inputs rounded to fp8 e4m3 (not the 16-bit type autocast uses), "
                               f"then {v.name}")


def derive(table: Mapping[str, Sequence[Any]]) -> dict[str, list]:
    """``op -> [autocast-<name> variants]`` for the ops of :data:`AUTOCAST_OPS` in ``table``: one per
    legitimate variant, and the bug ``autocast-fp8-inputs`` (the op's first legitimate variant on
    inputs rounded to fp8 e4m3)."""
    out: dict[str, list] = {}
    for op in AUTOCAST_OPS:
        legit = [v for v in table.get(op, ()) if v.legit]
        if legit:
            out[op] = [_wrap(v) for v in legit] + [_fp8(legit[0])]
    return out
