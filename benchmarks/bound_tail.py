#!/usr/bin/env python
"""Benchmark: how the worst element of a probabilistic bound grows with the number of outputs N.

A standard's constants (``lam`` of ``lam·u·√K·|A||B|``) are calibrated on its suite, outputs of at
most a few thousand elements, but a verdict requires the bound of *every* element, so what the
constant has to cover is ``max_i |e_i|/E_i`` over the N elements of the call, which grows with N.
For legitimate kernels (torch CPU when installed, numpy's own float32 arithmetic; matmul, sum and
KernelBench's avg_pool3d) on the suite's
input distributions, this prints ``normalized_max`` (``max |error| / bound``) judged by a standard
*without* the tail model (``--standard``-style fixed IDs below), against N, and the ratio to the
smallest N next to ``ln N / ln N_0`` (exponential tail) and ``√(ln N / ln N_0)`` (Gaussian union
bound): the evidence for :func:`numstd.judge.criteria.tail_factor`.

    python benchmarks/bound_tail.py [--seeds 3] [--max-batch 256]

Writes ``benchmarks/results/bound_tail.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the standards judged (fixed versions without tail_n, so the raw growth shows)
STANDARDS = {"matmul": "NS-MATMUL-FP32@2", "sum": "NS-SUM-FP32@2", "avg_pool3d": "NS-AVGPOOL3D-FP32@1"}
POOL = {"kernel_size": 3, "stride": 2, "padding": 1}  # KernelBench's 46_Average_Pooling_3D


def _kernels() -> dict:
    """name -> {op: f(arrays) -> float32 output}: legitimate implementations available here."""
    out = {"numpy": {"matmul": lambda a, b: np.matmul(a, b), "sum": lambda x: np.sum(x, axis=-1)}}  # (no numpy pool)
    try:
        import torch
    except ImportError:
        return out
    torch.set_num_threads(1)
    import torch.nn.functional as F

    out["torch"] = {"matmul": lambda a, b: torch.bmm(torch.from_numpy(a), torch.from_numpy(b)).numpy(),
                    "sum": lambda x: torch.sum(torch.from_numpy(x), dim=-1).numpy(),
                    "avg_pool3d": lambda x: F.avg_pool3d(torch.from_numpy(x), **POOL).numpy()}
    return out


def main() -> int:
    import numstd
    from numstd.catalog.suites import draw

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--max-batch", type=int, default=256)
    p.add_argument("--ops", default="matmul,sum,avg_pool3d")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bound_tail.json")
    args = p.parse_args()
    batches = [b for b in (1, 4, 16, 64, 256, 1024) if b <= args.max_batch]
    rows = []
    for kname, ops in _kernels().items():
        for op, fn in ops.items():
            if op not in args.ops.split(","):
                continue
            for dist in ("heavy", "normal"):
                base = None
                for b in batches:
                    worst = []
                    for seed in range(args.seeds):
                        rng = np.random.default_rng([seed, b])
                        if op == "matmul":
                            xs = [draw(rng, (b, 64, 64), dist).astype(np.float32) for _ in range(2)]
                        elif op == "sum":  # b*64 rows of K = 1024
                            xs = [draw(rng, (b * 64, 1024), dist).astype(np.float32)]
                        else:  # b*8 channels of 32^3, pooled to 16^3 (32,768 outputs each b)
                            xs = [draw(rng, (b, 8, 32, 32, 32), dist).astype(np.float32)]
                        y = np.asarray(fn(*xs))
                        kw = {"axis": -1} if op == "sum" else POOL if op == "avg_pool3d" else {}
                        v = numstd.check(y, op=op, inputs=xs, standard=STANDARDS[op], **kw)
                        worst.append(v.normalized_max)
                    n = int(y.size)
                    med = float(np.median(worst))
                    base = base or (n, med)
                    row = {"kernel": kname, "op": op, "standard": STANDARDS[op], "dist": dist, "N": n,
                           "normalized_max": [round(w, 4) for w in worst], "median": round(med, 4),
                           "ratio": round(med / base[1], 3), "ln_ratio": round(math.log(n) / math.log(base[0]), 3),
                           "sqrt_ln_ratio": round(math.sqrt(math.log(n) / math.log(base[0])), 3)}
                    rows.append(row)
                    print(f"{kname:6} {op:6} {dist:6} N={n:>9,} max/bound median {med:.3f} (×{row['ratio']:.2f}; "
                          f"ln N/ln N0 {row['ln_ratio']:.2f}, sqrt {row['sqrt_ln_ratio']:.2f}) {row['normalized_max']}",
                          flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"numstd": numstd.__version__, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
