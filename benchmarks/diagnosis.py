#!/usr/bin/env python
"""Benchmark: does numstd.diagnosis name the right cause of numstd.corpus's bugs?

For every standard of the discrimination benchmark (:func:`benchmarks.discrimination.sweep.
benchmark_standards`), every case of its suite (seed 101, as there; ``--quick``: two smallest
shapes) and every corpus bug with a named class (``Variant.cause``, set in the bug's definition,
never by the diagnosis), where the bug is observable: run the bug, ``numstd.check`` it and, when
the verdict fails, :func:`numstd.diagnosis.diagnose` it against the float64 reference, with
``numstd.reference`` as the re-run.  A (standard, bug) pair's diagnosis is
:func:`numstd.diagnosis.combine` of its failing cases; it is right when its first cause is the
bug's ``cause``.  Target: right for ≥ 90 % of the pairs.  Prints the Markdown table (per cause),
the misses, and one JSON line of totals; exit code 1 when the target is missed.

    python benchmarks/diagnosis.py [--quick] [--ops softmax,matmul] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 0.90


def pairs(quick: bool, ops: list[str] | None) -> dict:
    """``{(standard, op/bug): {"cause", "groups": [diagnoses of each failing case]}}``."""
    import numstd
    from numstd.diagnosis import diagnose
    from numstd.ops import validate
    from numstd.registry import get_standard
    from numstd.suites import make_case

    from benchmarks.discrimination.sweep import benchmark_standards, subjects_for, units

    out: dict = {}
    for u in units(benchmark_standards(ops), quick=quick):
        std = get_standard(u.standard)
        params = dict(std.suite.get("params", {}))
        case = make_case(std.op, u.shape, u.distribution, u.seed, [f.name for f in std.inputs], params)
        _, arrays, full = validate(std.op, list(case.inputs), dict(case.params))
        ref = None
        for v, legit, family, _ in subjects_for(std, arrays, full):
            if legit or v.cause is None or family == "excluded":
                continue
            try:
                if v.observable is not None and not v.observable(arrays, full, std.output):
                    continue
                with np.errstate(all="ignore"):
                    y = v.fn([None if x is None else np.array(x) for x in case.inputs], dict(full), std.output,
                             std.accumulate, 1000 * u.seed + 7)
                verdict = numstd.check(y, op=std.op, inputs=case.inputs, **case.params)
            except Exception:  # noqa: BLE001 - the discrimination benchmark reports these
                continue
            entry = out.setdefault((std.key, v.key), {"cause": v.cause, "groups": [], "cases": 0})
            entry["cases"] += 1
            if verdict.passed:
                continue
            if ref is None:
                ref = numstd.reference(std.op, arrays, **full).values

            def rerun(ins, _op=std.op, _full=full, **over):
                return numstd.reference(_op, ins, **dict(_full, **over)).values

            entry["groups"].append(diagnose(y, ref, fmt=std.output, op=std.op, inputs=arrays, params=full,
                                            rerun=rerun))
    return out


def main() -> int:
    from numstd.diagnosis import combine

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two smallest shapes per suite")
    p.add_argument("--ops", default=None, help="comma-separated ops (default: all of the corpus)")
    p.add_argument("--json", default=None, help="write every pair's result here")
    args = p.parse_args()
    t0 = time.perf_counter()
    res = pairs(args.quick, args.ops.split(",") if args.ops else None)
    rows: dict[str, list[int]] = {}
    misses, detail = [], []
    for (std, bug), e in sorted(res.items()):
        if not e["groups"]:
            continue  # never failed: nothing to diagnose (the discrimination benchmark counts misses)
        top = combine(e["groups"])
        first = top[0].cause if top else "(none)"
        ok = first == e["cause"]
        r = rows.setdefault(e["cause"], [0, 0])
        r[0] += ok
        r[1] += 1
        detail.append({"standard": std, "bug": bug, "cause": e["cause"], "diagnosis": [d.to_dict() for d in top],
                       "right": ok, "failing_cases": len(e["groups"])})
        if not ok:
            misses.append(f"| {std} | {bug} | {e['cause']} | {first} | {top[0].evidence if top else ''} |")
    right = sum(r[0] for r in rows.values())
    total = sum(r[1] for r in rows.values())
    print("| cause (from the bug's definition) | (standard, bug) pairs | right cause first |")
    print("|---|---:|---:|")
    for cause, (k, n) in sorted(rows.items()):
        print(f"| {cause} | {n} | {k}/{n} ({100 * k / n:.0f} %) |")
    print(f"| **all** | **{total}** | **{right}/{total} ({100 * right / max(total, 1):.1f} %)** |")
    if misses:
        print("\n| standard | bug | cause | diagnosed first | evidence |\n|---|---|---|---|---|")
        print("\n".join(misses))
    summary = {"pairs": total, "right": right, "rate": right / max(total, 1), "target": TARGET,
               "quick": args.quick, "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "pairs": detail}, indent=1))
    return 0 if summary["rate"] >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
