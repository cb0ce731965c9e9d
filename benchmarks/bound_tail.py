#!/usr/bin/env python
"""Benchmark: how the worst element of a probabilistic bound grows with the number of outputs N.

A standard's constants (``lam`` of ``lam·u·√K·|A||B|``) are calibrated on its suite, outputs of at
most a few thousand elements, but a verdict requires the bound of *every* element, so what the
constant has to cover is ``max_i |e_i|/E_i`` over the N elements of the call, which grows with N.
For legitimate kernels (torch CPU when installed, numpy's own float32 arithmetic; matmul, sum and
KernelBench's avg_pool3d, the families with tail_n; and, to show why the others need none, the
TF32 and fp32 -> bf16 matmuls, whose bound has a deterministic input-rounding term, and fp32
softmax, log_softmax, cumsum and layer_norm, whose bound has a deterministic output term) on the
suite's input distributions, this prints ``normalized_max`` (``max |error| / bound``) judged by a standard
*without* the tail model (``--standard``-style fixed IDs below), against N, and the ratio to the
smallest N next to ``ln N / ln N_0`` (exponential tail) and ``√(ln N / ln N_0)`` (Gaussian union
bound): the evidence for :func:`numstd.judge.criteria.tail_factor`.

    python benchmarks/bound_tail.py [--seeds 3] [--max-batch 256] [--ops matmul,sum,avg_pool3d]
    python benchmarks/bound_tail.py --ops matmul_tf32,matmul_to_bf16,softmax,log_softmax,cumsum,layer_norm \
        --max-batch 64 --out benchmarks/results/bound_tail_other.json

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
STANDARDS = {"matmul": "NS-MATMUL-FP32@2", "sum": "NS-SUM-FP32@2", "avg_pool3d": "NS-AVGPOOL3D-FP32@1",
             # the families published without tail_n (their latest versions)
             "matmul_tf32": "NS-MATMUL-FP32-TF32@1", "matmul_to_bf16": "NS-MATMUL-FP32-TO-BF16@1",
             "softmax": "NS-SOFTMAX-FP32@2", "log_softmax": "NS-LOGSOFTMAX-FP32@2", "cumsum": "NS-CUMSUM-FP32@1",
             "layer_norm": "NS-LAYERNORM-FP32@2"}
#: the catalog op each benchmark op is checked as
OP = {"matmul_tf32": "matmul", "matmul_to_bf16": "matmul"}
#: ops over rows of K = 1024 (b·64 rows), with their check parameters
ROWWISE = {"sum": {"axis": -1}, "softmax": {"axis": -1}, "log_softmax": {"axis": -1}, "cumsum": {"axis": -1},
           "layer_norm": {"eps": 1e-5}}


def _tf32_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An fp32 matmul of TF32-rounded operands (tensor-core TF32: 10 stored mantissa bits, RNE),
    products and sums in fp32 (numpy's sgemm)."""
    from numstd.core.formats import round_to

    return np.matmul(round_to(a, "tf32").astype(np.float32), round_to(b, "tf32").astype(np.float32))
POOL = {"kernel_size": 3, "stride": 2, "padding": 1}  # KernelBench's 46_Average_Pooling_3D


def _kernels() -> dict:
    """name -> {op: f(arrays) -> float32 output}: legitimate implementations available here."""
    out = {"numpy": {"matmul": lambda a, b: np.matmul(a, b), "sum": lambda x: np.sum(x, axis=-1),
                     "matmul_tf32": _tf32_numpy}}  # (no numpy pool)
    try:
        import torch
    except ImportError:
        return out
    torch.set_num_threads(1)
    import torch.nn.functional as F

    out["torch"] = {"matmul": lambda a, b: torch.bmm(torch.from_numpy(a), torch.from_numpy(b)).numpy(),
                    "sum": lambda x: torch.sum(torch.from_numpy(x), dim=-1).numpy(),
                    "avg_pool3d": lambda x: F.avg_pool3d(torch.from_numpy(x), **POOL).numpy(),
                    # autocast's lower-precision list: fp32 operands cast to bf16, bf16 GEMM, bf16 output
                    "matmul_to_bf16": lambda a, b: _bf16_numpy(torch.bmm(torch.from_numpy(a).bfloat16(),
                                                                         torch.from_numpy(b).bfloat16())),
                    "softmax": lambda x: torch.softmax(torch.from_numpy(x), dim=-1).numpy(),
                    "log_softmax": lambda x: torch.log_softmax(torch.from_numpy(x), dim=-1).numpy(),
                    "cumsum": lambda x: torch.cumsum(torch.from_numpy(x), dim=-1).numpy(),
                    "layer_norm": lambda x: F.layer_norm(torch.from_numpy(x), (x.shape[-1],), eps=1e-5).numpy()}
    return out


def _bf16_numpy(t) -> np.ndarray:
    """A torch bfloat16 tensor as an ml_dtypes.bfloat16 array (bit for bit)."""
    import ml_dtypes
    import torch

    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)


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
                        if op.startswith("matmul"):
                            xs = [draw(rng, (b, 64, 64), dist).astype(np.float32) for _ in range(2)]
                        elif op in ROWWISE:  # b*64 rows of K = 1024
                            xs = [draw(rng, (b * 64, 1024), dist).astype(np.float32)]
                        else:  # b*8 channels of 32^3, pooled to 16^3 (32,768 outputs each b)
                            xs = [draw(rng, (b, 8, 32, 32, 32), dist).astype(np.float32)]
                        y = np.asarray(fn(*xs))
                        kw = ROWWISE.get(op, POOL if op == "avg_pool3d" else {})
                        if op == "layer_norm":  # weight 1, bias 0 (F.layer_norm without them)
                            xs = xs + [np.ones(1024, np.float32), np.zeros(1024, np.float32)]
                        v = numstd.check(y, op=OP.get(op, op), inputs=xs, standard=STANDARDS[op], **kw)
                        worst.append(v.normalized_max)
                    n = int(y.size)
                    med = float(np.median(worst))
                    base = base or (n, med)
                    row = {"kernel": kname, "op": op, "standard": STANDARDS[op], "dist": dist, "N": n,
                           "normalized_max": [round(w, 4) for w in worst], "median": round(med, 4),
                           "ratio": round(med / base[1], 3), "ln_ratio": round(math.log(n) / math.log(base[0]), 3),
                           "sqrt_ln_ratio": round(math.sqrt(math.log(n) / math.log(base[0])), 3)}
                    rows.append(row)
                    print(f"{kname:6} {op:14} {dist:6} N={n:>9,} max/bound median {med:.3f} (×{row['ratio']:.2f}; "
                          f"ln N/ln N0 {row['ln_ratio']:.2f}, sqrt {row['sqrt_ln_ratio']:.2f}) {row['normalized_max']}",
                          flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"numstd": numstd.__version__, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
