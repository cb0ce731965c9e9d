#!/usr/bin/env python
"""Benchmark: ``python -m numstd report`` of 70 verdicts (140 plots), wall and CPU time.

The verdicts are a grade report of ``tests/problems/softmax`` (``faithful`` candidate, 5 trials ×
7 input distributions, judged by the module and the op standard: 70 verdicts), written once with
``python -m numstd grade ... --no-shapes2 --secret-seed 1 --json`` (needs torch), or read from
``--verdicts FILE``.  The report command then runs in a subprocess as a user types it (interpreter
start, imports, Markdown, HTML and every plot written to a temporary directory), with
``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` removed from its environment.  ``--tree DIR`` runs the
numstd of another checkout (``PYTHONPATH=DIR``), for before/after figures; the two trees then run
in turn (A B A B ...), so that a load change on the machine moves both.  Reported: median wall
and CPU seconds (user + system of the command and the processes it waited for) over
``--repeats`` runs after one warm-up run, and the load average.  Target: median wall ≤ 10 s.
Prints one JSON line.

    python benchmarks/perf/bench_report.py [--verdicts FILE] [--repeats 5] [--workers N] [--tree DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, clean_env, emit, loadavg  # noqa: E402

TARGET_S = 10.0


def _verdicts(dest: Path) -> Path:
    """The 70-verdict grade report of tests/problems/softmax (module docstring)."""
    pdir = ROOT / "tests" / "problems" / "softmax"
    cmd = [sys.executable, "-m", "numstd", "grade", "--problem", str(pdir / "problem.py"),
           "--candidate", str(pdir / "faithful.py"), "--no-shapes2", "--secret-seed", "1", "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"grade failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    dest.write_text(proc.stdout, encoding="utf-8")
    return dest


def _once(tree: Path, verdicts: Path, workers: int | None) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of one report run with ``tree``'s numstd."""
    env = clean_env()
    env["PYTHONPATH"] = str(tree)
    env["NUMSTD_PROGRESS"] = "0"
    with tempfile.TemporaryDirectory(prefix="numstd-bench-report-") as out:
        cmd = [sys.executable, "-m", "numstd", "report", str(verdicts), "--out", out]
        if workers is not None:
            cmd += ["--workers", str(workers)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--verdicts", type=Path, default=None, help="verdict file (default: made by grade, needs torch)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workers", type=int, default=None, help="passed to report --workers (default: its own)")
    p.add_argument("--tree", type=Path, default=None, help="a second checkout to time in turn (before/after)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="numstd-bench-verdicts-") as tmp:
        verdicts = args.verdicts or _verdicts(Path(tmp) / "grade.json")
        trees = {"this": ROOT} | ({"other": args.tree.resolve()} if args.tree else {})
        for tree in trees.values():  # warm-up (file cache, font cache)
            _once(tree, verdicts, args.workers)
        load0 = loadavg()
        runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in trees}
        for _ in range(max(1, args.repeats)):
            for name, tree in trees.items():
                # the other tree may not know --workers: it gets the option only when it is this one
                runs[name].append(_once(tree, verdicts, args.workers if name == "this" else None))
        result: dict = {"benchmark": "report", "command": "python -m numstd report GRADE.json --out DIR"
                        + (f" --workers {args.workers}" if args.workers else ""),
                        "verdicts": str(args.verdicts or "grade of tests/problems/softmax (70 verdicts)"),
                        "repeats": args.repeats, "cpus": os.cpu_count(), "load_before": load0, "load_after": loadavg()}
        for name, rs in runs.items():
            result[name] = {"tree": str(trees[name]), "median_wall_s": round(statistics.median(r[0] for r in rs), 2),
                            "median_cpu_s": round(statistics.median(r[1] for r in rs), 2),
                            "wall_s": [round(r[0], 2) for r in rs], "exit_codes": [r[2] for r in rs]}
        if args.tree:
            result["wall_ratio_this_over_other"] = [round(a[0] / b[0], 3) for a, b in zip(runs["this"], runs["other"])]
        med = result["this"]["median_wall_s"]
        ok = med <= TARGET_S and all(r[2] == 0 for r in runs["this"])
        result |= {"target_s": TARGET_S, "ok": ok}
        emit(result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
