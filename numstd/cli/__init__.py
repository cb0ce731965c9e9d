"""Layer 6: the command line, ``python -m numstd COMMAND`` (all argparse code lives here).

:mod:`.app` dispatches the subcommands (and holds list, show, check, review, verify); :mod:`.grade`,
:mod:`.survey`, :mod:`.backends`, :mod:`.calibrate`, :mod:`.capture` (capture and compare),
:mod:`.publish`, :mod:`.docs` and :mod:`.report` hold the parsers of the commands of those names.
Each parses, calls the library (layers below) and prints; the library modules take no argparse
namespace.
"""

from __future__ import annotations

from typing import Any

from . import app as _app
from .app import COMMANDS, main

__all__ = ["main", "COMMANDS"]


def __getattr__(name: str) -> Any:
    try:
        return getattr(_app, name)
    except AttributeError:
        raise AttributeError(f"module 'numstd.cli' has no attribute {name!r}") from None
