#!/usr/bin/env python
"""Benchmark: numstd.grade of one small KernelBench-layout problem (tests/problems/).

Target: median < 1 s per grade after import and a warm-up grade (5 trials × 7 input distributions
= 35 cases, each running the float64 truth, the baseline and the candidate and judging them), with
torch limited to one intra-op thread: on tiny problems, thread start-up costs more than the work,
and a grading harness runs many grades in parallel processes anyway.  The timing with torch's
default thread count is reported too.  Prints one JSON line; exit code 1 when the target is missed.

    python benchmarks/perf/bench_grade.py [--problem softmax] [--candidate faithful] [--dtype fp32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TARGET_S = 1.0


def _timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problem", default="softmax")
    p.add_argument("--candidate", default="faithful")
    p.add_argument("--dtype", default=None)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()

    t0 = time.perf_counter()
    import torch

    import numstd
    from numstd.grade_cli import grade_files, load_module

    import_s = time.perf_counter() - t0
    patch = None
    fallback = load_module(ROOT / "tests" / "problems" / "standards_fallback.py")
    if fallback.published() is None:  # NS-MODULE-* not published yet: the provisional copies
        import pytest

        patch = pytest.MonkeyPatch()
        fallback.install(patch)
    pdir = ROOT / "tests" / "problems" / args.problem

    def run() -> object:
        return grade_files(pdir / "problem.py", pdir / f"{args.candidate}.py", dtype=args.dtype, trials=args.trials)

    threads = torch.get_num_threads()
    t = time.perf_counter()
    first = run()
    first_s = time.perf_counter() - t
    default_threads = _timed(run, max(3, args.repeats // 2))
    torch.set_num_threads(1)
    one_thread = _timed(run, args.repeats)
    torch.set_num_threads(threads)
    med = statistics.median(one_thread)
    n_elem = first.cases[0].verdict.n_elements
    print(json.dumps({
        "benchmark": "grade", "problem": args.problem, "candidate": args.candidate, "dtype": first.dtype,
        "passed": first.passed, "cases": len(first.cases), "elements_per_case": n_elem,
        "standards": list(first.standards), "import_s": round(import_s, 3), "first_grade_s": round(first_s, 3),
        "median_s_one_thread": round(med, 4), "median_s_default_threads": round(statistics.median(default_threads), 4),
        "default_threads": threads, "per_case_ms_one_thread": round(1e3 * med / len(first.cases), 3),
        "target_s": TARGET_S, "numstd": numstd.__version__, "torch": torch.__version__, "cpus": os.cpu_count(),
    }))
    if patch is not None:
        patch.undo()
    return 0 if med < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
