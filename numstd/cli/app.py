"""``python -m numstd``: list, show, check, and the commands the other modules contribute.

Exit codes: 0 success / pass, 1 a failing verdict (or a refused calibration), 2 a usage error
(bad arguments, unknown op or standard, unreadable files).  Every subcommand module exposes
``configure(parser)`` and ``run(args) -> int``; they are imported only when their command runs,
apart from building the parser.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from typing import Sequence

from ..core.errors import NumstdError

__all__ = ["main", "COMMANDS"]

#: subcommand -> (module, one-line help); this module holds list, show, check, review and verify
COMMANDS = {
    "list": ("numstd.cli.app", "list standards (filter with --op; --json for tools)"),
    "show": ("numstd.cli.app", "show one standard: formula, constants, criteria, rationale, provenance"),
    "check": ("numstd.cli.app", "judge an output (.safetensors/.npy/.npz) against a standard; exit 0 pass, 1 fail, 2 usage"),
    "survey": ("numstd.cli.survey", "exhaustive/sampled accuracy survey of an elementwise function"),
    "backends": ("numstd.cli.backends", "list backends with available/unavailable and why"),
    "capture": ("numstd.cli.capture", "run a standard's suite on a backend and write a Parquet capture"),
    "compare": ("numstd.cli.capture", "judge captures against the reference and against each other"),
    "export": ("numstd.cli.capture", "write a capture's outputs as safetensors, bit for bit (formats in __metadata__)"),
    "calibrate": ("numstd.cli.calibrate", "derive a standard's constants from evidence; write a draft"),
    "publish": ("numstd.cli.publish", "move a reviewed draft into standards/, update LOCK and docs"),
    "grade": ("numstd.cli.grade", "grade a KernelBench-layout candidate against its problem"),
    "report": ("numstd.cli.report", "write Markdown/HTML reports of saved verdicts"),
    "review": ("numstd.cli.app", "print a rubric-ready Markdown block for a grade report or verdict (.json)"),
    "docs": ("numstd.cli.docs", "regenerate docs/standards from the standard files"),
    "verify": ("numstd.cli.app", "check every shipped file against its recorded sha256; exit 1 on any mismatch"),
}


def _parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = argparse.ArgumentParser(prog="python -m numstd", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"numstd {__version__}")
    p.add_argument("--standards-dir", action="append", default=[], metavar="DIR",
                   help="a directory of your own standards (with its own LOCK), loaded beside the shipped "
                        "ones; publish writes there (repeatable; also NUMSTD_STANDARDS_PATH)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        if module != "numstd.cli.app" and importlib.util.find_spec(module) is None:
            continue
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(_module=module)
        if module == "numstd.cli.app":
            globals()[f"_configure_{name}"](sp)
        else:
            configure = getattr(importlib.import_module(module), "configure")
            configure(sp, name) if configure.__code__.co_argcount == 2 else configure(sp)
    return p


def _configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", help="only standards for this op")
    p.add_argument("--status", help="only this status (draft, active, deprecated)")
    p.add_argument("--json", action="store_true", help="a JSON array of objects (id, op, formats, status, …)")


def _configure_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("standard", help="ID@N, or ID for its latest version")


def _configure_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", required=True)
    p.add_argument("--inputs", nargs="+", required=True, metavar="FILE[:NAME]",
                   help="input tensors: .safetensors, .npy or .npz files (never unpickled); FILE:NAME picks one "
                        "tensor of a file that holds several (numstd.tensorio)")
    p.add_argument("--actual", required=True, metavar="FILE[:NAME]", help="the kernel's output, likewise")
    p.add_argument("--standard", help="ID@N to judge by (default: the covering standard)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="op parameter, e.g. axis=-1 or approximate=tanh (JSON values)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")


def _configure_verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="a JSON array of {path, manifest, problem}")


def _run_verify(args: argparse.Namespace) -> int:
    from ..catalog.integrity import verify

    bad = verify()
    if args.json:
        print(json.dumps([{"path": m.path, "manifest": m.manifest, "problem": m.problem} for m in bad], indent=1))
    else:
        for m in bad:
            print(f"MISMATCH {m}")
        print(f"{len(bad)} mismatch(es)" if bad else "every shipped file matches its recorded sha256")
    return 1 if bad else 0


def _configure_review(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", metavar="REPORT.json", help="`numstd grade --json` output, or a verdict's JSON")
    p.add_argument("-o", "--output", default=None, metavar="FILE.md", help="write the block here (default: stdout)")


def _run_review(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..core.errors import ParameterError
    from ..reporting.review import load_report, review_markdown

    path = Path(args.report)
    if not path.is_file():
        raise ParameterError(f"{path}: no such file; pass the JSON that `numstd grade --json` printed")
    text = review_markdown(load_report(path.read_text(encoding="utf-8")))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


def _run_list(args: argparse.Namespace) -> int:
    from ..catalog.registry import list_standards

    stds = list_standards(args.op, status=args.status)
    if args.json:
        print(json.dumps([s.to_dict() for s in stds], indent=1))
        return 0
    width = max((len(s.key) for s in stds), default=10)
    for s in stds:
        fm = s.formats
        print(f"{s.key:<{width}}  {s.status:<10} {s.op:<12} {'+'.join(fm['inputs'])} → {fm['output']} "
              f"(acc {fm['accumulate']}){' default' if s.default else ''}{' ' + str(dict(s.selector)) if s.selector else ''}")
    print(f"{len(stds)} standard(s)")
    return 0


def _run_show(args: argparse.Namespace) -> int:
    from ..authoring.docs import render_standard
    from ..catalog.registry import get_standard

    s = get_standard(args.standard)
    print(render_standard(s))
    return 0


def parse_params(items: Sequence[str]) -> dict:
    """``--param NAME=VALUE`` options as a dict (values parsed as JSON where they are JSON)."""
    from ..core.errors import ParameterError

    out: dict = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"--param {item!r}: write NAME=VALUE, e.g. axis=-1 or approximate=tanh")
        k, v = item.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def load_npy(path: str):  # noqa: ANN201
    """One tensor from a .safetensors/.npy/.npz file (``FILE[:NAME]``), never unpickled
    (:func:`numstd.tensorio.read_array`: bfloat16 and fp8 exactly)."""
    from ..core.tensorio import read_array

    return read_array(path)


def _run_check(args: argparse.Namespace) -> int:
    from ..judge.check import check

    params = parse_params(args.param)
    inputs = [load_npy(p) for p in args.inputs]
    actual = load_npy(args.actual)
    v = check(actual, op=args.op, inputs=inputs, standard=args.standard, **params)
    print(v.to_json(indent=1) if args.json else v.message)
    return 0 if v.passed else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    if args.standards_dir:  # users' standards: read by the registry, written by publish
        import os

        from ..catalog.registry import STANDARDS_PATH_ENV

        old = [d for d in os.environ.get(STANDARDS_PATH_ENV, "").split(os.pathsep) if d]
        os.environ[STANDARDS_PATH_ENV] = os.pathsep.join([*args.standards_dir, *(d for d in old if d not in args.standards_dir)])
    try:
        if args._module == "numstd.cli.app":
            return globals()[f"_run_{args.command}"](args)
        module = importlib.import_module(args._module)
        runner = getattr(module, "run")
        return runner(args, args.command) if runner.__code__.co_argcount == 2 else runner(args)
    except NumstdError as exc:
        print(f"numstd: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `python -m numstd list | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
