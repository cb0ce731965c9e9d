#!/usr/bin/env python
"""Benchmark: wall time of ``python -m numstd calibrate --op matmul --inputs bfloat16 --quick``.

The command runs in a subprocess exactly as a standard author types it (interpreter start, imports,
the quick sweep, the draft, evidence Parquet and plot written to a temporary directory), with
``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` removed from its environment.  Reported: the median
wall time over ``--repeats`` runs (a first, untimed run warms the file cache unless
``--no-warmup``), and whether calibration succeeded.  Target: < 60 s.  Prints one JSON line.

    python benchmarks/perf/bench_calibrate.py [--op matmul] [--inputs bfloat16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, clean_env, emit  # noqa: E402

TARGET_S = 60.0


def _once(op: str, inputs: str) -> tuple[float, int, str, str]:
    with tempfile.TemporaryDirectory(prefix="numstd-bench-cal-") as out:
        cmd = [sys.executable, "-m", "numstd", "calibrate", "--op", op, "--inputs", inputs, "--quick",
               "--out", out, "--date", "2000-01-01"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True)
        took = time.perf_counter() - t
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    err = proc.stderr.strip()[-400:] if proc.returncode else ""
    return took, proc.returncode, tail, err


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="matmul")
    p.add_argument("--inputs", default="bfloat16")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-warmup", action="store_true")
    args = p.parse_args()

    if not args.no_warmup:
        _once(args.op, args.inputs)
    runs = [_once(args.op, args.inputs) for _ in range(max(1, args.repeats))]
    med = statistics.median(r[0] for r in runs)
    ok_runs = all(r[1] == 0 for r in runs)
    emit({
        "benchmark": "calibrate",
        "command": f"python -m numstd calibrate --op {args.op} --inputs {args.inputs} --quick",
        "repeats": len(runs), "median_s": round(med, 2), "all_s": [round(r[0], 2) for r in runs],
        "exit_codes": [r[1] for r in runs], "last_line": runs[-1][2],
        "errors": [r[3] for r in runs if r[1]],
        "target_s": TARGET_S, "ok": med < TARGET_S and ok_runs,
    })
    return 0 if med < TARGET_S and ok_runs else 1


if __name__ == "__main__":
    sys.exit(main())
