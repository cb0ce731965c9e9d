"""``python -m numstd report VERDICTS --out DIR``: Markdown and HTML reports of saved verdicts.

Reads each ``VERDICTS`` file (:func:`numstd.reporting.html.load_verdict_files`: verdict JSON, a
list of them, a grade report or a Parquet table of verdicts) and writes ``report.md``,
``report.html`` and ``plots/`` (:func:`numstd.reporting.html.write_report`).  ``--npz I=FILE``
(arrays ``actual`` and ``reference``, never unpickled) plots every element of verdict ``I``;
``--workers N`` sets the processes that draw the plots.
Exit code 0, 2 on a usage error (an unreadable file, a bad ``--npz``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.errors import NumstdError

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    """Add the report options to ``p``."""
    p.add_argument("verdicts", nargs="+", metavar="VERDICTS",
                   help="JSON (list, verdict or grade report) or Parquet files written by numstd")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for report.md, report.html, plots/")
    p.add_argument("--npz", action="append", default=[], metavar="I=FILE",
                   help="arrays 'actual' and 'reference' of verdict I: plot every element")
    p.add_argument("--plots", choices=("all", "failed", "none"), default="all", help="which verdicts get plots")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes drawing the plots (default: one per core, at most 4; 1: this process)")


def _npz(spec: str) -> tuple[int, Any, Any]:
    """``--npz INDEX=FILE`` as (index, actual, reference as float64)."""
    import numpy as np

    if "=" not in spec:
        raise NumstdError(f"--npz {spec!r}: write INDEX=FILE, e.g. 0=out.npz (arrays 'actual' and 'reference')")
    idx, path = spec.split("=", 1)
    try:
        with np.load(path, allow_pickle=False) as z:
            return int(idx), np.asarray(z["actual"]), np.asarray(z["reference"], dtype=np.float64)
    except (OSError, KeyError, ValueError) as exc:
        raise NumstdError(f"--npz {spec}: needs a readable .npz with arrays 'actual' and 'reference' ({exc})") from None


def run(args: argparse.Namespace) -> int:
    """Write the report ``args`` describes and print where; returns the exit code."""
    from ..reporting.html import load_verdict_files, write_report

    items = load_verdict_files(args.verdicts)
    npz = {}
    for spec in args.npz:
        i, a, r = _npz(spec)
        npz[i] = (a, r)
    paths = write_report(items, args.out, npz=npz, plots=args.plots, workers=args.workers)
    n_fail = sum(not v.passed for _, v in items)
    print(f"{len(items)} verdict(s), {n_fail} failing: {paths['markdown']} and {paths['html']}")
    if paths["plots"]:
        print(f"plots: {len(paths['plots'])} in {Path(args.out) / 'plots'} (first: {paths['plots'][0]})")
    return 0
