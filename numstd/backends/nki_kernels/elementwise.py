"""NKI elementwise functions: ``y = f(x)`` by ``nisa.activation`` on the Scalar Engine.

The Scalar Engine upcasts ``x`` to fp32, evaluates ``f`` with its piecewise-polynomial
approximation and rounds once to the output dtype.  Valid input ranges (``nki.isa`` activation
table): ``log`` on ``[2^-64, 2^64]``, ``sqrt`` on ``[2^-116, 2^118]``, ``rsqrt`` on
``[2^-87, 2^97]``; outside them the engine's result is not defined — a capture shows what the
hardware does there.  ``gelu`` is ``nl.gelu`` (erf form) or ``nl.gelu_apprx_tanh``.

The kernel walks the 2-D input in tiles of up to 128 rows (partitions) by ``COLS = 2048`` columns.
"""

import nki
import nki.isa as nisa
import nki.language as nl

__all__ = ["activation_kernel", "FUNCTIONS", "COLS"]

#: the ``fn`` names activation_kernel accepts (``gelu_tanh``: the tanh approximation)
FUNCTIONS = ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh", "silu", "relu", "rsqrt", "sqrt")
COLS = 2048


def _activation_op(fn):
    """The Scalar Engine activation function for ``fn`` (resolved at specialization time)."""
    if fn == "exp":
        return nl.exp
    if fn == "log":
        return nl.log
    if fn == "tanh":
        return nl.tanh
    if fn == "sigmoid":
        return nl.sigmoid
    if fn == "erf":
        return nl.erf
    if fn == "gelu":
        return nl.gelu
    if fn == "gelu_tanh":
        return nl.gelu_apprx_tanh
    if fn == "silu":
        return nl.silu
    if fn == "relu":
        return nl.relu
    if fn == "rsqrt":
        return nl.rsqrt
    assert fn == "sqrt", f"unknown activation {fn}"
    return nl.sqrt


@nki.jit
def activation_kernel(x, fn):
    """``fn(x)`` for the 2-D HBM tensor ``x`` (``fn`` one of :data:`FUNCTIONS`); output dtype of x."""
    R, C = x.shape
    P = nl.tile_size.pmax
    F = 2048
    op = _activation_op(fn)
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    for ri in range((R + P - 1) // P):
        r0 = ri * P
        p = P if R - r0 >= P else R - r0
        zero = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=zero, value=0.0)
        for ci in range((C + F - 1) // F):
            c0 = ci * F
            f = F if C - c0 >= F else C - c0
            x_tile = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x_tile, src=x[r0:r0 + p, c0:c0 + f])
            y = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
            nisa.activation(dst=y, op=op, data=x_tile, bias=zero, scale=1.0)
            nisa.dma_copy(dst=out[r0:r0 + p, c0:c0 + f], src=y)
    return out
