#!/usr/bin/env python
"""Write every verdict of grading each KernelBench-layout problem's candidates to JSON (issue 21).

Used to prove that a speed-up of :func:`numstd.grade` changed no verdict: run it before and after
and compare the two files.  For every problem in ``tests/problems`` and every candidate file beside
its ``problem.py`` (``faithful.py`` and each near miss), in fp32 and bf16, one grade with
``trials=2``, ``secret_seed=0``, the second shape set off, the module standards of
``tests/problems/standards_fallback.py``.  Each report is written whole (``GradeReport.to_dict``:
pass/fail, every verdict with its criteria, params, distribution, worst elements and diagnosis)
except the timing fields ``seconds`` and ``forward_seconds``.  A grade that raises is recorded as
its exception's type and message.  torch runs one intra-op thread.

    python benchmarks/grade_verdicts.py OUT.json [--problems softmax,relu] [--dtypes float32,bfloat16]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems"
#: report fields that measure time, not verdicts
TIMING = ("seconds", "forward_seconds")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--problems", default=None, help="comma-separated problem names (default: all)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--trials", type=int, default=2)
    args = p.parse_args(argv)
    import pytest
    import torch

    from numstd.grade_cli import grade_files, load_module

    torch.set_num_threads(1)
    fallback = load_module(PROBLEMS / "standards_fallback.py")
    names = args.problems.split(",") if args.problems else sorted(
        d.name for d in PROBLEMS.iterdir() if (d / "problem.py").is_file())
    out: dict[str, dict] = {}
    with pytest.MonkeyPatch.context() as mp:
        fallback.install(mp)
        for name in names:
            prob = PROBLEMS / name / "problem.py"
            for cand in sorted(f for f in (PROBLEMS / name).glob("*.py") if f.name != "problem.py"):
                for dtype in args.dtypes.split(","):
                    key = f"{name}/{cand.stem}/{dtype}"
                    try:
                        r = grade_files(prob, cand, trials=args.trials, secret_seed=0, shapes2=False, dtype=dtype)
                        d = r.to_dict()
                        for k in TIMING:
                            d.pop(k, None)
                    except Exception as exc:  # noqa: BLE001 - a raising grade is a result to compare too
                        d = {"raised": type(exc).__name__, "message": str(exc)}
                    out[key] = d
                    print(key, d.get("passed", d.get("raised")), file=sys.stderr, flush=True)
    text = json.dumps(out, indent=1, sort_keys=True, default=str)
    Path(args.out).write_text(text)
    print(f"{len(out)} grades, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
