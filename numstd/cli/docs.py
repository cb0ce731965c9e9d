"""``python -m numstd docs``: regenerate ``docs/standards/<op>.md`` from the standard files.

The pages come from :func:`numstd.authoring.docs.generate`; without ``--out`` they go to
``docs/standards`` of the source checkout numstd runs from
(:func:`numstd.authoring.docs.default_out`).  Prints each written path.  Exit code 0, 2 on a usage
error (no ``--out`` outside a source checkout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    """Add the docs options to ``p``."""
    p.add_argument("--out", default=None, help="output directory (default: docs/standards of the repository, "
                                               "in a source checkout only)")


def run(args: argparse.Namespace) -> int:
    """Write the pages where ``args`` says and print their paths; returns the exit code."""
    from ..authoring.docs import default_out, generate

    out = Path(args.out) if args.out else default_out()
    for p in generate(out):
        print(p)
    return 0
