#!/usr/bin/env python
"""Benchmark: ``numstd.check`` of a bf16 matmul against one float64 ``np.matmul`` of the same size.

A, B are ``N×N`` bfloat16 (N(0, 1) rounded), the kernel output is the float32 product rounded
once to bfloat16.  Timed (medians over ``--repeats`` ≥ 5 interleaved rounds after one warm-up
round): ``numstd.check(C, op="matmul", inputs=[A, B])`` and ``np.matmul(A64, B64)`` on float64
copies prepared beforehand (the cheapest possible float64 reference).  Target: ``check / matmul ≤
2.5``.  A cProfile of one ``check`` call gives the share of each step and the functions with the
largest own time.  Prints one JSON line.

    python benchmarks/perf/bench_matmul.py [--n 2048] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import blas_info, emit, interleaved_times, profile_stages, profile_top  # noqa: E402

TARGET_RATIO = 2.5


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    import ml_dtypes
    import numpy as np

    import numstd

    n = args.n
    rng = np.random.default_rng(7)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    c = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    def run_check() -> bool:
        return numstd.check(c, op="matmul", inputs=[a, b]).passed

    verdict = numstd.check(c, op="matmul", inputs=[a, b])
    times = interleaved_times({"check": run_check, "matmul": lambda: np.matmul(a64, b64)}, args.repeats)
    t_check, t_mm = statistics.median(times["check"]), statistics.median(times["matmul"])
    all_check = times["check"]
    ratio = t_check / t_mm
    emit({
        "benchmark": "check-matmul", "shape": [n, n, n], "dtype": "bfloat16", "standard": verdict.standard_id,
        "passed": verdict.passed, "repeats": args.repeats, "check_s": round(t_check, 4),
        "check_all_s": [round(t, 4) for t in all_check], "float64_matmul_s": round(t_mm, 4),
        "float64_matmul_all_s": [round(t, 4) for t in times["matmul"]],
        "ratio": round(ratio, 3), "ratio_min": round(min(times["check"]) / min(times["matmul"]), 3),
        "target_ratio": TARGET_RATIO, "ok": ratio <= TARGET_RATIO,
        "blas": blas_info(), "profile_check": profile_top(run_check), "stages_check": profile_stages(run_check),
    })
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
