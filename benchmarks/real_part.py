"""The "real" part of ``benchmarks/run.py``: real kernels, real-torch bugs, the side-by-side table
and the KernelBench-layout sweep (docs/benchmarks.md section 1b).

One run judges, on every suite case of the default standard of each catalog op (module excepted)
in fp32, bf16 and fp16:

* the library kernels of :mod:`benchmarks.real_impls` (torch CPU with 1 and 2 threads, jax CPU;
  torch.compile/inductor on the first shape and seed of each suite, since it compiles per shape);
* ``rounded64``, the float64 reference rounded once to the format (the KernelBench-layout sweep:
  an ideal kernel must pass; with torch1, the framework reference itself, beside it);
* the bugs of :mod:`benchmarks.real_bugs`;

each by numstd.check and by the fixed-tolerance checks of :mod:`benchmarks.side_by_side`.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["run", "markdown", "controls_table", "side_by_side_table", "sweep_table", "impls_table", "bugs_table", "false_rejects",
           "false_reject_table", "op_defects"]
_NAMES = {"torch1": "torch CPU, 1 thread", "torch2": "torch CPU, 2 threads", "inductor": "torch.compile/inductor CPU",
          "jax": "jax CPU (XLA)", "rounded64": "float64 reference rounded to the format"}


def run(*, quick: bool = False, inductor: bool = True, ops: list[str] | None = None, max_cases: int | None = None,
        kernels: tuple[str, ...] = ("torch1", "torch2", "jax", "rounded64"), bugs: tuple | None = None,
        controls: bool = True, reuse: dict | None = None, progress: Callable[[str], None] | None = None) -> dict:
    """All of the part; returns ``{"meta", "impls", "bugs"}`` (rows as in real_impls / real_bugs).

    Parameters
    ----------
    quick : bool
        First shape and seed of each suite only.
    inductor : bool
        Also the torch.compile kernels (always on the first shape and seed).
    ops : list of str, optional
        Only these ops (default: every catalog op but module).
    max_cases : int, optional
        At most this many cases per suite (smoke tests).
    kernels : tuple of str
        Kernel labels of :func:`benchmarks.real_impls.kernels` besides inductor.
    bugs : tuple of Bug, optional
        The bugs to run (default :data:`benchmarks.real_bugs.BUGS`).
    controls : bool
        Also :data:`benchmarks.real_bugs.CONTROLS` (the bugs' code without the bug), rows ``"controls"``.
    reuse : dict, optional
        A previous result whose kernel rows (``impls``) and their meta are kept: only the bugs and
        controls run again.
    """
    from benchmarks import real_bugs, real_impls

    t0 = time.perf_counter()
    stds = real_impls.default_standards(ops)
    if reuse is None:
        impls = real_impls.run(stds, list(kernels), quick=quick, methods=True,
                               max_cases=max_cases, progress=progress)
        t1 = time.perf_counter()
        if inductor:  # compiles once per op, shape and dtype: first shape and seed only
            impls += real_impls.run(stds, ["inductor"], quick=True, methods=True, max_cases=max_cases,
                                    progress=progress)
        t2 = time.perf_counter()
        kmeta = {"kernels": round(t1 - t0, 1), "inductor": round(t2 - t1, 1)}
    else:
        impls, kmeta = reuse["impls"], {k: reuse["meta"]["seconds"][k] for k in ("kernels", "inductor")}
        t2 = time.perf_counter()
    bug_rows = real_bugs.run(ops, quick=quick, max_cases=max_cases, progress=progress,
                             bugs=real_bugs.BUGS if bugs is None else bugs)
    t3 = time.perf_counter()
    control_rows = real_bugs.run(ops, quick=quick, max_cases=max_cases, progress=progress,
                                 bugs=real_bugs.CONTROLS) if controls else []
    t4 = time.perf_counter()
    meta: dict[str, Any] = {"quick": quick, "inductor": inductor, "standards": [s.key for s in stds],
                            "seconds": {**kmeta, "bugs": round(t3 - t2, 1), "controls": round(t4 - t3, 1)}}
    if reuse is not None:
        meta["kernels_from"] = reuse["meta"].get("kernels_from") or reuse["meta"].get("run", "an earlier run")
    try:
        import jax
        import torch

        meta["versions"] = {"torch": torch.__version__, "jax": jax.__version__}
    except Exception:  # pragma: no cover - both are installed where this part runs
        pass
    return {"meta": meta, "impls": impls, "bugs": bug_rows, "controls": control_rows}


def _judged(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("passed") is not None]


def _population(r: dict) -> str:
    """Which legit population a default-policy kernel row belongs to."""
    if r["backend"] == "rounded64":
        return "rounded64"
    if r["backend"] == "jax" and r["format"] != "float32":
        return "jax16"
    return "legit"


def impls_table(rows: list[dict]) -> str:
    """Per kernel and policy: judged, rejected outside defects, documented defects, no standard, errors."""
    g: dict[tuple, list] = defaultdict(list)
    for r in rows:
        g[(r["backend"], r["policy"])].append(r)
    lines = ["| kernel | policy | judged | rejected outside documented defects | documented defects | "
             "no standard (StandardNotFound) | kernel raised | (op, format) rejected outside defects (worst max\\|e\\|/B) |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    order = {k: i for i, k in enumerate(("torch1", "torch2", "inductor", "jax", "rounded64"))}
    for key in sorted(g, key=lambda k: (order.get(k[0], 9), k[1])):
        rs = g[key]
        j = _judged(rs)
        bad = [r for r in j if not r["passed"] and not r.get("defect")]
        per: dict[tuple, float] = {}
        for r in bad:
            per[(r["op"], r["format"])] = max(per.get((r["op"], r["format"]), 0.0), r["normalized_max"])
        nostd = sum(1 for r in rs if r.get("passed") is None and r.get("error", "").startswith("StandardNotFound"))
        raised = sum(1 for r in rs if r.get("passed") is None and r.get("error", "").startswith("kernel raised"))
        listing = ", ".join(f"{op} {_short(f)} ({w:.3g})" for (op, f), w in sorted(per.items())) or "none"
        lines.append(f"| {_NAMES.get(key[0], key[0])} | {key[1]} | {len(j)} | {len(bad)} | "
                     f"{sum(1 for r in j if not r['passed'] and r.get('defect'))} | {nostd} | {raised} | {listing} |")
    return "\n".join(lines)


def _short(fmt: str) -> str:
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(fmt, fmt)


def false_rejects(rows: list[dict]) -> list[dict]:
    """Default-policy rows of torch, inductor, jax fp32 and rounded64 rejected outside the defects."""
    return [r for r in _judged(rows) if r["policy"] == "default" and not r["passed"] and not r.get("defect")
            and _population(r) in ("legit", "rounded64")]


def op_defects() -> dict[tuple[str, str, str], str]:
    """``(library, op, format) -> defect id`` of the documented defects, whatever their case lists."""
    import tomllib

    from benchmarks.real_impls import DEFECTS

    doc = tomllib.loads(DEFECTS.read_text(encoding="utf-8"))
    return {(d["library"], op, f): d["id"] for d in doc.get("defect", []) for op in d.get("ops", [d["op"]])
            for f in d["formats"]}


def false_reject_table(rows: list[dict]) -> str:
    """Each (kernel, op, format) with false rejects: cases, criteria, worst, flushed-zero evidence, and
    the documented defect of the same library, op and format when one exists (its case list
    does not name these cases)."""
    from benchmarks.real_impls import _LIBRARY

    g: dict[tuple, list] = defaultdict(list)
    for r in false_rejects(rows):
        g[(r["backend"], r["op"], r["format"])].append(r)
    if not g:
        return "No false rejects."
    known = op_defects()
    lines = ["| kernel | op | format | cases rejected | failed criteria | worst max\\|e\\|/B | worst ulp | "
             "cases with flushed zeros | documented defect of this op (cases not listed) | worst case |",
             "|---|---|---|---:|---|---:|---:|---:|---|---|"]
    for (b, op, f), rs in sorted(g.items()):
        crit = ", ".join(sorted({c for r in rs for c in r["failed"]}))
        w = max(rs, key=lambda r: r["normalized_max"])
        ftz = sum(1 for r in rs if r.get("flushed", 0) > 0)
        lines.append(f"| {b} | {op} | {_short(f)} | {len(rs)} | {crit} | {w['normalized_max']:.3g} | "
                     f"{w['ulp_max']:.3g} | {ftz} | {known.get((_LIBRARY.get(b, b), op, f), '–')} | `{w['case']}` |")
    return "\n".join(lines)


def sweep_table(rows: list[dict]) -> str:
    """KernelBench-layout sweep: per format, op/format pairs and cases, rounded64 and torch1 rejects."""
    lines = ["| candidate | (op, format) pairs | cases judged | rejected | rejected (op, format) |",
             "|---|---:|---:|---:|---|"]
    for label in ("rounded64", "torch1"):
        j = [r for r in _judged(rows) if r["backend"] == label and r["policy"] == "default"]
        bad = [r for r in j if not r["passed"]]
        pairs = {(r["op"], r["format"]) for r in j}
        badp = sorted({(r["op"], _short(r["format"])) for r in bad})
        lines.append(f"| {_NAMES[label]} | {len(pairs)} | {len(j)} | {len(bad)} | "
                     f"{', '.join(f'{o} {f}' for o, f in badp) or 'none'} |")
    return "\n".join(lines)


def bugs_table(rows: list[dict]) -> str:
    """Per family: bugs, cases, observable cases, numstd detected (observable / not observable)."""
    from benchmarks.real_bugs import FAMILIES

    lines = ["| family | bugs | cases | observable | numstd detects, observable | numstd detects, not observable |",
             "|---|---:|---:|---:|---:|---:|"]
    j = _judged(rows)
    for fam, label in FAMILIES.items():
        rs = [r for r in j if r["family"] == fam]
        obs = [r for r in rs if r["observable"]]
        hid = [r for r in rs if not r["observable"]]
        lines.append(f"| {label} | {len({r['bug'] for r in rs})} | {len(rs)} | {len(obs)} | "
                     f"{sum(not r['passed'] for r in obs)} / {len(obs)} | {sum(not r['passed'] for r in hid)} / {len(hid)} |")
    obs = [r for r in j if r["observable"]]
    hid = [r for r in j if not r["observable"]]
    lines.append(f"| **all** | {len({r['bug'] for r in j})} | {len(j)} | {len(obs)} | "
                 f"{sum(not r['passed'] for r in obs)} / {len(obs)} | {sum(not r['passed'] for r in hid)} / {len(hid)} |")
    return "\n".join(lines)


def _pct(n: int, d: int) -> str:
    return f"{n} / {d} ({100.0 * n / d:.1f} %)" if d else "0 / 0"


def side_by_side_table(impls: list[dict], bugs: list[dict]) -> str:
    """Methods as rows: legit rejected (per population), bugs detected (observable / all)."""
    from benchmarks.side_by_side import LABELS, METHODS

    legit = [r for r in _judged(impls) if r["policy"] == "default" and not r.get("defect") and "methods" in r]
    pops = {p: [r for r in legit if _population(r) == p] for p in ("legit", "jax16", "rounded64")}
    jb = [r for r in _judged(bugs) if "methods" in r]
    obs = [r for r in jb if r["observable"]]

    def rejects(rs: list[dict], m: str) -> int:
        return sum(1 for r in rs if not (r["passed"] if m == "numstd" else r["methods"][m]))

    lines = ["| method | torch 1/2 threads, inductor, jax fp32: legit rejected | jax bf16/fp16 (16-bit arithmetic): "
             "rejected | float64 reference rounded: rejected | observable bugs detected | all bug cases detected |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in ("numstd", *METHODS):
        lines.append(f"| {LABELS[m]} | {_pct(rejects(pops['legit'], m), len(pops['legit']))} | "
                     f"{_pct(rejects(pops['jax16'], m), len(pops['jax16']))} | "
                     f"{_pct(rejects(pops['rounded64'], m), len(pops['rounded64']))} | "
                     f"{_pct(rejects(obs, m), len(obs))} | {_pct(rejects(jb, m), len(jb))} |")
    return "\n".join(lines)


def _case(r: dict) -> str:
    return f"`{r['case']}` {_short(r['format'])}"


def controls_table(rows: list[dict]) -> str:
    """Per control (a bug's code without the bug): cases, rejected, worst max|e|/B, rejected cases."""
    g: dict[str, list] = defaultdict(list)
    for r in _judged(rows):
        g[r["bug"]].append(r)
    lines = ["| control | formats | cases | rejected | worst max\\|e\\|/B | rejected cases |", "|---|---|---:|---:|---:|---|"]
    for name, rs in sorted(g.items()):
        bad = [r for r in rs if not r["passed"]]
        lines.append(f"| {name} | {', '.join(sorted({_short(r['format']) for r in rs}))} | {len(rs)} | {len(bad)} | "
                     f"{max(r['normalized_max'] for r in rs):.3g} | "
                     f"{', '.join(_case(r) for r in bad) or 'none'} |")
    return "\n".join(lines)


def markdown(result: dict, *, date: str = "", commit: str = "", command: str = "") -> dict[str, str]:
    """The generated blocks of docs/benchmarks.md section 1b."""
    from benchmarks.real_bugs import summary as bug_summary

    m = result["meta"]
    v = m.get("versions", {})
    run_id = f"{date}, commit `{commit}`, `{command}`"
    m.setdefault("run", run_id)
    kernels = (f"kernels {m['seconds']['kernels']} s, inductor {m['seconds']['inductor']} s "
               f"({'first shape and seed of each suite' if m['inductor'] else 'skipped'})")
    if m.get("kernels_from"):
        kernels = f"kernel rows kept from the run of {m['kernels_from']} ({kernels})"
    head = (f"Run {run_id}: torch {v.get('torch', '?')}, jax {v.get('jax', '?')}; {kernels}; "
            f"bugs {m['seconds']['bugs']} s, controls {m['seconds'].get('controls', 0)} s"
            f"{' (--quick: first shape and seed only)' if m['quick'] else ''}; {len(m['standards'])} default standards.")
    return {
        "real-controls": controls_table(result.get("controls", [])),
        "real-meta": head,
        "real-impls": impls_table(result["impls"]),
        "real-false-rejects": false_reject_table(result["impls"]),
        "real-sweep": sweep_table(result["impls"]),
        "real-bugs": bugs_table(result["bugs"]),
        "real-bugs-detail": bug_summary(result["bugs"]),
        "real-side-by-side": side_by_side_table(result["impls"], result["bugs"]),
    }
