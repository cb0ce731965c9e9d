"""Integrity of shipped data: every file checked against the sha256 its manifest records.

The chain of trust: ``standards/LOCK`` records the sha256 of every published standard file; each
standard's ``[provenance] evidence_sha256`` (inside those locked bytes) records its evidence
Parquet; ``reference_data/tables/manifest.json`` records the exhaustive tables;
``reference_data/golden/manifest.json`` the golden verdicts (and any other
``reference_data/<dir>/manifest.json``: captures, emulator truth data).  :func:`verify` walks every manifest
that exists and returns one :class:`Mismatch` per file whose bytes differ (or that is missing);
``python -m numstd verify`` prints them by path and exits 1 on any.  At run time
:func:`evidence_path` checks a standard's evidence lazily, once per process, when it is read.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..core.errors import DataIntegrityError, NumstdError

__all__ = ["Mismatch", "verify", "evidence_path", "sha256_file"]


@dataclass(frozen=True)
class Mismatch:
    """One file that fails its manifest: ``path``, which ``manifest`` recorded it, and why."""

    path: str
    manifest: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem} (recorded in {self.manifest})"


def sha256_file(path: Path) -> str:
    """sha256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _package_dir(name: str) -> Path:
    from importlib import resources

    return Path(str(resources.files(name)))


def _check(path: Path, want: str, manifest: str, shown: str) -> Mismatch | None:
    if not path.is_file():
        return Mismatch(shown, manifest, "missing")
    got = sha256_file(path)
    return None if got == want else Mismatch(shown, manifest, f"sha256 {got[:16]}… ≠ recorded {want[:16]}…")


def _standards(std_dir: Path, evidence_dir: Path, label: str, ev_label: str) -> Iterator[Mismatch]:
    """Standard files against their LOCK, published files missing from it, and their evidence."""
    from .registry import load_standard, read_lock

    lock_path = std_dir / "LOCK"
    lock_name = f"{label}/LOCK"
    try:
        lock = read_lock(lock_path.read_text(encoding="utf-8"), lock_name) if lock_path.is_file() else {}
    except (NumstdError, UnicodeDecodeError) as exc:
        yield Mismatch(lock_name, lock_name, f"unreadable: {exc}")
        return
    for rel, want in sorted(lock.items()):
        bad = _check(std_dir / rel, want, lock_name, f"{label}/{rel}")
        if bad is not None:
            yield bad
            continue
        std = load_standard((std_dir / rel).read_bytes(), f"{label}/{rel}")
        ev, ev_sha = std.provenance.get("evidence"), std.provenance.get("evidence_sha256")
        if ev and ev_sha:
            bad = _check(evidence_dir / Path(ev).name, ev_sha, f"{label}/{rel} [provenance]", f"{ev_label}/{Path(ev).name}")
            if bad is not None:
                yield bad
    for f in sorted(std_dir.glob("*/*.toml")):
        rel = f"{f.parent.name}/{f.name}"
        if rel in lock or f.parent.name.startswith(("_", ".")):
            continue
        if b'status = "draft"' not in f.read_bytes():
            yield Mismatch(f"{label}/{rel}", lock_name, "published (not a draft) but not in LOCK")


def _manifest_json(folder: Path, label: str) -> Iterator[Mismatch]:
    """Files of a ``manifest.json``: ``{"files": {name: {"sha256": …}}}``, ``{name: {"sha256": …}}`` or
    ``{"files": [{"file": name, "sha256": …}, …]}`` (the tensor-core truth data)."""
    path = folder / "manifest.json"
    if not path.is_file():
        return
    name = f"{label}/manifest.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        yield Mismatch(name, name, f"unreadable: {exc}")
        return
    entries = doc.get("files", doc) if isinstance(doc, dict) else {}
    if isinstance(entries, list):
        entries = {e["file"]: e for e in entries if isinstance(e, dict) and "file" in e}
    for fname, entry in sorted(entries.items()):
        want = entry.get("sha256") if isinstance(entry, dict) else entry if isinstance(entry, str) else None
        if want:
            bad = _check(folder / fname, want, name, f"{label}/{fname}")
            if bad is not None:
                yield bad


def verify(standards_dirs: Any = None) -> list[Mismatch]:
    """Every shipped file against its recorded sha256 (see the module docstring).

    Parameters
    ----------
    standards_dirs : list of paths, optional
        Users' standard directories to check as well (default: ``NUMSTD_STANDARDS_PATH``); each
        holds its own ``LOCK`` and its evidence in ``<dir>/evidence/``.

    Returns
    -------
    list of Mismatch
        Empty when every file matches.
    """
    from .registry import user_standards_dirs

    data = _package_dir("numstd.reference_data")
    out = list(_standards(_package_dir("numstd.standards"), data / "evidence", "standards", "reference_data/evidence"))
    for sub in sorted(p.name for p in data.iterdir() if (p / "manifest.json").is_file()):  # tables, golden, any other
        out += _manifest_json(data / sub, f"reference_data/{sub}")
    for d in (user_standards_dirs() if standards_dirs is None else [Path(p) for p in standards_dirs]):
        out += _standards(Path(d), Path(d) / "evidence", str(d), str(Path(d) / "evidence"))
    return out


_verified: set[tuple[str, str]] = set()
_verified_lock = threading.Lock()


def evidence_path(std: Any) -> Path:
    """The path of standard ``std``'s evidence Parquet, its sha256 checked against the standard's
    ``evidence_sha256`` the first time it is asked for in this process (then cached).

    Raises
    ------
    DataIntegrityError
        The file is missing or its bytes differ from the recorded sha256; the message names it.
    NumstdError
        The standard records no evidence.
    """
    ev, want = std.provenance.get("evidence"), std.provenance.get("evidence_sha256")
    if not ev:
        raise NumstdError(f"{std.key} records no evidence file in [provenance]")
    if str(std.path).startswith("standards/"):  # shipped: reference_data/evidence
        path = _package_dir("numstd.reference_data") / "evidence" / Path(ev).name
    else:  # a user directory <dir>/<op>/<file> keeps its evidence in <dir>/evidence
        path = Path(std.path).parent.parent / "evidence" / Path(ev).name
    key = (str(path), str(want))
    with _verified_lock:
        if key in _verified:
            return path
    if not path.is_file():
        raise DataIntegrityError(f"{path}: the evidence of {std.key} is missing; restore it (python -m numstd verify)")
    if want:
        got = sha256_file(path)
        if got != want:
            raise DataIntegrityError(f"{path}: sha256 {got[:16]}… differs from {std.key}'s evidence_sha256 "
                                     f"{want[:16]}…; the evidence was altered: restore it (python -m numstd verify)")
    with _verified_lock:
        _verified.add(key)
    return path
