"""NKI layer norm and RMS norm over the last axis (rows on partitions, a row in the free dimension).

Per tile of up to 128 rows, in fp32 on the engines (``n`` = row length):

layer norm (two-pass variance)::

    s    = Σ x                                   nisa.tensor_reduce(op=nl.add)
    d    = x + (-s/n)                            nisa.tensor_scalar (fp32 tile)
    ss   = Σ d²                                  nisa.activation_reduce(op=nl.square, reduce_op=nl.add)
    rstd = rsqrt(ss · (1/n) + eps)               nisa.activation(op=nl.rsqrt, scale=1/n, bias=eps)
    y    = (d · rstd) · weight + bias            nisa.scalar_tensor_tensor, nisa.tensor_tensor

RMS norm::

    ss   = Σ x²;  rstd = rsqrt(ss · (1/n) + eps);  y = (x · rstd) · weight

``weight`` and ``bias`` (shape ``[1, n]`` in HBM) are broadcast to every partition on the Tensor
Engine, as the NKI library does: ``ones[1, p]ᵀ @ w[1, f]`` into PSUM (exact: one product by 1.0
per element), ``f ≤ 512`` columns at a time.  ``rsqrt`` on the Scalar Engine is valid on
``[2^-87, 2^97]``: ``eps`` keeps the argument inside.  Rows of at most ``MAX_COLS = 8192`` columns.
"""

import nki
import nki.isa as nisa
import nki.language as nl

__all__ = ["layer_norm_kernel", "rms_norm_kernel", "MAX_COLS"]

MAX_COLS = 8192


def _vector(p, value):
    """A ``[p, 1]`` fp32 SBUF tile filled with ``value`` (bias operands are vectors on NeuronCore-v2)."""
    v = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=v, value=value)
    return v


def _broadcast_rows(vec_sbuf, ones, p, c0, f):
    """``vec[0, c0:c0+f]`` repeated on ``p`` partitions, in PSUM (fp32), via ``onesᵀ @ vec``."""
    rows = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=rows, stationary=ones[0:1, 0:p], moving=vec_sbuf[0:1, c0:c0 + f], accumulate=False)
    return rows


def _load_row(vec, C):
    """The ``[1, C]`` HBM tensor ``vec`` in SBUF, and a ``[1, 128]`` tile of ones of its dtype."""
    row = nl.ndarray((1, C), dtype=vec.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=vec[0:1, 0:C])
    ones = nl.ndarray((1, nl.tile_size.pmax), dtype=vec.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    return row, ones


def _rstd(data, p, C, eps):  # noqa: ANN001, ANN202 - NKI tiles
    """``1/sqrt(mean(data²) + eps)`` per partition row: squares summed on ScalarE in fp32 (one pass)."""
    squares = nl.ndarray((p, C), dtype=nl.float32, buffer=nl.sbuf)
    sq_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=squares, op=nl.square, data=data, reduce_op=nl.add,
                           reduce_res=sq_sum, bias=_vector(p, 0.0), scale=1.0)
    rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=rstd, op=nl.rsqrt, data=sq_sum, bias=_vector(p, eps), scale=1.0 / C)
    return rstd


@nki.jit
def layer_norm_kernel(x, weight, bias, eps):
    """Layer norm of each row of ``x`` ``[R, C]`` with ``weight``, ``bias`` ``[1, C]``; output dtype of x."""
    R, C = x.shape
    assert C <= 8192, f"layer_norm_kernel holds a row in one partition: at most 8192 columns, got {C}"
    P = nl.tile_size.pmax
    F = nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    w_row, w_ones = _load_row(weight, C)
    b_row, b_ones = _load_row(bias, C)
    for ri in range((R + P - 1) // P):
        r0 = ri * P
        p = P if R - r0 >= P else R - r0
        x_tile = nl.ndarray((p, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[r0:r0 + p, 0:C])

        row_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=x_tile, axis=1)
        neg_mean = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_mean, data=row_sum, op0=nl.multiply, operand0=-1.0 / C)
        centred = nl.ndarray((p, C), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=centred, data=x_tile, op0=nl.add, operand0=neg_mean)

        rstd = _rstd(centred, p, C, eps)

        for ci in range((C + F - 1) // F):
            c0 = ci * F
            f = F if C - c0 >= F else C - c0
            w_rows = _broadcast_rows(w_row, w_ones, p, c0, f)
            scaled = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=scaled, data=centred[0:p, c0:c0 + f], op0=nl.multiply,
                                      operand0=rstd, op1=nl.multiply, operand1=w_rows)
            b_rows = _broadcast_rows(b_row, b_ones, p, c0, f)
            y = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=y, data1=scaled, data2=b_rows, op=nl.add)
            nisa.dma_copy(dst=out[r0:r0 + p, c0:c0 + f], src=y)
    return out


@nki.jit
def rms_norm_kernel(x, weight, eps):
    """RMS norm of each row of ``x`` ``[R, C]`` with ``weight`` ``[1, C]``; output dtype of x."""
    R, C = x.shape
    assert C <= 8192, f"rms_norm_kernel holds a row in one partition: at most 8192 columns, got {C}"
    P = nl.tile_size.pmax
    F = nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    w_row, w_ones = _load_row(weight, C)
    for ri in range((R + P - 1) // P):
        r0 = ri * P
        p = P if R - r0 >= P else R - r0
        x_tile = nl.ndarray((p, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[r0:r0 + p, 0:C])

        rstd = _rstd(x_tile, p, C, eps)

        for ci in range((C + F - 1) // F):
            c0 = ci * F
            f = F if C - c0 >= F else C - c0
            w_rows = _broadcast_rows(w_row, w_ones, p, c0, f)
            y = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=y, data=x_tile[0:p, c0:c0 + f], op0=nl.multiply,
                                      operand0=rstd, op1=nl.multiply, operand1=w_rows)
            nisa.dma_copy(dst=out[r0:r0 + p, c0:c0 + f], src=y)
    return out
