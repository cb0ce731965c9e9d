"""KernelBench-layout files: load a problem file (``Model``, ``get_inputs``, ``get_init_inputs``) and a
candidate file (``ModelNew``) and grade them (:func:`grade_files`).

Both are loaded with :mod:`importlib` from their paths (executed as Python modules — never
unpickled); with ``isolate=True`` the candidate file is never executed in this process
(:class:`numstd.grade.isolated.IsolatedCandidate`).  ``max_dim=N`` caps the problem's size
constants: every module-level ``int`` of the problem file greater than N (booleans excluded), and
every element of a module-level tuple of ints, is set to N before ``get_inputs``/``get_init_inputs`` run, so a problem sized for a GPU grades on a CPU in
seconds.  The command line is ``python -m numstd grade`` (:mod:`numstd.cli.grade`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from ..core.errors import NumstdError, ParameterError

__all__ = ["load_module", "cap_dims", "file_inputs", "second_shapes", "grade_files", "CandidateLoadError"]

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
        hint = _install_hint(exc)
        raise ParameterError(f"{p}: raised {type(exc).__name__} while loading: {exc}{hint}") from exc
    if max_dim is not None:
        cap_dims(mod, max_dim)
    return mod


#: packages a KernelBench file imports -> how to install them
_INSTALL = {"torch": "pip install torch (or pip install 'numstd[torch]')",
            "jax": "pip install jax (or pip install 'numstd[jax]')"}


def _install_hint(exc: BaseException) -> str:
    """``"; install it: …"`` when ``exc`` is a missing torch or jax, else ``""``."""
    top = (getattr(exc, "name", None) or "").split(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
    return f"; grading this file needs {top}: {_INSTALL[top]}" if top in _INSTALL else ""


def file_inputs(path: str | Path) -> Any:
    """``make_inputs`` for :func:`~numstd.grade.grade` from a tensor file (:mod:`numstd.tensorio`).

    The tensors are passed in the order of their sorted names (name them ``0``, ``1``, … or
    ``a``, ``b``, …), exactly (bfloat16 and fp8 bit for bit), as torch tensors when torch is
    installed (KernelBench modules are torch) and numpy arrays otherwise.
    """
    from ..core.tensorio import load

    f = load(path)
    arrays = [f.arrays[k] for k in sorted(f.arrays)]
    try:
        from ..backends.torch_backend import to_torch

        import torch  # noqa: F401 - only whether it is there
    except ImportError:
        return lambda: list(arrays)
    return lambda: [to_torch(a, "cpu") for a in arrays]


def cap_dims(module: ModuleType, max_dim: int) -> dict[str, tuple[int, int]]:
    """Set every public module-level ``int`` greater than ``max_dim`` to ``max_dim``.

    Tuples of ints (shape constants such as ``input_shape = (32768,)``) have each element capped.
    Returns ``{name: (old, new)}`` of the changed constants.  ``bool`` values and names starting
    with ``_`` are left alone; constants computed at import time from others (``K = 2 * dim``) are
    capped independently, since they are module-level ints too.
    """
    if isinstance(max_dim, bool) or not isinstance(max_dim, int) or max_dim < 1:
        raise ParameterError(f"--max-dim must be a positive integer, got {max_dim!r}")
    changed = {}
    for key, value in list(vars(module).items()):
        if key.startswith("_"):
            continue
        if type(value) is int and value > max_dim:
            setattr(module, key, max_dim)
            changed[key] = (value, max_dim)
        elif type(value) is tuple and value and all(type(v) is int for v in value) and max(value) > max_dim:
            # a shape constant (``input_shape = (32768,)``), capped like the ints it goes with
            capped = tuple(min(v, max_dim) for v in value)
            setattr(module, key, capped)
            changed[key] = (value, capped)
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


def grade_files(problem: str | Path, candidate: str | Path, *, max_dim: int | None = None,
                inputs: str | Path | None = None, progress: Any = None, isolate: bool = False,
                timeout_s: float = 120.0, shapes2: bool = True, **kwargs: Any) -> Any:
    """Load a KernelBench problem and candidate file and :func:`~numstd.grade.grade` them.

    ``kwargs`` go to :func:`numstd.grade.grade` (``dtype``, ``trials``, ``seed``, ``secret_seed``,
    ``protocol``, ``device``, …); the problem's module-level ``NUMSTD_OP`` declares its catalog op.
    ``inputs`` (a tensor file, :func:`file_inputs`) replaces the problem's ``get_inputs`` draw;
    ``progress(done, total)`` (optional) is called after each case has run (:func:`numstd.grade.grade`).
    ``isolate=True`` never executes the candidate file here: it runs in a subprocess
    (:class:`numstd.grade.isolated.IsolatedCandidate`, ``timeout_s`` per call).  ``shapes2`` grades
    a second shape set too, the problem's size constants changed by :func:`second_shapes` (not with
    an ``inputs`` file, whose shapes are fixed).

    Raises
    ------
    ParameterError
        For a problem file that does not load or lacks ``Model``/``get_inputs``.
    CandidateLoadError
        For a candidate file that does not load or lacks ``ModelNew``.
    """
    from .grading import grade

    prob = load_module(problem, max_dim=max_dim)
    for attr in ("Model", "get_inputs"):
        if not hasattr(prob, attr):
            raise ParameterError(f"{problem}: defines no {attr}; a KernelBench problem has Model, get_inputs "
                                 "and get_init_inputs")
    if isolate:
        from .isolated import IsolatedCandidate

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
    make_inputs = prob.get_inputs if inputs is None else file_inputs(inputs)
    if shapes2 and inputs is None and "shapes2" not in kwargs:
        prob2 = load_module(problem, max_dim=max_dim)
        if second_shapes(prob2):
            kwargs["shapes2"] = (prob2.get_inputs, getattr(prob2, "get_init_inputs", lambda: []))
    try:
        from dataclasses import replace

        report = grade(prob.Model, model_new, make_inputs, init_inputs=init, progress=progress, **kwargs)
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
