"""The standards registry: load, validate, look up and verify the standard files.

Standards live in ``standards/<op>/<ID>@<version>.toml`` (shipped in the wheel as the package
``numstd.standards``).  Each file is validated on load against the schema below; an unknown key, a
missing field or a bad formula is a :class:`~numstd.errors.SchemaError` that names the file and the
field.  Published files (status ``active`` or ``deprecated``) are immutable: ``standards/LOCK`` holds
their sha256, and a published file whose bytes differ from its LOCK entry is refused with a
:class:`~numstd.errors.DataIntegrityError`.  A change is a new file with the next version and
``supersedes``; every published ``ID@version`` stays resolvable by :func:`get_standard`.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core.errors import AmbiguousStandard, DataIntegrityError, SchemaError, StandardNotFound
from ..core.formats import Format, get_format
from ..models import ErrorModel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "Standard",
    "Criteria",
    "get_standard",
    "find_standard",
    "list_standards",
    "load_standard",
    "load_registry",
    "read_lock",
    "file_sha256",
    "standards_root",
    "user_standards_dirs",
    "STANDARDS_PATH_ENV",
    "STATUSES",
    "POLICIES",
    "DEFAULT_POLICY",
    "policy_of",
]

STATUSES = ("draft", "active", "deprecated")
#: precision policies (docs/methodology.md §2.1): ``fp32`` fp32 internal math, one final rounding;
#: ``stored16`` fp32 math with the intermediates the framework's kernel stores rounded to the 16-bit
#: output type; ``arith16`` the primitives round to the 16-bit type (``accumulate`` = that type).
POLICIES = ("fp32", "stored16", "arith16")
#: the policy a call gets when it names none, by (output format, accumulate format); where no active
#: standard of that policy matches the call, the next one in the tuple is used.  16-bit outputs with
#: fp32 accumulation default to ``stored16``: it is what PyTorch's own CPU kernels do (a superset of
#: one-rounding kernels), and its extra terms are u16 per stored intermediate only, so a long
#: reduction accumulated in 16 bits still fails (docs/methodology.md §2.1).
DEFAULT_POLICY = {"bfloat16": ("stored16", "fp32"), "float16": ("stored16", "fp32")}
_ID_RE = re.compile(r"^NS-[A-Z0-9]+(?:-[A-Z0-9]+)*$")
_TOP_KEYS = {
    "schema": int, "id": str, "version": int, "status": str, "op": str, "title": str,
    "default": bool, "supersedes": str, "selector": dict, "policy": str, "formats": dict, "model": dict,
    "criteria": dict, "suite": dict, "rationale": dict, "provenance": dict,
}
_REQUIRED = ("schema", "id", "version", "status", "op", "title", "formats", "model", "criteria", "rationale", "provenance")
_FORMAT_KEYS = {"inputs", "accumulate", "output"}
_CRITERIA_KEYS = {
    "bound_max_fraction": float, "bias_tau": float, "bias_z": float, "bias_kappa": float, "ulp_max": float,
    "ulp_quantiles": dict, "output_rounding": list, "nan_policy": str, "signed_zero": bool, "bias_mode": str,
    "convex_hull": bool, "rounded_constants": bool, "stored_shift": bool, "intermediate_overflow": bool, "bias_min_n": int, "row_bias": bool,
    "row_bias_tau": float, "row_bias_z": float, "row_bias_rel": float, "row_bias_drift": str, "quantile_min_n": int, "bias_rows": bool,
    "tail_n": int, "bias_rows_t": bool, "range_exit": bool,
}
def _tail_n(value: Any, where: str) -> int:
    """``[criteria] tail_n``: 0 (off) or the largest output size the constants were calibrated at (≥ 2)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value == 1:
        raise SchemaError(f"{where} [criteria]: tail_n must be 0 (off) or an integer ≥ 2 (the calibrated output "
                          f"size), got {value!r}")
    return value


#: how an NS-MODULE bias criterion compares with its baseline (numstd.module_standard)
BIAS_MODES = ("paired", "one_sided")
_RATIONALE_KEYS = {"text": str, "citations": list}
_PROVENANCE_KEYS = {
    "method": str, "command": str, "date": str, "numstd_version": str, "backends": list,
    "evidence": str, "evidence_sha256": str, "notes": str, "hardware": list,
}
_SUITE_KEYS = {"distributions": list, "shapes": list, "seeds": list, "params": dict, "specials": bool}
_ROUNDINGS = {"rne", "stochastic", "rtz"}


