"""``python -m numstd capture``, ``compare`` and ``export``: captures on a backend, judged, exported.

``capture`` runs a standard's suite on one backend and writes the exact output bits as one Parquet
file (:func:`numstd.authoring.capture.capture`, schema in :mod:`numstd.authoring.capture`); with
``--executor local/ray`` its tasks' results are kept in ``OUT.sweep`` so that the same command
resumes.  ``compare`` judges captures against the reference and against each other
(:func:`numstd.authoring.capture.compare`).  ``export CAPTURE --out OUT.safetensors`` (or
``capture ... --safetensors OUT.safetensors``) writes the outputs as safetensors, bit for bit
(:func:`numstd.authoring.capture.export_safetensors`).

Exit codes: 0 a capture was written / every capture passes, 1 a capture fails (compare), 2 a
usage error (unknown standard or backend, an unreadable or altered capture).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .calibrate import add_executor_options

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser, name: str = "capture") -> None:
    """Add the options of command ``name`` (``capture``, ``compare`` or ``export``) to ``p``."""
    if name == "export":
        p.add_argument("capture", metavar="CAPTURE", help="capture file (.parquet)")
        p.add_argument("--out", required=True, metavar="OUT.safetensors",
                       help="safetensors file: one tensor per case (named by case ID), metadata in __metadata__")
    elif name == "capture":
        p.add_argument("--standard", required=True, help="ID@N or ID (a template ID before publication)")
        p.add_argument("--backend", required=True, help="backend name (python -m numstd backends)")
        p.add_argument("--out", required=True, help="output Parquet file")
        p.add_argument("--safetensors", metavar="OUT.safetensors", help="also export the outputs as safetensors")
        p.add_argument("--quick", action="store_true", help="first shape and first seed only")
        p.add_argument("--seeds", type=int, nargs="+", help="replace the suite's seeds")
        add_executor_options(p, default="serial")
        p.add_argument("--retries", type=int, default=2, help="extra runs of a failing task (with --executor local/ray)")
    else:
        p.add_argument("captures", nargs="+", metavar="CAPTURE", help="capture files (.parquet)")
        p.add_argument("--standard", help="judge against this standard instead of the one each capture names")
        p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace, name: str = "capture") -> int:
    """Run command ``name`` (``capture``, ``compare`` or ``export``) as ``args`` says; returns the exit code."""
    if name == "export":
        from ..authoring.capture import capture_metadata, export_safetensors, read_capture

        table = read_capture(args.capture)
        _print_export(export_safetensors(table, args.out), table, capture_metadata(table))
        return 0
    if name == "capture":
        from ..authoring.capture import capture, capture_metadata, write_capture
        from ..core.progress import counter

        sweep = None if args.executor == "serial" else Path(str(args.out) + ".sweep")
        table = capture(args.standard, args.backend, args.quick, seeds=args.seeds, progress=counter("capture", "case"),
                        executor=None if args.executor == "serial" else args.executor, workers=args.workers,
                        ray_address=args.ray_address, retries=args.retries, sweep_dir=sweep)
        path = write_capture(table, args.out)
        meta = capture_metadata(table)
        errors = sum(e is not None for e in table.column("error").to_pylist())
        print(f"{path}: {meta['n_cases']} cases of {meta['standard']} on {meta['backend']} ({meta['device']}; "
              f"{meta['versions']})" + (f"; {errors} raised" if errors else ""))
        if args.safetensors:
            from ..authoring.capture import export_safetensors

            _print_export(export_safetensors(table, args.safetensors), table, meta)
        return 0
    from ..authoring.capture import compare

    result = compare(args.captures, standard=args.standard)
    print(json.dumps(result.to_dict(), indent=1, default=str) if args.json else result.text())
    return 0 if result.passed else 1


def _print_export(path: Path, table: object, meta: dict) -> None:
    errors = sum(e is not None for e in table.column("error").to_pylist())  # type: ignore[attr-defined]
    print(f"{path}: {meta['n_cases'] - errors} tensors (one per case, named by case ID) of {meta['standard']} "
          f"on {meta['backend']}, bit for bit; formats and capture metadata in __metadata__")
