"""Markdown and HTML reports of saved verdicts (:func:`write_report`; the command
``python -m numstd report VERDICTS --out DIR`` is its parser, :mod:`numstd.cli.report`).

``VERDICTS`` is what numstd saves: a JSON list of verdicts (the pytest plugin's
``--numstd-report x.json``; each may carry a ``test`` label), a Parquet table of verdict rows
(``--numstd-report x.parquet``), a grade report (``python -m numstd grade --json``), or one
verdict (``Verdict.to_json()``).  For each verdict the report has its reviewer snippet
(:meth:`numstd.Verdict.snippet`), the criteria table, the ULP-error quantiles, a histogram of
|ULP error| and an error-vs-magnitude plot.  Verdicts keep a histogram and the worst offenders,
not every element, so the magnitude plot shows the offenders against the distribution's
quantiles; ``--npz I=FILE`` (arrays ``actual`` and ``reference``) plots every element of verdict
``I`` instead.  Plots need matplotlib (imported only here); without it the report says so and
keeps the tables.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..core.errors import NumstdError, SchemaError
from ..judge.verdict import Verdict

__all__ = ["load_verdicts", "load_verdict_files", "write_report", "render_markdown"]


# ---------------------------------------------------------------------------------- loading
def load_verdicts(path: str | Path) -> list[tuple[str, Verdict]]:
    """``[(label, Verdict)]`` from a JSON or Parquet file numstd wrote (module docstring).

    Raises
    ------
    NumstdError
        For a missing or unreadable file, or content that is no numstd verdict/grade report.
    """
    p = Path(path)
    if not p.is_file():
        raise NumstdError(f"{p}: no such file; pass a JSON or Parquet file written by numstd")
    if p.suffix == ".parquet":
        return _from_parquet(p)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NumstdError(f"{p}: not JSON ({exc}); pass a .json or .parquet file written by numstd") from None
    return _from_doc(doc, p)


def load_verdict_files(paths: Sequence[str | Path]) -> list[tuple[str, Verdict]]:
    """The verdicts of several files, in order, for one report.

    Parameters
    ----------
    paths : sequence of str or Path
        Files :func:`load_verdicts` reads.

    Returns
    -------
    list of (label, Verdict)
        With one file, its labels; with more, each label prefixed by its file's name
        (``"run.json: verdict 0"``).

    Raises
    ------
    NumstdError
        As :func:`load_verdicts`, for the first file it cannot read.
    """
    items: list[tuple[str, Verdict]] = []
    for path in paths:
        loaded = load_verdicts(path)
        items += [(label if len(paths) == 1 else f"{Path(path).name}: {label}", v) for label, v in loaded]
    return items


def _from_doc(doc: Any, p: Path) -> list[tuple[str, Verdict]]:
    if isinstance(doc, list):
        out = []
        for i, d in enumerate(doc):
            if not isinstance(d, Mapping):
                raise SchemaError(f"{p}: item {i} is not a verdict object")
            out.append((str(d.get("test", f"verdict {i}")), Verdict.from_dict(d)))
        return out
    if isinstance(doc, Mapping) and str(doc.get("schema", "")).startswith("numstd.grade/"):
        from ..grade.grading import GradeReport

        rep = GradeReport.from_dict(doc)
        return [(f"{c.label} ({c.kind})", c.verdict) for c in rep.cases]
    if isinstance(doc, Mapping) and "schema" in doc:
        return [(str(doc.get("test", "verdict")), Verdict.from_dict(doc))]
    raise SchemaError(f"{p}: neither a verdict, a list of verdicts nor a grade report")


def _from_parquet(p: Path) -> list[tuple[str, Verdict]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for bad files
        raise NumstdError(f"{p}: not a readable Parquet file ({exc})") from None
    labels = table.column("test").to_pylist() if "test" in table.column_names else None
    return [(str(labels[i]) if labels else f"verdict {i}", Verdict.from_arrow(table, i)) for i in range(table.num_rows)]


# ---------------------------------------------------------------------------------- plots
def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(plt: Any, fig: Any, path: Path, right: float = 0.7) -> Path:
    # fixed margins instead of tight_layout, and plain tick labels without minor ticks
    # (_plain_log): measuring and mathtext-parsing every tick label was most of the 75 s that 70
    # verdicts (140 plots) took
    fig.subplots_adjust(left=0.18 if right > 0.9 else 0.12, right=right, bottom=0.24, top=0.88)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return path


def _plain_log(ax: Any, axis: str, subs: tuple = (1.0,)) -> None:
    """A log scale with ticks at ``subs`` × 10^k labelled as plain text (``1,000``, ``0.5``, ``2e-05``)
    and no minor ticks: mathtext labels and the minor ticks' objects were most of a plot's cost."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_locator(LogLocator(base=10, subs=subs, numticks=6))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 and v == int(v) else f"{v:.2g}"))
    target.set_minor_locator(NullLocator())


