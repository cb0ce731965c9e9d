"""``python -m numstd survey``: accuracy survey of an elementwise function from the command line.

Example::

    python -m numstd survey --op erf --format bfloat16 --backend torch --plot erf.png
    python -m numstd survey --op exp --format float32 --inputs 100000 --json

Prints the summary table of :meth:`numstd.survey.Survey.summary` (or the survey as JSON with
``--json``), draws a progress bar on stderr when it is a terminal (:mod:`numstd.progress`), and optionally saves a plot of the ULP error against
the input (matplotlib, imported only then).  Exit code 0 when the survey ran, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.errors import ParameterError

__all__ = ["configure", "run"]

def configure(p: argparse.ArgumentParser) -> None:
    """Add the survey options to ``p``."""
    p.add_argument("--op", required=True, help="elementwise op: exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt")
    p.add_argument("--format", required=True, help="input format: bfloat16, float16, float8_e4m3fn, float8_e5m2, … "
                                                    "(exhaustive) or float32 (with --inputs N)")
    p.add_argument("--backend", default="numpy", help="numpy (default), torch, jax, or a numstd.backends name")
    p.add_argument("--inputs", default="exhaustive", help="'exhaustive' (default) or a number of seeded samples")
    p.add_argument("--seed", type=int, default=0, help="seed of the samples (default 0)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="op parameter, e.g. approximate=tanh for gelu")
    p.add_argument("--standard", help="ID@N to judge by (default: the covering standard, if any)")
    p.add_argument("--json", action="store_true", help="print the survey as JSON")
    p.add_argument("--plot", metavar="PNG", help="save a plot of the ULP error against the input")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    from .calibrate import add_executor_options

    add_executor_options(p, default="serial")
    p.add_argument("--sweep-dir", help="dataset of the tasks' outputs (with --executor local/ray; the same "
                                       "command resumes from it)")


def _params(items: list[str]) -> dict[str, Any]:
    from .app import parse_params

    return parse_params(items)


def _inputs(text: str) -> Any:
    if text == "exhaustive":
        return text
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise ParameterError(f"--inputs {text!r}: pass 'exhaustive' or a number of samples, e.g. 100000") from None


def run(args: argparse.Namespace) -> int:
    """Run the survey described by ``args``; returns the exit code."""
    from ..core.progress import stages
    from ..survey.surveying import survey

    s = survey(args.op, args.format, backend=args.backend, inputs=_inputs(args.inputs), seed=args.seed,
               standard=args.standard, progress=None if args.quiet else stages(f"survey {args.op}"),
               executor=None if args.executor == "serial" else args.executor, workers=args.workers,
               ray_address=args.ray_address, sweep_dir=args.sweep_dir, **_params(args.param))
    print(s.to_json(indent=1) if args.json else s.summary())
    if args.plot:
        s.plot(args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0
