"""Markdown tables of a scored discrimination benchmark (docs/benchmarks.md, README)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .score import NUMSTD, Score, Subject

__all__ = ["headline_table", "family_tables", "op_table", "numstd_findings", "labels"]


def labels(methods: Sequence[Any]) -> dict[str, str]:
    """Method name -> printed label (numstd first)."""
    out = {NUMSTD: "**numstd** (default standard)"}
    out.update({m.name: m.label for m in methods})
    return out


def _pct(k: int, n: int) -> str:
    if not n:
        return "–"
    pct = 100.0 * k / n
    return f"{k}/{n} ({pct:.1f} %)" if 0 < pct < 1 else f"{k}/{n} ({pct:.0f} %)"


def headline_table(score: Score, label: Mapping[str, str]) -> str:
    """Bugs detected / legitimate variants rejected per method, over every counted subject."""
    rates = score.rates()
    lines = ["| method | bugs detected ↑ | legitimate variants rejected ↓ |", "|---|---:|---:|"]
    for m in score.methods:
        d, r = rates[m]["detected"], rates[m]["rejected"]
        lines.append(f"| {label.get(m, m)} | {_pct(*d)} | {_pct(*r)} |")
    return "\n".join(lines)


def _short(m: str, label: Mapping[str, str]) -> str:
    return "numstd" if m == NUMSTD else label.get(m, m)


def family_tables(score: Score, label: Mapping[str, str]) -> str:
    """Two tables by corpus family: bugs detected, and legitimate variants rejected."""
    groups = score.by("family")
    head = "| family | " + " | ".join(_short(m, label) for m in score.methods) + " |"
    sep = "|---|" + "---:|" * len(score.methods)
    parts = []
    for legit, title in ((False, "Bugs detected, by family"), (True, "Legitimate variants rejected, by family")):
        rows = [head, sep]
        for fam in sorted(f for f, subs in groups.items() if subs[0].legit == legit):
            subs = groups[fam]
            n = len(subs)
            rows.append(f"| {fam} ({n}) | " + " | ".join(f"{sum(s.flagged(m) for s in subs)}/{n}"
                                                         for m in score.methods) + " |")
        parts.append(f"**{title}** (subjects per family in parentheses)\n\n" + "\n".join(rows))
    return "\n\n".join(parts)


def op_table(score: Score, label: Mapping[str, str]) -> str:
    """Per op: ``detected/bugs · rejected/legit`` for each method."""
    groups = score.by("op")
    head = "| op (bugs · legit) | " + " | ".join(_short(m, label) for m in score.methods) + " |"
    rows = [head, "|---|" + "---:|" * len(score.methods)]
    for op in sorted(groups):
        subs = groups[op]
        bugs = [s for s in subs if not s.legit]
        legit = [s for s in subs if s.legit]
        cells = [f"{sum(s.flagged(m) for s in bugs)} · {sum(s.flagged(m) for s in legit)}" for m in score.methods]
        rows.append(f"| {op} ({len(bugs)} · {len(legit)}) | " + " | ".join(cells) + " |")
    return ("Each cell: bugs detected · legitimate variants rejected.\n\n" + "\n".join(rows))


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def _fail_line(s: Subject, shown: int = 3) -> str:
    head = f"- `{s.standard}` · `{s.variant}` ({s.family}): fails {len(s.numstd_fails)}/{len(s.cases)} case(s)"
    cases = [f"`{f['case']}`: {', '.join(f['failed']) or '?'}; max |e|/B {_fmt(f['normalized_max'])}, "
             f"max ulp {_fmt(f['ulp_max'])}, mean signed {_fmt(f['ulp_mean_signed'])}"
             for f in s.numstd_fails[:shown]]
    more = f"; … {len(s.numstd_fails) - shown} more" if len(s.numstd_fails) > shown else ""
    return head + " — " + " · ".join(cases) + more


def numstd_findings(score: Score) -> str:
    """numstd's misses and false rejects (with the failing criteria), never-observable bugs,
    template exclusions and errors, as markdown lists."""
    out = []
    fr = score.numstd_false_rejects()
    out.append(f"**numstd false rejects: {len(fr)}**" + ("" if fr else " (none)"))
    out.extend(_fail_line(s) for s in fr)
    miss = score.numstd_misses()
    out.append("")
    out.append(f"**numstd misses: {len(miss)}**" + ("" if miss else " (none)"))
    for s in miss:
        c = s.closest
        out.append(f"- `{s.standard}` · `{s.variant}` ({s.family}): passes all {len(s.cases)} observable case(s); "
                   f"closest `{c.get('case')}`: max |e|/B {_fmt(c.get('normalized_max'))}, max ulp "
                   f"{_fmt(c.get('ulp_max'))}, mean signed {_fmt(c.get('ulp_mean_signed'))}")
    never = score.never_observable
    out.append("")
    out.append(f"**Bugs not observable on any benchmark case (not counted): {len(never)}**"
               + ("" if never else " (none)"))
    if never:
        out.append(", ".join(f"`{s.standard}` · `{s.variant}`" for s in never))
    exc = score.excluded
    out.append("")
    out.append(f"**Corpus variants a standard does not accept as evidence (not counted): {len(exc)}**"
               + ("" if exc else " (none)"))
    by_note: dict[str, list[Subject]] = {}
    for s in exc:
        by_note.setdefault(s.note, []).append(s)
    for note, subs in by_note.items():
        items = ", ".join(f"`{s.standard}` · `{s.variant}` (numstd fails {len(s.rejected.get(NUMSTD, []))}/"
                          f"{len(s.cases)})" for s in subs)
        out.append(f"- {note}: {items}")
    errs = score.errors
    if errs:
        out.append("")
        out.append(f"**Runs that raised: {len(errs)} subject(s)**")
        out.extend(f"- `{s.key}`: {s.errors[0]}" + (f" (+{len(s.errors) - 1})" if len(s.errors) > 1 else "")
                   for s in errs)
    return "\n".join(out)
