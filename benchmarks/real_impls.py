"""Real implementations against the default standards: which library kernels does numstd reject?

Runs every catalog op's *library* kernel — torch CPU with 1 and 2 intra-op threads, torch.compile
(inductor, CPU), jax CPU — on every case of the suite of each default standard (fp32, bf16, fp16
inputs), and judges each output with :func:`numstd.check` exactly as a user would (the standard
chosen by the registry from the input and output formats; ``accumulate`` left at its default, and
for jax's 16-bit outputs also ``accumulate=<16-bit format>``, the declared 16-bit-arithmetic policy).

Usage::

    python benchmarks/real_impls.py [--ops softmax,sum] [--backends torch1,torch2,jax,inductor,rounded64] [--methods]
                                    [--quick] [--out benchmarks/results/real_impls.json]

Output: a JSON file with one row per (backend, op, input format, case, policy) — pass, max
|error|/bound, failed criteria, the standard used — and a markdown summary on stdout (failing cases
per op and backend, worst normalized error).  ``benchmarks/run.py`` (part ``real``,
``benchmarks/real_part.py``) runs it with ``--methods`` beside the real-torch bugs and writes
docs/benchmarks.md section 1b; a number there about real kernels comes from that run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

__all__ = ["default_standards", "kernels", "judge", "run", "summary", "known_defects", "main"]

DEFECTS = ROOT / "reference_data" / "evidence" / "known_library_defects.toml"
_LIBRARY = {"torch1": "torch", "torch2": "torch", "inductor": "torch", "jax": "jax / XLA CPU",
            "rounded64": "numstd reference"}


def known_defects() -> dict[tuple[str, str, str], str]:
    """``(library, input format, case id) -> defect id`` from the documented list of known library
    defects (reference_data/evidence/known_library_defects.toml)."""
    import tomllib

    doc = tomllib.loads(DEFECTS.read_text(encoding="utf-8"))
    return {(d["library"], fmt, case): d["id"] for d in doc.get("defect", []) for fmt in d["formats"]
            for case in d["cases"]}

_FORMATS = ("float32", "bfloat16", "float16")
_SKIP_OPS = {"module"}


def default_standards(ops: Iterable[str] | None = None) -> list:
    """The standard that :func:`numstd.check` picks by default for each (op, input format) of
    fp32/bf16/fp16 (accumulate float32, no selector), i.e. what a user of a library meets."""
    from numstd.errors import NumstdError
    from numstd.ops import OPS
    from numstd.registry import find_standard

    out = []
    for op in sorted(OPS):
        if op in _SKIP_OPS or (ops and op not in ops):
            continue
        for fmt in _FORMATS:
            try:
                out.append(find_standard(op, inputs=fmt, output=fmt))
            except NumstdError:
                continue
    return out


def _inductor(op: str) -> Callable[[list, dict], np.ndarray]:
    """torch.compile (inductor, CPU) of the torch backend's function for ``op`` (compiled per shape)."""
    import torch
    import torch.nn.functional as F

    from numstd.arrays import to_numpy
    from numstd.backends.base import framework_call
    from numstd.backends.torch_backend import _table, to_torch

    fn = _table(torch, F).get(op) or framework_call(op, "torch")
    cache: dict = {}

    def run(arrays: list, params: dict) -> np.ndarray:
        key = tuple(sorted((k, repr(v)) for k, v in params.items()))
        if key not in cache:
            cache[key] = torch.compile(lambda *a: fn(list(a), params), backend="inductor", dynamic=False)
        args = [None if a is None else to_torch(a, torch.device("cpu")) for a in arrays]
        with torch.no_grad():
            return to_numpy(cache[key](*args))

    return run


