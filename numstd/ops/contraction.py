"""Contractions: ``matmul`` and ``linear`` (dot products of length K).

Reference: :mod:`numstd.reference.contraction` (float64 GEMM refined with compensated dot products
where the output format could see the difference); variants: :mod:`numstd.corpus.contraction`
(accumulation orders, tensor-core and Trainium models, and the bugs).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.errors import ShapeError
from ._shapes import broadcast, check_vector, need_ndim
from .entry import Call, OpInfo, entry

__all__ = ["ENTRIES"]


def _matmul_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    A, B = a
    for pos, arr in enumerate(a):
        if arr.ndim == 0:
            raise ShapeError(f"matmul: inputs[{pos}] ({spec.inputs[pos]}) is 0-d; matmul needs arrays "
                             "with at least 1 dimension (use multiply for scalars)")
    ka = A.shape[-1]
    kb = B.shape[0] if B.ndim == 1 else B.shape[-2]
    if ka != kb:
        raise ShapeError(
            f"matmul: inner dimensions differ: A {A.shape} has K={ka} columns but B {B.shape} has "
            f"K={kb} rows; A.shape[-1] must equal B.shape[-2] (B.shape[0] for a 1-D B)"
        )
    batch = broadcast("matmul", "A and B", A.shape[:-2], B.shape[:-2])
    tail = (A.shape[-2],) if A.ndim >= 2 else ()
    tail += (B.shape[-1],) if B.ndim >= 2 else ()
    return batch + tail


def _linear_shape(spec: OpInfo, a: list, p: Mapping[str, Any]) -> tuple[int, ...]:
    x, W, b = a
    need_ndim(spec, 0, x, 1, "(..., in_features)")
    if W.ndim != 2:
        raise ShapeError(f"linear: inputs[1] (weight) has shape {W.shape}; it must be 2-D "
                         "(out_features, in_features) as in torch.nn.functional.linear")
    if W.shape[1] != x.shape[-1]:
        raise ShapeError(
            f"linear: x {x.shape} has in_features={x.shape[-1]} but weight {W.shape} has "
            f"in_features={W.shape[1]}; weight must be (out_features, in_features) — pass W.T if "
            "yours is (in, out)"
        )
    check_vector(spec, 2, b, W.shape[0], "one bias per output feature")
    return x.shape[:-1] + (W.shape[0],)


ENTRIES: tuple[OpInfo, ...] = (
    entry("matmul", "contraction", ("A", "B"), 0, {}, (
        'C = A @ B with numpy.matmul semantics: batched over leading axes with broadcasting; '
        'a 1-D A is a row vector, a 1-D B a column vector, and the added axis is removed. K ='
        ' A.shape[-1] = B.shape[-2].'
    ),
          shape=_matmul_shape, reference="contraction:matmul", corpus="contraction",
          terms=("absdot", "K", "indev", "insum", "inrms"),  # in*: reference/rounded_operands.py
          calls={"torch": Call("torch.matmul"), "jax": Call("jax.numpy.matmul"), "numpy": Call("numpy.matmul")}),
    entry("linear", "contraction", ("x", "weight", "bias"), 1, {}, (
        'y = x @ weight.T + bias (torch.nn.functional.linear): weight is (out_features, '
        'in_features), bias (out_features,) or omitted. K = in_features.'
    ),
          shape=_linear_shape, reference="contraction:linear", corpus="contraction",
          terms=("absdot", "K", "indev", "insum", "inrms"),  # in*: reference/rounded_operands.py
          calls={"torch": Call("torch.nn.functional.linear")}),
)
