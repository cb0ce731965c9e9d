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

from .errors import NumstdError

__all__ = ["main", "COMMANDS"]

#: subcommand -> (module, one-line help); ``numstd.cli`` itself holds list, show and check
COMMANDS = {
    "list": ("numstd.cli", "list standards (filter with --op; --json for tools)"),
    "show": ("numstd.cli", "show one standard: formula, constants, criteria, rationale, provenance"),
    "check": ("numstd.cli", "judge an output (.npy) against a standard; exit 0 pass, 1 fail, 2 usage"),
    "survey": ("numstd.survey_cli", "exhaustive/sampled accuracy survey of an elementwise function"),
    "backends": ("numstd.backends.cli", "list backends with available/unavailable and why"),
    "capture": ("numstd.capture", "run a standard's suite on a backend and write a Parquet capture"),
    "compare": ("numstd.capture", "judge captures against the reference and against each other"),
    "calibrate": ("numstd.calibrate", "derive a standard's constants from evidence; write a draft"),
    "publish": ("numstd.publish", "move a reviewed draft into standards/, update LOCK and docs"),
    "grade": ("numstd.grade_cli", "grade a KernelBench-layout candidate against its problem"),
    "report": ("numstd.report", "write Markdown/HTML reports of saved verdicts"),
    "review": ("numstd.cli", "print a rubric-ready Markdown block for a grade report or verdict (.json)"),
    "docs": ("numstd.docs", "regenerate docs/standards from the standard files"),
}


def _parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = argparse.ArgumentParser(prog="python -m numstd", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"numstd {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        if module != "numstd.cli" and importlib.util.find_spec(module) is None:
            continue
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(_module=module)
        if module == "numstd.cli":
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
    p.add_argument("--inputs", nargs="+", required=True, metavar="NPY", help="input arrays (.npy, never unpickled)")
    p.add_argument("--actual", required=True, metavar="NPY", help="the kernel's output (.npy)")
    p.add_argument("--standard", help="ID@N to judge by (default: the covering standard)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="op parameter, e.g. axis=-1 or approximate=tanh (JSON values)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")


def _configure_review(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", metavar="REPORT.json", help="`numstd grade --json` output, or a verdict's JSON")
    p.add_argument("-o", "--output", default=None, metavar="FILE.md", help="write the block here (default: stdout)")


def _run_review(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .errors import ParameterError
    from .review import load_report, review_markdown

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
    from .registry import list_standards

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
    from .registry import get_standard

    s = get_standard(args.standard)
    print(render_standard(s))
    return 0


def render_standard(s) -> str:  # noqa: ANN001 - Standard
    """Human-readable text of one standard (also used by the docs generator)."""
    c = s.criteria
    consts = ", ".join(f"{k} = {v:g}" for k, v in sorted(s.model.constants.items())) or "none"
    lines = [
        f"{s.key} — {s.title}",
        f"  status: {s.status}{' (default for its formats)' if s.default else ''}; sha256 {s.sha256}",
        f"  op: {s.op}; inputs {', '.join(s.formats['inputs'])}; accumulate {s.accumulate.name}; output {s.output.name}",
    ]
    if s.selector:
        lines.append(f"  selected by: {', '.join(f'{k}={v!r}' for k, v in s.selector.items())}")
    if s.supersedes:
        lines.append(f"  supersedes: {s.supersedes}")
    if s.op == "module":  # graded by numstd.grade: the fields mean something else (docs/grading.md)
        from .grade import describe_module_standard

        text = describe_module_standard(s)
        lines += (text.splitlines() if isinstance(text, str) else list(text))
    else:
        lines += [
            "  bound:  B_i = E_i + rho·ulp_out(|r_i| + E_i)" + (" + 2^emin_out (flush-to-zero allowed)" if s.model.ftz else "")
            + " + reference error",
            f"          E_i = {s.model.error.text}",
            f"          rho = {s.model.rho:g} ulp; constants: {consts}",
            "  criteria:",
            f"    bound: |a_i − r_i| ≤ B_i for all but a fraction {c.bound_max_fraction:g} of elements",
            f"    bias:  |mean signed ulp error| ≤ {c.bias_tau:g} + {c.bias_z:g}·max(sd, rho/√3)/√n_eff over elements "
            f"with E_i ≤ {c.bias_kappa:g}·ulp",
            f"    specials: non-finite positions match the reference (policy {c.nan_policy}); signed zero "
            + ("compared" if c.signed_zero else "ignored"),
            f"    output rounding accepted: {', '.join(c.output_rounding)}",
        ]
        if c.ulp_max is not None:
            lines.append(f"    ulp_max: {c.ulp_max:g}")
        for q, v in sorted(c.ulp_quantiles.items()):
            lines.append(f"    ulp quantile {q:g}: ≤ {v:g}")
    lines.append("  rationale:")
    lines += ["    " + line for line in s.rationale.splitlines()]
    if s.citations:
        lines.append("  citations:")
        lines += [f"    - {x}" for x in s.citations]
    lines.append("  provenance:")
    lines += [f"    {k}: {v}" for k, v in s.provenance.items()]
    return "\n".join(lines)


def parse_params(items: Sequence[str]) -> dict:
    """``--param NAME=VALUE`` options as a dict (values parsed as JSON where they are JSON)."""
    from .errors import ParameterError

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
    """Load a .npy file without ever unpickling (object arrays are refused)."""
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise NumstdError(f"{path}: cannot load without unpickling ({exc}); save plain numeric arrays with np.save") from None
    except OSError as exc:
        raise NumstdError(f"{path}: cannot read ({exc})") from None


def _run_check(args: argparse.Namespace) -> int:
    from .check import check

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
    try:
        if args._module == "numstd.cli":
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
