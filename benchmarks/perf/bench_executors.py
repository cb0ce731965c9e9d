#!/usr/bin/env python
"""Benchmark: one calibration (matmul bf16, quick and full) on each executor — one process
(``serial``), the local process pool over every core (``local``) and a local Ray (``ray``).

Each configuration runs ``--repeats`` times from an empty output directory; the medians and the
speed-ups over one process (``serial median / executor median``) are printed and written to
``benchmarks/results/bench_executors.json``.  Also measured: the Ray start-up (not in the Ray
figures), a resumed run whose tasks are all already done (phase 2 alone: references and
judgement), and whether every executor wrote the same draft and evidence, byte for byte.

    python benchmarks/perf/bench_executors.py [--repeats 3] [--standard NS-MATMUL-BF16] [--no-ray]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _digest(res) -> str:  # noqa: ANN001 - CalibrationResult
    h = hashlib.sha256(res.evidence_path.read_bytes())
    if res.draft_path is not None:
        h.update(res.draft_path.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--standard", default="NS-MATMUL-BF16", help="template instance to calibrate")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-ray", action="store_true", help="skip Ray (also skipped when ray is not installed)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_executors.json"))
    args = p.parse_args()

    from numstd.calibrate import calibrate
    from numstd.executor import LocalExecutor, RayExecutor, SerialExecutor

    executors = {"serial": SerialExecutor(), "local": LocalExecutor()}
    ray_init = None
    if not args.no_ray:
        try:
            import ray

            t = time.perf_counter()
            path = os.pathsep.join(x for x in sys.path if x)
            ray.init(include_dashboard=False, logging_level="WARNING", runtime_env={"env_vars": {"PYTHONPATH": path}})
            ray_init = time.perf_counter() - t
            executors["ray"] = RayExecutor()
        except ImportError:
            pass
    result: dict = {"benchmark": "executors", "standard": args.standard, "cpus": os.cpu_count(),
                    "repeats": args.repeats, "ray_init_s": None if ray_init is None else round(ray_init, 3),
                    "runs": {}, "speedup_over_serial": {}, "resumed_s": {}, "identical": True}
    digests = set()
    for mode in ("quick", "full"):
        quick = mode == "quick"
        runs = {}
        for name, ex in executors.items():
            times = []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as out:
                    t = time.perf_counter()
                    res = calibrate(template=args.standard, quick=quick, out=out, date="2025-01-01", executor=ex)
                    times.append(time.perf_counter() - t)
                    digests.add((mode, _digest(res)))
                    if name == "serial" and len(times) == 1:
                        t = time.perf_counter()
                        calibrate(template=args.standard, quick=quick, out=out, date="2025-01-01", executor=ex)
                        result["resumed_s"][mode] = round(time.perf_counter() - t, 3)
                        result.setdefault("tasks", {})[mode] = res.sweep.total
            runs[name] = {"median_s": round(statistics.median(times), 3), "times_s": [round(x, 3) for x in times]}
            print(f"{mode:<5} {name:<6} median {runs[name]['median_s']:.2f} s  {runs[name]['times_s']}", flush=True)
        result["runs"][mode] = runs
        base = runs["serial"]["median_s"]
        result["speedup_over_serial"][mode] = {n: round(base / r["median_s"], 3) for n, r in runs.items()}
    result["identical"] = len({d for m, d in digests if m == "quick"}) == 1 and len({d for m, d in digests if m == "full"}) == 1
    for ex in executors.values():
        ex.close()
    if ray_init is not None:
        import ray

        ray.shutdown()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
