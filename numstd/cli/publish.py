"""``python -m numstd publish DRAFT.toml …``: make reviewed drafts published, immutable standards.

Each draft goes through :func:`numstd.authoring.publish.publish` (validation, atomic writes, where
they land: its module docstring), in the order given; the generated docs pages are rewritten once,
after the last draft.  ``--into DIR`` publishes into a directory of the user's own standards.
Prints each published path.  Exit code 0, 2 when a draft is refused (nothing of it is written).
"""

from __future__ import annotations

import argparse

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    """Add the publish options to ``p``."""
    p.add_argument("drafts", nargs="+", help="draft standard files written by calibrate")
    p.add_argument("--root", help="repository root (default: numstd's source checkout)")
    p.add_argument("--into", dest="into", metavar="DIR",
                   help="publish into this directory of your own standards (default: the first --standards-dir "
                        "or NUMSTD_STANDARDS_PATH entry)")


def run(args: argparse.Namespace) -> int:
    """Publish the drafts ``args`` names and print their paths; returns the exit code."""
    from ..authoring.publish import publish

    for d in args.drafts:
        path = publish(d, root=args.root, standards_dir=args.into, docs=d == args.drafts[-1])
        print(f"published {path}")
    return 0