@dataclass(frozen=True)
class Criteria:
    """Pass criteria of a standard (see :mod:`numstd.criteria`)."""

    bound_max_fraction: float = 0.0
    bias_tau: float = 0.1
    bias_z: float = 6.0
    bias_kappa: float = 8.0
    ulp_max: float | None = None
    ulp_quantiles: Mapping[float, float] = field(default_factory=dict)
    output_rounding: tuple[str, ...] = ("rne",)
    nan_policy: str = "match"
    signed_zero: bool = False
    bias_mode: str = "paired"
    convex_hull: bool = False  # attention: every output in the convex hull of v's rows (criteria.hull_violations)
    rounded_constants: bool = False  # bias allows the op's constants rounded to the compute format (criteria.constant_shifts)
    stored_shift: bool = False  # bias allows the shift of the intermediates the op's 16-bit kernel stores (OpInfo.stored)
    bias_min_n: int = 1  # the element-level bias test needs this many independent elements (a scalar loss has 1)
    intermediate_overflow: bool = False  # non-finite outputs allowed where the accumulate format's intermediates overflow (criteria.spill_mask)
    row_bias: bool = False  # the row-level bias criterion (criteria.row_groups, docs/methodology.md "Row bias")
    row_bias_tau: float = 0.0  # legitimate drift of the mean normalised signed row error (calibrated)
    row_bias_z: float = 6.0  # its noise allowance, in standard errors of the mean over rows
    row_bias_rel: float = 0.0  # declared systematic relative error of a group's shared operations, in u_acc
    row_bias_drift: str = ""  # legitimate drift of a group's reduction, in u_acc, a formula in K (added to row_bias_rel)
    bias_rows: bool = False  # the bias standard error row-clustered over the scan axis (criteria.bias_standard_error)
    bias_rows_t: bool = False  # with bias_rows: Student-t critical value on R - 1 dof, untested below 2 rows
    quantile_min_n: int = 0  # NS-MODULE: below this many elements the ULP quantiles get the accumulation floor (grade.module_standard)
    range_exit: bool = False  # scans: 0 or non-finite outputs allowed after a running product may leave the accumulate format's range (criteria.exit_mask)
    tail_n: int = 0  # above this many output elements the model's E_i grows by ln N / ln tail_n (criteria.tail_factor)


@dataclass(frozen=True)
class Standard:
    """One immutable, versioned standard (one file)."""

    id: str
    version: int
    status: str
    op: str
    title: str
    default: bool
    supersedes: str | None
    selector: Mapping[str, Any]
    inputs: tuple[Format, ...]
    accumulate: Format
    output: Format
    model: ErrorModel
    criteria: Criteria
    suite: Mapping[str, Any]
    rationale: str
    citations: tuple[str, ...]
    provenance: Mapping[str, Any]
    path: str
    sha256: str
    policy: str = "fp32"

    @property
    def key(self) -> str:
        """``ID@version``, what a reviewer cites."""
        return f"{self.id}@{self.version}"

    @property
    def citation(self) -> str:
        """``ID@version (sha256:prefix)``: the exact bytes the verdict was judged by."""
        return f"{self.key} (sha256:{self.sha256[:12]})"

    @property
    def formats(self) -> dict:
        return {
            "inputs": [f.name for f in self.inputs],
            "accumulate": self.accumulate.name,
            "output": self.output.name,
        }

    def to_dict(self) -> dict:
        """A JSON-ready summary (used by ``python -m numstd list --json``)."""
        return {
            "id": self.key, "op": self.op, "title": self.title, "status": self.status,
            "default": self.default, "formats": self.formats, "policy": self.policy, "selector": dict(self.selector),
            "supersedes": self.supersedes, "sha256": self.sha256,
            "model": {"error": self.model.error.text, "rho": self.model.rho, "ftz": self.model.ftz,
                      "constants": dict(self.model.constants)},
        }


def _drift_formula(text: str, where: str) -> str:
    """``row_bias_drift``: a formula in ``K`` (checked here; evaluated by the judge), or empty."""
    if text:
        from ..models.formula import Formula

        Formula.parse(text, {"K"}, f"{where} [criteria] row_bias_drift")
    return text


