#!/usr/bin/env python
"""Write the tensor-core match table (dataset -> bit-exact rows of 5,000) into docs/emulators.md.

Every dataset of ``reference_data/tensor_core/`` is replayed with
:func:`numstd.emulate.tensor_core_truth.replay` (one ``tensor_core_matmul`` call with the GPU's
architecture, the dataset's ``c`` and output format); the table lists the matches over all rows,
over the even rows (the half used to fit the paths marked "fitted" in the docs) and over the odd
rows (held out), and the total.  The table replaces the text between the markers
``<!-- tc-match-table:begin -->`` and ``<!-- tc-match-table:end -->``.

Usage::

    python scripts/tc_match_table.py [--doc docs/emulators.md] [--check]

``--check`` exits with status 1 if the document's table differs from the one computed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from numstd.emulate import TENSOR_CORES
from numstd.emulate import tensor_core_truth as truth
from numstd.emulate.tensor_core import input_kind
from numstd.formats import get_format

BEGIN, END = "<!-- tc-match-table:begin -->", "<!-- tc-match-table:end -->"


def table() -> str:
    rows = ["| dataset | arch | datapath source | matches / 5,000 | even rows / 2,500 "
            "(fit) | odd rows / 2,500 (held out) |", "|---|---|---|---|---|---|"]
    total = n = 0
    for name in truth.datasets():
        ds = truth.load(name)
        ok = truth.replay(ds)
        model = TENSOR_CORES[ds.arch]
        kind = input_kind(get_format(ds.input_format).p)
        path = model.path(kind, ds.out)
        fitted = "fitted" if "fitted" in path.source else "upstream"
        total += int(ok.sum())
        n += ok.size
        rows.append(f"| {name} | `{ds.arch}` | {fitted} | {int(ok.sum()):,} | "
                    f"{int(ok[0::2].sum()):,} | {int(ok[1::2].sum()):,} |")
    rows.append(f"| **total** | | | **{total:,} / {n:,}** | | |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", type=Path, default=Path("docs/emulators.md"))
    ap.add_argument("--check", action="store_true", help="compare only, do not write")
    args = ap.parse_args()
    text = args.doc.read_text()
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    new = text[:a] + "\n" + table() + "\n" + text[b:]
    if args.check:
        sys.exit(0 if new == text else 1)
    args.doc.write_text(new)
    print(f"wrote the match table into {args.doc}")


if __name__ == "__main__":
    main()
