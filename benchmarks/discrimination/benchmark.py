"""The whole discrimination benchmark: sweep, score, and a JSON-ready result with its tables."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

from .methods import load_methods
from .report import family_tables, headline_table, labels, numstd_findings, op_table
from .score import Score, score
from .sweep import SEED, benchmark_standards, sweep, units

__all__ = ["run", "markdown"]


def run(*, quick: bool = False, jobs: int | None = None, ops: Sequence[str] | None = None, seed: int = SEED,
        progress: Callable[[int, int, Any], None] | None = None) -> tuple[Score, dict]:
    """Run the benchmark; return the score and a JSON-ready result (meta, rates, subjects).

    Parameters
    ----------
    quick : bool
        The two smallest shapes of each suite instead of all.
    jobs : int, optional
        Worker processes (default: the usable cores, at most 8).
    ops : sequence of str, optional
        Restrict to these ops (default: every op of the corpus).
    seed : int
        Suite seed of the cases (default 101, unused by calibration).
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = os.cpu_count() or 1
    jobs = jobs or min(8, usable)
    methods = load_methods()
    stds = benchmark_standards(ops)
    work = units(stds, seed=seed, quick=quick)
    t0 = time.perf_counter()
    runs = sweep(work, jobs=jobs, progress=progress)
    took = time.perf_counter() - t0
    sc = score(runs, [m.name for m in methods])
    meta = {
        "quick": quick, "seed": seed, "jobs": jobs, "seconds": round(took, 1), "standards": [s.key for s in stds],
        "cases": len(work), "runs": sum(1 for r in runs if r["observable"]),
        "distinct_variants": {"legit": len({(s.op, s.variant) for s in sc.counted(True)}),
                              "bugs": len({(s.op, s.variant) for s in sc.counted(False)})},
        "subjects": {"legit": len(sc.counted(True)), "bugs": len(sc.counted(False)),
                     "never_observable": len(sc.never_observable), "excluded": len(sc.excluded)},
        "methods": [{"name": m.name, "label": m.label, "rule": m.rule, "source": m.source,
                     "tol": {k: dict(v) for k, v in m.tol.items()}, "max_rel_l2": m.max_rel_l2} for m in methods],
    }
    return sc, {"meta": meta, **sc.to_dict()}


def markdown(sc: Score, meta: dict) -> dict[str, str]:
    """The markdown blocks: ``headline``, ``families``, ``ops``, ``findings``, ``summary``."""
    methods = load_methods()
    lab = labels(methods)
    m = meta
    scope = ", quick: two smallest shapes per suite" if m["quick"] else ", every shape × distribution of each suite"
    subj, distinct = m["subjects"], m["distinct_variants"]
    summary = (f"{len(m['standards'])} default standards, {m['cases']} cases (seed {m['seed']}{scope}), "
               f"{m['runs']} variant runs; {subj['bugs']} bug subjects ({distinct['bugs']} distinct corpus bugs) and "
               f"{subj['legit']} legitimate subjects ({distinct['legit']} distinct legitimate variants); "
               f"{subj['never_observable']} bug subjects never observable and {subj['excluded']} excluded subjects "
               f"listed separately; {m['seconds']:.0f} s with "
               f"{m['jobs']} worker processes.")
    return {"headline": headline_table(sc, lab), "families": family_tables(sc, lab), "ops": op_table(sc, lab),
            "findings": numstd_findings(sc), "summary": summary}
