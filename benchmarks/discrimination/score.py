"""Scoring: runs of the sweep -> per-subject outcomes -> detection and false-rejection rates.

Rules (docs/benchmarks.md):

* a **legitimate** subject is *falsely rejected* by a method if the method fails it on any case;
* a **bug** subject is *detected* by a method if the method fails it on at least one case where
  the bug is observable; a bug observable on no case is listed separately and not counted;
* a subject whose variant or ``numstd.check`` raised on some case is listed under *errors*; the
  cases that ran still count;
* variants a standard's template excludes are reported separately (not counted).

"numstd" is one more method here: it fails a run when the verdict fails (``numstd.check`` with
the case's inputs and the default standard).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["Subject", "Score", "score", "NUMSTD"]

NUMSTD = "numstd"


@dataclass
class Subject:
    """One (standard, variant) pair and its outcome per method.

    ``rejected[m]`` lists the case IDs on which method ``m`` failed the subject (bugs: observable
    cases only); ``cases`` the cases it ran on; ``numstd_fails`` one entry per case numstd failed
    (case, failed criteria, normalized error); ``closest`` the run where numstd came closest to
    failing (largest normalized error), for misses.
    """

    standard: str
    op: str
    output: str
    variant: str
    legit: bool
    family: str
    cases: list = field(default_factory=list)
    unobservable: int = 0
    rejected: dict = field(default_factory=lambda: defaultdict(list))
    numstd_fails: list = field(default_factory=list)
    closest: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.standard}/{self.variant}"

    @property
    def counted(self) -> bool:
        """Counted in the rates: not excluded by the standard and (bugs) observable somewhere."""
        return self.family != "excluded" and bool(self.cases)

    def flagged(self, method: str) -> bool:
        """The method rejects (legit) / detects (bug) this subject."""
        return bool(self.rejected.get(method))

    def to_dict(self) -> dict:
        """JSON-ready: case counts per method, numstd's rejected case IDs, and numstd's failing
        criteria on every case for a legitimate subject (the first 5 cases for a bug)."""
        return {"standard": self.standard, "op": self.op, "output": self.output, "variant": self.variant,
                "legit": self.legit, "family": self.family, "cases": len(self.cases),
                "unobservable_cases": self.unobservable,
                "rejected_cases": {m: len(c) for m, c in self.rejected.items()},
                "numstd_rejected": sorted(self.rejected.get(NUMSTD, [])),
                "numstd_fails": self.numstd_fails if self.legit else self.numstd_fails[:5],
                "closest": self.closest, "errors": self.errors, "note": self.note}


@dataclass
class Score:
    """The scored benchmark."""

    methods: tuple[str, ...]
    subjects: list[Subject]

    def counted(self, legit: bool) -> list[Subject]:
        return [s for s in self.subjects if s.counted and s.legit == legit]

    @property
    def never_observable(self) -> list[Subject]:
        """Bugs that cannot manifest on any benchmark case of their standard."""
        return [s for s in self.subjects if not s.legit and s.family != "excluded" and not s.cases]

    @property
    def excluded(self) -> list[Subject]:
        return [s for s in self.subjects if s.family == "excluded"]

    @property
    def errors(self) -> list[Subject]:
        return [s for s in self.subjects if s.errors]

    def rates(self, subjects: Iterable[Subject] | None = None) -> dict[str, dict[str, tuple[int, int]]]:
        """``{method: {"detected": (k, n_bugs), "rejected": (k, n_legit)}}`` over ``subjects``."""
        subs = [s for s in (self.subjects if subjects is None else subjects) if s.counted]
        bugs = [s for s in subs if not s.legit]
        legit = [s for s in subs if s.legit]
        return {m: {"detected": (sum(s.flagged(m) for s in bugs), len(bugs)),
                    "rejected": (sum(s.flagged(m) for s in legit), len(legit))} for m in self.methods}

    def by(self, key: str) -> dict[str, list[Subject]]:
        """Counted subjects grouped by an attribute (``family``, ``op``, ``output``, ``standard``)."""
        groups: dict[str, list[Subject]] = defaultdict(list)
        for s in self.subjects:
            if s.counted:
                groups[getattr(s, key)].append(s)
        return dict(groups)

    def numstd_misses(self) -> list[Subject]:
        return [s for s in self.counted(False) if not s.flagged(NUMSTD)]

    def numstd_false_rejects(self) -> list[Subject]:
        return [s for s in self.counted(True) if s.flagged(NUMSTD)]

    def to_dict(self) -> dict:
        return {"methods": list(self.methods), "rates": {m: {k: list(v) for k, v in r.items()}
                                                          for m, r in self.rates().items()},
                "subjects": [s.to_dict() for s in self.subjects]}


def score(runs: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> Score:
    """Aggregate the sweep's runs (dicts of :class:`~.sweep.Run`) into a :class:`Score`.

    ``methods`` are the fixed rules' names; "numstd" is added first.
    """
    names = (NUMSTD,) + tuple(m for m in methods if m != NUMSTD)
    subjects: dict[tuple[str, str], Subject] = {}
    for r in runs:
        k = (r["standard"], r["variant"])
        s = subjects.get(k)
        if s is None:
            s = subjects[k] = Subject(r["standard"], r["op"], r["output"], r["variant"], r["legit"], r["family"],
                                      note=r.get("note", ""))
        if r.get("error"):
            s.errors.append(f"{r['case']}: {r['error']}")
        if not r["observable"]:
            s.unobservable += 1
            continue
        if r.get("error") and r.get("numstd_passed") is None and not r.get("methods"):
            continue
        s.cases.append(r["case"])
        if r.get("numstd_standard") and r["numstd_standard"] != r["standard"]:
            s.errors.append(f"{r['case']}: numstd.check selected {r['numstd_standard']}, not {r['standard']}")
        outcomes = {m: (p, metric) for m, (p, metric) in r.get("methods", {}).items()}
        if r.get("numstd_passed") is not None:
            outcomes[NUMSTD] = (r["numstd_passed"], r.get("normalized_max"))
        for m, (passed, _) in outcomes.items():
            if not passed:
                s.rejected[m].append(r["case"])
        if r.get("numstd_passed") is False:
            s.numstd_fails.append({"case": r["case"], "failed": list(r.get("numstd_failed", [])),
                                   "normalized_max": r.get("normalized_max"), "ulp_max": r.get("ulp_max"),
                                   "ulp_mean_signed": r.get("ulp_mean_signed")})
        nm = r.get("normalized_max")
        if nm is not None and (not s.closest or _gt(nm, s.closest.get("normalized_max"))):
            s.closest = {"case": r["case"], "normalized_max": nm, "ulp_max": r.get("ulp_max"),
                         "ulp_mean_signed": r.get("ulp_mean_signed"), "passed": r.get("numstd_passed")}
    for s in subjects.values():
        s.rejected = defaultdict(list, {m: s.rejected.get(m, []) for m in names})
    ordered = sorted(subjects.values(), key=lambda s: (s.op, s.standard, not s.legit, s.variant))
    return Score(names, ordered)


def _gt(a: float, b: float | None) -> bool:
    if b is None:
        return True
    a = -1.0 if a is None or (isinstance(a, float) and math.isnan(a)) else a
    return a > b
