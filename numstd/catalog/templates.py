"""Standard templates (``standards/_templates/*.toml``): what calibration turns into standards.

A template holds an op's error model, criteria, suite and rationale once, and a list of
``[[standards]]`` instances (ID, formats, overrides).  :func:`instances` expands them into complete
standard tables (the schema of :mod:`numstd.registry`, without provenance and version), ready for
calibration to fill the constants.  See ``standards/_templates/README.md``.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from typing import Any, Mapping

from ..core.errors import SchemaError, StandardNotFound

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Template", "instances", "find_template", "to_toml"]

_TEMPLATE_KEYS = {"op", "calibrate", "margin", "floor", "model", "criteria", "suite", "rationale", "standards",
                  "allow", "exclude"}
_INSTANCE_KEYS = {"id", "op", "title", "inputs", "output", "accumulate", "default", "selector", "policy", "model",
                  "criteria", "suite", "calibrate", "margin", "floor", "allow", "exclude", "rationale"}


@dataclass(frozen=True)
class Template:
    """One expanded instance: a standard table without version/status/provenance, plus fit settings."""

    id: str
    table: Mapping[str, Any]
    calibrate: str
    floor: float
    source: str
    allow: Mapping[str, str] = None  # bug variant -> why this standard accepts it (e.g. TF32 rounding)
    exclude: Mapping[str, str] = None  # legitimate variant -> why it is not evidence for this standard


def _merge(base: dict, over: Mapping[str, Any]) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict) and k != "constants":
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def instances() -> list[Template]:
    """Every instance of every shipped template, in file order."""
    from importlib import resources

    root = resources.files("numstd.standards") / "_templates"
    result: list[Template] = []
    for f in sorted(root.iterdir(), key=lambda p: p.name):
        if not f.name.endswith(".toml"):
            continue
        where = f"standards/_templates/{f.name}"
        doc = tomllib.loads(f.read_text(encoding="utf-8"))
        unknown = set(doc) - _TEMPLATE_KEYS
        if unknown:
            raise SchemaError(f"{where}: unknown key(s) {sorted(unknown)}")
        for inst in doc.get("standards", []):
            bad = set(inst) - _INSTANCE_KEYS
            if bad:
                raise SchemaError(f"{where} [[standards]] {inst.get('id')}: unknown key(s) {sorted(bad)}")
            calibrate = inst.get("calibrate", doc.get("calibrate", ""))
            margin = float(inst.get("margin", doc.get("margin", 2.0)))
            model = _merge(doc.get("model", {}), inst.get("model", {}))
            if calibrate:
                model["calibrated"] = calibrate
                model["margin"] = margin
            table = {
                "schema": 1, "id": inst["id"], "op": inst.get("op", doc["op"]), "title": inst["title"],
                "default": bool(inst.get("default", False)),
                "formats": {"inputs": list(inst["inputs"]), "accumulate": inst.get("accumulate", "float32"),
                            "output": inst["output"]},
                "model": model,
                "criteria": _merge(doc.get("criteria", {}), inst.get("criteria", {})),
                "suite": _merge(doc.get("suite", {}), inst.get("suite", {})),
                "rationale": _merge(doc["rationale"], inst.get("rationale", {})),  # (an instance may replace text/citations)
            }
            if inst.get("selector"):
                table["selector"] = dict(inst["selector"])
            if inst.get("policy"):
                table["policy"] = str(inst["policy"])
            allow = dict(doc.get("allow", {}), **inst.get("allow", {}))
            exclude = dict(doc.get("exclude", {}), **inst.get("exclude", {}))
            result.append(Template(inst["id"], table, calibrate, float(inst.get("floor", doc.get("floor", 0.0))), where,
                                   allow, exclude))
    return result


def find_template(standard_id: str) -> Template:
    """The template instance of a standard ID (without version)."""
    sid = standard_id.split("@")[0].upper()
    for t in instances():
        if t.id == sid:
            return t
    raise StandardNotFound(f"no template for {standard_id!r} in standards/_templates; add a [[standards]] entry")


# ---------------------------------------------------------------- a small deterministic TOML writer
_ORDER = ("schema", "id", "version", "status", "op", "title", "default", "supersedes", "selector", "policy",
          "formats", "model", "criteria", "suite", "rationale", "provenance")


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r if ("e" in r or "." in r or "inf" in r or "nan" in r) else r + ".0"
    if isinstance(v, str):
        if "\n" in v:
            return '"""\n' + v.strip("\n").replace("\\", "\\\\").replace('"""', '\\"""') + '\n"""'
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, str) for x in v) and sum(len(x) for x in v) > 60:
            return "[\n" + "".join(f"  {_value(x)},\n" for x in v) + "]"
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _key(k: str) -> str:
    import re

    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _value(str(k))


def to_toml(table: Mapping[str, Any]) -> str:
    """Serialise a standard table: scalars first, then one ``[section]`` per sub-table, fixed order."""
    keys = [k for k in _ORDER if k in table] + sorted(k for k in table if k not in _ORDER)
    lines: list[str] = []
    for k in keys:
        if not isinstance(table[k], Mapping):
            lines.append(f"{_key(k)} = {_value(table[k])}")
    for k in keys:
        if isinstance(table[k], Mapping):
            lines.append("")
            lines.append(f"[{k}]")
            for kk, vv in table[k].items():
                lines.append(f"{_key(kk)} = {_value(vv)}")
    return "\n".join(lines) + "\n"
