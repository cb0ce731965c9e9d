"""The report of :func:`numstd.grade`: one verdict per case, the totals, and its JSON form.

``GradeReport.to_json()`` writes schema ``numstd.grade/1`` (:data:`SCHEMA`); ``from_json`` reads it
back (``python -m numstd report`` and ``numstd.report`` tabulate it).  See ``docs/grading.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from .._version import __version__
from ..judge.verdict import Verdict

SNIPPET_MAX = 300  # characters of GradeReport.snippet()


def _clip(line: str) -> str:
    return line if len(line) <= SNIPPET_MAX else line[:SNIPPET_MAX - 1] + "…"

__all__ = ["CaseVerdict", "GradeReport", "SCHEMA", "SNIPPET_MAX"]

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
    secret_seed : int or None
        The secret mixed with ``seed`` into every draw (:func:`numstd.grade.combined_seed`); with
        ``seed`` it reproduces every verdict.
    protocol : mapping
        The protocol's steps (:class:`numstd.grade.Protocol`), ``isolation`` (``"in-process"`` or
        ``"subprocess"``) and what happened to the second shape set.
    environment : mapping
        The precision switches at grading time (:func:`numstd.grade_frameworks.precision_environment`).
    reproducible : bool or None
        Whether two candidate runs on the same inputs gave the same bits (None: not tested).
    forwards : mapping
        Forward calls the grade ran: ``truth`` (float64), ``reference`` (working dtype, incl. the
        determinism rerun), ``candidate`` (incl. the reproducibility rerun).
    forward_seconds : float
        Seconds spent inside those forwards; ``seconds − forward_seconds`` is grade's own overhead.
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
    secret_seed: int | None = None
    protocol: Mapping = field(default_factory=dict)
    environment: Mapping = field(default_factory=dict)
    reproducible: bool | None = None
    forwards: Mapping = field(default_factory=dict)
    forward_seconds: float = 0.0

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

    @property
    def diagnosis(self) -> tuple:
        """The likely causes over the failing cases (:func:`numstd.judge.diagnosis.combine`), most likely first."""
        from ..judge.diagnosis import combine

        return combine([c.verdict.diagnosis for c in self.failures]) if self.failures else ()

    def snippet(self) -> str:
        """One line of at most 300 characters for written feedback: outcome, standard, where it fails, why."""
        cited = ", ".join(self.standards)
        if self.passed:
            worst = max((c.verdict.normalized_max for c in self.cases if c.kind == "module"), default=0.0)
            line = (f"PASS {cited} ({self.dtype}): {len(self.cases)} verdicts over {self.trials} trial(s) × "
                    f"{len(self.distributions)} input distributions; worst quantile at {worst:.2f}× its allowance")
            return _clip(line)
        bad = self.failures
        dists = list(dict.fromkeys(c.distribution for c in bad))
        crits = list(dict.fromkeys(x.name for c in bad for x in c.verdict.failed_criteria))
        where = ", ".join(dists[:3]) + (f" +{len(dists) - 3}" if len(dists) > 3 else "")
        line = (f"FAIL {self.standard_id} ({self.dtype}): fails {len(bad)}/{len(self.cases)} cases, "
                f"{'/'.join(crits[:2])} on {where} inputs")
        diag = self.diagnosis
        if diag:
            line += f"; likely {diag[0].cause}"
            if len(diag) > 1:
                line += f" (else {diag[1].cause})"
        return _clip(line)

    def to_dict(self) -> dict:
        return {
            "schema": self.schema, "numstd_version": self.numstd_version, "passed": self.passed,
            "standard_id": self.standard_id, "standards": list(self.standards), "dtype": self.dtype,
            "device": self.device, "framework": self.framework,
            "op": None if self.op is None else [self.op[0], dict(self.op[1])], "op_note": self.op_note,
            "trials": self.trials, "distributions": list(self.distributions), "seed": self.seed,
            "seconds": self.seconds, "message": self.message, "snippet": self.snippet(),
            "secret_seed": self.secret_seed, "protocol": dict(self.protocol), "environment": dict(self.environment),
            "reproducible": self.reproducible, "forwards": dict(self.forwards), "forward_seconds": self.forward_seconds,
            **({"diagnosis": [d.to_dict() for d in self.diagnosis]} if not self.passed else {}),
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
            numstd_version=d.get("numstd_version", ""), secret_seed=d.get("secret_seed"),
            protocol=dict(d.get("protocol") or {}), environment=dict(d.get("environment") or {}),
            reproducible=d.get("reproducible"), forwards=dict(d.get("forwards") or {}),
            forward_seconds=float(d.get("forward_seconds", 0.0)),
        )

    @classmethod
    def from_json(cls, text: str) -> "GradeReport":
        return cls.from_dict(json.loads(text))