def _histogram_plot(plt: Any, v: Verdict, title: str, path: Path) -> Path:
    """Bars of the |ULP error| histogram on a labelled log scale that starts below one element,
    so that every bar is drawn from the same floor (a linear axis hides bins of a few elements;
    matplotlib's automatic log limits started at the smallest bar, making 131,200 against 130,944
    look like a tenfold gap); each bar is labelled with its count."""
    edges = list(v.ulp.histogram.get("edges", []))
    counts = list(v.ulp.histogram.get("counts", []))
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    if counts:
        labels = [f"≤{e:g}" if math.isfinite(e) else f">{edges[i]:g}" for i, e in enumerate(edges[1:])]
        ax.bar(range(len(counts)), counts, color="#4477aa")
        ax.set_xticks(range(len(counts)))
        ax.set_xticklabels(labels, rotation=60, fontsize=7)
        _plain_log(ax, "y")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_ylim(0.5, max(max(counts), 1) * 8)
        for i, c in enumerate(counts):
            if c > 0:
                ax.text(i, c * 1.15, f"{c:,}", ha="center", va="bottom", fontsize=7)
    else:
        ax.text(0.5, 0.5, "no finite elements compared", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("|ULP error| bin")
    ax.set_ylabel("elements (log scale)")
    ax.set_title(title, fontsize=9, y=1.01)  # (a fixed y: matplotlib otherwise measures every tick label to place it)
    return _save(plt, fig, path, right=0.97)


#: colours of the quantile lines (Paul Tol's bright scheme, colour-blind safe)
_QUANTILE_COLOURS = ("#4477aa", "#228833", "#ccbb44", "#ee6677", "#aa3377", "#66ccee", "#bbbbbb")


def _magnitude_plot(plt: Any, v: Verdict, title: str, path: Path, data: tuple | None) -> tuple[Path, str]:
    """The plot and a caption saying what it shows."""
    fig, ax = plt.subplots(figsize=(6.2, 3.2))
    caption = f"error vs magnitude: the {len(v.worst)} worst elements (x) against the quantiles (lines)"
    if data is not None:
        from ..core.ulp import ulp_error

        actual, ref = data
        a = np.asarray(actual, dtype=np.float64).reshape(-1)
        r = np.broadcast_to(ref, np.shape(actual)).reshape(-1)
        e = np.abs(ulp_error(a, r, v.formats.get("output", "float32")))
        ok = np.isfinite(e) & np.isfinite(r) & (r != 0)
        if ok.sum() > 20000:  # every element is too many points: a fixed-stride subsample
            ok[np.flatnonzero(ok)[:: int(ok.sum() // 20000) + 1]] = False
        ax.scatter(np.abs(r[ok]), np.maximum(e[ok], 1e-3), s=2, alpha=0.4, label="elements")
        caption = f"error vs magnitude: {int(ok.sum()):,} of {a.size:,} elements (from --npz), worst (x), quantiles (lines)"
    pts = [(abs(w.reference), max(abs(w.ulp_error), 1e-3)) for w in v.worst
           if w.reference != 0 and math.isfinite(w.reference)]
    if pts:
        ax.scatter(*zip(*pts), marker="x", color="#cc3311", s=30, label="worst elements")
    for j, (q, val) in enumerate(sorted(v.ulp.quantiles.items())):
        if val > 0 and math.isfinite(val):  # (a legend, not labels at the lines: near-equal quantiles overlap)
            ax.axhline(val, ls=("--", ":", "-.")[j % 3], lw=1, color=_QUANTILE_COLOURS[j % len(_QUANTILE_COLOURS)],
                       label=f"q{q:g} = {val:.3g} ulp")
    _plain_log(ax, "x", (1.0, 2.0, 5.0))
    _plain_log(ax, "y", (1.0, 2.0, 5.0))
    ax.tick_params(axis="both", labelsize=7)
    ax.tick_params(axis="x", labelrotation=30)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_xlabel("|reference|")
    ax.set_ylabel("|ULP error| (log scale)")
    ax.set_title(title, fontsize=9, y=1.01)  # (a fixed y: matplotlib otherwise measures every tick label to place it)
    return _save(plt, fig, path), caption


# ---------------------------------------------------------------------------------- text
def _criteria_rows(v: Verdict) -> list[tuple[str, str, str, str, str]]:
    return [(c.name, "pass" if c.passed else "**FAIL**", f"{c.value:.4g}", f"{c.limit:.4g}", c.message)
            for c in v.criteria]


def render_markdown(items: Sequence[tuple[str, Verdict]], images: Mapping[int, Sequence[tuple[Path, str]]] | None = None,
                    base: Path | None = None, note: str = "") -> str:
    """The Markdown report; ``images`` maps a verdict's index to ``(png, caption)`` pairs (linked relative to ``base``)."""
    images = images or {}
    n_fail = sum(not v.passed for _, v in items)
    stds = sorted({v.standard_id for _, v in items})
    lines = ["# numstd report", "",
             f"{len(items)} verdict(s): {len(items) - n_fail} pass, {n_fail} fail. Standards: "
             + ", ".join(f"`{s}`" for s in stds) + ".", ""]
    if note:
        lines += [note, ""]
    lines += ["| # | verdict | outcome | standard | max \\|ULP\\| | mean signed |", "|---|---|---|---|---|---|"]
    for i, (label, v) in enumerate(items):
        lines.append(f"| {i} | [{_md(label)}](#v{i}) | {'PASS' if v.passed else '**FAIL**'} | `{v.standard_id}` | "
                     f"{v.ulp.max:.3g} | {v.ulp.mean_signed:+.3f} |")
    for i, (label, v) in enumerate(items):
        lines += ["", f"## <a id=\"v{i}\"></a>{i}. {_md(label)} — {'PASS' if v.passed else 'FAIL'}", "",
                  "Reviewer snippet:", "", "```", v.snippet(), "```", "",
                  f"{v.citation}; op `{v.op}`, shape {list(v.shape)}, formats {dict(v.formats)}; "
                  f"{v.n_elements:,} elements ({v.n_nonfinite:,} non-finite).", "",
                  "| criterion | outcome | value | limit | detail |", "|---|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} | {_md(e)} |" for a, b, c, d, e in _criteria_rows(v)]
        q = ", ".join(f"q{k:g} ≤ {val:.3g}" for k, val in sorted(v.ulp.quantiles.items()))
        lines += ["", f"|ULP error| quantiles: {q or 'none'}; max {v.ulp.max:.3g}; mean {v.ulp.mean:.3g}.", ""]
        for img, caption in images.get(i, ()):
            rel = img.relative_to(base) if base is not None else img
            lines += [f"![{img.stem}]({rel.as_posix()})", "", f"*{caption}*", ""]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _render_html(items: Sequence[tuple[str, Verdict]], images: Mapping[int, Sequence[tuple[Path, str]]],
                 note: str) -> str:
    esc = html.escape
    n_fail = sum(not v.passed for _, v in items)
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>numstd report</title>",
           "<style>body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}.fail{color:#b00;font-weight:bold}"
           ".pass{color:#070}pre{background:#f4f4f4;padding:6px;white-space:pre-wrap}</style></head><body>",
           "<h1>numstd report</h1>",
           f"<p>{len(items)} verdict(s): {len(items) - n_fail} pass, {n_fail} fail.</p>"]
    if note:
        out.append(f"<p>{esc(note)}</p>")
    out.append("<table><tr><th>#</th><th>verdict</th><th>outcome</th><th>standard</th><th>max |ULP|</th>"
               "<th>mean signed</th></tr>")
    for i, (label, v) in enumerate(items):
        cls = "pass" if v.passed else "fail"
        out.append(f"<tr><td>{i}</td><td><a href='#v{i}'>{esc(label)}</a></td><td class='{cls}'>"
                   f"{'PASS' if v.passed else 'FAIL'}</td><td>{esc(v.standard_id)}</td><td>{v.ulp.max:.3g}</td>"
                   f"<td>{v.ulp.mean_signed:+.3f}</td></tr>")
    out.append("</table>")
    for i, (label, v) in enumerate(items):
        cls = "pass" if v.passed else "fail"
        out.append(f"<h2 id='v{i}'>{i}. {esc(label)} — <span class='{cls}'>{'PASS' if v.passed else 'FAIL'}</span></h2>")
        out.append(f"<pre>{esc(v.snippet())}</pre><p>{esc(v.citation)}; op {esc(v.op)}, shape {esc(str(list(v.shape)))}; "
                   f"{v.n_elements:,} elements.</p>")
        out.append("<table><tr><th>criterion</th><th>outcome</th><th>value</th><th>limit</th><th>detail</th></tr>")
        for c in v.criteria:
            out.append(f"<tr><td>{esc(c.name)}</td><td class='{'pass' if c.passed else 'fail'}'>"
                       f"{'pass' if c.passed else 'FAIL'}</td><td>{c.value:.4g}</td><td>{c.limit:.4g}</td>"
                       f"<td>{esc(c.message)}</td></tr>")
        out.append("</table>")
        for img, caption in images.get(i, ()):
            data = base64.b64encode(img.read_bytes()).decode("ascii")
            out.append(f"<figure><img alt='{esc(img.stem)}' src='data:image/png;base64,{data}'>"
                       f"<figcaption>{esc(caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(items: Iterable[tuple[str, Verdict]], out: str | Path, *,
                 npz: Mapping[int, tuple] | None = None, plots: str = "all") -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and ``plots/*.png`` into ``out``.

    Parameters
    ----------
    items : iterable of (label, Verdict)
    out : directory (created)
    npz : mapping verdict index → (actual, reference) arrays, optional
        Every element for that verdict's error-vs-magnitude plot.
    plots : "all", "failed" or "none"

    Returns
    -------
    dict with keys ``markdown`` and ``html`` (paths) and ``plots`` (list of the PNGs written).
    """
    if plots not in ("all", "failed", "none"):
        raise NumstdError(f"plots={plots!r}: use 'all', 'failed' or 'none'")
    items = list(items)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    npz = dict(npz or {})
    bad = [k for k in npz if not 0 <= k < len(items)]
    if bad:
        raise NumstdError(f"--npz index {bad[0]} is not a verdict of this report (0 … {len(items) - 1})")
    plt = _pyplot() if plots != "none" else None
    note = "" if plt is not None or plots == "none" else "matplotlib is not installed: no plots (pip install matplotlib)."
    images: dict[int, list[tuple[Path, str]]] = {}
    if plt is not None:
        from ..core.progress import iterate

        pdir = out / "plots"
        pdir.mkdir(exist_ok=True)
        for i, (label, v) in iterate(list(enumerate(items)), "report plots", "verdict"):
            if plots == "failed" and v.passed:
                continue
            title = f"{i}. {label}"[:80]
            hist = _histogram_plot(plt, v, title, pdir / f"{i:04d}-histogram.png")
            images[i] = [(hist, f"|ULP error| histogram of {v.ulp.count:,} compared elements"),
                         _magnitude_plot(plt, v, title, pdir / f"{i:04d}-magnitude.png", npz.get(i))]
    if note:
        import sys

        print(f"numstd report: {note}", file=sys.stderr)
    md = out / "report.md"
    md.write_text(render_markdown(items, images, out, note), encoding="utf-8")
    page = out / "report.html"
    page.write_text(_render_html(items, images, note), encoding="utf-8")
    return {"markdown": md, "html": page, "plots": [img for pairs in images.values() for img, _ in pairs]}
