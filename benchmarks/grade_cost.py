#!/usr/bin/env python
"""Benchmark: the cost of numstd.grade per KernelBench-layout problem (tests/problems/*/faithful.py).

For each problem, one grade of the faithful candidate with the full protocol (secret seed, order
swap, cached/constant-output checks, reference determinism rerun, reproducibility rerun, op
standard where one applies; second shape set off, so every problem runs the same cases):
``forwards`` counts the truth (float64), reference and candidate calls, reruns included;
``forward s`` is the time inside them (``GradeReport.forward_seconds``); ``overhead`` is
``seconds − forward s``: redraws, copies, judging, diagnosis; ``protocol's own`` is the grade's
time minus that of the same grade with every protocol step off (:meth:`numstd.grade.Protocol.off`).  Target: overhead ≤ 0.5× the
forwards, in-process.  ``CPU s`` is the process's CPU time over the grade (forwards included: on a
machine shared with other jobs the wall times grow with the load, the CPU time much less), ``gc s``
the time in Python's garbage collector during the grade (a full collection of the process's
~200k objects, torch's mostly, lands in one grade or another).  ``--repeats N`` grades each problem
N times and reports the medians; ``--tree DIR`` imports numstd (and the problems) from another
checkout, e.g. an export of an older commit, to compare the two under the same load.
``--isolated`` adds the subprocess mode (child start and transfers are part of its overhead).  torch runs one intra-op thread.  Prints the Markdown table and one JSON
line; exit code 1 when the median in-process ratio misses the target.

    python benchmarks/grade_cost.py [--trials 5] [--isolated] [--problems softmax,matmul] [--repeats 3] [--tree DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.5


class _GcTimer:
    """Seconds spent in the garbage collector while active (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds, self._t0 = 0.0, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0

    def __enter__(self) -> "_GcTimer":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--isolated", action="store_true", help="also time the subprocess mode")
    p.add_argument("--problems", default=None, help="comma-separated problem names (default: all)")
    p.add_argument("--repeats", type=int, default=1, help="grades per problem; the medians are reported")
    p.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose numstd and problems are timed")
    args = p.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    PROBLEMS = tree / "tests" / "problems"
    import torch

    from numstd.grade import Protocol
    from numstd.grade_cli import grade_files, load_module

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
            reps = []
            for _ in range(max(args.repeats, 1)):
                with _GcTimer() as gct:
                    c0 = time.process_time()
                    r = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False)
                    cpu = time.process_time() - c0
                bare = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False,
                                   protocol=Protocol.off())
                reps.append((r, bare, cpu, gct.seconds))
            med = lambda f: statistics.median(f(*x) for x in reps)  # noqa: E731
            fwd = med(lambda r, b, c, g: r.forward_seconds)
            over = med(lambda r, b, c, g: r.seconds - r.forward_seconds)
            ratio = med(lambda r, b, c, g: (r.seconds - r.forward_seconds) / r.forward_seconds
                        if r.forward_seconds > 0 else float("inf"))
            ratios.append(ratio)
            row = {"problem": name, "cases": len(r.cases), "forwards": sum(r.forwards.values()),
                   "detail": dict(r.forwards), "forward_s": fwd, "seconds": med(lambda r, b, c, g: r.seconds),
                   "overhead_s": over, "ratio": ratio, "passed": all(x[0].passed for x in reps),
                   "protocol_s": med(lambda r, b, c, g: r.seconds - b.seconds),
                   "bare_forwards": sum(bare.forwards.values()), "cpu_s": med(lambda r, b, c, g: c),
                   "gc_s": med(lambda r, b, c, g: g), "repeats": len(reps)}
            if args.isolated:
                t = time.perf_counter()
                ri = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False, isolate=True)
                row["isolated_s"] = time.perf_counter() - t
                row["isolated_passed"] = ri.passed
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    iso = " subprocess s |" if args.isolated else ""
    print(f"| problem | cases | forwards (truth/ref/cand) | forward s | grade s | overhead s | overhead / forwards "
          f"| protocol's own s (vs all steps off) | CPU s | gc s |{iso}")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.isolated else ""))
    for r in rows:
        d = r["detail"]
        extra = f" {r['isolated_s']:.2f} |" if args.isolated else ""
        print(f"| {r['problem']} | {r['cases']} | {r['forwards']} ({d['truth']}/{d['reference']}/{d['candidate']}) | "
              f"{r['forward_s']:.3f} | {r['seconds']:.3f} | {r['overhead_s']:.3f} | {r['ratio']:.2f}× | "
              f"{r['protocol_s']:+.3f} | {r['cpu_s']:.3f} | {r['gc_s']:.3f} |{extra}")
    med = statistics.median(ratios)
    try:
        load = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        load = None
    summary = {"median_ratio": med, "max_ratio": max(ratios), "target": TARGET, "trials": args.trials,
               "problems": len(rows), "repeats": args.repeats, "tree": str(tree), "loadavg": load}
    print(json.dumps(summary))
    return 0 if med <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
