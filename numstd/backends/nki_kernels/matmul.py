"""NKI matmul: ``C = lhsT.T @ rhs`` on the Tensor Engine, K tiled over the partitions, PSUM fp32.

Tiling (NeuronCore Tensor Engine limits, ``nl.tile_size``): the contraction K is cut into tiles of
``pmax = 128`` rows — the partition dimension of both operands — the output rows M into tiles of
``gemm_stationary_fmax = 128`` (the stationary operand's free size) and the output columns N into
tiles of ``gemm_moving_fmax = 512`` (the moving operand's free size, one 2 KiB PSUM bank of fp32).
The last tile of each dimension is shorter (K = 300 → 128 + 128 + 44).

Numerics: for one (M, N) tile, ``nisa.nc_matmul`` multiplies one K tile and writes (first tile,
``accumulate=False``) or adds (``accumulate=True``) its fp32 result into the PSUM tile, in K order;
"the accumulation precision internal to Tensor Engine is float32" (``nki.isa.nc_matmul``).
``nisa.tensor_copy`` then converts the fp32 PSUM tile to the output dtype (round to nearest even,
or stochastic rounding when the runtime sets ``NEURON_RT_STOCHASTIC_ROUNDING_EN=1``).  This is the
computation :func:`numstd.emulate.trainium_matmul` models.

Layout: the left operand is passed transposed (``lhsT`` of shape ``[K, M]``) because the Tensor
Engine contracts over the partition dimension of both operands; the backend transposes on the host
(a data movement, exact).  Inputs: bfloat16, float16 or float32 (both float32 if either is).
"""

import nki
import nki.isa as nisa
import nki.language as nl

__all__ = ["matmul_kernel"]


@nki.jit
def matmul_kernel(lhsT, rhs):
    """``lhsT.T @ rhs`` for ``lhsT`` of shape ``[K, M]`` and ``rhs`` of shape ``[K, N]``; output dtype of lhsT."""
    K, M = lhsT.shape
    K_rhs, N = rhs.shape
    assert K == K_rhs, f"contraction sizes differ: lhsT has K={K}, rhs has K={K_rhs}"
    TILE_K = nl.tile_size.pmax
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_N = nl.tile_size.gemm_moving_fmax

    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mi in range((M + TILE_M - 1) // TILE_M):
        m0 = mi * TILE_M
        mt = TILE_M if M - m0 >= TILE_M else M - m0
        for ni in range((N + TILE_N - 1) // TILE_N):
            n0 = ni * TILE_N
            nt = TILE_N if N - n0 >= TILE_N else N - n0
            acc = nl.ndarray((mt, nt), dtype=nl.float32, buffer=nl.psum)
            for ki in range((K + TILE_K - 1) // TILE_K):
                k0 = ki * TILE_K
                kt = TILE_K if K - k0 >= TILE_K else K - k0
                a_tile = nl.ndarray((kt, mt), dtype=lhsT.dtype, buffer=nl.sbuf)
                b_tile = nl.ndarray((kt, nt), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile, src=lhsT[k0:k0 + kt, m0:m0 + mt])
                nisa.dma_copy(dst=b_tile, src=rhs[k0:k0 + kt, n0:n0 + nt])
                # PSUM: overwrite with the first K tile, then accumulate in fp32, in K order
                nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile, accumulate=ki > 0)
            out_tile = nl.ndarray((mt, nt), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)  # fp32 PSUM -> output dtype (RNE or SR)
            nisa.dma_copy(dst=result[m0:m0 + mt, n0:n0 + nt], src=out_tile)
    return result
