"""Publication: make a reviewed draft a published, immutable standard (:func:`publish`; the command
``python -m numstd publish DRAFT.toml`` is its parser, :mod:`numstd.cli.publish`).

Where: a repository (``--root``: ``<root>/standards``, evidence in ``<root>/reference_data/evidence``,
docs in ``<root>/docs/standards``; the default when numstd runs from its source checkout), or a
directory of the user's own standards (``--standards-dir DIR`` / ``NUMSTD_STANDARDS_PATH``: ``DIR/<op>/``,
``DIR/LOCK``, evidence in ``DIR/evidence``).  publish never writes into an installed package.

Validation, before anything is written: the draft parses; its ID names its op (``NS-<OP>-…``, the
op without underscores: ``NS-CROSSENTROPY-FP32`` for cross_entropy) and lands in ``<op>/``; no
standard ``ID@N`` exists in the target or any loaded directory; ``supersedes`` names an existing
standard; the evidence file exists, matches the draft's ``evidence_sha256`` and its name is not
taken in the evidence directory (an ``@2`` never overwrites ``@1``'s evidence) — unless the draft
reuses an evidence file already published, byte for byte (its ``evidence_sha256`` matches: a new
version that changes a criterion, not the constants, cites the evidence they were fitted on); and the published
file (status ``active``) loads against the new LOCK.

Atomic: the evidence, the standard and the new LOCK are written to temporary files beside their
destinations, then renamed into place, the LOCK last (the commit point).  If any step fails, the
files already renamed are removed again and the old LOCK stays: every write lands, or none does.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ..core.errors import DataIntegrityError, NumstdError, ParameterError, SchemaError

__all__ = ["publish", "id_matches_op"]


def _repo_root() -> Path:
    """The package directory whose ``standards``/``reference_data`` are numstd's data (a source checkout
    links them to the repository's)."""
    from importlib import resources

    return Path(str(resources.files("numstd.standards"))).parent


def _source_checkout() -> Path | None:
    """The repository numstd runs from, when it is a source checkout (``pyproject.toml`` beside the package)."""
    from importlib import resources

    repo = Path(str(resources.files("numstd"))).resolve().parent
    return repo if (repo / "pyproject.toml").is_file() and (repo / "standards").is_dir() else None


def id_matches_op(std_id: str, op: str) -> bool:
    """Whether a standard ID names its op: ``NS-<OP>`` or ``NS-<OP>-…`` with the op upper-cased, no ``_``."""
    token = "NS-" + op.replace("_", "").upper()
    return std_id == token or std_id.startswith(token + "-")


def _target(root: str | Path | None, standards_dir: str | Path | None) -> tuple[Path, Path, Path | None]:
    """(standards directory, evidence directory, docs directory or None) to publish into."""
    if root is not None and standards_dir is not None:
        raise NumstdError("publish: pass --root (a repository) or --standards-dir (your standards), not both")
    if standards_dir is None and root is None:
        from ..catalog.registry import user_standards_dirs

        dirs = user_standards_dirs()
        if dirs:
            standards_dir = dirs[0]
        else:
            root = _source_checkout()
            if root is None:
                raise NumstdError(
                    "publish: numstd is installed as a package and publish never writes into it; pass "
                    "--standards-dir DIR (a directory of your own standards, created if needed) or --root REPO")
    if standards_dir is not None:
        d = Path(standards_dir)
        return d, d / "evidence", None
    r = Path(root)
    return r / "standards", r / "reference_data" / "evidence", r / "docs" / "standards"


