#!/usr/bin/env python
"""Benchmark: exhaustive bfloat16 survey of one function with the numpy backend.

Target: median < 0.2 s per survey once the table is loaded (the first call loads and verifies the
table; it is timed separately).  Prints one JSON line; exit code 1 when the target is missed.

    python benchmarks/perf/bench_survey.py [--op exp] [--format bfloat16] [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))

TARGET_S = 0.2


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="exp")
    p.add_argument("--format", default="bfloat16")
    p.add_argument("--backend", default="numpy")
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()

    from numstd.survey import survey

    t0 = time.perf_counter()
    first = survey(args.op, args.format, backend=args.backend)
    first_s = time.perf_counter() - t0
    times, times_nojudge = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        survey(args.op, args.format, backend=args.backend)
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        survey(args.op, args.format, backend=args.backend, judge=False)
        times_nojudge.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(json.dumps({
        "benchmark": "survey", "op": args.op, "format": args.format, "backend": args.backend,
        "n": first.n, "first_call_s": round(first_s, 4), "median_s": round(med, 4),
        "median_without_verdict_s": round(statistics.median(times_nojudge), 4),
        "verdict": first.verdict.standard_id if first.verdict is not None else None,
        "target_s": TARGET_S, "ok": med < TARGET_S,
    }))
    return 0 if med < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
