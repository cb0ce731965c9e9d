"""``python -m numstd grade``: grade a KernelBench-layout candidate file against its problem file.

The problem file defines ``Model`` (a ``torch.nn.Module``), ``get_inputs()`` and
``get_init_inputs()``; the candidate file defines ``ModelNew``: :func:`numstd.grade.files.grade_files`
loads and grades them.  ``--max-dim N`` caps the problem's size constants (sizes for a CPU run).

Exit codes: 0 the candidate passes, 1 it fails (including a candidate file that does not load or
a ``ModelNew`` that cannot be built), 2 a usage error (bad arguments, a problem file that does
not load or lacks ``Model``/``get_inputs``, no standard for the dtype).
"""

from __future__ import annotations

import argparse

from ..core.errors import ParameterError
from ..grade.files import CandidateLoadError, cap_dims, file_inputs, grade_files, load_module, second_shapes

# the library functions are re-exported: ``numstd.grade_cli`` (this module's path before the
# layers) named them
__all__ = ["configure", "run", "grade_files", "load_module", "cap_dims", "file_inputs", "second_shapes",
           "CandidateLoadError"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problem", required=True, metavar="PROBLEM.py", help="KernelBench problem: Model, get_inputs, get_init_inputs")
    p.add_argument("--candidate", required=True, metavar="CANDIDATE.py", help="file defining ModelNew")
    p.add_argument("--inputs", default=None, metavar="FILE",
                   help="the inputs as a .safetensors/.npz file (tensors in sorted-name order) instead of get_inputs()")
    p.add_argument("--dtype", default=None, help="working format: fp32, bf16, fp16 (default: the inputs' dtype)")
    p.add_argument("--max-dim", type=int, default=None, metavar="N",
                   help="cap the problem's module-level int constants at N (sizes for a CPU run)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--trials", type=int, default=5, help="independent draws of get_inputs (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--standard", default=None, metavar="ID@N",
                   help="module standard to judge by (default: NS-MODULE-<dtype>, latest published)")
    p.add_argument("--json", action="store_true", help="print the GradeReport as JSON (input of `numstd report`)")
    p.add_argument("--secret-seed", type=int, default=None, metavar="S",
                   help="secret mixed into every draw (default: drawn at random and recorded in the report)")
    p.add_argument("--in-process", action="store_true",
                   help="run the candidate in this process (faster; trusts the candidate). Default: a subprocess")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds allowed per candidate call in the subprocess (default 120)")
    p.add_argument("--no-shapes2", action="store_true", help="skip the second shape set")


def run(args: argparse.Namespace) -> int:
    if args.trials < 1:
        raise ParameterError(f"--trials must be ≥ 1, got {args.trials}")
    if args.dtype is not None:
        from ..core.formats import get_format

        get_format(args.dtype)  # a FormatError (exit 2) before anything is loaded
    try:
        from ..core.progress import counter

        report = grade_files(args.problem, args.candidate, max_dim=args.max_dim, inputs=args.inputs,
                             progress=counter("grade", "case"), dtype=args.dtype,
                             trials=args.trials, seed=args.seed, device=args.device, standard=args.standard,
                             secret_seed=getattr(args, "secret_seed", None),
                             isolate=not getattr(args, "in_process", True), timeout_s=getattr(args, "timeout", 120.0),
                             shapes2=not getattr(args, "no_shapes2", False))
    except CandidateLoadError as exc:
        print(f"FAIL: the candidate cannot be graded: {exc}")
        return 1
    if args.json:
        print(report.to_json(indent=1))
    else:
        print(report.message)
        print(report.snippet())
    return 0 if report.passed else 1