def publish(draft: str | Path, *, root: str | Path | None = None, docs: bool = True,
            standards_dir: str | Path | None = None) -> Path:
    """Publish ``draft`` into a repository ``root`` or a user's ``standards_dir`` (module docstring).

    Returns the path of the published file.

    Raises
    ------
    SchemaError, DataIntegrityError, NumstdError
        Naming what is wrong; nothing was written.
    """
    from ..catalog import registry
    from ..catalog.registry import load_registry, load_standard, read_lock

    draft = Path(draft)
    std_dir, ev_dir, docs_dir = _target(root, standards_dir)
    try:
        data = draft.read_bytes()
    except OSError as exc:
        raise ParameterError(f"{draft}: cannot read the draft ({exc.strerror or exc}); pass the .toml that "
                             "`python -m numstd calibrate --out DIR` wrote (DIR/<ID>@<N>.toml)") from None
    std = load_standard(data, str(draft))
    if std.status != "draft":
        raise SchemaError(f"{draft}: status is {std.status!r}; only drafts are published")
    if not id_matches_op(std.id, std.op):
        raise SchemaError(f"{draft}: id {std.id} does not name its op {std.op!r}; a standard for {std.op} is "
                          f"called NS-{std.op.replace('_', '').upper()}-…")
    text = data.decode("utf-8")
    if 'status = "draft"' not in text:
        raise SchemaError(f"{draft}: expected a line status = \"draft\"")
    text = text.replace('status = "draft"', 'status = "active"', 1)
    rel = f"{std.op}/{std.id}@{std.version}.toml"
    dest = std_dir / rel
    if dest.exists():
        raise DataIntegrityError(f"{dest} exists: published standards are immutable; calibrate the next version")
    registry._cache.clear()
    known = {}
    for reg in (load_registry(), load_registry(std_dir) if std_dir.is_dir() else None):
        if reg is not None:
            known.update(reg.by_key)
    if std.key in known:
        raise DataIntegrityError(f"{std.key} is already published ({known[std.key].path}); calibrate the next version")
    if std.supersedes and std.supersedes not in known:
        raise SchemaError(f"{draft}: supersedes {std.supersedes}, which is not a loaded standard")
    ev_name = Path(std.provenance.get("evidence", "")).name
    ev_src = draft.parent / ev_name
    ev_bytes = b""
    want = std.provenance.get("evidence_sha256")
    if ev_name and (ev_dir / ev_name).exists():
        # an evidence file already published is never replaced; a new version may *reuse* it (a
        # version that changes a criterion, not the constants: same bytes, same sha256)
        if not want or hashlib.sha256((ev_dir / ev_name).read_bytes()).hexdigest() != want:
            raise DataIntegrityError(f"{ev_dir / ev_name} exists: evidence files are never replaced; name the "
                                     f"draft's evidence after its own version ({std.key}.evidence.parquet), or "
                                     "reuse the published one with its evidence_sha256")
        ev_name = ""  # reused: nothing to write
    elif ev_name:
        if not ev_src.is_file():
            raise NumstdError(f"evidence {ev_src} is missing; publish the draft from its calibration directory")
        ev_bytes = ev_src.read_bytes()
        if want and hashlib.sha256(ev_bytes).hexdigest() != want:
            raise DataIntegrityError(f"{ev_src}: sha256 differs from the draft's provenance; recalibrate")
    lock_path = std_dir / "LOCK"
    lock = read_lock(lock_path.read_text(encoding="utf-8")) if lock_path.exists() else {}
    digest = hashlib.sha256(text.encode()).hexdigest()
    lock[rel] = digest
    lines = ["# sha256 of every published standard file; a published file never changes (see registry.py)"]
    lines += [f"{h}  {p}" for p, h in sorted(lock.items())]
    registry._load_file(text.encode(), rel, str(dest), lock)  # still valid as published, against the new LOCK

    writes = ([(ev_dir / ev_name, ev_bytes)] if ev_name else []) + [(dest, text.encode()),
                                                                     (lock_path, ("\n".join(lines) + "\n").encode())]
    _write_all(writes)
    registry._cache.clear()
    if docs and docs_dir is not None:
        from .docs import generate

        generate(docs_dir, standards_root=std_dir)
    return dest


def _write_all(writes: list[tuple[Path, bytes]]) -> None:
    """Write every (path, bytes) or none: temporary files first, then renames; the last write (the
    LOCK) replaces its file, the others are new files, removed again if a later step fails."""
    temps: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for path, data in writes:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            temps.append((Path(tmp), path))
        for tmp, path in temps:
            os.replace(tmp, path)
            placed.append(path)
    except BaseException:  # (the LOCK is renamed last: when anything failed it was not, so placed files are new)
        for path in placed:
            path.unlink(missing_ok=True)
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise
