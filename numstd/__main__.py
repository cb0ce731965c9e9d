"""``python -m numstd``: the command-line interface (see :mod:`numstd.cli`)."""

import sys

from .cli.app import main

sys.exit(main())
