#!/usr/bin/env python
"""Draft the next version of a published standard that changes criteria, not constants.

The draft keeps the model, its calibrated constants, the suite and the evidence of the published
version (the same evidence file, reused byte for byte: ``python -m numstd publish`` accepts an
evidence file already published when its sha256 matches), sets ``supersedes``, adds the given
``[criteria]`` keys, a rationale paragraph and a provenance note.  A change of constants is a
recalibration instead (``python -m numstd calibrate --standard ID@N``).

    python scripts/derive_version.py NS-NORMALIZE-FP32@1 --set bias_rows_t=true \\
        --why "..." --note "..." --out DRAFTS
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

__all__ = ["derive"]


def derive(std, criteria: dict[str, str], rationale: str, note: str) -> str:
    """The published file of ``std`` as the draft of its next version (module docstring).

    ``criteria`` maps keys to TOML literals (``{"tail_n": "1536"}``); ``rationale`` is appended to
    the rationale's text, ``note`` becomes ``[provenance] notes``.
    """
    text = Path(std.path).read_text(encoding="utf-8")
    out = re.sub(r"(?m)^version = \d+$", f"version = {std.version + 1}", text, count=1)
    out = out.replace('status = "active"', 'status = "draft"', 1)
    sup = f'supersedes = "{std.key}"'
    if re.search(r"(?m)^supersedes = ", out):
        out = re.sub(r'(?m)^supersedes = "[^"]*"$', sup, out, count=1)
    else:
        out = re.sub(r"(?m)^(default = (true|false))$", r"\1\n" + sup, out, count=1)
        if sup not in out:
            out = re.sub(r"(?m)^(version = \d+)$", r"\1\n" + sup, out, count=1)
    keys = "".join(f"{k} = {v}\n" for k, v in criteria.items())
    out = out.replace("[criteria]\n", "[criteria]\n" + keys, 1)
    # the rationale's text is a multi-line basic string: the paragraph goes before its closing quotes
    head, sep, rest = out.partition("[rationale]\ntext = \"\"\"")
    body, close, tail = rest.partition('"""')
    out = head + sep + body.rstrip("\n") + "\n" + rationale.rstrip("\n") + "\n" + close + tail
    if re.search(r"(?m)^notes = ", out):
        raise SystemExit(f"{std.key}: has provenance notes already; extend derive() before deriving it")
    out = out.replace("\n[provenance]\n", "\n[provenance]\nnotes = \"" + note.replace('"', "'") + "\"\n", 1)
    return out


def main() -> int:
    from numstd.catalog.registry import get_standard, load_standard

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("standards", nargs="+", help="ID@N of each published standard to derive from")
    p.add_argument("--set", action="append", default=[], metavar="KEY=TOML", help="a [criteria] key to add")
    p.add_argument("--why", required=True, help="the rationale paragraph (the version's reason)")
    p.add_argument("--note", required=True, help="the provenance note")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    criteria = {}
    for kv in args.set:
        k, _, v = kv.partition("=")
        tomllib.loads(f"x = {v}")  # a TOML literal
        criteria[k.strip()] = v.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    for key in args.standards:
        std = get_standard(key)
        text = derive(std, criteria, "\n" + args.why.format(version=std.version + 1), args.note.format(prev=std.key))
        dest = args.out / f"{std.id}@{std.version + 1}.toml"
        load_standard(text.encode(), str(dest))  # the draft parses
        dest.write_text(text, encoding="utf-8")
        print(f"{std.key} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
