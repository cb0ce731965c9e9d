#!/usr/bin/env python
"""Benchmark: ``numstd.check`` on 2^24 float32 elements against what harnesses do today.

For ``--op exp`` (x ~ N(0, 1)) and ``--op softmax`` (rows of 4096, x ~ N(0, 1)) the kernel output is
numpy's own float32 result.  Three ways to decide it is correct, each timed end to end (reference
included — every one of them must compute the truth from the inputs):

``check``   ``numstd.check(out, op=op, inputs=[x])``;
``numpy``   the float64 reference (``np.exp(x64)``; ``exp(x − max) / Σ`` for softmax), cast to
            float32, then ``np.allclose(out, ref)``;
``torch``   the same in torch: ``torch.exp(x.double()).float()`` (``torch.softmax(x.double(), -1)``),
            then ``torch.testing.assert_close(out, ref)`` on float32 tensors (torch's default
            intra-op threads; the count is recorded).

Reported: medians over ``--repeats`` (≥ 5) interleaved rounds after one warm-up round, the ratios
``check / numpy`` and ``check / torch`` (target ≤ 1.0), and a cProfile of one ``check`` call (the
share of each step, and the functions with the largest own time).  Prints one JSON line.

    python benchmarks/perf/bench_check.py [--op exp|softmax] [--log2n 24] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import blas_info, emit, interleaved_times, profile_stages, profile_top  # noqa: E402

TARGET_RATIO = 1.0


def _numpy_baseline(op: str, x, out):  # noqa: ANN001, ANN202
    import numpy as np

    def run() -> bool:
        x64 = x.astype(np.float64)
        if op == "exp":
            ref = np.exp(x64)
        else:
            e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
            ref = e / e.sum(axis=-1, keepdims=True)
        return bool(np.allclose(out, ref.astype(np.float32)))

    return run


def _torch_baseline(op: str, x, out):  # noqa: ANN001, ANN202
    import torch

    xt, ot = torch.from_numpy(x), torch.from_numpy(out)

    def run() -> bool:
        x64 = xt.double()
        ref = (torch.exp(x64) if op == "exp" else torch.softmax(x64, dim=-1)).float()
        try:
            torch.testing.assert_close(ot, ref)
        except AssertionError:
            return False
        return True

    return run, torch.get_num_threads(), torch.__version__


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="exp", choices=["exp", "softmax"])
    p.add_argument("--log2n", type=int, default=24, help="log2 of the element count (default 24)")
    p.add_argument("--row", type=int, default=4096, help="softmax row length (default 4096)")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    import numpy as np

    import numstd

    n = 1 << args.log2n
    rng = np.random.default_rng(20240)
    x = rng.standard_normal(n, dtype=np.float32)
    if args.op == "softmax":
        x = x.reshape(-1, args.row)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        out = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
        params = {"axis": -1}
    else:
        out = np.exp(x)
        params = {}

    def run_check() -> bool:
        return numstd.check(out, op=args.op, inputs=[x], **params).passed

    verdict = numstd.check(out, op=args.op, inputs=[x], **params)
    np_run = _numpy_baseline(args.op, x, out)
    fns = {"check": run_check, "numpy": np_run}
    try:
        torch_run, threads, tv = _torch_baseline(args.op, x, out)
        fns["torch"] = torch_run
    except ImportError:
        torch_run = None
    times = interleaved_times(fns, args.repeats)
    t_check, t_np = statistics.median(times["check"]), statistics.median(times["numpy"])
    result = {
        "benchmark": "check", "op": args.op, "elements": n, "shape": list(x.shape), "dtype": "float32",
        "standard": verdict.standard_id, "passed": verdict.passed, "numpy_allclose_passed": np_run(),
        "repeats": args.repeats, "check_s": round(t_check, 4), "check_all_s": [round(t, 4) for t in times["check"]],
        "numpy_s": round(t_np, 4), "numpy_all_s": [round(t, 4) for t in times["numpy"]],
        "ratio_vs_numpy": round(t_check / t_np, 3),
        "ratio_vs_numpy_min": round(min(times["check"]) / min(times["numpy"]), 3),
    }
    if torch_run is None:
        result.update({"torch_s": None, "ratio_vs_torch": None, "torch": None})
    else:
        t_t = statistics.median(times["torch"])
        result.update({"torch_assert_close_passed": torch_run(), "torch_s": round(t_t, 4),
                       "torch_all_s": [round(t, 4) for t in times["torch"]], "ratio_vs_torch": round(t_check / t_t, 3),
                       "ratio_vs_torch_min": round(min(times["check"]) / min(times["torch"]), 3),
                       "torch": tv, "torch_threads": threads})
    ratios = [r for r in (result["ratio_vs_numpy"], result.get("ratio_vs_torch")) if r is not None]
    result.update({"target_ratio": TARGET_RATIO, "ok": all(r <= TARGET_RATIO for r in ratios),
                   "blas": blas_info(), "profile_check": profile_top(run_check),
                   "stages_check": profile_stages(run_check)})
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
