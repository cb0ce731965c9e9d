"""NKI softmax over the last axis: ``y = exp(x - max x) / sum exp(x - max x)``, rows on partitions.

For each tile of up to 128 rows (one row per partition, the whole row in the free dimension):

1. ``nisa.tensor_reduce(op=nl.maximum, negate=True)`` — ``-max x`` per row (Vector Engine, exact);
2. ``nisa.activation_reduce(op=nl.exp, bias=-max x, reduce_op=nl.add)`` — ``e = exp(x - max x)`` in
   fp32 on the Scalar Engine (``x - max x`` rounded once to fp32, ``exp`` approximated by the
   engine) and the row sum ``s = Σ e`` accumulated by the engine in fp32;
3. ``nisa.reciprocal`` — ``1 / s`` on the Vector Engine (fp32);
4. ``nisa.tensor_scalar(op0=nl.multiply)`` — ``y = e · (1/s)`` rounded once to the output dtype.

Rows must fit one partition of SBUF: at most ``MAX_COLS = 8192`` columns (three fp32 row buffers).
"""

import nki
import nki.isa as nisa
import nki.language as nl

__all__ = ["softmax_kernel", "MAX_COLS"]

MAX_COLS = 8192


@nki.jit
def softmax_kernel(x):
    """Softmax of each row of the 2-D HBM tensor ``x``; output dtype of x."""
    R, C = x.shape
    assert C <= 8192, f"softmax_kernel holds a row in one partition: at most 8192 columns, got {C}"
    P = nl.tile_size.pmax
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    for ri in range((R + P - 1) // P):
        r0 = ri * P
        p = P if R - r0 >= P else R - r0
        x_tile = nl.ndarray((p, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[r0:r0 + p, 0:C])

        neg_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=x_tile, axis=1, negate=True)

        e = nl.ndarray((p, C), dtype=nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e, op=nl.exp, data=x_tile, reduce_op=nl.add, reduce_res=row_sum,
                               bias=neg_max, scale=1.0)

        inv_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)

        y = nl.ndarray((p, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[r0:r0 + p, 0:C], src=y)
    return out
