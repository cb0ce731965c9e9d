"""Casts into block-scaled formats: ``cast`` (quantize, then dequantize).

``cast(x, to=F)`` is what a kernel passes on after quantizing ``x`` into the block-scaled format
``F`` (:data:`numstd.core.scaled.SCALED_FORMATS`: OCP MX ``mxfp8_e4m3`` ... ``mxfp4``, ``nvfp4``,
fp8 with fp32 per-tensor/per-row/per-block scales): the dequantized round trip
``y = RN_out(q * S)`` with ``q`` the element codes and ``S`` the block scales of the format's scale
rule.  ``check`` judges that tensor (``check(y, op="cast", inputs=[x], to="mxfp4")``, ``y`` in
float32 or bfloat16); the codes and scales themselves are what :func:`numstd.core.scaled.quantize`
returns.  Each standard selects one format (``selector = {to = ...}``).

Reference: :mod:`numstd.reference.cast`; variants: :mod:`numstd.corpus.casts`.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.errors import FormatError, ParameterError
from .entry import REQUIRED, OpInfo, entry

__all__ = ["ENTRIES"]


def _to(op: str, value: Any) -> str:
    """``to``: the canonical name of a block-scaled format (aliases and any case accepted)."""
    from ..core.scaled import SCALED_FORMATS, get_scaled_format

    try:
        return get_scaled_format(value).name
    except (FormatError, AttributeError):
        raise ParameterError(f"{op}: to={value!r} is not a block-scaled format; use one of "
                             f"{', '.join(SCALED_FORMATS)}") from None


def _shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    from ..core.errors import ShapeError

    if a[0].ndim == 0:
        raise ShapeError("cast: x is a scalar; block-scaled formats cut the last axis into blocks: pass x[None]")
    return tuple(a[0].shape)


ENTRIES: tuple[OpInfo, ...] = (
    entry("cast", "exact", ("x",), 0, {"to": REQUIRED}, (
        "y = dequantize(quantize(x, to)) = RN_out(q * S): x quantized into the block-scaled format `to` "
        "(codes q = RN_elem,sat(x / S), S the block scales of the format's rule: OCP MX v1.0 E8M0 "
        "2^(floor(log2 amax) - emax_elem) per 32 elements; NVFP4 E4M3 per 16 times an fp32 tensor scale; "
        "fp32 amax / max per tensor, row, 1x128 block or 128x128 tile) and multiplied back, rounded once "
        "to the output format. Blocks run along the last axis (tiles over the last two); a block whose "
        "amax is NaN or infinite is NaN."
    ),
          shape=_shape, reference="cast:cast", corpus="casts", terms=("legit",), param_checks={"to": _to}),
)
