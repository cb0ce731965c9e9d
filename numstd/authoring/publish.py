"""``python -m numstd publish DRAFT.toml``: make a reviewed draft a published, immutable standard.

Steps: validate the draft; refuse if ``standards/<op>/<ID>@<N>.toml`` exists (published files are
never edited) or if the draft's evidence file is missing or its sha256 differs from provenance;
set ``status = "active"``; write the file; copy the evidence to ``reference_data/evidence/``; add
the file's sha256 to ``standards/LOCK``; regenerate ``docs/standards/``.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

from ..core.errors import DataIntegrityError, NumstdError, SchemaError

__all__ = ["publish", "configure", "run"]


def _repo_root() -> Path:
    from importlib import resources

    return Path(str(resources.files("numstd.standards"))).parent


def publish(draft: str | Path, *, root: str | Path | None = None, docs: bool = True) -> Path:
    """Publish ``draft`` into ``root`` (default: the repository holding numstd's standards/).

    Returns the path of the published file.
    """
    from ..catalog.registry import load_standard, read_lock

    draft = Path(draft)
    root = Path(root) if root is not None else _repo_root()
    data = draft.read_bytes()
    std = load_standard(data, str(draft))
    if std.status != "draft":
        raise SchemaError(f"{draft}: status is {std.status!r}; only drafts are published")
    text = data.decode("utf-8")
    if 'status = "draft"' not in text:
        raise SchemaError(f"{draft}: expected a line status = \"draft\"")
    text = text.replace('status = "draft"', 'status = "active"', 1)
    rel = f"{std.op}/{std.id}@{std.version}.toml"
    dest = root / "standards" / rel
    if dest.exists():
        raise DataIntegrityError(f"{dest} exists: published standards are immutable; calibrate the next version")
    ev_name = Path(std.provenance.get("evidence", "")).name
    ev_src = draft.parent / ev_name
    if ev_name:
        if not ev_src.is_file():
            raise NumstdError(f"evidence {ev_src} is missing; publish the draft from its calibration directory")
        want = std.provenance.get("evidence_sha256")
        if want and hashlib.sha256(ev_src.read_bytes()).hexdigest() != want:
            raise DataIntegrityError(f"{ev_src}: sha256 differs from the draft's provenance; recalibrate")
    load_standard(text.encode(), str(dest))  # still valid as published
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8")
    if ev_name:
        ev_dir = root / "reference_data" / "evidence"
        ev_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ev_src, ev_dir / ev_name)
    lock_path = root / "standards" / "LOCK"
    lock = read_lock(lock_path.read_text(encoding="utf-8")) if lock_path.exists() else {}
    lock[rel] = hashlib.sha256(text.encode()).hexdigest()
    lines = ["# sha256 of every published standard file; a published file never changes (see registry.py)"]
    lines += [f"{h}  {p}" for p, h in sorted(lock.items())]
    lock_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from ..catalog import registry

    registry._cache.clear()
    if docs:
        from .docs import generate

        generate(root / "docs" / "standards", standards_root=root / "standards")
    return dest


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("drafts", nargs="+", help="draft standard files written by calibrate")
    p.add_argument("--root", help="repository root (default: where numstd's standards/ lives)")


def run(args: argparse.Namespace) -> int:
    for d in args.drafts:
        path = publish(d, root=args.root, docs=d == args.drafts[-1])
        print(f"published {path}")
    return 0
