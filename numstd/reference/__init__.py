"""References: the exact op applied to the exact inputs a kernel received, with a proven error bound.

``reference(op, inputs, **params)`` upcasts the inputs losslessly to float64 (every numstd format
embeds in float64) and evaluates the op's formula (:mod:`numstd.ops`) in float64 with
double-double (compensated) sums where float64 alone is not accurate enough: row sums, means,
prefix sums, and the dot products of a matrix product that cancel.  Each result carries
``error_bound``, a bound on ``|values - exact|`` element by element, and ``aux``, the magnitudes
the error models of :mod:`numstd.models` need.

One module per family computes values, bounds and aux:

==================  =================================================================
module              ops
==================  =================================================================
``summation``       double-double building blocks (no op)
``contraction``     matmul, linear
``scaled``          scaled_matmul (exact dequantization, then ``contraction.dot``)
``conv``            conv, conv_transpose (im2col rows through ``contraction.dot``)
``reduction``       sum, mean, cumsum
``softmax``         softmax, log_softmax
``normalization``   layer_norm, rms_norm
``elementwise``     exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt
``attention``       attention
``loss``            cross_entropy, mse_loss, huber_loss, smooth_l1_loss, kl_div, nll_loss, hinge_embedding_loss
``similarity``      normalize, cosine_similarity, cosine_embedding_loss, triplet_margin_loss
``exact``           hardtanh, clamp, amax, amin, argmax, argmin (bound 0)
==================  =================================================================

Conventions shared by all bounds:

* ``u = 2**-53``; each module docstring derives its bound (first order in ``u`` plus explicit
  second-order terms); the final bound is multiplied by ``1 + 2**-20`` to cover the rounding
  errors made while *evaluating* the bound formula and the neglected terms of relative size
  ``O(u)`` (all of which are below ``2**-30`` of the bound whenever the bound is finite).
* Where ``values`` is not finite the bound is 0: the value is the IEEE-754 result (NaN or an
  infinity propagated from non-finite inputs, or an overflow beyond float64's range, which any
  narrower output format overflows as well).  A NaN produced by the bound formula becomes ``inf``.
* Transcendental functions (numpy's ``exp``/``log``/``log1p``/``tanh``, scipy's ``erf``/``erfcx``)
  are not correctly rounded; their accuracy is taken with a margin of at least 2x over the worst
  error measured against mpmath (``tests/test_reference.py`` re-measures it); see
  :mod:`numstd.reference.elementwise`.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["Reference", "RowPiece", "reference", "validated_reference", "INFLATE"]

INFLATE: float = 1.0 + 2.0**-20
"""Factor applied to every bound (module docstring)."""

def _impl_of(op: str) -> tuple[str, str]:
    """(module in numstd.reference, function name) of ``op``: its catalog entry's ``reference``."""
    from ..ops import get_op

    module, func = get_op(op).reference.split(":")
    return module, func



@dataclass(frozen=True)
class RowPiece:
    """The inputs of a reference are a piece of whole rows, cut along the reduced axis.

    ``check`` judges rows longer than its chunk in pieces (:func:`numstd.judge.chunks.plan`): the
    reference of a piece needs statistics of its whole rows (softmax's maximum and exp-sum), which
    it computes from ``whole`` and which must not depend on the cut, so that every element gets the
    same bits whatever the chunk size.

    Attributes
    ----------
    whole : sequence of arrays
        The inputs of the whole rows, with the same axes as the piece's inputs: the rows' ``x``
        (``None`` for the other inputs, e.g. a norm's weight, of which the piece's inputs hold the
        piece's part).
    start, stop : int
        The piece's range along the reduced axis.
    key : hashable
        Names the rows among the pieces of one call (their index in the op's output), so that the
        statistics of one row are computed once for all its pieces (``cache``).
    """

    whole: Sequence[Any]
    start: int
    stop: int
    key: Any


@dataclass(frozen=True)
class Reference:
    """The exact op on the exact inputs, in float64, with a bound on its own error.

    Attributes
    ----------
    op : str
    values : numpy.ndarray of float64
        The op applied to the inputs (upcast losslessly to float64), output shape of the op.
    error_bound : numpy.ndarray of float64
        Broadcastable to ``values``: ``|values - exact| <= error_bound`` element by element.
    aux : mapping of str to numpy.ndarray
        Magnitudes the error models need (float64; names per op in :data:`numstd.models.OP_TERMS`).
    params : mapping
        The full parameter set (defaults filled, as returned by :func:`numstd.ops.validate`).

    All arrays are read-only.
    """

    op: str
    values: np.ndarray
    error_bound: np.ndarray
    aux: Mapping[str, np.ndarray]
    params: Mapping[str, object]


def _readonly(a: Any) -> np.ndarray:
    view = np.asarray(a, dtype=np.float64).view()  # a read-only view never freezes the caller's array
    view.flags.writeable = False
    return view


