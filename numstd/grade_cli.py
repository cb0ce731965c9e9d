"""``python -m numstd grade``: grade a KernelBench-layout candidate file against its problem file.

The problem file defines ``Model`` (a ``torch.nn.Module``), ``get_inputs()`` and
``get_init_inputs()``; the candidate file defines ``ModelNew``.  Both are loaded with
:mod:`importlib` from their paths (executed as Python modules — never unpickled), then
:func:`numstd.grade.grade` runs.  ``--max-dim N`` caps the problem's size constants: every
module-level ``int`` of the problem file greater than N (booleans excluded) is set to N before
``get_inputs``/``get_init_inputs`` run, so a problem sized for a GPU grades on a CPU in seconds.

Exit codes: 0 the candidate passes, 1 it fails (including a candidate file that does not load or
a ``ModelNew`` that cannot be built), 2 a usage error (bad arguments, a problem file that does
not load or lacks ``Model``/``get_inputs``, no standard for the dtype).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import NumstdError, ParameterError

__all__ = ["load_module", "cap_dims", "second_shapes", "grade_files", "CandidateLoadError", "configure", "run"]

_LOAD_LOCK = threading.Lock()


class CandidateLoadError(NumstdError):
    """The candidate file does not load or lacks ``ModelNew`` (a failing candidate, exit 1)."""


def load_module(path: str | Path, *, max_dim: int | None = None) -> ModuleType:
    """Execute a Python file as a fresh module (registered in ``sys.modules`` under a unique name).

    Parameters
    ----------
    path : path of a ``.py`` file
    max_dim : int, optional
        Cap the module's integer constants at this value (:func:`cap_dims`).

    Raises
    ------
    ParameterError
        When the file is missing or raises while it executes (the message carries the exception).
    """
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"{p}: no such file; pass the path of a KernelBench-layout .py file")
    digest = hashlib.sha256(str(p.resolve()).encode()).hexdigest()[:12]
    name = f"numstd_loaded_{p.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ParameterError(f"{p}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    with _LOAD_LOCK:
        sys.modules[name] = mod  # classes and dataclasses look their module up here
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's file is reported, not raised raw
        with _LOAD_LOCK:
            sys.modules.pop(name, None)
        raise ParameterError(f"{p}: raised {type(exc).__name__} while loading: {exc}") from exc
    if max_dim is not None:
        cap_dims(mod, max_dim)
    return mod


def cap_dims(module: ModuleType, max_dim: int) -> dict[str, tuple[int, int]]:
    """Set every public module-level ``int`` greater than ``max_dim`` to ``max_dim``.

    Returns ``{name: (old, new)}`` of the changed constants.  ``bool`` values and names starting
    with ``_`` are left alone; constants computed at import time from others (``K = 2 * dim``) are
    capped independently, since they are module-level ints too.
    """
    if isinstance(max_dim, bool) or not isinstance(max_dim, int) or max_dim < 1:
        raise ParameterError(f"--max-dim must be a positive integer, got {max_dim!r}")
    changed = {}
    for key, value in list(vars(module).items()):
        if key.startswith("_") or type(value) is not int or value <= max_dim:
            continue
        setattr(module, key, max_dim)
        changed[key] = (value, max_dim)
    return changed


def second_shapes(module: ModuleType) -> dict[str, tuple[int, int]]:
    """Set every public module-level ``int`` ≥ 8 to ``n − n//4 − 1`` (512 → 383, 16 → 11): a second
    shape set with odd sizes off the tile multiples.  Returns ``{name: (old, new)}``."""
    changed = {}
    for key, value in list(vars(module).items()):
        if key.startswith("_") or type(value) is not int or value < 8:
            continue
        setattr(module, key, value - value // 4 - 1)
        changed[key] = (value, value - value // 4 - 1)
    return changed


def grade_files(problem: str | Path, candidate: str | Path, *, max_dim: int | None = None, isolate: bool = False,
                timeout_s: float = 120.0, shapes2: bool = True, **kwargs: Any) -> Any:
    """Load a KernelBench problem and candidate file and :func:`~numstd.grade.grade` them.

    ``kwargs`` go to :func:`numstd.grade.grade` (``dtype``, ``trials``, ``seed``, ``secret_seed``,
    ``protocol``, ``device``, …); the problem's module-level ``NUMSTD_OP`` declares its catalog op.
    ``isolate=True`` never executes the candidate file here: it runs in a subprocess
    (:class:`numstd.grade_isolated.IsolatedCandidate`, ``timeout_s`` per call).  ``shapes2`` grades
    a second shape set too, the problem's size constants changed by :func:`second_shapes`.

    Raises
    ------
    ParameterError
        For a problem file that does not load or lacks ``Model``/``get_inputs``.
    CandidateLoadError
        For a candidate file that does not load or lacks ``ModelNew``.
    """
    from .grade import grade

    prob = load_module(problem, max_dim=max_dim)
    for attr in ("Model", "get_inputs"):
        if not hasattr(prob, attr):
            raise ParameterError(f"{problem}: defines no {attr}; a KernelBench problem has Model, get_inputs "
                                 "and get_init_inputs")
    if isolate:
        from .grade_isolated import IsolatedCandidate

        if not Path(candidate).is_file():
            raise CandidateLoadError(f"{candidate}: no such file")
        model_new: Any = IsolatedCandidate(candidate, timeout_s=timeout_s)
    else:
        try:
            cand = load_module(candidate)
        except ParameterError as exc:
            raise CandidateLoadError(str(exc)) from exc
        if not hasattr(cand, "ModelNew"):
            raise CandidateLoadError(f"{candidate}: defines no ModelNew")
        model_new = cand.ModelNew
    init = getattr(prob, "get_init_inputs", lambda: [])
    if "op" not in kwargs and hasattr(prob, "NUMSTD_OP"):
        kwargs["op"] = prob.NUMSTD_OP
    if shapes2 and "shapes2" not in kwargs:
        prob2 = load_module(problem, max_dim=max_dim)
        if second_shapes(prob2):
            kwargs["shapes2"] = (prob2.get_inputs, getattr(prob2, "get_init_inputs", lambda: []))
    try:
        from dataclasses import replace

        report = grade(prob.Model, model_new, prob.get_inputs, init_inputs=init, **kwargs)
        return replace(report, protocol=dict(report.protocol, problem=str(problem), candidate=str(candidate),
                                             max_dim=max_dim))
    except NumstdError:
        raise
    except Exception as exc:  # noqa: BLE001 - constructing ModelNew failed
        if isolate:
            model_new.close()
        raise CandidateLoadError(f"{candidate}: grading raised {type(exc).__name__}: {exc}") from exc
    finally:
        if isolate:
            model_new.close()


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problem", required=True, metavar="PROBLEM.py", help="KernelBench problem: Model, get_inputs, get_init_inputs")
    p.add_argument("--candidate", required=True, metavar="CANDIDATE.py", help="file defining ModelNew")
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
        from .formats import get_format

        get_format(args.dtype)  # a FormatError (exit 2) before anything is loaded
    try:
        report = grade_files(args.problem, args.candidate, max_dim=args.max_dim, dtype=args.dtype,
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
