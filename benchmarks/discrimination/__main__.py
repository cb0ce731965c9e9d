"""``python -m benchmarks.discrimination [--quick] [--jobs N] [--ops a,b] [--json PATH]``: run the
discrimination benchmark alone and print its tables (``benchmarks/run.py`` runs everything)."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    from .benchmark import markdown, run

    p = argparse.ArgumentParser(prog="python -m benchmarks.discrimination", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two smallest shapes per suite")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: usable cores)")
    p.add_argument("--ops", default=None, help="comma-separated ops (default: all of the corpus)")
    p.add_argument("--json", default=None, help="write the full result here")
    args = p.parse_args(argv)

    from numstd.progress import counter

    bar = counter("discrimination", "case")  # (a tqdm bar on stderr when it is a terminal)
    sc, result = run(quick=args.quick, jobs=args.jobs, ops=args.ops.split(",") if args.ops else None,
                     progress=lambda i, n, unit: bar(i, n))
    md = markdown(sc, result["meta"])
    print(md["summary"], md["headline"], md["families"], md["ops"], md["findings"], sep="\n\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