def kernels(names: Iterable[str]) -> dict[str, Callable[[str, list, dict], np.ndarray]]:
    """Kernels by label: ``torch1``/``torch2`` (torch CPU with 1/2 threads), ``inductor``, ``jax``, and
    ``rounded64``: the float64 reference (the exact op on the exact inputs) rounded once to the
    input format, the output an ideal kernel returns (the KernelBench-layout sweep)."""
    from numstd import backends
    from numstd.ops import validate

    out: dict[str, Callable] = {}
    for name in names:
        if name in ("torch1", "torch2"):
            be = backends.get("torch:cpu")
            if not be.available()[0]:
                continue
            nthreads = int(name[-1])

            def f(op: str, inputs: list, params: dict, be: Any = be, n: int = nthreads) -> np.ndarray:
                import torch

                torch.set_num_threads(n)
                return be.run(op, inputs, **params)

            out[name] = f
        elif name == "jax":
            be = backends.get("jax:cpu")
            if be.available()[0]:
                out[name] = lambda op, inputs, params, be=be: be.run(op, inputs, **params)
        elif name == "rounded64":
            def r(op: str, inputs: list, params: dict) -> np.ndarray:
                from benchmarks.side_by_side import expected_for, truth
                from numstd.ops import OPS

                if OPS[op].index_of:  # argmax/argmin: the exact first index (numpy's, torch's rule; NaN first)
                    x = np.asarray(inputs[0], dtype=np.float64)
                    pick = np.argmax if op == "argmax" else np.argmin
                    return np.asarray(pick(x, axis=params.get("axis"), keepdims=bool(params.get("keepdims", False))),
                                      dtype=np.int64)
                return expected_for(truth(op, list(inputs), dict(params)), np.asarray(inputs[0]).dtype.name)

            out[name] = r
        elif name == "inductor":
            compiled: dict = {}

            def g(op: str, inputs: list, params: dict, compiled: dict = compiled) -> np.ndarray:
                import torch

                torch.set_num_threads(2)
                if op not in compiled:
                    compiled[op] = _inductor(op)
                spec, arrays, full = validate(op, list(inputs), dict(params))
                return compiled[op](arrays, full)

            out[name] = g
        else:
            raise SystemExit(f"unknown backend label {name!r}; use torch1, torch2, inductor, jax, rounded64")
    return out


