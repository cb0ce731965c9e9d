"""The package's layout: layers, the old import paths, the op entries (docs/architecture.md)."""

from __future__ import annotations

import importlib
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_no_import_goes_up_the_layers():
    checker = runpy.run_path(str(ROOT / "scripts" / "layer_check.py"))
    root = ROOT / "numstd"
    old = checker["moved"](root)
    bad = []
    for path in sorted(root.rglob("*.py")):
        for mod, line, target in checker["imports"](path, root):
            if target in old:
                bad.append(f"{path.name}:{line} imports the old path {target}")
            src, dst = checker["package_of"](mod), checker["package_of"](target)
            if src and dst and src != dst and target not in checker["OUTSIDE"]:
                if checker["LAYERS"][dst] >= checker["LAYERS"][src]:
                    bad.append(f"{path.name}:{line} {src} -> {target}")
    assert bad == []


def test_every_package_has_a_layer():
    checker = runpy.run_path(str(ROOT / "scripts" / "layer_check.py"))
    packages = {p.name for p in (ROOT / "numstd").iterdir() if (p / "__init__.py").exists()}
    assert packages - {"standards", "reference_data"} <= set(checker["LAYERS"])


@pytest.mark.parametrize("old", sorted(__import__("numstd._aliases", fromlist=["MOVED"]).MOVED))
def test_the_module_paths_before_the_layers_import_the_moved_module(old):
    from numstd._aliases import MOVED

    mod = importlib.import_module(old)
    assert mod is importlib.import_module(MOVED[old])
    assert mod.__name__ == MOVED[old] and mod.__spec__.name == MOVED[old]


def test_packages_named_like_their_functions_stay_callable_and_importable():
    import numstd
    import numstd.grade
    import numstd.survey
    from numstd.grade import GradeReport, describe_module_standard  # noqa: F401
    from numstd.ops import OPS, OpSpec, validate  # noqa: F401
    from numstd.survey import Survey  # noqa: F401

    assert callable(numstd.grade) and callable(numstd.survey) and callable(numstd.reference)
    assert numstd.grade.grade is numstd.grade.grading.grade


def test_import_numstd_stays_light():
    code = ("import sys, numstd; heavy = {'torch', 'jax', 'matplotlib', 'scipy', 'pyarrow', 'mpmath', 'ray'}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_every_entry_names_code_that_exists():
    from numstd.ops import KINDS, OPS

    for name, e in OPS.items():
        assert e.kind in KINDS, name
        if e.kind == "module":
            continue
        module, func = e.reference.split(":")
        assert callable(getattr(importlib.import_module(f"numstd.reference.{module}"), func)), name
        variants = importlib.import_module(f"numstd.corpus.{e.corpus}").VARIANTS
        assert any(v.op == name and v.legit for v in variants), f"{name}: no legitimate variant"
        assert any(v.op == name and not v.legit for v in variants), f"{name}: no bug"
        if e.kind == "elementwise":
            assert e.ref is not None and e.math is not None, name
        for framework, call in e.calls.items():
            assert framework in ("torch", "jax", "numpy") and call.fn.count(".") >= 1, name
            assert set(call.kwargs.values()) <= set(e.params) | {v for v in call.kwargs.values() if isinstance(v, tuple)}


@pytest.mark.torch
def test_torch_calls_of_the_entries_resolve():
    pytest.importorskip("torch")
    from numstd.backends.base import framework_call
    from numstd.backends.torch_backend import _SPECIAL, _table
    from numstd.ops import OPS

    import torch
    import torch.nn.functional as F

    assert set(_table(torch, F)) == set(_SPECIAL)
    for name, e in OPS.items():
        if "torch" in e.calls:
            assert callable(framework_call(name, "torch")), name
            assert name not in _SPECIAL, f"{name} has a torch call and a special implementation"


def test_the_wheel_lists_every_package():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.relative_to(ROOT).parts[:-1]) for p in (ROOT / "numstd").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found - {"numstd.standards", "numstd.reference_data"} <= listed
    assert {"numstd.standards", "numstd.reference_data"} <= listed


def test_numstd_check_stays_the_function_after_its_old_module_path_is_imported():
    code = ("import numpy as np, numstd, numstd.check; x = np.ones(4, np.float32); "
            "print(numstd.check(np.exp(x), op='exp', inputs=[x]).passed)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "True", out.stderr
