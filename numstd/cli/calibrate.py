"""``python -m numstd calibrate``: earn a standard's constants from evidence, write a draft.

The parser of :func:`numstd.authoring.calibrate.calibrate` (whose docstring and module describe the
steps, the files written and the scale-out).  The command line recorded in the draft's provenance
is rebuilt from the parsed arguments, so the same command and seed give the same draft.
:func:`add_executor_options` is shared with ``survey`` and ``capture``.

Exit codes: 0 a draft was written, 1 calibration refused (a legitimate variant fails or a bug
passes under the fitted standard), 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time

__all__ = ["configure", "run", "add_executor_options"]


def configure(p: argparse.ArgumentParser) -> None:
    """Add the calibrate options to ``p``."""
    p.add_argument("--op", help="op name (with --inputs)")
    p.add_argument("--inputs", help="input format, e.g. bfloat16")
    p.add_argument("--output", help="output format (default: the input format)")
    p.add_argument("--accumulate", default="float32", help="accumulation format (default float32)")
    p.add_argument("--standard", help="recalibrate this standard (ID or ID@N) into its next version")
    p.add_argument("--template", help="calibrate this template instance by ID (e.g. NS-MATMUL-FP32-TF32)")
    p.add_argument("--backends", nargs="*", default=["numpy"], help="backends whose outputs join the evidence")
    p.add_argument("--quick", action="store_true", help="one seed, smallest and largest shapes")
    p.add_argument("--seed", type=int, default=0, help="seed offset for the suite")
    p.add_argument("--date", help="date recorded in provenance (default SOURCE_DATE_EPOCH or today)")
    p.add_argument("--out", required=True, help="output directory for the draft, evidence, plot and the sweep "
                                                "dataset OUT/<ID>.sweep (the same command resumes it)")
    add_executor_options(p, default="local")
    p.add_argument("--retries", type=int, default=2, help="extra runs of a failing task before it is reported (default 2)")
    p.add_argument("--chunk", type=int, default=8, help="variants per task (default 8)")


def add_executor_options(p: argparse.ArgumentParser, default: str = "local") -> None:
    """``--executor``, ``--workers``, ``--ray-address`` (shared by calibrate, survey and capture)."""
    p.add_argument("--executor", choices=["local", "ray", "serial"], default=default,
                   help=f"where tasks run: local process pool, a Ray cluster, or this process (default {default})")
    p.add_argument("--workers", type=int, help="local processes (default: every core) or CPUs of a local Ray")
    p.add_argument("--ray-address", help="Ray cluster address (default: RAY_ADDRESS, else start a local Ray)")


def _command(args: argparse.Namespace) -> str:
    """The command line recorded in the draft's provenance, rebuilt from the parsed arguments."""
    cmd = "python -m numstd calibrate " + " ".join(
        f"--{k} {v}" for k, v in (("op", args.op), ("inputs", args.inputs), ("output", args.output),
                                  ("standard", args.standard), ("template", args.template)) if v) \
        + (f" --accumulate {args.accumulate}" if args.accumulate != "float32" else "") \
        + (" --backends " + " ".join(args.backends) if args.backends != ["numpy"] else "") \
        + (" --quick" if args.quick else "") + (f" --seed {args.seed}" if args.seed else "")
    return cmd.strip()


def run(args: argparse.Namespace) -> int:
    """Calibrate as ``args`` says and print the result; returns the exit code."""
    from ..authoring.calibrate import calibrate
    from ..core.progress import counter

    start = time.perf_counter()
    res = calibrate(args.op, args.inputs, args.output, args.accumulate, standard=args.standard, template=args.template,
                    backends=args.backends, quick=args.quick, seed=args.seed, out=args.out, date=args.date,
                    progress=counter("calibrate", "task"), command=_command(args), executor=args.executor,
                    workers=args.workers, ray_address=args.ray_address, retries=args.retries, chunk=args.chunk)
    if res.sweep is not None and res.sweep.reused:
        print(f"resumed: {res.sweep.reused} of {res.sweep.total} tasks reused from {res.sweep_path}", file=sys.stderr)
    print(res.summary())
    took = time.perf_counter() - start
    if res.ok:
        print(f"draft: {res.draft_path}\nevidence: {res.evidence_path}\n"
              + (f"plot: {res.plot_path}" if res.plot_path else "plot: none (matplotlib is not importable: pip install matplotlib)"))
        print(f"model headroom {res.legit_headroom:.2f}× over the most demanding legitimate case; "
              f"mildest bug {res.bug_margin:.3g}× its limit; {took:.1f} s")
        print(f"review it, then: python -m numstd publish {res.draft_path}")
        return 0
    print(f"calibration refused to write a draft ({took:.1f} s); evidence: {res.evidence_path}", file=sys.stderr)
    return 1
