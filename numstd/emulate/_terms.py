"""Terms of a reduction: exact float64 products of two operands, or a given array of terms.

Every emulator in :mod:`numstd.emulate` reduces a sequence of *terms* ``t_0 .. t_{K-1}`` held
exactly in float64 (one sequence per output element, all outputs processed together).  For a
matrix product the terms are the products ``t_k = A[..., m, k] * B[..., k, n]``.

Exactness of the products (the assumption every model rests on): an operand of precision ``p``
has at most ``p`` significant bits, so a product has at most ``p_A + p_B`` bits and is exact in
float64 (53 bits) when ``p_A + p_B <= 53`` -- in particular for any operands of at most 26 bits
(float32 has 24, tf32/float16 11, bfloat16 8, fp8 4 or 3) -- provided it neither overflows nor
underflows float64, which holds for values inside the exponent range ``[-300, 300]`` (every format
of :data:`numstd.formats.FORMATS` except float64 itself).  float64 operands are accepted when their
values satisfy the same conditions; their precision is measured from the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.arrays import to_numpy
from ..core.errors import DtypeError, FormatError, ParameterError, ShapeError
from ..core.formats import FORMATS, Format, get_format, round_to

__all__ = ["Operand", "operand", "host_array", "exponents", "ProductTerms", "ArrayTerms", "Terms"]

# Exponent given to zero operands: far below any real exponent, so a sum of two stays below.
ZERO_EXPONENT = -(1 << 20)
# float64 operands must lie within 2**±_RANGE so that products are exact in float64.
_RANGE = 300
# Elements of float64 scratch per chunk of terms (32 MiB).
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Operand:
    """One operand held as float64, with the precision and exponent range its values occupy.

    Attributes
    ----------
    values : numpy.ndarray
        float64 copy of the operand (exact).
    fmt : Format or None
        The operand's format (None for float64 arrays, whose precision is measured).
    p : int
        Significant bits of the widest element (the format's precision, or measured).
    emin : int
        Exponent of the smallest normal binade of the operand's format (float64: -1022); the
        tensor-core model clamps subnormal exponents to it.
    """

    values: np.ndarray
    fmt: Format | None
    p: int
    emin: int

    def min_quantum_exponent(self) -> int:
        """Exponent of the smallest possible last significant bit of a nonzero finite element."""
        v = np.abs(self.values[np.isfinite(self.values) & (self.values != 0)])
        if v.size == 0:
            return _RANGE
        _, e = np.frexp(v.min())
        return max(int(e) - 1, self.emin) - self.p + 1

    def max_abs(self) -> float:
        """Largest finite magnitude (0 for an all-zero operand)."""
        v = np.abs(self.values[np.isfinite(self.values)])
        return float(v.max()) if v.size else 0.0


def exponents(values: np.ndarray, emin: int) -> np.ndarray:
    """``max(floor(log2|x|), emin)`` per element (int64); zeros get ``ZERO_EXPONENT``.

    This is the exponent of the format's encoding (subnormals share ``emin``), the exponent
    Khattak & Mikaitis (2025) align products with in their tensor-core model.
    """
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.where(np.isfinite(values), values, 1.0))
    e = e.astype(np.int64) - 1
    np.maximum(e, emin, out=e)
    e[values == 0] = ZERO_EXPONENT
    return e


def _significant_bits(v: np.ndarray) -> int:
    """Largest number of significant bits among the finite nonzero float64 values ``v``."""
    v = v[np.isfinite(v) & (v != 0)]
    if v.size == 0:
        return 1
    m, _ = np.frexp(np.abs(v))
    mi = np.ldexp(m, 53).astype(np.int64)  # the 53-bit integer significand, exact
    low = mi & -mi  # lowest set bit
    _, tz = np.frexp(low.astype(np.float64))  # low = 2**(tz - 1)
    return int(53 - (tz - 1).min())


def host_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a numpy array; numpy arrays of the ml_dtypes formats pass through unchanged.

    (:func:`numstd.arrays.to_numpy` rejects ml_dtypes arrays, whose dtype kind is ``"V"``.)
    """
    if isinstance(x, np.ndarray) and x.dtype.name in FORMATS:
        return x
    return to_numpy(x, name=name)


def operand(x: Any, name: str) -> Operand:
    """Convert one input array to an :class:`Operand`, checking that products will be exact.

    Raises
    ------
    DtypeError
        For non-floating dtypes, and for float64 values with more than 26 significant bits or
        outside ``2**±300`` (their products would not be exact in float64).
    """
    arr = host_array(x, name)
    if arr.dtype.kind in "biu":
        raise DtypeError(f"{name}: dtype {arr.dtype} is integer; pass floating-point values")
    try:
        fmt = get_format(arr.dtype)
    except FormatError:
        raise DtypeError(
            f"{name}: dtype {arr.dtype} is not one of the floating-point formats; convert it "
            "first (e.g. .astype(np.float32))"
        ) from None
    with np.errstate(invalid="ignore"):
        values = arr.astype(np.float64)
    if fmt.name != "float64":
        return Operand(values, fmt, fmt.p, fmt.emin)
    p = _significant_bits(values)
    finite = np.abs(values[np.isfinite(values) & (values != 0)])
    out_of_range = finite.size and (
        finite.max() >= np.ldexp(1.0, _RANGE) or finite.min() < np.ldexp(1.0, -_RANGE)
    )
    if p > 26 or out_of_range:
        raise DtypeError(
            f"{name}: float64 values with {p} significant bits"
            f"{' or magnitudes outside 2**±300' if out_of_range else ''} cannot be emulated: "
            "products must be exact in float64, which needs operands of at most 26 bits; pass "
            "the array in its real format (float32, bfloat16, ...) or round it first"
        )
    return Operand(values, None, p, -1022)


class Terms:
    """Interface of a sequence of K float64 terms per output element (shape ``shape``)."""

    K: int
    shape: tuple[int, ...]

    def term(self, k: int) -> np.ndarray:  # pragma: no cover - interface
        """Term ``k`` of every output element, shape ``shape``."""
        raise NotImplementedError

    def terms(self, k0: int, k1: int) -> np.ndarray:  # pragma: no cover - interface
        """Terms ``k0 .. k1-1``, shape ``(k1 - k0, *shape)``."""
        raise NotImplementedError

    def element_terms(self, flat_index: int, k0: int, k1: int) -> np.ndarray:  # pragma: no cover
        """Terms ``k0 .. k1-1`` of one output element (C-order flat index), 1-D."""
        raise NotImplementedError

    def in_format(self, fmt: Format) -> bool:  # pragma: no cover - interface
        """True when every term is guaranteed to be a finite value of ``fmt``."""
        raise NotImplementedError

    def chunk_size(self) -> int:
        """Terms per chunk so that a chunk stays within :data:`CHUNK_ELEMENTS` elements."""
        size = int(np.prod(self.shape, dtype=np.int64))
        return max(1, CHUNK_ELEMENTS // max(size, 1))


class ArrayTerms(Terms):
    """Terms given as an array whose axis 0 is the reduction axis."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.ascontiguousarray(values, dtype=np.float64)
        self.K = self.values.shape[0]
        self.shape = self.values.shape[1:]

    def term(self, k: int) -> np.ndarray:
        return self.values[k]

    def terms(self, k0: int, k1: int) -> np.ndarray:
        return self.values[k0:k1]

    def element_terms(self, flat_index: int, k0: int, k1: int) -> np.ndarray:
        return self.values[k0:k1].reshape(k1 - k0, -1)[:, flat_index]

    def in_format(self, fmt: Format) -> bool:
        v = self.values
        if not np.isfinite(v).all():
            return False
        return bool(np.array_equal(round_to(v, fmt).astype(np.float64), v))


class ProductTerms(Terms):
    """Products ``A[..., m, k] * B[..., k, n]`` of a (batched) matrix product, numpy semantics.

    ``A`` of shape ``(..., M, K)`` and ``B`` of shape ``(..., K, N)``; 1-D operands are promoted
    as by :func:`numpy.matmul` (``(K,)`` -> ``(1, K)`` for A, ``(K, 1)`` for B) and the promoted
    axis is removed again by :meth:`finish`.
    """

    def __init__(self, A: Any, B: Any) -> None:
        a, b = operand(A, "A"), operand(B, "B")
        if a.values.ndim == 0 or b.values.ndim == 0:
            raise ShapeError("matmul: A and B must have at least one dimension (numpy semantics)")
        if a.p + b.p > 53:
            raise DtypeError(
                f"products of {a.p}-bit and {b.p}-bit significands are not exact in float64; "
                "the emulators need operands of at most 26 significant bits"
            )
        self._drop: list[int] = []
        av, bv = a.values, b.values
        if av.ndim == 1:
            av = av[None, :]
            self._drop.append(-2)
        if bv.ndim == 1:
            bv = bv[:, None]
            self._drop.append(-1)
        if av.shape[-1] != bv.shape[-2]:
            raise ShapeError(
                f"matmul: A has {av.shape[-1]} columns but B has {bv.shape[-2]} rows "
                f"(A.shape={a.values.shape}, B.shape={b.values.shape}); the contracted sizes "
                "must match"
            )
        try:
            batch = np.broadcast_shapes(av.shape[:-2], bv.shape[:-2])
        except ValueError:
            raise ShapeError(
                f"matmul: batch shapes {av.shape[:-2]} and {bv.shape[:-2]} do not broadcast"
            ) from None
        av = av.reshape((1,) * (len(batch) - (av.ndim - 2)) + av.shape)
        bv = bv.reshape((1,) * (len(batch) - (bv.ndim - 2)) + bv.shape)
        self.a, self.b = a, b
        self.K = av.shape[-1]
        self.shape = tuple(batch) + (av.shape[-2], bv.shape[-1])
        self.bits = a.p + b.p
        # K first and contiguous: term k is an outer product of two contiguous vectors.
        self._at = np.ascontiguousarray(np.moveaxis(av, -1, 0))  # (K, *batchA, M)
        self._bk = np.ascontiguousarray(np.moveaxis(bv, -2, 0))  # (K, *batchB, N)
        self._batch = tuple(batch)

    def term(self, k: int) -> np.ndarray:
        return self._at[k][..., :, None] * self._bk[k][..., None, :]

    def terms(self, k0: int, k1: int) -> np.ndarray:
        return self._at[k0:k1][..., :, None] * self._bk[k0:k1][..., None, :]

    def element_terms(self, flat_index: int, k0: int, k1: int) -> np.ndarray:
        idx = np.unravel_index(flat_index, self.shape)
        bidx, m, n = idx[:-2], idx[-2], idx[-1]
        at = np.broadcast_to(self._at, (self.K, *self._batch, self._at.shape[-1]))
        bk = np.broadcast_to(self._bk, (self.K, *self._batch, self._bk.shape[-1]))
        return at[(slice(k0, k1), *bidx, m)] * bk[(slice(k0, k1), *bidx, n)]

    def exponent_sums(self, k0: int, k1: int) -> np.ndarray:
        """``e(A[m,k]) + e(B[k,n])`` for terms ``k0 .. k1-1`` (see :meth:`Operand.exponents`)."""
        if not hasattr(self, "_ea"):
            self._ea = exponents(self._at, self.a.emin)
            self._eb = exponents(self._bk, self.b.emin)
        return self._ea[k0:k1][..., :, None] + self._eb[k0:k1][..., None, :]

    def in_format(self, fmt: Format) -> bool:
        if self.bits > fmt.p:
            return False
        if not (np.isfinite(self.a.values).all() and np.isfinite(self.b.values).all()):
            return False
        if self.a.max_abs() * self.b.max_abs() > fmt.max_finite:
            return False
        quantum = self.a.min_quantum_exponent() + self.b.min_quantum_exponent()
        return quantum >= fmt.emin - fmt.p + 1

    def finish(self, result: np.ndarray) -> np.ndarray:
        """Remove the axes numpy's matmul adds for 1-D operands."""
        for axis in sorted(self._drop):
            result = np.squeeze(result, axis=axis if axis == -1 else -2)
        return result

    def rows(self, m0: int, m1: int) -> "ProductTerms":
        """The products of rows ``m0 .. m1-1`` of A only (a view; for memory-bounded orders)."""
        sub = object.__new__(ProductTerms)
        sub.__dict__.update(self.__dict__)
        sub._at = self._at[..., m0:m1]
        sub.shape = self.shape[:-2] + (m1 - m0, self.shape[-1])
        sub._drop = []
        if hasattr(self, "_ea"):
            sub._ea = self._ea[..., m0:m1]
        return sub


def check_order_parameter(name: str, value: int) -> int:
    """A positive integer parameter (block, splits, tile sizes) or a ParameterError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
