#!/usr/bin/env python
"""NS-MODULE-*@1 (paired bias) against @2 (one-sided baseline criteria) on real torch modules.

For every working format (fp32, bf16, fp16) and every module of ``tests/module_zoo.py``
(BatchNorm, InstanceNorm, RMSNorm, the Frobenius norm, KLDiv, the triplet loss, swish, softsign,
minGPT's GELU), three kinds of candidate are run once each on the same cases (``trials`` draws of
the module's inputs and every suite redraw, grade seed 0, torch CPU, one thread):

* legitimate: the module run in float64 and rounded once (``CR``, the most accurate output
  there is) and torch's own module (``torch``);
* planted bugs (``module_zoo.BUGS``): truncation instead of RNE, a (1 + 8u) scale error, one
  element times 1.25.

Each run is judged by both versions of the standard (:func:`numstd.grade.judge_case`): a
candidate is accepted when every case passes.  Prints a Markdown table and writes
``benchmarks/results/module_baseline.json``; ``--write-docs`` replaces the generated block of
``docs/benchmarks.md`` (section "3. NS-MODULE@1 against @2").

    python benchmarks/module_baseline.py [--trials 1] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "module_baseline.json"
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- module-baseline:begin -->", "<!-- module-baseline:end -->"
IDS = {"float32": "NS-MODULE-FP32", "bfloat16": "NS-MODULE-BF16", "float16": "NS-MODULE-FP16"}


def run(trials: int) -> list[dict]:
    """One row per (format, module, candidate): accepted by @1 and @2, the failed criteria."""
    import torch

    import numstd
    from numstd.grade import judge_case, run_cases
    from numstd.grade_cli import load_module

    zoo = load_module(ROOT / "tests" / "module_zoo.py")
    torch.set_num_threads(1)
    rows = []
    for fmt, sid in IDS.items():
        stds = {v: numstd.get_standard(f"{sid}@{v}") for v in (1, 2)}
        dists = list(stds[2].suite.get("distributions", []))
        for name, (model, init, inputs) in zoo.ZOO.items():
            cands = [("CR", True, zoo.correctly_rounded(model)), ("torch", True, model)]
            cands += [(bug, False, zoo.correctly_rounded(model, bug)) for bug in zoo.BUGS]
            for cname, legit, cand in cands:
                _, runs, _ = run_cases(model, cand, inputs, init_inputs=init, dtype=fmt, trials=trials, seed=0,
                                       distributions=dists)
                row = {"format": fmt, "module": name, "candidate": cname, "legit": legit, "cases": len(runs)}
                for v, std in stds.items():
                    verdicts = [judge_case(std, r, {}) for r in runs]
                    row[f"v{v}"] = all(x.passed for x in verdicts)
                    row[f"v{v}_failed"] = sorted({c.name for x in verdicts for c in x.failed_criteria})
                base = [judge_case(stds[2], r, {}).params.get("baseline", {}).get("mean_signed", 0.0) for r in runs]
                row["baseline_mean_signed_worst"] = max(base, key=abs) if base else 0.0
                rows.append(row)
    return rows


def _mark(ok: bool, legit: bool) -> str:
    return ("accepted" if ok else "**REJECTED**") if legit else ("passes" if ok else "caught")


def table(rows: list[dict]) -> str:
    """The Markdown summary (counts) and the per-module table."""
    out = []
    legit = [r for r in rows if r["legit"]]
    bugs = [r for r in rows if not r["legit"]]
    out.append("| | NS-MODULE-*@1 (paired bias) | NS-MODULE-*@2 (one-sided) |")
    out.append("|---|---|---|")
    for label, sel in (("correctly rounded (float64, one rounding) accepted", [r for r in legit if r["candidate"] == "CR"]),
                       ("torch's own module accepted", [r for r in legit if r["candidate"] == "torch"])):
        out.append(f"| {label} | {sum(r['v1'] for r in sel)}/{len(sel)} | {sum(r['v2'] for r in sel)}/{len(sel)} |")
    out.append(f"| planted bugs caught | {sum(not r['v1'] for r in bugs)}/{len(bugs)} | "
               f"{sum(not r['v2'] for r in bugs)}/{len(bugs)} |")
    out.append("")
    out.append("| format | module | torch's worst mean signed error (ulp) | CR @1 / @2 | "
               + " | ".join(f"{b} @1 / @2" for b in sorted({r['candidate'] for r in bugs})) + " |")
    out.append("|---|---|---:|---|" + "---|" * len({r['candidate'] for r in bugs}))
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["format"], r["module"]), {})[r["candidate"]] = r
    for (fmt, mod), cs in by.items():
        cr = cs["CR"]
        cells = [f"{_mark(cr['v1'], True)} / {_mark(cr['v2'], True)}"]
        for b in sorted(c for c in cs if not cs[c]["legit"]):
            cells.append(f"{_mark(cs[b]['v1'], False)} / {_mark(cs[b]['v2'], False)}")
        out.append(f"| {fmt} | {mod} | {cr['baseline_mean_signed_worst']:+.1f} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1, help="draws of each module's inputs (default 1)")
    p.add_argument("--write-docs", action="store_true", help="replace the generated block of docs/benchmarks.md")
    args = p.parse_args(argv)
    start = time.perf_counter()
    rows = run(args.trials)
    md = table(rows)
    cmd = "python benchmarks/module_baseline.py" + (f" --trials {args.trials}" if args.trials != 1 else "")
    RESULTS.write_text(json.dumps({"command": cmd, "trials": args.trials, "seconds": round(time.perf_counter() - start, 1),
                                   "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(md)
    if args.write_docs:
        doc = DOC.read_text(encoding="utf-8")
        block = f"{BEGIN}\n<!-- generated by `{cmd} --write-docs`; do not edit -->\n{md}\n{END}"
        if BEGIN not in doc:
            raise SystemExit(f"{DOC} has no {BEGIN} … {END} block; add the section first")
        DOC.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S),
                       encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
