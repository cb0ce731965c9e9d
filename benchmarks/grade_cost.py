#!/usr/bin/env python
"""Benchmark: the cost of numstd.grade per KernelBench-layout problem (tests/problems/*/faithful.py).

For each problem, one grade of the faithful candidate with the full protocol (secret seed, order
swap, cached/constant-output checks, reference determinism rerun, reproducibility rerun, op
standard where one applies; second shape set off, so every problem runs the same cases):
``forwards`` counts the truth (float64), reference and candidate calls, reruns included;
``forward s`` is the time inside them (``GradeReport.forward_seconds``); ``overhead`` is
``seconds − forward s``: redraws, copies, judging, diagnosis; ``protocol's own`` is the grade's
time minus that of the same grade with every protocol step off (:meth:`numstd.grade.Protocol.off`).  Target: overhead ≤ 0.5× the
forwards, in-process.  ``--isolated`` adds the subprocess mode (child start and transfers are
part of its overhead).  torch runs one intra-op thread.  Prints the Markdown table and one JSON
line; exit code 1 when the median in-process ratio misses the target.

    python benchmarks/grade_cost.py [--trials 5] [--isolated] [--problems softmax,matmul]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PROBLEMS = ROOT / "tests" / "problems"
TARGET = 0.5


def main() -> int:
    import torch

    from numstd.grade import Protocol
    from numstd.grade_cli import grade_files, load_module

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--isolated", action="store_true", help="also time the subprocess mode")
    p.add_argument("--problems", default=None, help="comma-separated problem names (default: all)")
    args = p.parse_args()
    torch.set_num_threads(1)
    fallback = load_module(PROBLEMS / "standards_fallback.py")
    import pytest

    names = args.problems.split(",") if args.problems else sorted(d.name for d in PROBLEMS.iterdir()
                                                                  if (d / "problem.py").is_file())
    rows, ratios = [], []
    with pytest.MonkeyPatch.context() as mp:
        fallback.install(mp)
        for name in names:
            prob, cand = PROBLEMS / name / "problem.py", PROBLEMS / name / "faithful.py"
            grade_files(prob, cand, trials=1, secret_seed=0, shapes2=False)  # warm-up (imports, caches)
            r = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False)
            bare = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False, protocol=Protocol.off())
            over = r.seconds - r.forward_seconds
            ratio = over / r.forward_seconds if r.forward_seconds > 0 else float("inf")
            ratios.append(ratio)
            row = {"problem": name, "cases": len(r.cases), "forwards": sum(r.forwards.values()),
                   "detail": dict(r.forwards), "forward_s": r.forward_seconds, "seconds": r.seconds,
                   "overhead_s": over, "ratio": ratio, "passed": r.passed,
                   "protocol_s": r.seconds - bare.seconds, "bare_forwards": sum(bare.forwards.values())}
            if args.isolated:
                t = time.perf_counter()
                ri = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False, isolate=True)
                row["isolated_s"] = time.perf_counter() - t
                row["isolated_passed"] = ri.passed
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    iso = " subprocess s |" if args.isolated else ""
    print(f"| problem | cases | forwards (truth/ref/cand) | forward s | grade s | overhead s | overhead / forwards "
          f"| protocol's own s (vs all steps off) |{iso}")
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.isolated else ""))
    for r in rows:
        d = r["detail"]
        extra = f" {r['isolated_s']:.2f} |" if args.isolated else ""
        print(f"| {r['problem']} | {r['cases']} | {r['forwards']} ({d['truth']}/{d['reference']}/{d['candidate']}) | "
              f"{r['forward_s']:.3f} | {r['seconds']:.3f} | {r['overhead_s']:.3f} | {r['ratio']:.2f}× | "
              f"{r['protocol_s']:+.3f} |{extra}")
    med = statistics.median(ratios)
    summary = {"median_ratio": med, "max_ratio": max(ratios), "target": TARGET, "trials": args.trials,
               "problems": len(rows)}
    print(json.dumps(summary))
    return 0 if med <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
