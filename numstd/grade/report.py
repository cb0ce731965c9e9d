"""The report of :func:`numstd.grade`: one verdict per case, the totals, and its JSON form.

``GradeReport.to_json()`` writes schema ``numstd.grade/1`` (:data:`SCHEMA`); ``from_json`` reads it
back (``python -m numstd report`` and ``numstd.report`` tabulate it).  See ``docs/grading.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from .._version import __version__
from ..judge.verdict import Verdict

__all__ = ["CaseVerdict", "GradeReport", "SCHEMA"]

SCHEMA = "numstd.grade/1"


@dataclass(frozen=True)
class CaseVerdict:
    """One verdict of a grade: the case (trial, distribution, input seed) and the standard's verdict.

    ``kind`` is ``"module"`` (NS-MODULE-*) or ``"op"`` (the catalog op's own standard).
    """

    trial: int
    distribution: str
    seed: int
    kind: str
    verdict: Verdict

    @property
    def label(self) -> str:
        return f"trial {self.trial}, {self.distribution}"

    def to_dict(self) -> dict:
        return {"trial": self.trial, "distribution": self.distribution, "seed": self.seed,
                "kind": self.kind, "verdict": self.verdict.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping) -> "CaseVerdict":
        return cls(int(d["trial"]), d["distribution"], int(d["seed"]), d["kind"], Verdict.from_dict(d["verdict"]))


@dataclass(frozen=True)
class GradeReport:
    """What :func:`grade` returns: the outcome and every verdict behind it.

    Attributes
    ----------
    passed : bool
        Every verdict passed.
    standard_id : str
        The module standard, ``"NS-MODULE-<FMT>@N"``.
    dtype : str
        The working format.
    device, framework : str
    op : tuple or None
        ``(name, params)`` of the catalog op the module was judged as too, or None.
    op_note : str
        How the op was found (``"detected: torch.softmax"``, ``"declared"``) or why no op standard
        was applied.
    cases : tuple of CaseVerdict
        Every verdict, module and op, per (trial, distribution), in run order.
    trials : int
    distributions : tuple of str
    seconds : float
        Wall time of the grade.
    """

    passed: bool
    standard_id: str
    dtype: str
    device: str
    framework: str
    op: tuple | None
    op_note: str
    cases: tuple[CaseVerdict, ...]
    trials: int
    distributions: tuple[str, ...]
    seed: int
    seconds: float
    numstd_version: str = __version__
    schema: str = SCHEMA

    def __bool__(self) -> bool:
        return self.passed

    @property
    def verdicts(self) -> list[Verdict]:
        return [c.verdict for c in self.cases]

    @property
    def failures(self) -> list[CaseVerdict]:
        """The failing cases, in run order."""
        return [c for c in self.cases if not c.verdict.passed]

    @property
    def standards(self) -> tuple[str, ...]:
        """Every standard cited, ``ID@N``, module standard first."""
        seen = [self.standard_id]
        for c in self.cases:
            if c.verdict.standard_id not in seen:
                seen.append(c.verdict.standard_id)
        return tuple(seen)

    def reasons(self) -> list[str]:
        """One line per failing case: where, which standard, which criterion and why."""
        return [f"{c.label} (seed {c.seed}), {c.verdict.standard_id}: "
                + "; ".join(f"{x.name} — {x.message}" for x in c.verdict.failed_criteria) for c in self.failures]

    @property
    def message(self) -> str:
        n, bad = len(self.cases), len(self.failures)
        head = (f"{'PASS' if self.passed else 'FAIL'}: {self.dtype} on {self.device} judged by "
                f"{', '.join(self.standards)} over {self.trials} trial(s) × {len(self.distributions)} "
                f"input distribution(s) ({', '.join(self.distributions)}); {n - bad}/{n} verdicts pass.")
        if self.op_note:
            head += f" Op standard: {self.op_note}."
        if bad:
            head += " Failed: " + " | ".join(self.reasons()[:5]) + (f" | … {bad - 5} more" if bad > 5 else "")
        return head

    def snippet(self) -> str:
        """One line for written feedback: outcome, standards, and the first failure's reason."""
        cited = ", ".join(self.standards)
        if self.passed:
            worst = max((c.verdict.normalized_max for c in self.cases if c.kind == "module"), default=0.0)
            return (f"PASS {cited} ({self.dtype}): {len(self.cases)} verdicts over {self.trials} trial(s) × "
                    f"{len(self.distributions)} input distributions; worst quantile at {worst:.2f}× its allowance")
        first = self.failures[0]
        dists = [d for d in self.distributions if any(c.distribution == d for c in self.failures)]
        why = first.verdict.snippet().split(" — ", 1)[-1]
        return (f"FAIL {cited} ({self.dtype}): {len(self.failures)}/{len(self.cases)} verdicts fail, on "
                f"{', '.join(dists)} inputs; first ({first.label}, {first.verdict.standard_id}): {why}")

    def to_dict(self) -> dict:
        return {
            "schema": self.schema, "numstd_version": self.numstd_version, "passed": self.passed,
            "standard_id": self.standard_id, "standards": list(self.standards), "dtype": self.dtype,
            "device": self.device, "framework": self.framework,
            "op": None if self.op is None else [self.op[0], dict(self.op[1])], "op_note": self.op_note,
            "trials": self.trials, "distributions": list(self.distributions), "seed": self.seed,
            "seconds": self.seconds, "message": self.message, "snippet": self.snippet(),
            "cases": [c.to_dict() for c in self.cases],
        }

    def to_json(self, **kwargs: Any) -> str:
        """JSON text (schema ``numstd.grade/1``); each case holds a full ``numstd.verdict/1`` verdict."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping) -> "GradeReport":
        if d.get("schema") != SCHEMA:
            from ..core.errors import SchemaError

            raise SchemaError(f"grade report schema {d.get('schema')!r} is not {SCHEMA!r}; upgrade numstd to read it")
        op = d.get("op")
        return cls(
            passed=bool(d["passed"]), standard_id=d["standard_id"], dtype=d["dtype"], device=d["device"],
            framework=d["framework"], op=None if op is None else (op[0], dict(op[1])), op_note=d["op_note"],
            cases=tuple(CaseVerdict.from_dict(c) for c in d["cases"]), trials=int(d["trials"]),
            distributions=tuple(d["distributions"]), seed=int(d["seed"]), seconds=float(d["seconds"]),
            numstd_version=d.get("numstd_version", ""),
        )

    @classmethod
    def from_json(cls, text: str) -> "GradeReport":
        return cls.from_dict(json.loads(text))

