#!/usr/bin/env python
"""Benchmark: near misses of the KernelBench level-1 problems that grade judges as compositions.

For each problem whose ``forward`` numstd.grade recognises as a composition of torch calls
(:mod:`numstd.grade.compose`, issue 18 item 11), two edits of the problem's source:

* a **near-miss candidate** (``ModelNew`` with a planted bug: the wrong axis, a 16-bit
  intermediate, eps outside the root, the mask ignored, …) must fail, and fail by the op standard
  (some ``op`` case fails), not only by ``NS-MODULE-*``;
* a **near-miss reference** (the problem itself edited: tanh for sigmoid, another constant, another
  exponent) graded against itself must not be judged by the op standard unless the edited forward
  still computes a catalog op (then the op recorded is the one it computes).

Sizes capped by ``--max-dim`` (default 16), one trial of every distribution, fp32, CPU, in-process.
Prints one row per problem and a JSON summary; exit code 1 when a near-miss candidate passes or is
not failed by the op standard.

    python benchmarks/kernelbench_compose.py --level1 KernelBench/KernelBench/level1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: problem number -> (candidate edit (old, new), reference edit (old, new) or None)
EDITS = {
    11: (('torch.einsum("bijl,lk->bijk", A, B)', 'torch.einsum("bijl,lk->bijk", A.half(), B.half()).float()'), None),
    12: (("A.unsqueeze(1) * B", "(A.half().unsqueeze(1) * B.half()).float()"), None),
    25: (("torch.sigmoid(x)", "torch.tanh(x)"), ("torch.sigmoid(x)", "torch.tanh(x)")),
    30: (("(1 + torch.abs(x))", "(1 + torch.abs(x.half()).float())"), ("(1 + torch.abs(x))", "(1.5 + torch.abs(x))")),
    36: (("torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)",
          "(torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True)) + self.eps)"), ("x ** 2", "x ** 3")),
    39: (("p=2, dim=1", "p=2, dim=0"), ("p=2, dim=1", "p=2, dim=0")),
    40: (("nn.LayerNorm(normalized_shape=normalized_shape)", "nn.LayerNorm(normalized_shape=normalized_shape, eps=1e-2)"),
         None),
    88: (("0.044715", "0.05"), ("0.044715", "0.05")),
    91: (("torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)", "torch.cumsum(x, dim=self.dim)"),
         ("torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)", "torch.cumsum(x.flip(self.dim), dim=self.dim)")),
    92: (("start=0", "start=1"), ("start=0", "start=1")),
    93: (("torch.cumsum(x * mask, dim=self.dim)", "torch.cumsum(x, dim=self.dim)"), None),
    94: (("torch.mean((predictions - targets) ** 2)", "torch.mean(((predictions - targets) ** 2).bfloat16()).float()"),
         ("** 2)", "** 3)")),
}


def _grade(problem: Path, ref_src: str, cand_src: str, max_dim: int) -> object:
    from numstd.grade.files import grade_files

    with tempfile.TemporaryDirectory(prefix="numstd-kbc-") as tmp:
        ref, cand = Path(tmp) / problem.name, Path(tmp) / "candidate.py"
        ref.write_text(ref_src, encoding="utf-8")
        cand.write_text(cand_src, encoding="utf-8")
        return grade_files(ref, cand, max_dim=max_dim, trials=1, seed=42, secret_seed=0, dtype="float32", shapes2=False)


def _edit(src: str, old: str, new: str) -> str:
    if src.count(old) != 1:
        raise SystemExit(f"edit {old!r}: found {src.count(old)} times")
    return src.replace(old, new)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level1", required=True, type=Path)
    p.add_argument("--max-dim", type=int, default=16)
    p.add_argument("--only", default=None)
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    keep = sorted(EDITS) if not args.only else [int(n) for n in args.only.split(",")]
    rows, bad = [], []
    for n in keep:
        (problem,) = args.level1.glob(f"{n}_*.py")
        src = problem.read_text(encoding="utf-8")
        cand_edit, ref_edit = EDITS[n]
        r = _grade(problem, src, _edit(src, *cand_edit) + "\n\nModelNew = Model\n", args.max_dim)
        op_cases = [c for c in r.cases if c.kind == "op"]
        row = {"number": n, "candidate_passed": bool(r.passed), "op_cases_failed": sum(not c.verdict.passed for c in op_cases),
               "op_cases": len(op_cases), "op_standard": sorted({c.verdict.standard_id for c in op_cases})}
        if r.passed or not row["op_cases_failed"]:
            bad.append(n)
        if ref_edit is not None:
            near = _edit(src, *ref_edit)
            rr = _grade(problem, near, near + "\n\nModelNew = Model\n", args.max_dim)
            row.update(near_reference_passed=bool(rr.passed), near_reference_op=None if rr.op is None else rr.op[0],
                       near_reference_note=rr.op_note[:160])
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps({"problems": len(rows), "candidates_not_failed_by_op_standard": bad}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
