#!/usr/bin/env python
"""Benchmark: what the rounded-operand model (version 2 of the TF32 and autocast contraction
standards, docs/methodology.md §3.1 "Rounded operands") changes, against version 1's worst case.

On N(0,1) operands, for each standard: the kernel that rounds exactly as the standard allows, a
finer rounding (TF32), none (float64 then one rounding), and a coarser rounding (bf16 under TF32 and
under the fp16 standards, fp8 e4m3 under the bf16 ones), judged by @1 and @2; prints
``max |error| / bound`` and the verdict. The kernels are float64 products of the rounded operands
(conv: torch's float64 conv2d, skipped without torch).

    python benchmarks/rounded_operands.py [--k 1152,4608] > benchmarks/results/rounded_operands.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (standard, op, output format, allowed rounding, coarser rounding)
CASES = [("NS-MATMUL-FP32-TF32", "matmul", "float32", "tf32", "bfloat16"),
         ("NS-MATMUL-FP32-TO-BF16", "matmul", "bfloat16", "bfloat16", "float8_e4m3fn"),
         ("NS-MATMUL-FP32-TO-FP16", "matmul", "float16", "float16", "bfloat16"),
         ("NS-LINEAR-FP32-TO-BF16", "linear", "bfloat16", "bfloat16", "float8_e4m3fn"),
         ("NS-LINEAR-FP32-TO-FP16", "linear", "float16", "float16", "bfloat16"),
         ("NS-CONV-FP32-TO-BF16", "conv", "bfloat16", "bfloat16", "float8_e4m3fn"),
         ("NS-CONV-FP32-TO-FP16", "conv", "float16", "float16", "bfloat16")]


def main() -> int:
    import ml_dtypes  # noqa: F401  (the bfloat16 dtype name)

    import numstd
    from numstd.core.formats import get_format, round_to

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default="1152,4608", help="contraction lengths (conv: 9 × input channels)")
    ks = [int(k) for k in p.parse_args().k.split(",")]
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        torch = None
    print("| standard | K | operands rounded to | @1 max|e|/B | @1 | @2 max|e|/B | @2 |\n|---|---|---|---|---|---|---|")
    for sid, op, out, allowed, coarse in CASES:
        if op == "conv" and torch is None:
            print(f"| {sid} | – | (needs torch) | | | | |")
            continue
        dt = np.dtype(get_format(out).numpy_dtype)
        for K in ks:
            g = np.random.default_rng(0)
            if op == "conv":
                cin = max(1, K // 9)
                x = g.standard_normal((2, cin, 8, 8)).astype(np.float32)
                w = g.standard_normal((16, cin, 3, 3)).astype(np.float32)
                b = g.standard_normal(16).astype(np.float32)
                inputs, params = [x, w, b], {"padding": 1}
            else:
                A = g.standard_normal((64, K)).astype(np.float32)
                B = g.standard_normal((K, 64)).astype(np.float32)
                bias = g.standard_normal(64).astype(np.float32)
                inputs = [A, B.T.copy(), bias] if op == "linear" else [A, B]
                params = {}

            def kernel(fin: str) -> np.ndarray:
                r = [None if a is None else np.asarray(round_to(a, fin), np.float64) for a in inputs]
                if op == "conv":
                    y = F.conv2d(*(torch.from_numpy(a) for a in r), padding=1).numpy()
                elif op == "linear":
                    y = r[0] @ r[1].T + r[2]
                else:
                    y = r[0] @ r[1]
                return np.asarray(round_to(y, out)).astype(dt)

            for fin in dict.fromkeys((allowed, "tf32", "float64", coarse)):
                y = kernel(fin)
                v1, v2 = (numstd.check(y, op=op, inputs=inputs, standard=f"{sid}@{n}", **params) for n in (1, 2))
                kk = 9 * max(1, K // 9) if op == "conv" else K
                print(f"| {sid} | {kk} | {fin}{' (coarser)' if fin == coarse else ''} | {v1.normalized_max:.3g} | "
                      f"{'pass' if v1.passed else 'FAIL'} | {v2.normalized_max:.3g} | {'pass' if v2.passed else 'FAIL'} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