def _finish_bound(values: np.ndarray, bound: np.ndarray) -> np.ndarray:
    from ..core.native import compiled

    nat = compiled()
    if (nat is not None and isinstance(bound, np.ndarray) and bound.dtype == np.float64 and values.dtype == np.float64
            and bound.shape == values.shape and bound.flags.c_contiguous and values.flags.c_contiguous):
        out = np.empty(values.shape)
        nat.finish_bound(bound, values, out, INFLATE)  # the same operations, in C
        return out
    bound = np.multiply(np.asarray(bound, dtype=np.float64), INFLATE,
                        out=np.empty(np.broadcast_shapes(np.shape(bound), values.shape)))
    nan = np.isnan(bound)
    if nan.any():
        bound[nan] = np.inf
    special = ~np.isfinite(values)
    if special.any():
        bound[special] = 0.0
    return bound


def reference(op: str, inputs: Sequence[Any], *, resolution: Any = None, row_offset: int = 0,
              cache: dict | None = None, input_rounding: Any = None, **params: Any) -> Reference:
    """Compute the reference result of ``op`` on ``inputs``.

    Parameters
    ----------
    op : str
        Op name from :data:`numstd.ops.OPS`.
    inputs : sequence of arrays
        The exact inputs the kernel received (numpy incl. ml_dtypes, torch or jax arrays), in the
        order of the op's :attr:`~numstd.ops.OpSpec.inputs`.
    resolution : format, optional
        The format whose ULPs the values must resolve (default float32): contractions refine
        cancelling elements beyond one float64 GEMM only where that format could see the
        difference; ``check`` passes the standard's output format. The bound is proven either way.
    row_offset : int
        For callers that compute a product in chunks of rows (``check``): the absolute number of
        the first row of this chunk (matmul, linear: flattened rows of the output; attention: query
        rows), so that contractions compute each element in the same BLAS block whatever the
        chunking (:func:`numstd.reference.contraction.padded_matmul`).
    cache : dict, optional
        A dict the caller keeps across the chunks of one call: contractions convert a shared
        operand (the ``B`` of a matmul, a linear weight) once instead of once per chunk.
    input_rounding : format, optional
        A rounding the kernel may apply to its operands first (TF32 mode, autocast's bf16/fp16;
        a standard's ``[model] input_rounding``): contractions then add the aux terms ``indev``,
        ``insum`` and ``inrms`` (:mod:`numstd.reference.rounded_operands`).
    **params
        Op parameters (``axis``, ``eps``, ``approximate``, ``scale``, ``causal``, ``reduction``…).

    Returns
    -------
    Reference

    Raises
    ------
    UnknownOpError, ParameterError, DtypeError, ShapeError
        From :func:`numstd.ops.validate`.

    Examples
    --------
    >>> import numpy as np
    >>> r = reference("sum", [np.array([1e8, 1.0, -1e8], dtype=np.float32)])
    >>> float(r.values), bool(r.error_bound <= 2.0**-60)
    (1.0, True)
    """
    from ..ops.catalog import validate

    spec, arrays, full = validate(op, inputs, params)
    if input_rounding is not None:
        from ..core.formats import get_format
        from ..models import INPUT_ROUNDING_KEY

        full = dict(full, **{INPUT_ROUNDING_KEY: get_format(input_rounding).name})
    return validated_reference(spec.name, arrays, full, resolution=resolution, row_offset=row_offset, cache=cache)


def validated_reference(op: str, arrays: Sequence[np.ndarray], full: Mapping[str, Any], *, resolution: Any = None,
                        row_offset: int = 0, cache: dict | None = None, piece: RowPiece | None = None) -> Reference:
    """:func:`reference` of inputs and parameters that :func:`numstd.ops.validate` returned (or slices
    of those inputs, as ``check``'s chunks are): the same result without validating again.

    ``check`` calls it once per chunk, where validation cost ~30 µs of Python per chunk for nothing.
    ``piece`` (:class:`RowPiece`, only for ops whose chunks may cut the reduced axis: softmax,
    log_softmax, cumsum, layer_norm, rms_norm): ``arrays`` are a piece of the rows ``piece.whole``.
    """
    impl = _IMPLS.get(op)
    if impl is None:
        module, func = _impl_of(op)
        impl = _IMPLS[op] = getattr(importlib.import_module(f"{__name__}.{module}"), func)
    with np.errstate(all="ignore"):
        values, bound, aux = impl(op, arrays, dict(full, _resolution=resolution, _row0=int(row_offset), _cache=cache,
                                               **({} if piece is None else {"_piece": piece})))
        values = np.asarray(values, dtype=np.float64)
        bound = _finish_bound(values, bound)
    return Reference(
        op=op,
        values=_readonly(values),
        error_bound=_readonly(bound),
        aux=types.MappingProxyType({k: _readonly(v) for k, v in aux.items()}),
        params=types.MappingProxyType(dict(full)),
    )


_IMPLS: dict = {}  # op -> its implementation, imported on first use


from ..core._callable import make_callable  # noqa: E402

make_callable(__name__, reference)
