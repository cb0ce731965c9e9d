"""Generated documentation of the standards: ``docs/standards/<op>.md``, one anchor per ID.

``python -m numstd docs`` regenerates it; a test fails when the committed pages differ from what
the standard files generate (stale docs).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["render", "generate", "default_out", "configure", "run"]


def _anchor(key: str) -> str:
    return key.lower().replace("@", "-v")


def render(root: Any = None) -> dict[str, str]:
    """``{file name: markdown}`` for every op with standards, plus ``README.md`` (the index)."""
    from .cli import render_standard
    from .registry import list_standards

    stds = list_standards(root=root)
    pages: dict[str, str] = {}
    ops = sorted({s.op for s in stds})
    index = ["# numstd standards catalog", "",
             "Generated from `standards/` by `python -m numstd docs`; do not edit. Cite a standard as",
             "`ID@N`; each has an anchor below. Formulas and their sources: [methodology](../methodology.md).", "",
             "| standard | op | inputs → output (accumulate) | status | default |", "|---|---|---|---|---|"]
    for s in stds:
        index.append(f"| [{s.key}]({s.op}.md#{_anchor(s.key)}) | {s.op} | {' × '.join(s.formats['inputs'])} → "
                     f"{s.output.name} ({s.accumulate.name}) | {s.status} | {'yes' if s.default else ''}"
                     f"{' (' + ', '.join(f'{k}={v}' for k, v in s.selector.items()) + ')' if s.selector else ''} |")
    index.append("")
    index.append(f"{len(stds)} standards.")
    pages["README.md"] = "\n".join(index) + "\n"
    for op in ops:
        lines = [f"# {op}", "", "Generated from `standards/" + op + "/`; do not edit.", ""]
        for s in (x for x in stds if x.op == op):
            lines += [f'<a id="{_anchor(s.key)}"></a>', f"## {s.key}", "", "```text", render_standard(s), "```", ""]
        pages[f"{op}.md"] = "\n".join(lines)
    return pages


def generate(out: str | Path, standards_root: Any = None) -> list[Path]:
    """Write the pages to ``out`` (removing stale ones); returns the written paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pages = render(standards_root)
    for old in out.glob("*.md"):
        if old.name not in pages:
            old.unlink()
    written = []
    for name, text in pages.items():
        p = out / name
        p.write_text(text, encoding="utf-8")
        written.append(p)
    return written


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="output directory (default: docs/standards of the repository, "
                                               "in a source checkout only)")


def default_out() -> Path:
    """``docs/standards`` of the source checkout numstd runs from.

    Raises
    ------
    ParameterError
        When numstd is installed from a wheel (no checkout around its standards: the default would
        be inside site-packages); the message says to pass ``--out``.
    """
    from importlib import resources

    from .errors import ParameterError

    # (resolved: in a checkout numstd/standards is a link to the top-level standards/)
    root = Path(str(resources.files("numstd.standards"))).resolve().parent
    if not ((root / "pyproject.toml").is_file() and (root / "docs").is_dir()):
        raise ParameterError(f"numstd is installed outside a source checkout ({root}); pass --out DIR to write "
                             "the standards' pages somewhere, e.g. python -m numstd docs --out numstd-docs")
    return root / "docs" / "standards"


def run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else default_out()
    for p in generate(out):
        print(p)
    return 0
