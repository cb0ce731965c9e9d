"""``python -m numstd``: the command-line interface (see :mod:`numstd.cli`)."""

import sys

from .cli import main

sys.exit(main())