def judge(actual: np.ndarray, case: Any, accumulate: str | None = None) -> dict:
    """One verdict as a JSON row (``error`` when the call raises a numstd error)."""
    import numstd
    from numstd.errors import NumstdError

    kw = {} if accumulate is None else {"accumulate": accumulate}
    try:
        v = numstd.check(actual, op=case.op, inputs=case.inputs, **kw, **case.params)
    except NumstdError as exc:
        return {"passed": None, "error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    failed = [c.name for c in v.criteria if not c.passed]
    return {"passed": bool(v.passed), "standard": v.standard_id, "applied_policy": v.formats.get("policy"),
            "normalized_max": float(v.normalized_max),
            "ulp_max": float(v.ulp.max), "mean_signed": float(v.ulp.mean_signed), "failed": failed}


def run(stds: list, labels: Iterable[str], *, quick: bool = False, methods: bool = False,
        max_cases: int | None = None, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Every kernel on every case of every standard; one row per (kernel, case, policy).

    With ``methods``, each default-policy row also holds ``methods``: the pass/fail of every
    fixed-tolerance check of :mod:`benchmarks.side_by_side` on the same output (against the float64
    reference rounded to the output format).  ``max_cases`` keeps the first cases of each suite.
    """
    from numstd.suites import cases_for

    from benchmarks.side_by_side import expected_for, judge_all, truth

    ks = kernels(labels)
    defects = known_defects()
    rows: list[dict] = []
    for std in stds:
        cases = cases_for(std, quick=quick)[:max_cases]
        expect: dict[str, np.ndarray] = {}
        for label, k in ks.items():
            t0 = time.perf_counter()
            for case in cases:
                base = {"backend": label, "op": std.op, "format": std.inputs[0].name, "case": case.id}
                try:
                    out = k(case.op, case.inputs, dict(case.params))
                except Exception as exc:  # a library that cannot run the case is reported, not judged
                    rows.append({**base, "policy": "default", "passed": None,
                                 "error": f"kernel raised {type(exc).__name__}: {str(exc)[:160]}"})
                    continue
                defect = defects.get((_LIBRARY[label], base["format"], case.id))
                row = {**base, "policy": "default", "defect": defect, **judge(out, case)}
                if row["passed"] is not None and (methods or not row["passed"]):
                    if case.id not in expect:
                        expect[case.id] = expected_for(truth(case.op, list(case.inputs), dict(case.params)),
                                                       std.output.name)
                    e = expect[case.id]
                    if methods:
                        row["methods"] = judge_all(out, e, std.output.name)
                    if not row["passed"] and np.shape(out) == e.shape:  # zeros where the rounded truth is not
                        row["flushed"] = int(((np.asarray(out, np.float64) == 0) & (np.asarray(e, np.float64) != 0)).sum())
                rows.append(row)
                if label == "jax" and std.inputs[0].name != "float32":
                    rows.append({**base, "policy": "accumulate16", "defect": defect,
                                 **judge(out, case, std.inputs[0].name)})
            if progress:
                progress(f"{std.key} {label}: {len(cases)} cases, {time.perf_counter() - t0:.1f} s")
    return rows


def summary(rows: list[dict]) -> str:
    """Markdown: per (backend, policy, op, format) the cases rejected / judged and the worst max|e|/B."""
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        groups[(r["backend"], r["policy"], r["op"], r["format"])].append(r)
    lines = ["| backend | policy | op | format | rejected / judged | documented defects | worst max\\|e\\|/B | "
             "failed criteria | errors |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(groups):
        g = groups[key]
        judged = [r for r in g if r["passed"] is not None]
        bad = [r for r in judged if not r["passed"] and not r.get("defect")]
        doc = [r for r in judged if not r["passed"] and r.get("defect")]
        errs = sorted({r["error"].split(":")[0] for r in g if r["passed"] is None})
        worst = max((r["normalized_max"] for r in judged), default=float("nan"))
        crit = sorted({c for r in bad for c in r["failed"]})
        lines.append(f"| {' | '.join(key)} | {len(bad)} / {len(judged)} | {len(doc)} | {worst:.3g} | "
                     f"{', '.join(crit)} | {', '.join(errs)} |")
    total = [r for r in rows if r["passed"] is not None]
    lines.append(f"\n{sum(not r['passed'] and not r.get('defect') for r in total)} of {len(total)} judged real-kernel "
                 f"outputs rejected outside the documented defects ({sum(not r['passed'] and bool(r.get('defect')) for r in total)} "
                 f"rejected cases are documented defects); {sum(r['passed'] is None for r in rows)} calls without a verdict.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="", help="comma-separated ops (default: every catalog op but module)")
    ap.add_argument("--backends", default="torch1,torch2,jax", help="torch1,torch2,inductor,jax,rounded64")
    ap.add_argument("--quick", action="store_true", help="first shape and seed of each suite only")
    ap.add_argument("--methods", action="store_true", help="also judge by the fixed-tolerance checks "
                    "(benchmarks/side_by_side.py)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "real_impls.json"))
    a = ap.parse_args(argv)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ops = [o for o in a.ops.split(",") if o] or None
    stds = default_standards(ops)
    t0 = time.perf_counter()
    rows = run(stds, a.backends.split(","), quick=a.quick, methods=a.methods, progress=lambda m: print(m, file=sys.stderr, flush=True))
    meta = {"seconds": round(time.perf_counter() - t0, 1), "standards": [s.key for s in stds],
            "backends": a.backends, "quick": a.quick}
    try:
        import jax
        import torch

        meta["versions"] = {"torch": torch.__version__, "jax": jax.__version__}
    except Exception:
        pass
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
