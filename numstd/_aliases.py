"""Import paths of numstd's modules before the package was split into layers.

``numstd.formats``, ``numstd.registry``, ``numstd.check``… were flat modules; they now live in the
layer packages (``numstd.core``, ``numstd.catalog``, ``numstd.judge``…, docs/architecture.md).
Users, docs and tools import the old paths, so each old name stays importable: the finder below
answers an old name with the moved module itself (the same object, so attributes, monkeypatching
and ``isinstance`` behave as before).  Nothing is imported until an old name is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Mapping, Sequence

__all__ = ["MOVED", "install"]

#: old module name -> the module it is now
MOVED: Mapping[str, str] = types.MappingProxyType({
    "numstd.errors": "numstd.core.errors",
    "numstd.arrays": "numstd.core.arrays",
    "numstd.formats": "numstd.core.formats",
    "numstd.ulp": "numstd.core.ulp",
    "numstd.distribution": "numstd.core.distribution",
    "numstd.native": "numstd.core.native",
    "numstd._callable": "numstd.core._callable",
    "numstd.progress": "numstd.core.progress",
    "numstd.tensorio": "numstd.core.tensorio",
    "numstd.reference.summation": "numstd.core.summation",
    "numstd.tables": "numstd.reference.tables",
    "numstd.registry": "numstd.catalog.registry",
    "numstd.templates": "numstd.catalog.templates",
    "numstd.suites": "numstd.catalog.suites",
    "numstd.integrity": "numstd.catalog.integrity",
    "numstd.check": "numstd.judge.check",
    "numstd.chunks": "numstd.judge.chunks",
    "numstd.criteria": "numstd.judge.criteria",
    "numstd.verdict": "numstd.judge.verdict",
    "numstd.diagnosis": "numstd.judge.diagnosis",
    "numstd.calibrate": "numstd.authoring.calibrate",
    "numstd.capture": "numstd.authoring.capture",
    "numstd.publish": "numstd.authoring.publish",
    "numstd.sweep": "numstd.sweeps.sweep",
    "numstd.executor": "numstd.sweeps.executor",
    "numstd.docs": "numstd.authoring.docs",
    "numstd.grade_frameworks": "numstd.grade.frameworks",
    "numstd.grade_report": "numstd.grade.report",
    "numstd.module_standard": "numstd.grade.module_standard",
    "numstd.grade_isolated": "numstd.grade.isolated",
    "numstd.report": "numstd.reporting.html",
    "numstd.review": "numstd.reporting.review",
    "numstd.strategies": "numstd.testing.strategies",
    "numstd.pytest_plugin": "numstd.testing.pytest_plugin",
    "numstd.grade_cli": "numstd.cli.grade",
    "numstd.survey_cli": "numstd.cli.survey",
    "numstd.backends.cli": "numstd.cli.backends",
})


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module it moved to."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system set __spec__ to the alias's; the module keeps its own
        module.__spec__ = self.spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
