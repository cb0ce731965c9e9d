#!/usr/bin/env python
"""Re-check every published standard against its evidence: the quick path of issue 18.

A published standard cites an evidence file (``[provenance] evidence``): one row per legitimate
variant, bug and case its calibration judged, with the verdict (``passed``) and the worst element's
error in units of the bound (``normalized_max``).  This script regenerates, for each evidence file, the
rows that carry the standard's claims — per legitimate corpus variant the case that needed the most of
the bound, per bug the first case the calibration caught it on (or its strongest, if it caught none) —
reruns the variant on the regenerated inputs exactly as calibration did (the same case, parameters and
variant seed ``1000·seed + 7``), judges the output with :func:`numstd.check` against the standard that
wrote the evidence, and compares.  The claim is the verdict — every legitimate variant passes, every bug
is caught where the calibration caught it — and a changed verdict fails the run.  ``normalized_max``
(the worst element's error in units of the bound) is compared too, to ``--rtol``, and a difference is
reported as *drift*, not as a failure: variants built on BLAS (sgemm, tensor-core emulations,
attention's GEMMs) or on numpy's float32 libm (``fp32-math``) give other last bits on another CPU or
BLAS thread count (measured: up to 6× on a legitimate matmul row's 0.003, 0.38 → 0.74 on fp32 elu's
SIMD expm1), which moves the ratio but not the verdict.  Rows that cannot be regenerated — a variant
removed from the corpus after publication, or one that no longer applies on this machine (torch's
oneDNN availability) — are listed apart.

It does not refit constants (that is ``scripts/calibrate_all.py``, hours on two cores); it confirms that
what each file records is what the code in this checkout computes, so a change of the corpus, the
references, the criteria or the case generator that would silently change a published claim shows up.
Third-party rows (``backend:*``, and library variants such as ``torch-cpu`` when their library is not
installed) are skipped: their outputs depend on the installed library, not on this checkout.

    python scripts/recheck_evidence.py [--only NS-SOFTMAX-BF16 ...] [--jobs 2] [--json OUT.json]

Exit status 1 when any verdict differs (each is printed with its drift and the rows not regenerated), else 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

__all__ = ["evidence_files", "select_rows", "recheck_file", "recheck_rows", "main"]


def evidence_files(only: list[str] | None = None) -> list[tuple[str, str]]:
    """``(standard key ID@N, evidence file name)`` for every evidence file an active standard cites,
    each file once, judged by the standard that wrote it (the file's own ``ID@N``: a criteria-only
    version reuses its predecessor's file byte for byte)."""
    from numstd.registry import list_standards

    seen: dict[str, str] = {}
    for s in list_standards(status="active"):
        if s.op == "module" or (only and s.id not in only):
            continue
        name = Path(str(s.provenance.get("evidence", ""))).name
        if name and name not in seen:
            seen[name] = name.removesuffix(".evidence.parquet")
    return sorted((key, name) for name, key in seen.items())


def select_rows(rows: list[dict]) -> list[dict]:
    """The rows that carry a standard's claims (module docstring): per legitimate variant its most
    demanding case, per bug its first caught case (else its strongest)."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        if r["family"] == "backend-excluded" or str(r["variant"]).startswith("backend:"):
            continue
        by.setdefault(r["variant"], []).append(r)
    out = []
    for name, rs in sorted(by.items()):
        if rs[0]["legit"]:
            out.append(max(rs, key=lambda r: (_num(r["normalized_max"]), r["case"])))
        else:
            caught = [r for r in rs if not r["passed"]]
            out.append(caught[0] if caught else max(rs, key=lambda r: (_num(r["normalized_max"]), r["case"])))
    return out


def _num(x: Any) -> float:
    v = float(x)
    return -1.0 if math.isnan(v) else v


#: ratios beyond this are "outside by any measure": an exact standard's error over a zero bound is inf in
#: the calibration's table and err/tiny (~1e38) in a verdict
_HUGE = 1e30


def _same(a: float, b: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a >= _HUGE or b >= _HUGE:
        return a >= _HUGE and b >= _HUGE
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-300) or abs(a - b) <= 1e-12


def recheck_file(key: str, name: str, rtol: float = 1e-6) -> dict:
    """Regenerate and re-judge the selected rows of one evidence file (:func:`recheck_rows`)."""
    from importlib import resources

    import pyarrow.parquet as pq

    path = resources.files("numstd.reference_data") / "evidence" / name
    return recheck_rows(key, pq.read_table(str(path)).to_pylist(), rtol)


def recheck_rows(key: str, rows: list[dict], rtol: float = 1e-6) -> dict:
    """Regenerate and re-judge the selected rows (:func:`select_rows`) of evidence ``rows`` written by
    the standard ``key``; returns a summary dict with ``checked``, ``skipped`` and ``problems`` (one
    string per differing or missing row)."""
    import numpy as np

    import numstd
    from numstd.corpus import variants_for
    from numstd.ops import validate
    from numstd.registry import get_standard
    from numstd.suites import cases_for

    start = time.perf_counter()
    std = get_standard(key)
    cases = {c.id: c for c in cases_for(std)}
    corpus = {v.name: v for v in variants_for(std.op)}
    out: dict[str, Any] = {"standard": key, "checked": 0, "skipped": 0, "problems": [], "drift": [], "missing": []}
    for r in select_rows(rows):
        v, case = corpus.get(r["variant"]), cases.get(r["case"])
        if v is None or case is None:
            out["missing"].append(f"{key}: {r['variant']} on {r['case']}: "
                                  + ("no such corpus variant" if v is None else "the suite no longer has this case"))
            continue
        _, arrays, params = validate(std.op, list(case.inputs), dict(case.params))
        try:
            if not v.applicable(arrays, params, std.output, std.accumulate):
                if v.family == "library":  # (torch or jax not installed, or another build of it)
                    out["skipped"] += 1
                else:
                    out["missing"].append(f"{key}: {r['variant']} on {r['case']}: does not apply here")
                continue
            with np.errstate(all="ignore"):
                y = np.asarray(v.fn([np.array(a) if a is not None else None for a in arrays], dict(params),
                                    std.output, std.accumulate, 1000 * case.seed + 7))
        except numstd.BackendUnavailable:
            out["skipped"] += 1  # (a library variant whose library is not installed here)
            continue
        except ImportError:
            out["skipped"] += 1
            continue
        verdict = numstd.check(y, op=std.op, inputs=list(case.inputs), standard=key, **dict(case.params))
        out["checked"] += 1
        got, want = float(verdict.normalized_max), float(r["normalized_max"])
        line = (f"{key}: {r['variant']} on {r['case']}: evidence passed={bool(r['passed'])} "
                f"normalized_max={want:.9g}, now passed={verdict.passed} normalized_max={got:.9g}")
        if verdict.passed != bool(r["passed"]):
            out["problems"].append(line)
        elif not _same(got, want, rtol):
            out["drift"].append(line)
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def _task(args: tuple) -> dict:
    key, name, rtol = args
    try:
        return recheck_file(key, name, rtol)
    except Exception as exc:  # a file that cannot be rechecked is a finding, not a crash of the whole run
        return {"standard": key, "checked": 0, "skipped": 0, "seconds": 0.0, "drift": [], "missing": [],
                "problems": [f"{key}: recheck raised {type(exc).__name__}: {exc}"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", help="standard IDs (default: every active standard)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance on normalized_max (default 1e-6)")
    p.add_argument("--json", default=None, help="write every file's summary here")
    args = p.parse_args(argv)
    files = evidence_files(args.only)
    start = time.perf_counter()
    tasks = [(k, n, args.rtol) for k, n in files]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_task, tasks, chunksize=4))
    else:
        results = [_task(t) for t in tasks]
    took = time.perf_counter() - start
    problems = [pr for r in results for pr in r["problems"]]
    drift = [d for r in results for d in r["drift"]]
    missing = [m for r in results for m in r["missing"]]
    for title, lines in (("not regenerated", missing), ("drift (same verdict)", drift), ("VERDICT DIFFERS", problems)):
        for line in lines:
            print(f"{title}: {line}")
    checked = sum(r["checked"] for r in results)
    skipped = sum(r["skipped"] for r in results)
    print(f"rechecked {len(results)} evidence files, {checked} rows ({skipped} library rows skipped, "
          f"{len(missing)} not regenerated): {len(problems)} verdicts differ, {len(drift)} rows drift, {took:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": round(took, 1), "files": results}, indent=1) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
