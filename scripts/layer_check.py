"""List imports between numstd's packages that go up the layers (docs/architecture.md).

    python scripts/layer_check.py        # exit 1 and list them, if any

Every ``from``/``import`` of a numstd module, at module level or inside a function, counts.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

#: package -> layer; a module may import only from its own package or from lower layers
LAYERS = {
    "core": 0, "ops": 1, "emulate": 1, "models": 2, "reference": 3, "catalog": 4, "corpus": 5, "sweeps": 5,
    "backends": 4, "judge": 5, "grade": 6, "survey": 6, "authoring": 7, "reporting": 7, "testing": 7,
    "integrations": 8, "cli": 9,
}
#: modules outside the layers: the package's front door and its compatibility table
OUTSIDE = {"numstd", "numstd._version", "numstd._aliases", "numstd.__main__", "numstd._native"}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def imports(path: Path, root: Path) -> list[tuple[str, int, str]]:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    mod = ".".join(parts[:-1] if is_pkg else parts)
    pkg = mod if is_pkg else mod.rsplit(".", 1)[0]
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                target = ".".join(base + ([n.module] if n.module else []))
            else:
                target = n.module or ""
            names = [target + "." + a.name for a in n.names] if n.module is None else [target]
            out += [(n.lineno, t) for t in names if t.startswith("numstd")]
        elif isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names if a.name.startswith("numstd")]
    return [(mod, line, t) for line, t in out]


def moved(root: Path) -> dict:
    """numstd/_aliases.py's table of the module paths before the layers."""
    for node in ast.walk(ast.parse((root / "_aliases.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "MappingProxyType":
            return ast.literal_eval(node.args[0])
    return {}


def main() -> int:
    root = Path(__file__).resolve().parent.parent / "numstd"
    old = moved(root)
    bad = []
    for path in sorted(root.rglob("*.py")):
        for mod, line, target in imports(path, root):
            if target in old:
                bad.append(f"{path.relative_to(root.parent)}:{line}: imports the old path {target}; use {old[target]} "
                           "(python scripts/fix_old_imports.py rewrites it)")
                continue
            src, dst = package_of(mod), package_of(target)
            if src is None or dst is None or src == dst or target in OUTSIDE:
                continue
            if LAYERS[dst] >= LAYERS[src]:
                bad.append(f"{path.relative_to(root.parent)}:{line}: {src} (layer {LAYERS[src]}) imports {target} "
                           f"(layer {LAYERS[dst]})")
    print("\n".join(bad) if bad else "no upward imports")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
