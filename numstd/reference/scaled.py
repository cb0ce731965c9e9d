"""Reference of ``scaled_matmul``: the dequantized operands, exact, through the matmul reference.

Dequantization is exact in float64.  An element ``a = q * s`` has a code ``q`` of at most 4
significant bits (fp8 e4m3: 4, e5m2: 3, MX fp6/fp4: at most 4) and a scale ``s`` of at most 24
(float32) or 1 (E8M0, a power of two): at most 28 significant bits, and its exponent stays within
float64's normal range (``|q s|`` between ``2**-149 * 2**-16`` and ``2**128 * 57344``).  So
``A = A_q ⊙ s_A`` and ``B = B_q ⊙ s_B`` are the exact operands, and

    C = A @ B

is the exact product whatever the order in which a kernel applies the scales (after the whole dot
product, per K block, or to the operands): scaling is linear, ``sum_b s_A,b s_B,b sum_{k in b}
q_a q_b = sum_k (s_A q_a)(s_B q_b)``.

The products of two 28-bit values have up to 56 bits, so ``C`` is not one exact GEMM; it is
:func:`numstd.reference.contraction.dot`, the matmul reference with its proven bound (float64
GEMM, refined by an Ozaki split and double-double dot products where the output format could see
the difference: Higham 2002 eq. (3.5); Ozaki, Ogita, Oishi & Rump 2012).

aux:

``absdot``  ``|A| @ |B|`` of the dequantized operands (an upper bound, :func:`~numstd.reference.contraction.abs_product`);
``K``       the reduction length;
``nblocks`` the number of scale blocks along K (1 per tensor / row, ``ceil(K/128)``, ``ceil(K/32)`` for MX);
``tcmag``   ``sqrt(34 sum_i M_i**2)`` over the blocks ``i`` of :data:`TC_BLOCK` products, ``M_i`` the
            largest magnitude a block FMA of an fp8 tensor core aligns to when its narrow accumulator
            is promoted to fp32 every :data:`PROMOTE` products: ``max(|c_i|, |c_{i+1}|, max|a| max|b|)``
            with ``c_i`` the exact partial sum of the chunk before block ``i``.  A block FMA truncates
            its 33 aligned terms and its result to the grid ``u_tc 2**E <= u_tc M_i`` (``u_tc = 2**-13``),
            errors of independent signs: ``u_tc * tcmag`` is their root-sum-square size
            (docs/scaled_gemm.md §3).
``tcsum``   ``sum_i M_i``: the size of the errors that keep one sign (the truncation toward zero of
            the incoming partial sum and of each block result), which add linearly.

With ``use_fast_accum=True`` (the call allows the narrow accumulator over the whole of K) the
chunk of ``tcmag`` and ``tcsum`` is the whole of K: ``c_i`` is the running sum of every block before.
"""

from __future__ import annotations

import numpy as np

from .contraction import RESOLUTION_KEY, ROW0_KEY, dot, padded_matmul

__all__ = ["scaled_matmul", "dequantized", "PROMOTE", "TC_BLOCK"]

PROMOTE: int = 128
"""K terms per promotion of the H100 fp8 accumulator to fp32 (DeepSeek-V3 §3.3.2, cuBLAS)."""

TC_BLOCK: int = 32
"""Products per block FMA of the H100/H200 fp8 tensor core (two blocks of 16 on Ada: covered, docs/scaled_gemm.md)."""


def dequantized(arrays: list, scaling: str) -> tuple[np.ndarray, np.ndarray]:
    """``(A_q ⊙ s_A, B_q ⊙ s_B)`` in float64, exact (module docstring)."""
    from ..ops.scaled import element_scales

    A_q, sA, B_q, sB = arrays
    with np.errstate(invalid="ignore", over="ignore"):
        A = np.asarray(A_q).astype(np.float64) * element_scales(sA, scaling, A_q.shape, "A")
        B = np.asarray(B_q).astype(np.float64) * element_scales(sB, scaling, B_q.shape, "B")
    return A, B


def _tensor_core_terms(A: np.ndarray, B: np.ndarray, row0: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tcmag, tcsum)``: ``sqrt((TC_BLOCK + 2) * sum_i M_i**2)`` and ``sum_i M_i`` over the K blocks ``i`` of
    :data:`TC_BLOCK` terms (module docstring).

    ``M_i = max(|c_i|, |c_{i+1}|, max_k |a_k| * max_k |b_k|)`` with ``c_i`` the exact partial sum of
    the blocks before ``i`` in its chunk of ``chunk`` terms (``c = 0`` at a chunk's start: the
    accumulator promoted to fp32 and restarted), ``max_k`` over the block; each block sum is one
    float64 GEMM of 32 terms (relative error below 2**-47, covered by the factor ``1 + 2**-40``).
    """
    M, K = A.shape
    sq = np.zeros((M, B.shape[1]))
    lin = np.zeros_like(sq)
    c = np.zeros_like(sq)
    for k0 in range(0, K, TC_BLOCK):
        if k0 % chunk == 0:
            c[...] = 0.0
        a, b = A[:, k0:k0 + TC_BLOCK], B[k0:k0 + TC_BLOCK]
        nxt = c + padded_matmul(a, b, row0)
        m = np.abs(a).max(axis=1)[:, None] * np.abs(b).max(axis=0)[None, :]
        np.maximum(m, np.abs(c), out=m)
        np.maximum(m, np.abs(nxt), out=m)
        sq += m * m
        lin += m
        c = nxt
    grow = 1.0 + 2.0**-40
    return np.sqrt((TC_BLOCK + 2) * sq) * grow, lin * grow


def scaled_matmul(op: str, arrays: list, params: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Reference of ``scaled_matmul(A_q, scale_A, B_q, scale_B, scaling=...)``: ``(values, bound, aux)``."""
    from ..ops.scaled import k_blocks

    scaling = params["scaling"]
    A, B = dequantized(arrays, scaling)
    res = params.get(RESOLUTION_KEY)
    row0 = params.get(ROW0_KEY, 0)
    values, bound, absdot = dot(A, B, resolution=res or "float32", resolution_slack=res is not None,
                                row0=row0)  # (no cache: A and B are this call's temporaries)
    K = A.shape[1]
    # the narrow accumulator is promoted every PROMOTE terms, or never where the call allows fast accumulation
    tcmag, tcsum = _tensor_core_terms(A, B, row0, max(K, 1) if params.get("use_fast_accum") else PROMOTE)
    aux = {"absdot": absdot, "K": np.asarray(float(K)), "nblocks": np.asarray(float(k_blocks(K, scaling))),
           "tcmag": tcmag, "tcsum": tcsum}
    return values, bound, aux
