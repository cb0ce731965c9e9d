"""Winograd F(2x2, 3x3) and FFT convolutions in float32, judged by NS-CONV-FP32 (docs/methodology.md).

    PYTHONPATH=$PWD python scripts/conv_fast_algorithms.py

For two suite shapes of NS-CONV-FP32@1 (3x3 and 5x5, stride 1) and the suite's distributions, each
algorithm runs with every operation in float32 (numpy float32 / complex64 arithmetic: scipy.fft keeps
single precision), the bias added in float32.  Printed per algorithm and distribution: how many of
the seeds' cases pass NS-CONV-FP32@1, the worst normalised error (|e| / the standard's bound), the
worst |e| / (u32 · sqrt(K) · |x|·|w|) (the componentwise quantity the standard scales), and for
FFT the worst |e| / (u32 · log2(n) · ||x_n||_2 · ||w_o||_2) (the normwise model, n the transform
size, norms over the image's and the filter's entries).
"""

from __future__ import annotations

import math

import numpy as np

from numstd import check
from numstd.catalog.suites import make_case
from numstd.reference import reference

U32 = 2.0**-24
SHAPES = ([2, 16, 32, 1, 1, 1, 1, 3, 3, 16, 16], [1, 64, 16, 1, 1, 0, 1, 5, 5, 12, 12])
DISTS = ("normal", "uniform", "heavy", "rowscale", "wide")  # the suite's three, then two of wide dynamic range
SEEDS = (0, 1, 2, 3)


def winograd_f2x3(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """F(2x2, 3x3) (Lavin & Gray 2016), stride 1, float32 throughout; odd output sizes padded."""
    f = np.float32
    BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], f)
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], f)
    AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], f)
    n, c, h, wd = x.shape
    oh, ow = h + 2 * pad - 2, wd + 2 * pad - 2
    th, tw = -(-oh // 2), -(-ow // 2)
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), f)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    U = np.einsum("ij,ocjk,lk->ocil", G, w.astype(f), G).astype(f)  # (O, C, 4, 4)
    tiles = np.lib.stride_tricks.sliding_window_view(xp, (4, 4), axis=(2, 3))[:, :, ::2, ::2]  # n c th tw 4 4
    V = np.einsum("ij,nctwjk,lk->nctwil", BT, tiles, BT).astype(f)
    M = np.einsum("ocil,nctwil->notwil", U, V).astype(f)  # the channel sum in float32
    Y = np.einsum("ij,notwjk,lk->notwil", AT, M, AT).astype(f)  # (n, O, th, tw, 2, 2)
    y = Y.transpose(0, 1, 2, 4, 3, 5).reshape(n, w.shape[0], 2 * th, 2 * tw)[:, :, :oh, :ow]
    return (y + b.astype(f)[None, :, None, None]).astype(f)


def fft_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """Cross-correlation by FFT in single precision (complex64), stride 1."""
    import scipy.fft as sf

    n, c, h, wd = x.shape
    k = w.shape[-1]
    xp = np.pad(x.astype(np.float32), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    H, W = xp.shape[2:]
    wf = w[:, :, ::-1, ::-1].astype(np.float32)
    X = sf.rfft2(xp, s=(H, W))
    Wt = sf.rfft2(wf, s=(H, W))
    Y = np.einsum("nchw,ochw->nohw", X, Wt).astype(np.complex64)
    y = sf.irfft2(Y, s=(H, W)).astype(np.float32)[:, :, k - 1:, k - 1:]
    return (y + b.astype(np.float32)[None, :, None, None]).astype(np.float32)


def main() -> None:
    print(f"{'algorithm':10s} {'shape':34s} {'dist':8s} pass  worst|e|/B  worst|e|/(u sqrtK |x||w|)  FFT normwise")
    for shape in SHAPES:
        pad, k = shape[5], shape[7]
        for name, fn in (("winograd", winograd_f2x3), ("fft", fft_conv)):
            if name == "winograd" and k != 3:
                continue
            for dist in DISTS:
                passed, worst, comp, normwise = 0, 0.0, 0.0, 0.0
                for seed in SEEDS:
                    c = make_case("conv", shape, dist, seed, ["float32"])
                    x, w, b = c.inputs
                    y = fn(x, w, b, pad)
                    v = check(y, op="conv", inputs=c.inputs, standard="NS-CONV-FP32@1", **c.params)
                    passed += v.passed
                    worst = max(worst, float(v.normalized_max))
                    r = reference("conv", c.inputs, **c.params)
                    e = np.abs(y.astype(np.float64) - r.values)
                    K = float(r.aux["K"])
                    comp = max(comp, float(np.max(e / (U32 * math.sqrt(K) * r.aux["absdot"]))))
                    if name == "fft":
                        nfft = (x.shape[2] + 2 * pad) * (x.shape[3] + 2 * pad)
                        xn = np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=(1, 2, 3)))[:, None, None, None]
                        wn = np.sqrt(np.sum(w.astype(np.float64) ** 2, axis=(1, 2, 3)))[None, :, None, None]
                        normwise = max(normwise, float(np.max(e / (U32 * math.log2(nfft) * xn * wn))))
                extra = f"{normwise:.3g}" if name == "fft" else "-"
                print(f"{name:10s} {str(shape):34s} {dist:8s} {passed}/{len(SEEDS)}  {worst:10.3g}  "
                      f"{comp:24.3g}  {extra}")


if __name__ == "__main__":
    main()
