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
import sys
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
def _agg_classes() -> Any:
    """matplotlib's Agg figure and canvas classes, or None when matplotlib is missing (pyplot is
    not needed: the report's figures never reach pyplot's figure manager)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure, FigureCanvasAgg


def _plain_log(ax: Any, axis: str, subs: tuple = (1.0,)) -> None:
    """A log scale with ticks at ``subs`` × 10^k labelled as plain text (``1,000``, ``0.5``, ``2e-05``)
    and no minor ticks: mathtext labels and the minor ticks' objects were most of a plot's cost."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_locator(LogLocator(base=10, subs=subs, numticks=6))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 and v == int(v) else f"{v:.2g}"))
    target.set_minor_locator(NullLocator())


class _Plotter:
    """The report's two plots, each drawn on one figure that is kept for every verdict.

    A new figure per plot cost most of a report's time (70 verdicts, 140 plots): each built its
    axes, ticks and tick labels from nothing.  Here the axes, scales, locators, labels and margins
    are set once; per verdict only the data artists (bars, counts, points, lines, legend) are
    removed and drawn anew, and the data limits restart from the new artists.  Fixed margins
    instead of tight_layout, and plain tick labels without minor ticks (:func:`_plain_log`): measuring
    and mathtext-parsing every tick label was most of the 75 s that 70 verdicts first took.
    """

    def __init__(self, classes: tuple) -> None:
        figure, canvas = classes
        self.hist_fig = figure(figsize=(4.6, 3.2))
        canvas(self.hist_fig)
        self.hist_fig.subplots_adjust(left=0.18, right=0.97, bottom=0.24, top=0.88)
        ax = self.hist_ax = self.hist_fig.add_subplot()
        _plain_log(ax, "y")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("|ULP error| bin")
        ax.set_ylabel("elements (log scale)")
        self.mag_fig = figure(figsize=(6.2, 3.2))
        canvas(self.mag_fig)
        self.mag_fig.subplots_adjust(left=0.12, right=0.7, bottom=0.24, top=0.88)
        ax = self.mag_ax = self.mag_fig.add_subplot()
        _plain_log(ax, "x", (1.0, 2.0, 5.0))
        _plain_log(ax, "y", (1.0, 2.0, 5.0))
        ax.tick_params(axis="both", labelsize=7)
        ax.tick_params(axis="x", labelrotation=30)
        ax.set_xlabel("|reference|")
        ax.set_ylabel("|ULP error| (log scale)")

    @staticmethod
    def _reset(ax: Any) -> None:
        """Remove the previous verdict's data artists; the next ones set the data limits afresh."""
        for artist in [*ax.patches, *ax.texts, *ax.lines, *ax.collections]:
            artist.remove()
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        ax.ignore_existing_data_limits = True
        ax.set_autoscale_on(True)

    @staticmethod
    def _save(fig: Any, path: Path) -> Path:
        fig.savefig(path, dpi=90, metadata={"Software": None}, pil_kwargs={"compress_level": 1})
        return path

    def histogram(self, v: Verdict, title: str, path: Path) -> Path:
        """Bars of the |ULP error| histogram on a labelled log scale that starts below one element,
        so that every bar is drawn from the same floor (a linear axis hides bins of a few elements;
        matplotlib's automatic log limits started at the smallest bar, making 131,200 against 130,944
        look like a tenfold gap); each bar is labelled with its count."""
        ax = self.hist_ax
        self._reset(ax)
        edges = list(v.ulp.histogram.get("edges", []))
        counts = list(v.ulp.histogram.get("counts", []))
        if counts:
            labels = [f"≤{e:g}" if math.isfinite(e) else f">{edges[i]:g}" for i, e in enumerate(edges[1:])]
            ax.bar(range(len(counts)), counts, color="#4477aa")
            ax.set_xticks(range(len(counts)))
            ax.set_xticklabels(labels, rotation=60, fontsize=7)
            ax.set_ylim(0.5, max(max(counts), 1) * 8)
            for i, c in enumerate(counts):
                if c > 0:
                    ax.text(i, c * 1.15, f"{c:,}", ha="center", va="bottom", fontsize=7)
        else:
            ax.set_xticks([])
            ax.set_xlim(0, 1)
            ax.set_ylim(0.5, 8)
            ax.text(0.5, 0.5, "no finite elements compared", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=9, y=1.01)  # (a fixed y: matplotlib otherwise measures every tick label to place it)
        return self._save(self.hist_fig, path)

    def magnitude(self, v: Verdict, title: str, path: Path, data: tuple | None) -> tuple[Path, str]:
        """The error-vs-magnitude plot and a caption saying what it shows."""
        ax = self.mag_ax
        self._reset(ax)
        caption = f"error vs magnitude: the {len(v.worst)} worst elements (x) against the quantiles (lines)"
        drawn = False
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
            drawn = drawn or bool(ok.any())
            caption = f"error vs magnitude: {int(ok.sum()):,} of {a.size:,} elements (from --npz), worst (x), quantiles (lines)"
        pts = [(abs(w.reference), max(abs(w.ulp_error), 1e-3)) for w in v.worst
               if w.reference != 0 and math.isfinite(w.reference)]
        if pts:
            ax.scatter(*zip(*pts), marker="x", color="#cc3311", s=30, label="worst elements")
            drawn = True
        lines = False
        for j, (q, val) in enumerate(sorted(v.ulp.quantiles.items())):
            if val > 0 and math.isfinite(val):  # (a legend, not labels at the lines: near-equal quantiles overlap)
                ax.axhline(val, ls=("--", ":", "-.")[j % 3], lw=1, color=_QUANTILE_COLOURS[j % len(_QUANTILE_COLOURS)],
                           label=f"q{q:g} = {val:.3g} ulp")
                lines = True
        if not drawn:  # no point sets the x range (axhline spans the axes): a fixed decade
            ax.set_xlim(0.1, 10)
        if not (drawn or lines):
            ax.set_ylim(0.1, 10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        ax.set_title(title, fontsize=9, y=1.01)  # (a fixed y: matplotlib otherwise measures every tick label to place it)
        return self._save(self.mag_fig, path), caption


#: colours of the quantile lines (Paul Tol's bright scheme, colour-blind safe)
_QUANTILE_COLOURS = ("#4477aa", "#228833", "#ccbb44", "#ee6677", "#aa3377", "#66ccee", "#bbbbbb")


#: verdicts per task of the process pool (also the smallest share worth a process of its own)
_PER_TASK = 16

_worker_plotter: "_Plotter | None" = None


def _draw_some(jobs: Sequence[tuple[int, str, Verdict, tuple | None]], pdir: Path,
               plotter: "_Plotter | None" = None) -> dict[int, list[tuple[Path, str]]]:
    """Both plots of each job ``(index, title, verdict, npz data)`` on ``plotter``; without one (in
    a pool worker) on the worker's own.  (A report drawn in the calling process has a plotter of
    its own: reports written from several threads share no figure.)"""
    global _worker_plotter
    if plotter is None:
        if _worker_plotter is None:
            _worker_plotter = _Plotter(_agg_classes())
        plotter = _worker_plotter
    out = {}
    for i, title, v, data in jobs:
        hist = plotter.histogram(v, title, pdir / f"{i:04d}-histogram.png")
        out[i] = [(hist, f"|ULP error| histogram of {v.ulp.count:,} compared elements"),
                  plotter.magnitude(v, title, pdir / f"{i:04d}-magnitude.png", data)]
    return out


def _mp_context() -> Any:
    """How the plot workers start: forked on Linux when this process runs one thread (they inherit
    matplotlib and numstd, already imported); spawned otherwise (macOS, Windows, or a process
    with threads, e.g. torch's or jax's, which a fork may copy holding a lock)."""
    import multiprocessing
    import threading

    linux = sys.platform.startswith("linux")
    return multiprocessing.get_context("fork" if linux and threading.active_count() == 1 else "spawn")


def _draw_all(jobs: list[tuple[int, str, Verdict, tuple | None]], pdir: Path,
              workers: int | None) -> dict[int, list[tuple[Path, str]]]:
    """Every job's plots, in a process pool when there are enough of them (:func:`write_report`),
    with a progress bar per verdict."""
    import os

    from ..core.progress import bar

    if workers is None:
        workers = min(os.cpu_count() or 1, 4, max(1, len(jobs) // _PER_TASK))
    tasks = [jobs[k:k + _PER_TASK] for k in range(0, len(jobs), _PER_TASK)] if workers > 1 else []
    images: dict[int, list[tuple[Path, str]]] = {}
    if len(tasks) > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        try:
            with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=_mp_context()) as pool:
                futures = [pool.submit(_draw_some, t, pdir) for t in tasks]
                with bar(len(jobs), "report plots", "verdict") as b:
                    for f in as_completed(futures):
                        done = f.result()
                        images.update(done)
                        b.update(len(done))
            return {i: images[i] for i, *_ in jobs}
        except (OSError, BrokenProcessPool) as exc:  # no processes here (a sandbox), or one died: draw here
            print(f"numstd report: drawing in one process ({exc})", file=sys.stderr)
            images = {}
    plotter = _Plotter(_agg_classes())
    with bar(len(jobs), "report plots", "verdict") as b:
        for job in jobs:
            images.update(_draw_some([job], pdir, plotter))
            b.update(1)
    return images


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
                 npz: Mapping[int, tuple] | None = None, plots: str = "all",
                 workers: int | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and ``plots/*.png`` into ``out``.

    Parameters
    ----------
    items : iterable of (label, Verdict)
    out : directory (created)
    npz : mapping verdict index → (actual, reference) arrays, optional
        Every element for that verdict's error-vs-magnitude plot.
    plots : "all", "failed" or "none"
    workers : int, optional
        Processes drawing the plots: 1 draws them in this process; default one per core (at most
        4, and one per 16 verdicts plotted). Each plot depends only on its verdict, so the PNGs
        are the same for any number.

    Returns
    -------
    dict with keys ``markdown`` and ``html`` (paths) and ``plots`` (list of the PNGs written).
    """
    if plots not in ("all", "failed", "none"):
        raise NumstdError(f"plots={plots!r}: use 'all', 'failed' or 'none'")
    if workers is not None and workers < 1:
        raise NumstdError(f"workers={workers}: use 1 or more (1 draws the plots in this process)")
    items = list(items)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    npz = dict(npz or {})
    bad = [k for k in npz if not 0 <= k < len(items)]
    if bad:
        raise NumstdError(f"--npz index {bad[0]} is not a verdict of this report (0 … {len(items) - 1})")
    classes = _agg_classes() if plots != "none" else None
    note = "" if classes is not None or plots == "none" else "matplotlib is not installed: no plots (pip install matplotlib)."
    images: dict[int, list[tuple[Path, str]]] = {}
    if classes is not None:
        pdir = out / "plots"
        pdir.mkdir(exist_ok=True)
        jobs = [(i, f"{i}. {label}"[:80], v, npz.get(i)) for i, (label, v) in enumerate(items)
                if plots == "all" or not v.passed]
        images = _draw_all(jobs, pdir, workers)
    if note:
        print(f"numstd report: {note}", file=sys.stderr)
    md = out / "report.md"
    md.write_text(render_markdown(items, images, out, note), encoding="utf-8")
    page = out / "report.html"
    page.write_text(_render_html(items, images, note), encoding="utf-8")
    return {"markdown": md, "html": page, "plots": [img for pairs in images.values() for img, _ in pairs]}
