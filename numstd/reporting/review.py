"""Rubric-ready Markdown for reviewers: one block per grade report or verdict.

:func:`review_markdown` renders, for a :class:`~numstd.grade_report.GradeReport` (or a single
:class:`~numstd.verdict.Verdict`): the verdict; the standard ID linked to its anchor in the
catalog (``docs/standards/<op>.md#<id>-v<N>``); the failing criterion with its measured value and
limit; the diagnosis (:mod:`numstd.judge.diagnosis`) with a suggested fix; and the command that
reproduces the case (the recorded ``seed`` and ``secret_seed``).  ``python -m numstd review
REPORT.json`` prints it.  See ``docs/reviewers.md``.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

__all__ = ["review_markdown", "load_report", "standard_link"]

#: where the catalog pages live, relative to the repository root
CATALOG = "docs/standards"


def standard_link(standard_id: str, base: str = CATALOG) -> str:
    """``[ID@N](docs/standards/<op>.md#<id>-vN)`` for a published standard (plain ID when unknown)."""
    sid, _, ver = standard_id.partition("@")
    anchor = f"{sid.lower()}-v{ver or '1'}"
    try:
        from ..catalog.registry import get_standard

        op = get_standard(standard_id).op
    except Exception:  # noqa: BLE001 - an unknown or unpublished ID: no link target
        return f"`{standard_id}`"
    return f"[{standard_id}]({base}/{op}.md#{anchor})"


def load_report(text: str) -> Any:
    """A GradeReport or a Verdict from its JSON text (schema ``numstd.grade/1`` or ``numstd.verdict/1``)."""
    from ..core.errors import SchemaError

    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not JSON ({exc}); pass the output of `numstd grade --json` or a verdict's to_json()") from None
    schema = d.get("schema") if isinstance(d, Mapping) else None
    if schema == "numstd.grade/1":
        from ..grade.report import GradeReport

        return GradeReport.from_dict(d)
    if schema == "numstd.verdict/1":
        from ..judge.verdict import Verdict

        return Verdict.from_dict(d)
    raise SchemaError(f"schema {schema!r} is neither numstd.grade/1 nor numstd.verdict/1; pass a grade report "
                      "(`numstd grade --json`) or a verdict (Verdict.to_json())")


def _criterion_lines(v: Any) -> list[str]:
    out = []
    for c in v.failed_criteria[:3]:
        out.append(f"- failing criterion **{c.name}**: measured {c.value:.4g}, limit {c.limit:.4g} — {c.message}")
    if v.worst:
        w = v.worst[0]
        out.append(f"- worst element {list(w.index)}: {w.actual!r} vs reference {w.reference!r} "
                   f"({w.ulp_error:+.3g} ulp, {w.normalized:.3g}× the bound)")
    return out


def _diagnosis_lines(diag: Any) -> list[str]:
    if not diag:
        return ["- diagnosis: no cause of the documented vocabulary fits the evidence"]
    out = []
    for i, d in enumerate(diag):
        head = "likely cause" if i == 0 else "alternative"
        out.append(f"- {head}: **{d.cause}** ({d.confidence:.0%}) — {d.evidence}")
    out.append(f"- suggested fix: {diag[0].fix}")
    return out


def _command(report: Any, case: Any) -> str:
    p = dict(report.protocol)
    if p.get("problem") and p.get("candidate"):
        cmd = ["python", "-m", "numstd", "grade", "--problem", p["problem"], "--candidate", p["candidate"],
               "--dtype", report.dtype, "--trials", str(report.trials), "--seed", str(report.seed)]
        if report.secret_seed is not None:
            cmd += ["--secret-seed", str(report.secret_seed)]
        if p.get("max_dim"):
            cmd += ["--max-dim", str(p["max_dim"])]
        if p.get("isolation") == "in-process":
            cmd.append("--in-process")
        return " ".join(shlex.quote(c) for c in cmd)
    return (f"numstd.grade(Model, ModelNew, get_inputs, init_inputs=get_init_inputs, dtype={report.dtype!r}, "
            f"trials={report.trials}, seed={report.seed}, secret_seed={report.secret_seed!r})")


def review_markdown(report: Any) -> str:
    """The Markdown block (module docstring) for a GradeReport or a Verdict."""
    from ..judge.verdict import Verdict

    if isinstance(report, Verdict):
        v = report
        lines = [f"**numstd verdict: {'PASS' if v.passed else 'FAIL'}** — {standard_link(v.standard_id)} "
                 f"(`{v.op}`, output {v.formats.get('output', '?')}, shape {list(v.shape)})", ""]
        if v.passed:
            lines.append(f"- {v.snippet()}")
        else:
            lines += _criterion_lines(v) + _diagnosis_lines(v.diagnosis)
        return "\n".join(lines) + "\n"
    r = report
    links = ", ".join(standard_link(s) for s in r.standards)
    lines = [f"**numstd grade: {'PASS' if r.passed else 'FAIL'}** — {links} ({r.dtype} on {r.device}, {r.framework})", "",
             f"- {r.snippet()}"]
    if not r.passed:
        first = r.failures[0]
        lines.append(f"- first failing case: {first.label} (input seed {first.seed}), {first.kind} standard "
                     f"{standard_link(first.verdict.standard_id)}")
        lines += _criterion_lines(first.verdict)
        lines += _diagnosis_lines(r.diagnosis)
    lines.append(f"- protocol: isolation {r.protocol.get('isolation', '?')}, secret seed "
                 f"{'recorded' if r.secret_seed is not None else 'off'}, reproducible bits: "
                 f"{'—' if r.reproducible is None else ('yes' if r.reproducible else 'no')}")
    tf32 = {k: v for k, v in r.environment.items() if "tf32" in k or "autocast" in k or k == "NEURON_CC_FLAGS"}
    if tf32:
        lines.append("- precision environment: " + ", ".join(f"`{k}={v}`" for k, v in tf32.items()))
    lines += ["", "Reproduce:", "", "```", _command(r, r.failures[0] if r.failures else None), "```"]
    return "\n".join(lines) + "\n"
