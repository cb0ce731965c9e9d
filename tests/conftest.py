"""Test-session settings.

1. Before any import of Ray, every Ray test stays on loopback: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
   makes Ray take 127.0.0.1 as this machine's address (``ray._private.services.get_node_ip_address``)
   instead of the external interface's, which it finds by opening a socket towards a public address.
   ``RAY_ADDRESS`` is dropped so that no test joins a cluster of the environment, and ``RAY_TMPDIR``
   points to a directory of this session so that ``ray.init()`` never joins another session's
   cluster through ``/tmp/ray/ray_current_cluster``.  For tests on one machine only: a real cluster
   uses its nodes' addresses (docs/scale-out.md).
2. The tests that need torch or jax are marked automatically, so that CI's second phase
   (``-m "torch or jax"``, run with both installed; ``.ci/run``) runs every one of them. A test is
   marked ``torch`` (``jax``) when its function's source, its module's top-level code, a module-level
   helper or fixture it names, or its parameter id names the package as a whole word (``import
   torch``, ``pytest.importorskip("jax.numpy")``, a ``"torch:cpu"`` backend, a ``torch-cpu``
   variant).  Marking too many only runs a test twice (it runs in the first phase too); marking too
   few would leave a test that skips without torch/jax never run, so the rule is deliberately wide.
"""

from __future__ import annotations

import ast
import copy
import inspect
import os
import re
import shutil
import tempfile
from functools import lru_cache

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.pop("RAY_ADDRESS", None)
_RAY_TMP = None
if "RAY_TMPDIR" not in os.environ:  # short: Ray's Unix socket paths live under it (108-byte limit)
    _RAY_TMP = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="nsray-", dir="/tmp")


def pytest_unconfigure(config) -> None:  # noqa: ANN001 - pytest.Config
    if _RAY_TMP is not None:
        shutil.rmtree(_RAY_TMP, ignore_errors=True)


_WORD = {name: re.compile(rf"\b{name}\b") for name in ("torch", "jax")}


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _code(node: ast.AST) -> str:
    """A definition's code without comments or docstrings (which may name torch without using it)."""
    if isinstance(node, _DEFS) and node.body and isinstance(node.body[0], ast.Expr) \
            and isinstance(node.body[0].value, ast.Constant):
        node = copy.copy(node)
        node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(node)


@lru_cache(maxsize=None)
def _module(path: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The module's statements that concern every test (imports, module-level skips and marks), the
    code of each module-level helper, fixture, class and constant that is not a test, and the code
    of each test, by name."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return "", {}, {}
    top, helpers, tests = [], {}, {}
    for n in tree.body:
        if isinstance(n, _DEFS):
            (tests if n.name.startswith("test") else helpers)[n.name] = _code(n)
        elif isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) for t in n.targets) \
                and not any(t.id == "pytestmark" for t in n.targets) and "importorskip" not in ast.unparse(n.value):
            for t in n.targets:  # a module-level constant counts where a test names it
                helpers[t.id] = ast.unparse(n)
        elif not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)):  # (not the docstring)
            top.append(ast.unparse(n))
    return "\n".join(top), helpers, tests


def _needs(item: pytest.Item) -> set[str]:
    top, helpers, tests = _module(str(item.path))
    fn = getattr(item, "function", None)
    src = tests.get(getattr(fn, "__name__", ""), "")
    if not src and fn is not None:  # (a test defined inside a class or generated)
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            src = ""
    used = [h for name, h in helpers.items() if re.search(rf"\b{re.escape(name)}\b", src)]
    callspec = getattr(item, "callspec", None)
    text = "\n".join([src, top, callspec.id if callspec is not None else "", *used])
    return {name for name, word in _WORD.items() if word.search(text)}


#: test files that start a local Ray cluster: under pytest-xdist (``-n auto --dist loadgroup``, the
#: README's test command) they share one worker, so two clusters never compete for ports and /dev/shm
_RAY_FILES = {"test_ray.py", "test_ray_cluster.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in _needs(item) - {m.name for m in item.iter_markers()}:
            item.add_marker(getattr(pytest.mark, name))
        if item.path.name in _RAY_FILES:
            item.add_marker(pytest.mark.xdist_group("ray"))
