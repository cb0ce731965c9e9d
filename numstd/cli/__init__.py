"""Layer 6: the command line, ``python -m numstd COMMAND`` (all argparse code lives here).

:mod:`.app` dispatches the subcommands; :mod:`.grade`, :mod:`.survey` and :mod:`.backends` hold the
parsers of the commands of those names.
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
