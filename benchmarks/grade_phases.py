#!/usr/bin/env python
"""Benchmark: where one grade's time goes, per KernelBench-layout problem (tests/problems/*/faithful.py).

The same grades as ``benchmarks/grade_cost.py`` (5 trials × 7 distributions, full protocol, second
shape set off, torch one intra-op thread), with wall-clock timers wrapped around the grade's
phases instead of a profiler (cProfile inflates the Python-heavy functions several times over and
charges them for waits): ``module judge`` (:func:`numstd.grade.module_standard.judge_module`, with
its ``module_errors``, ``quantiles`` and ``bias`` inside it), ``op check`` (:func:`numstd.check`, with
its float64 ``op reference`` inside it), ``redraw`` (the distributions' inputs); ``other`` is the
overhead outside these (running the cases, copies, digests, the cached- and constant-output tests).
Medians over ``--repeats`` grades; ``--tree DIR`` times another checkout.

    python benchmarks/grade_phases.py [--problems softmax,matmul] [--repeats 3] [--tree DIR]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PHASES = (("module judge", "numstd.grade.grading", "judge_module"),
          ("module_errors", "numstd.grade.module_standard", "module_errors"),
          ("quantiles", "numstd.grade.module_standard", "quantiles"),
          ("bias", "numstd.grade.module_standard", "_bias"),
          ("op check", "numstd.judge.check", "check"),
          ("op reference", "numstd.reference", "validated_reference"),
          ("redraw", "numstd.grade.grading", "_redraw"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", default="softmax,relu,matmul,layernorm,cross_entropy")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--tree", type=Path, default=ROOT)
    args = p.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    import pytest
    import torch

    from numstd.grade_cli import grade_files, load_module

    torch.set_num_threads(1)
    acc: dict[str, float] = {}

    def timed(label: str, f):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
        return wrapper

    problems = tree / "tests" / "problems"
    fallback = load_module(problems / "standards_fallback.py")
    labels = [lab for lab, _, _ in PHASES]
    print("| problem | overhead s | " + " | ".join(labels) + " | other |")
    print("|---|" + "---:|" * (len(labels) + 2))
    with pytest.MonkeyPatch.context() as mp:
        fallback.install(mp)
        for label, mod, name in PHASES:  # (grade imports check when it runs: the patched one)
            m = importlib.import_module(mod)
            mp.setattr(m, name, timed(label, getattr(m, name)))
        for name in args.problems.split(","):
            prob, cand = problems / name / "problem.py", problems / name / "faithful.py"
            grade_files(prob, cand, trials=1, secret_seed=0, shapes2=False)  # warm-up
            rows = []
            for _ in range(max(args.repeats, 1)):
                acc.clear()
                r = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False)
                rows.append(dict(acc, overhead=r.seconds - r.forward_seconds))
            med = {k: statistics.median(x.get(k, 0.0) for x in rows) for k in ["overhead", *labels]}
            other = med["overhead"] - med["module judge"] - med["op check"] - med["redraw"]
            print(f"| {name} | {med['overhead']:.3f} | " + " | ".join(f"{med[k]:.3f}" for k in labels)
                  + f" | {other:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
