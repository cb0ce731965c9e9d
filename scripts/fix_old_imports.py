"""Rewrite numstd's own imports of the module paths before the layers to the moved modules.

Also an import written relative to ``numstd/`` in a module that has since moved into a layer
package (``from .registry import x`` in ``numstd/judge/check.py``) is resolved from ``numstd/``.

    python scripts/fix_old_imports.py        # edits numstd/**.py in place, prints what it changed

Old paths stay importable for users (numstd/_aliases.py); numstd itself imports the real modules,
so that scripts/layer_check.py sees every edge.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _moved() -> dict:
    """numstd/_aliases.py's table (read by scripts/layer_check.py's parser, not imported)."""
    import runpy

    return runpy.run_path(str(ROOT / "scripts" / "layer_check.py"))["moved"](ROOT / "numstd")


def _module_of(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _relative(mod: str, is_pkg: bool, target: str) -> str:
    pkg = (mod if is_pkg else mod.rsplit(".", 1)[0]).split(".")
    t = target.split(".")
    common = 0
    while common < min(len(pkg), len(t)) and pkg[common] == t[common]:
        common += 1
    return "." * (len(pkg) - common + 1) + ".".join(t[common:])


def _exists(module: str) -> bool:
    p = ROOT.joinpath(*module.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def main() -> int:
    moved = _moved()
    changed = 0
    for path in sorted((ROOT / "numstd").rglob("*.py")):
        if "__pycache__" in path.parts or path.name == "_aliases.py":
            continue
        mod, is_pkg = _module_of(path)
        src = path.read_text()
        lines = src.split("\n")
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if node.level:
                pkg = (mod if is_pkg else mod.rsplit(".", 1)[0]).split(".")
                target = ".".join(pkg[: len(pkg) - (node.level - 1)] + [node.module])
            else:
                target = node.module
            if target not in moved and node.level and not _exists(target):
                # written before the module moved into its layer package: relative to numstd/ itself
                flat = "numstd." + node.module
                if not (flat in moved or _exists(flat)):
                    print(f"{path.relative_to(ROOT)}:{node.lineno}: {target} does not exist")
                    continue
                target = flat
            elif target not in moved:
                continue
            dest = moved.get(target, target)
            new = _relative(mod, is_pkg, dest) if node.level else dest
            line = lines[node.lineno - 1]
            m = re.match(r"(\s*from\s+)([\w\.]+)(\s+import\b.*)", line)
            if m is None:
                print(f"{path}:{node.lineno}: cannot rewrite {line.strip()!r}")
                continue
            lines[node.lineno - 1] = m.group(1) + new + m.group(3)
            print(f"{path.relative_to(ROOT)}:{node.lineno}: {m.group(2)} -> {new}")
            changed += 1
        path.write_text("\n".join(lines))
    print(f"{changed} import(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