def _check_types(table: Mapping[str, Any], spec: Mapping[str, type], where: str) -> None:
    for key, value in table.items():
        if key not in spec:
            raise SchemaError(f"{where}: unknown key {key!r}; allowed: {', '.join(sorted(spec))}")
        want = spec[key]
        ok = isinstance(value, want) and not (want in (int, float) and isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise SchemaError(f"{where}: {key} must be {want.__name__}, got {type(value).__name__} {value!r}")


def _fmt(name: Any, where: str) -> Format:
    try:
        return get_format(name)
    except Exception:
        raise SchemaError(f"{where}: unknown format {name!r}") from None


def load_standard(data: bytes, path: str) -> Standard:
    """Parse and validate one standard file's bytes.  ``path`` is used in messages."""
    where = path
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{where}: not UTF-8 text ({exc}); a standard file is UTF-8 TOML") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SchemaError(f"{where}: not valid TOML: {exc}") from None
    _check_types(doc, _TOP_KEYS, where)
    for key in _REQUIRED:
        if key not in doc:
            raise SchemaError(f"{where}: missing required field {key!r}")
    if doc["schema"] != 1:
        raise SchemaError(f"{where}: schema {doc['schema']} is not supported (this numstd reads schema 1)")
    if not _ID_RE.match(doc["id"]):
        raise SchemaError(f"{where}: id {doc['id']!r} must look like NS-OP-FORMAT (uppercase, digits, dashes)")
    if doc["version"] < 1:
        raise SchemaError(f"{where}: version must be ≥ 1")
    if doc["status"] not in STATUSES:
        raise SchemaError(f"{where}: status {doc['status']!r} must be one of {STATUSES}")
    stem = Path(path).name
    if stem.endswith(".toml") and stem != f"{doc['id']}@{doc['version']}.toml":
        raise SchemaError(f"{where}: file name must be {doc['id']}@{doc['version']}.toml")
    from ..ops.catalog import OPS

    if doc["op"] not in OPS:
        raise SchemaError(f"{where}: op {doc['op']!r} is not in the catalog")
    fmts = doc["formats"]
    _check_types(fmts, {"inputs": list, "accumulate": str, "output": str}, f"{where} [formats]")
    for key in _FORMAT_KEYS:
        if key not in fmts:
            raise SchemaError(f"{where} [formats]: missing {key!r}")
    inputs = tuple(_fmt(n, f"{where} [formats] inputs") for n in fmts["inputs"])
    if not inputs:
        raise SchemaError(f"{where} [formats] inputs: list at least the first input's format")
    crit_t = dict(doc["criteria"])
    _check_types(crit_t, _CRITERIA_KEYS, f"{where} [criteria]")
    rounding = tuple(crit_t.get("output_rounding", ["rne"]))
    if not rounding or set(rounding) - _ROUNDINGS:
        raise SchemaError(f"{where} [criteria] output_rounding: use a non-empty subset of {sorted(_ROUNDINGS)}")
    quantiles = {}
    for q, limit in crit_t.get("ulp_quantiles", {}).items():
        try:
            qf = float(q)
        except ValueError:
            raise SchemaError(f"{where} [criteria.ulp_quantiles]: key {q!r} must be a quantile like \"0.999\"") from None
        from ..core.distribution import QUANTILES

        if qf not in QUANTILES and qf != 1.0:
            raise SchemaError(f"{where} [criteria.ulp_quantiles]: {q} is not a reported quantile; use one of "
                              f"{', '.join(map(str, QUANTILES))} or 1.0 (the maximum)")
        if not isinstance(limit, (int, float)) or isinstance(limit, bool):
            raise SchemaError(f"{where} [criteria.ulp_quantiles]: {q} = {limit!r} is not a quantile → ULP limit")
        quantiles[qf] = float(limit)
    if crit_t.get("bias_mode", "paired") not in BIAS_MODES:
        raise SchemaError(f"{where} [criteria] bias_mode: {crit_t['bias_mode']!r} is not one of "
                          f"{', '.join(BIAS_MODES)} (see docs/grading.md)")
    if crit_t.get("nan_policy", "match") not in ("match",):
        raise SchemaError(f"{where} [criteria] nan_policy: only \"match\" is defined in schema 1")
    criteria = Criteria(
        bound_max_fraction=float(crit_t.get("bound_max_fraction", 0.0)),
        bias_tau=float(crit_t.get("bias_tau", 0.1)),
        bias_z=float(crit_t.get("bias_z", 6.0)),
        bias_kappa=float(crit_t.get("bias_kappa", 8.0)),
        ulp_max=float(crit_t["ulp_max"]) if "ulp_max" in crit_t else None,
        ulp_quantiles=quantiles,
        output_rounding=rounding,
        nan_policy=crit_t.get("nan_policy", "match"),
        signed_zero=bool(crit_t.get("signed_zero", False)),
        bias_mode=crit_t.get("bias_mode", "paired"),
        convex_hull=bool(crit_t.get("convex_hull", False)),
        rounded_constants=bool(crit_t.get("rounded_constants", False)),
        stored_shift=bool(crit_t.get("stored_shift", False)),
        intermediate_overflow=bool(crit_t.get("intermediate_overflow", False)),
        bias_min_n=int(crit_t.get("bias_min_n", 1)),
        row_bias=bool(crit_t.get("row_bias", False)),
        row_bias_tau=float(crit_t.get("row_bias_tau", 0.0)),
        row_bias_z=float(crit_t.get("row_bias_z", 6.0)),
        row_bias_rel=float(crit_t.get("row_bias_rel", 0.0)),
        row_bias_drift=_drift_formula(crit_t.get("row_bias_drift", ""), where),
        quantile_min_n=int(crit_t.get("quantile_min_n", 0)),
        bias_rows=bool(crit_t.get("bias_rows", False)),
        bias_rows_t=bool(crit_t.get("bias_rows_t", False)),
        tail_n=_tail_n(crit_t.get("tail_n", 0), where),
        range_exit=bool(crit_t.get("range_exit", False)),
    )
    rationale = doc["rationale"]
    _check_types(rationale, _RATIONALE_KEYS, f"{where} [rationale]")
    if not rationale.get("text", "").strip():
        raise SchemaError(f"{where} [rationale]: text is required (why these bounds)")
    _check_types(doc["provenance"], _PROVENANCE_KEYS, f"{where} [provenance]")
    if "method" not in doc["provenance"]:
        raise SchemaError(f"{where} [provenance]: method is required (how the constants were obtained)")
    _check_types(doc.get("suite", {}), _SUITE_KEYS, f"{where} [suite]")
    selector = dict(doc.get("selector", {}))
    for k, v in selector.items():
        if not isinstance(v, (bool, int, float, str)):
            raise SchemaError(f"{where} [selector] {k}: must be a scalar")
    acc_fmt = _fmt(fmts["accumulate"], f"{where} [formats] accumulate")
    policy = doc.get("policy", policy_of(acc_fmt))
    if policy not in POLICIES:
        raise SchemaError(f"{where}: policy {policy!r} must be one of {POLICIES} (docs/methodology.md §2.1)")
    if (policy == "arith16") != (acc_fmt.p < 24):
        raise SchemaError(f"{where}: policy {policy!r} does not fit accumulate = {acc_fmt.name!r}: arith16 is the "
                          "policy of 16-bit accumulation, fp32 and stored16 accumulate in float32")
    supersedes = doc.get("supersedes")
    if supersedes is not None and not re.match(r"^NS-[A-Z0-9-]+@\d+$", supersedes):
        raise SchemaError(f"{where}: supersedes must be an ID@version, got {supersedes!r}")
    return Standard(
        id=doc["id"], version=doc["version"], status=doc["status"], op=doc["op"], title=doc["title"],
        default=bool(doc.get("default", False)), supersedes=supersedes, selector=selector,
        inputs=inputs, accumulate=acc_fmt,
        output=_fmt(fmts["output"], f"{where} [formats] output"),
        model=ErrorModel.from_table(doc["op"], doc["model"], where), criteria=criteria,
        suite=dict(doc.get("suite", {})), rationale=rationale["text"].strip(),
        citations=tuple(rationale.get("citations", ())), provenance=dict(doc["provenance"]),
        path=path, sha256=file_sha256(data), policy=policy,
    )


def policy_of(accumulate: Format) -> str:
    """The policy a standard file that names none has: ``arith16`` for 16-bit accumulation, else ``fp32``."""
    return "arith16" if accumulate.p < 24 else "fp32"


def file_sha256(data: bytes) -> str:
    """sha256 hex digest of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=1)
def standards_root() -> Any:
    """The shipped standards directory (an importlib.resources Traversable; looked up once per process:
    the package does not move, and every registry lookup starts here)."""
    return resources.files("numstd.standards")


def read_lock(text: str, where: str = "standards/LOCK") -> dict[str, str]:
    """Parse LOCK: lines ``<sha256>  <op>/<ID>@<N>.toml``; ``#`` starts a comment."""
    lock: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            raise SchemaError(f"{where}:{n}: expected '<sha256>  <op>/<file>.toml', got {line!r}")
        lock[parts[1]] = parts[0]
    return lock


class _Registry:
    def __init__(self, standards: Sequence[Standard], broken: Mapping[str, Exception] | None = None) -> None:
        self.standards = tuple(sorted(standards, key=lambda s: (s.op, s.id, s.version)))
        self.by_key = {s.key: s for s in self.standards}
        #: the latest published version of each ID, if active (what :func:`find_standard` chooses from)
        self.latest = tuple(_latest_published(self.standards))
        by_op: dict[str, list[Standard]] = {}
        for s in self.standards:
            by_op.setdefault(s.op, []).append(s)
        #: op -> its standards, in the order of ``standards``
        self.by_op = {op: tuple(v) for op, v in by_op.items()}
        latest: dict[str, list[Standard]] = {}
        for s in self.latest:
            latest.setdefault(s.op, []).append(s)
        #: op -> its entries of ``latest``, in that order
        self.latest_by_op = {op: tuple(v) for op, v in latest.items()}
        #: ``op/ID@N.toml`` -> the error that file raises (integrity or schema); the rest stays usable
        self.broken = dict(sorted((broken or {}).items()))

    def broken_error(self, key: str | None = None, op: str | None = None) -> Exception | None:
        """The error of a broken file for ``ID@N`` / ``ID`` (any version) or for any file of ``op``."""
        for rel, exc in self.broken.items():
            folder, stem = rel.split("/", 1)[0], rel.rsplit("/", 1)[-1].removesuffix(".toml").upper()
            if (key is not None and (stem == key or stem.split("@")[0] == key)) or (op is not None and folder == op):
                return exc
        return None


_lock = threading.Lock()
_cache: dict[str, _Registry] = {}

#: environment variable: directories of users' own standards (``os.pathsep``-separated), each with
#: its own ``LOCK``, loaded beside the shipped ones (``--standards-dir`` of the CLI sets it)
STANDARDS_PATH_ENV = "NUMSTD_STANDARDS_PATH"


def user_standards_dirs() -> list[Path]:
    """The directories named by ``NUMSTD_STANDARDS_PATH`` (users' own standards), in order."""
    import os

    return [Path(d) for d in os.environ.get(STANDARDS_PATH_ENV, "").split(os.pathsep) if d.strip()]


def load_registry(root: Any = None) -> _Registry:
    """Load (once per process, thread-safe) and verify every standard under ``root``.

    ``root`` None: the shipped standards plus every directory of ``NUMSTD_STANDARDS_PATH``.  A file
    that fails its checks — bytes differing from its LOCK entry (whatever its status), published but
    not in LOCK, listed in LOCK but gone, not UTF-8, not valid schema — does not stop the others:
    it is recorded in ``broken`` and raises its :class:`~numstd.errors.DataIntegrityError` (or
    :class:`~numstd.errors.SchemaError`), naming the file, where it is asked for (:func:`get_standard`
    of its ID, :func:`find_standard` of its op).
    """
    dirs = [standards_root(), *user_standards_dirs()] if root is None else [Path(root)]
    key = "\0".join(map(str, dirs))
    with _lock:
        if key in _cache:
            return _cache[key]
    found: list[Standard] = []
    broken: dict[str, Exception] = {}
    seen: dict[str, str] = {}
    for base in dirs:
        _load_dir(base, found, broken, seen)
    reg = _Registry(found, broken)
    with _lock:
        _cache[key] = reg
    return reg


def _label(base: Any, rel: str) -> str:
    """How a file is named in messages: ``standards/<rel>`` for the shipped ones, else its path."""
    return f"standards/{rel}" if str(base) == str(standards_root()) else str(Path(str(base)) / rel)


def _load_dir(base: Any, found: list, broken: dict, seen: dict) -> None:
    lock_file = base / "LOCK"
    lock = read_lock(lock_file.read_text(encoding="utf-8"), _label(base, "LOCK")) if lock_file.is_file() else {}
    listed: set[str] = set()
    if not base.is_dir():
        raise SchemaError(f"standards directory {base} does not exist; create it or fix {STANDARDS_PATH_ENV}")
    for op_dir in sorted(base.iterdir(), key=lambda p: p.name):
        if not op_dir.is_dir() or op_dir.name.startswith(("_", ".")):
            continue
        for f in sorted(op_dir.iterdir(), key=lambda p: p.name):
            if not f.name.endswith(".toml"):
                continue
            rel = f"{op_dir.name}/{f.name}"
            listed.add(rel)
            try:
                std = _load_file(f.read_bytes(), rel, _label(base, rel), lock)
                if std.key in seen:
                    raise SchemaError(f"{_label(base, rel)}: {std.key} is also defined in {seen[std.key]}")
            except (SchemaError, DataIntegrityError) as exc:
                broken[rel] = exc
                continue
            seen[std.key] = _label(base, rel)
            found.append(std)
    for rel in sorted(set(lock) - listed):
        broken[rel] = DataIntegrityError(
            f"{_label(base, 'LOCK')} lists {rel} but the file is gone: published standards must stay resolvable; "
            "restore it")


def _load_file(data: bytes, rel: str, label: str, lock: Mapping[str, str]) -> Standard:
    """One standard file, checked against LOCK *before* it is parsed (a flipped byte is an integrity
    error even where it breaks UTF-8 or TOML; a LOCK entry binds the file whatever its status)."""
    digest = file_sha256(data)
    if rel in lock and lock[rel] != digest:
        raise DataIntegrityError(
            f"{label} changed after publication (sha256 {digest[:12]}… ≠ LOCK {lock[rel][:12]}…). Published "
            "standards are immutable: restore the file (`python -m numstd verify` lists every mismatch) and "
            "publish the change as a new version with `supersedes`."
        )
    std = load_standard(data, label)
    if std.op != rel.split("/", 1)[0]:
        raise SchemaError(f"{label}: op {std.op!r} must live in {std.op}/ of its standards directory")
    if std.status != "draft" and rel not in lock:
        raise DataIntegrityError(
            f"{label} is published (status {std.status!r}) but not in its LOCK; publish it with "
            "`python -m numstd publish`"
        )
    return std


def list_standards(op: str | None = None, *, status: str | Iterable[str] | None = None, root: Any = None) -> list[Standard]:
    """All standards, optionally filtered by op and status (``"active"``, or a list)."""
    statuses = {status} if isinstance(status, str) else set(status) if status else None
    reg = load_registry(root)
    pool = reg.standards if op is None else reg.by_op.get(op, ())
    return [s for s in pool if statuses is None or s.status in statuses]


def get_standard(key: str, *, root: Any = None) -> Standard:
    """Resolve ``"ID@N"`` exactly, or ``"ID"`` to its highest published version.

    Raises
    ------
    StandardNotFound
        With the closest existing IDs.
    """
    if isinstance(key, Standard):
        return key
    reg = load_registry(root)
    key = str(key).strip()
    bad = reg.broken_error(key=key.upper())
    if bad is not None and key.upper() not in reg.by_key:
        raise bad
    if "@" in key:
        if key.upper() in reg.by_key:
            return reg.by_key[key.upper()]
    else:
        versions = [s for s in reg.standards if s.id == key.upper() and s.status != "draft"]
        if versions:
            return max(versions, key=lambda s: s.version)
    import difflib

    close = difflib.get_close_matches(key.upper(), list(reg.by_key), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `python -m numstd list` shows them all"
    raise StandardNotFound(f"no standard {key!r}{hint}")


def _latest_published(standards: Iterable[Standard]) -> list[Standard]:
    best: dict[str, Standard] = {}
    for s in standards:
        if s.status == "draft":
            continue
        if s.id not in best or s.version > best[s.id].version:
            best[s.id] = s
    return [s for s in best.values() if s.status == "active"]


def find_standard(op: str, inputs: Any = None, output: Any = None, accumulate: Any = "float32", *,
                  policy: str | None = None, root: Any = None, **selector: Any) -> Standard:
    """The one standard for a call: op, input format(s), output format, accumulation, policy, selectors.

    ``inputs`` is a format (of the first input) or a list of formats (one per input).  Selector
    parameters (e.g. ``allow_tf32=True``) pick a non-default standard; a standard whose selector
    asks for a parameter matches only calls that pass it with that value.  ``policy`` (one of
    :data:`POLICIES`) keeps the standards of that precision policy; without it, the first policy of
    :data:`DEFAULT_POLICY` for the output format that has a match is used (``arith16`` when
    ``accumulate`` is a 16-bit format, else ``fp32`` for formats the mapping does not list).  Among
    several matches of one policy the one marked ``default = true`` wins.  An exact op
    (:attr:`numstd.ops.entry.OpInfo.exact`: amax, argmax, max pooling) rounds nothing, so its
    bit-exact standards match whatever ``accumulate`` the call declares (an arith16 one first where
    it exists, then the output format's default policies).

    Raises
    ------
    StandardNotFound, AmbiguousStandard
        Listing the standards that exist for ``op``.
    """
    from ..ops.catalog import get_op

    exact = get_op(op).exact  # no rounding happens: its standards hold for every accumulation format
    in_fmts = [] if inputs is None else [get_format(f) for f in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
    out_fmt = get_format(output) if output is not None else None
    acc_fmt = get_format(accumulate) if accumulate is not None else None
    selector = {k: v for k, v in selector.items() if v is not None}
    reg = load_registry(root)
    bad = reg.broken_error(op=op)
    if bad is not None:  # (a broken file of this op might be the one to choose)
        raise type(bad)(f"cannot choose a standard for {op}: {bad}") from bad
    same_op = list(reg.latest_by_op.get(op, ()))

    def matches(s: Standard) -> bool:
        if out_fmt is not None and s.output != out_fmt:
            return False
        if acc_fmt is not None and s.accumulate != acc_fmt and not exact:
            return False
        for want, got in zip(s.inputs, in_fmts):
            if want != got:
                return False
        for k, v in s.selector.items():
            if selector.get(k, _default_selector(v)) != v:
                return False
        for k, v in selector.items():
            if k not in s.selector and v != _default_selector(v):
                return False
        return True

    found = [s for s in same_op if matches(s)]
    if policy is not None:
        if policy not in POLICIES:
            from ..core.errors import ParameterError

            raise ParameterError(f"policy={policy!r} is not a precision policy; use one of {', '.join(POLICIES)} "
                                 "(docs/methodology.md §2.1)")
        found = [s for s in found if s.policy == policy]
    elif found:
        defaults = DEFAULT_POLICY.get(out_fmt.name if out_fmt is not None else "", ("fp32",))
        order = (("arith16",) + (defaults if exact else ()) if acc_fmt is not None and acc_fmt.p < 24 else defaults)
        for pol in order:
            if any(s.policy == pol for s in found):
                found = [s for s in found if s.policy == pol]
                break
        else:
            pols = sorted({s.policy for s in found})
            if len(pols) > 1:
                names = ", ".join(f"{s.key} ({s.policy})" for s in found)
                raise AmbiguousStandard(f"several policies match {op} ({names}); pass policy=... or standard=...")
    if len(found) > 1:
        defaults = [s for s in found if s.default]
        if len(defaults) == 1:
            return defaults[0]
        names = ", ".join(s.key for s in found)
        raise AmbiguousStandard(f"several standards match {op} ({names}); pass standard=... to choose one")
    if not found:
        req = (f"inputs={[f.name for f in in_fmts]}, output={out_fmt.name if out_fmt else None}, "
               f"accumulate={acc_fmt.name if acc_fmt else None}, policy={policy}, {selector or ''}")
        listing = "; ".join(f"{s.key}: inputs {s.formats['inputs']} → {s.output.name}, acc {s.accumulate.name}, "
                            f"policy {s.policy}" + (f", {dict(s.selector)}" if s.selector else "") for s in same_op)
        raise StandardNotFound(
            f"no standard for {op} with {req}. Existing for {op}: {listing or 'none'}. "
            "Cast the output to a covered format, pass standard='ID@N', or author a standard with "
            "`python -m numstd calibrate`."
        )
    return found[0]


def _default_selector(value: Any) -> Any:
    """The value a selector parameter has when a call does not pass it."""
    return False if isinstance(value, bool) else None
