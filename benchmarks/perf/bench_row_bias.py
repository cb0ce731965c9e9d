#!/usr/bin/env python
"""Benchmark: what the ``row_bias`` criterion costs in a softmax ``check`` (2^24 fp32, rows of 4096).

The data of ``bench_check.py --op softmax``.  Three variants, interleaved round by round after one
warm-up round:

``@1``          ``check`` under NS-SOFTMAX-FP32@1 (no row_bias criterion);
``@2``          ``check`` under the default NS-SOFTMAX-FP32@2, row_bias computed inside the compiled
                judge's pass (``numstd._native.judge`` with its ``rows`` argument);
``@2 numpy``    the same, row_bias by the numpy path ``Judge._add_rows`` (the compiled judge not told
                about rows: what main did before the statistic moved into the judge).

Reported per variant: the median and minimum wall time of the whole ``check``, and the thread CPU
time spent in ``Judge.add`` (the judge's own work, on the main thread: less sensitive to other
processes on a shared machine than wall time).  ``@2`` and ``@2 numpy`` must give byte-identical
verdict JSON (checked).  Prints one JSON line.

    python benchmarks/perf/bench_row_bias.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()

    import numpy as np

    import numstd
    from numstd.core.native import compiled
    from numstd.judge import criteria

    rng = np.random.default_rng(20240)
    x = rng.standard_normal(1 << 24, dtype=np.float32).reshape(-1, 4096)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)

    add0, rows0 = criteria.Judge.add, criteria.Judge._native_rows
    spent = [0.0]

    def timed_add(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        t = time.thread_time()
        try:
            return add0(self, *a, **k)
        finally:
            spent[0] += time.thread_time() - t

    variants = {"@1": ("NS-SOFTMAX-FP32@1", rows0), "@2": (None, rows0),
                "@2 numpy": (None, lambda self, *a: None)}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    verdicts: dict[str, str] = {}
    criteria.Judge.add = timed_add
    try:
        for rnd in range(args.repeats + 1):
            for name, (std, rows) in variants.items():
                criteria.Judge._native_rows = rows
                spent[0] = 0.0
                t = time.perf_counter()
                v = numstd.check(out, op="softmax", inputs=[x], axis=-1, **({"standard": std} if std else {}))
                dt = time.perf_counter() - t
                verdicts[name] = v.to_json()
                if rnd:  # (round 0: warm-up)
                    wall[name].append(dt)
                    cpu[name].append(spent[0])
    finally:
        criteria.Judge.add, criteria.Judge._native_rows = add0, rows0
    med = {k: statistics.median(v) for k, v in wall.items()}
    result = {
        "benchmark": "row_bias", "op": "softmax", "shape": list(x.shape), "repeats": args.repeats,
        "native": compiled() is not None, "load_average": list(os.getloadavg()),
        "check_s": {k: round(v, 4) for k, v in med.items()},
        "check_min_s": {k: round(min(v), 4) for k, v in wall.items()},
        "judge_add_cpu_s": {k: round(statistics.median(v), 4) for k, v in cpu.items()},
        "ratio_2_vs_1": round(med["@2"] / med["@1"], 3),
        "ratio_2numpy_vs_1": round(med["@2 numpy"] / med["@1"], 3),
        "same_verdict": verdicts["@2"] == verdicts["@2 numpy"],
    }
    emit(result)
    return 0 if result["same_verdict"] else 1


if __name__ == "__main__":
    sys.exit(main())
