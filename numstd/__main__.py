"""``python -m numstd``: the command-line interface (see :mod:`numstd.cli`)."""

import sys

from .cli.app import main

if __name__ == "__main__":  # (not when a spawned worker process imports this module as __mp_main__)
    sys.exit(main())
