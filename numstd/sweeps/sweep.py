"""Sweeps: tasks with deterministic IDs whose results stream into a Parquet dataset; resumable.

:func:`run_sweep` runs a list of :class:`~numstd.executor.Task` on an executor and writes each
task's result (a ``pyarrow.Table``) as ``DIR/<task id>.parquet`` the moment it arrives — written
to a temporary file in ``DIR``, flushed to disk, then renamed over the final name
(:func:`os.replace`, atomic), so a file is either complete or absent.  Hence:

* **resumable**: killed half-way and started again with the same tasks and directory, a sweep
  runs only the tasks whose file is missing (the others are *reused*);
* **nothing lost**: a task that fails (raises, or its worker dies) is run again, up to
  ``retries`` more times, then reported in :attr:`SweepReport.failed` — never dropped;
  :meth:`SweepReport.raise_for_failures` raises :class:`SweepFailed` naming it;
* **nothing twice**: one file per task ID, written once per run (a second driver on the same
  directory is refused by a lock on ``DIR/.lock``);
* **one dataset**: every file carries its task ID, label, function, worker (``host:pid``),
  placement (on Ray: node ID and IP, the node's resources, the resources and accelerator IDs the
  task was given; ``{}`` elsewhere) and time in its metadata (key ``numstd.sweep``);
  ``pyarrow.dataset.dataset(DIR)`` reads them all, wherever the workers ran — results travel back
  to the driver, which alone writes, into a directory of its file system (local or shared, never
  an object-store URL).

``DIR/_tasks.json`` lists the sweep's tasks (ID, label, function, resources) and
``DIR/_report.json`` the outcome of the last run (reused, ran, failed with errors).

Task IDs are ``<kind>-<sha256 prefix>`` of a canonical JSON of what determines the result
(:func:`task_id`); numstd's tasks include :func:`code_fingerprint`, so results of other code are
never reused and a worker running other code refuses the task (:func:`require_fingerprint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from .._version import __version__
from ..core.errors import DataIntegrityError, NumstdError, ParameterError

__all__ = [
    "SweepReport", "SweepFailed", "task_id", "run_sweep", "read_sweep", "read_results",
    "completed_ids", "code_fingerprint", "require_fingerprint", "task_metadata", "METADATA_KEY",
    "NOT_FINGERPRINTED",
]

METADATA_KEY = b"numstd.sweep"
_KIND = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_TMP = ".tmp-"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")  # s3://b/x, and s3:/b/x once a Path collapsed it


class SweepFailed(NumstdError):
    """Some tasks of a sweep still failed after their retries; ``report`` says which and why."""

    def __init__(self, message: str, report: "SweepReport") -> None:
        super().__init__(message)
        self.report = report


@dataclass
class SweepReport:
    """What :func:`run_sweep` did.

    Attributes
    ----------
    directory : str
    total : int
        Tasks of the sweep.
    reused : int
        Tasks whose result file was already there (a resumed sweep).
    ran : int
        Tasks that ran and were written in this run.
    attempts : dict of str to int
        Runs per task ID in this run (1 + retries at most).
    failed : dict of str to list of str
        Task ID -> the error of each attempt, for the tasks still without a result.
    labels : dict of str to str
        Task ID -> label.
    seconds : float
    """

    directory: str
    total: int
    reused: int = 0
    ran: int = 0
    attempts: dict[str, int] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """True when every task has its result file."""
        return not self.failed and self.reused + self.ran == self.total

    def summary(self) -> str:
        line = (f"{self.directory}: {self.reused + self.ran}/{self.total} tasks done "
                f"({self.reused} reused, {self.ran} ran in {self.seconds:.1f} s)")
        if self.failed:
            line += f"; {len(self.failed)} failed"
            for tid, errs in list(self.failed.items())[:5]:
                first = (errs[-1].splitlines() or [""])[0]
                line += f"\n  {self.labels.get(tid, tid)} [{tid}] after {len(errs)} attempt(s): {first}"
            if len(self.failed) > 5:
                line += f"\n  … and {len(self.failed) - 5} more (see {self.directory}/_report.json)"
        return line

    def raise_for_failures(self) -> None:
        """Raise :class:`SweepFailed` when a task has no result."""
        if self.failed:
            raise SweepFailed(self.summary() + f"\nrun the same command again: only the {len(self.failed)} "
                              "failed task(s) will run", self)

    def to_dict(self) -> dict:
        return {"directory": self.directory, "total": self.total, "reused": self.reused, "ran": self.ran,
                "attempts": self.attempts, "failed": self.failed, "seconds": round(self.seconds, 3),
                "numstd_version": __version__}


def task_id(kind: str, key: Any) -> str:
    """``<kind>-<first 24 hex digits of sha256(canonical JSON of key)>``.

    ``key`` holds everything the task's result depends on (JSON: str, numbers, bool, None, lists,
    dicts; tuples become lists); the same key gives the same ID on every machine and run.

    Raises
    ------
    ParameterError
        ``kind`` is not lowercase letters, digits and dashes, or ``key`` is not JSON.
    """
    if not _KIND.match(kind):
        raise ParameterError(f"task kind {kind!r}: use lowercase letters, digits and '-' (it starts file names)")
    try:
        blob = json.dumps(key, sort_keys=True, separators=(",", ":"), allow_nan=True)
    except TypeError as exc:
        raise ParameterError(f"task key must be JSON data (str, numbers, lists, dicts): {exc}") from None
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


#: numstd modules that cannot change what a task returns — the driver's judging and fitting, the
#: command line, reports, grading, publishing, the sweep machinery — left out of the fingerprint so
#: that editing them neither invalidates finished tasks nor makes workers refuse new ones
NOT_FINGERPRINTED: frozenset[str] = frozenset({
    "judge/check.py", "judge/criteria.py", "judge/verdict.py", "core/distribution.py", "catalog/registry.py",
    "catalog/templates.py", "authoring/publish.py", "authoring/docs.py", "reporting/html.py", "grade/grading.py",
    "cli/grade.py", "grade/report.py", "grade/frameworks.py", "grade/module_standard.py", "testing/strategies.py",
    "testing/pytest_plugin.py", "cli/app.py", "cli/survey.py", "cli/backends.py", "sweeps/executor.py",
    "sweeps/sweep.py", "sweeps/__init__.py", "__main__.py", "core/_callable.py", "models/__init__.py", "_aliases.py",
    "grade/__init__.py", "survey/__init__.py", "cli/__init__.py", "core/__init__.py", "judge/__init__.py",
    "catalog/__init__.py", "authoring/__init__.py", "reporting/__init__.py", "testing/__init__.py",
})

_fingerprint_cache: dict[tuple, str] = {}


def code_fingerprint() -> str:
    """sha256 of numstd's Python sources that tasks run (paths and bytes, sorted, except
    :data:`NOT_FINGERPRINTED`): equal on two machines exactly when their tasks run the same code.

    Recomputed when a file's size or modification time changes (one ``stat`` per file per call).
    """
    root = Path(__file__).resolve().parent.parent  # numstd/
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts
                   and p.relative_to(root).as_posix() not in NOT_FINGERPRINTED)
    stamp = tuple((p.as_posix(), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    if stamp not in _fingerprint_cache:
        h = hashlib.sha256(__version__.encode())
        for path in files:
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
        _fingerprint_cache.clear()
        _fingerprint_cache[stamp] = h.hexdigest()[:32]
    return _fingerprint_cache[stamp]


def require_fingerprint(expected: str) -> None:
    """Refuse to run a task made by a driver running other numstd code than this worker.

    Raises
    ------
    DataIntegrityError
        With the host name and both fingerprints; install the same numstd on every node.
    """
    here = code_fingerprint()
    if expected != here:
        import socket

        raise DataIntegrityError(f"numstd on {socket.gethostname()} (fingerprint {here}) is not the driver's "
                                 f"({expected}): install the same numstd version and source on every node")


def _path(directory: Path, tid: str) -> Path:
    return directory / f"{tid}.parquet"


def completed_ids(directory: str | os.PathLike) -> set[str]:
    """Task IDs with a result file in ``directory`` (temporary files ignored)."""
    d = Path(directory)
    if not d.is_dir():
        return set()
    return {p.name[:-len(".parquet")] for p in d.iterdir()
            if p.name.endswith(".parquet") and not p.name.startswith((_TMP, "_", "."))}


@contextlib.contextmanager
def _lock(directory: Path) -> Iterator[None]:
    """Exclusive lock on ``directory/.lock`` for the run (released when the process dies)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NumstdError(f"another sweep is running in {directory} (it holds {directory}/.lock); wait for it "
                              "to finish or use another output directory") from None
        except OSError as exc:  # ENOLCK, EOPNOTSUPP: a file system without locks (some FUSE mounts)
            raise NumstdError(f"{directory}: its file system does not support flock ({exc}), so two drivers "
                              "could write one sweep; use a local directory or a shared file system with locks "
                              "(NFS)") from None
        yield
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{_TMP}{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_result(directory: Path, task: Any, outcome: Any, attempt: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = outcome.value
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps({
        "task": task.id, "label": task.label, "fn": task.fn, "worker": outcome.worker,
        "seconds": round(outcome.seconds, 4), "attempt": attempt, "numstd_version": __version__,
        "placement": dict(getattr(outcome, "placement", None) or {}),
    }, sort_keys=True).encode()
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(meta), sink, compression="zstd", write_statistics=False)
    _atomic_write(_path(directory, task.id), sink.getvalue().to_pybytes())


def _write_json(path: Path, obj: Any) -> None:
    _atomic_write(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


def run_sweep(tasks: Sequence[Any], directory: str | os.PathLike, executor: Any = "local", *,
              retries: int = 2, progress: Callable[[int, int], None] | None = None,
              workers: int | None = None, address: str | None = None) -> SweepReport:
    """Run the tasks whose result file is missing in ``directory``; write each result as it arrives.

    Parameters
    ----------
    tasks : sequence of numstd.executor.Task
        Unique IDs; each task's function returns a ``pyarrow.Table``.
    directory : path
        The dataset (created if missing).  The same tasks and directory resume a sweep.
    executor : str or Executor
        ``"serial"``, ``"local"``, ``"ray"`` (:func:`numstd.executor.get_executor`) or an executor
        object (left open for the caller).
    retries : int
        Extra runs of a failed task (rounds: every task runs once, then the failed ones again, …).
    progress : callable, optional
        ``progress(done, total)`` after each result written (and once at the start with the reused).
    workers, address
        For an executor given by name.

    Returns
    -------
    SweepReport
        Failures are reported there, not raised (see :meth:`SweepReport.raise_for_failures`).

    Raises
    ------
    ParameterError
        Duplicate task IDs, ``retries < 0``, or arguments that cannot travel to a worker.
    NumstdError
        Another sweep holds the directory.
    """
    from .executor import Executor, SerialExecutor, check_picklable, get_executor

    tasks = list(tasks)
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ParameterError(f"duplicate task IDs {dup[:3]}: a task's ID must name its result uniquely")
    if retries < 0:
        raise ParameterError(f"retries={retries}: pass 0 or more")
    order = {tid: i for i, tid in enumerate(ids)}
    if _URL.match(os.fspath(directory)):
        raise ParameterError(f"directory={os.fspath(directory)!r}: a sweep dataset is a directory of the driver's "
                             "file system (local, or a shared one such as NFS), not an object-store URL; mount the "
                             "bucket, or write locally and copy the directory there afterwards")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    report = SweepReport(str(d), len(tasks), labels={t.id: t.label for t in tasks})
    with _lock(d):
        for p in d.iterdir():  # leftovers of a run that was killed while writing
            if p.name.startswith(_TMP):
                p.unlink()
        _write_json(d / "_tasks.json", [{"id": t.id, "label": t.label, "fn": t.fn,
                                          "resources": t.resources.describe()} for t in tasks])
        have = completed_ids(d) & set(ids)
        todo = [t for t in tasks if t.id not in have]
        report.reused = len(tasks) - len(todo)
        done = report.reused
        if progress is not None:
            progress(done, len(tasks))
        errors: dict[str, list[str]] = {}
        if todo:
            ex = get_executor(executor, workers=workers, address=address)
            owned = not isinstance(executor, Executor)
            here = SerialExecutor()
            try:
                check_picklable([t for t in todo if not t.inline], ex)
                for _ in range(1 + retries):
                    if not todo:
                        break
                    failed = []
                    outcomes = itertools.chain(ex.run([t for t in todo if not t.inline]),
                                               here.run([t for t in todo if t.inline]))
                    for out in outcomes:
                        t = out.task
                        n = report.attempts[t.id] = report.attempts.get(t.id, 0) + 1
                        if out.ok and not _is_table(out.value):
                            out = type(out)(t, False, error=f"{t.fn} returned {type(out.value).__name__}, "
                                            "not a pyarrow.Table", worker=out.worker)
                        if out.ok:
                            _write_result(d, t, out, n)
                            have.add(t.id)
                            errors.pop(t.id, None)
                            report.ran += 1
                            done += 1
                            if progress is not None:
                                progress(done, len(tasks))
                        else:
                            errors.setdefault(t.id, []).append(f"[{out.worker or '?'}] {out.error}".strip())
                            failed.append(t)
                    todo = sorted(failed, key=lambda t: order[t.id])
            finally:
                report.seconds = time.perf_counter() - start
                report.failed = {t.id: errors.get(t.id, ["not run: the sweep was interrupted"])
                                 for t in tasks if t.id not in have}
                _write_json(d / "_report.json", report.to_dict())
                if owned:
                    ex.close()
        report.seconds = time.perf_counter() - start
    return report


def _is_table(value: Any) -> bool:
    import pyarrow as pa

    return isinstance(value, pa.Table)


def read_results(directory: str | os.PathLike, tasks: Sequence[Any]) -> list[Any]:
    """One ``pyarrow.Table`` per task (a Task or a task ID), in the given order, with its metadata.

    Raises
    ------
    DataIntegrityError
        A task without a result file (listing the first missing), or a file that is not the
        task's (unreadable, or its metadata names another task).
    """
    import pyarrow.parquet as pq

    d = Path(directory)
    ids = [t if isinstance(t, str) else t.id for t in tasks]
    missing = [i for i in ids if not _path(d, i).exists()]
    if missing:
        raise DataIntegrityError(f"{d}: {len(missing)} of {len(ids)} task results missing (first: {missing[0]}); "
                                 "run the sweep again to complete it")
    out = []
    for tid in ids:
        path = _path(d, tid)
        try:
            table = pq.read_table(path)
        except Exception as exc:
            raise DataIntegrityError(f"{path}: not a readable Parquet result ({type(exc).__name__}: {exc}); "
                                     "delete it and run the sweep again") from None
        raw = (table.schema.metadata or {}).get(METADATA_KEY)
        try:
            meta = json.loads(raw) if raw is not None else {}
        except ValueError:
            meta = {}
        if meta.get("task") != tid:
            raise DataIntegrityError(f"{path}: holds the result of task {meta.get('task')!r}, not {tid!r} (file "
                                     "renamed or copied over?); delete it and run the sweep again")
        out.append(table)
    return out


def read_sweep(directory: str | os.PathLike, tasks: Sequence[Any]) -> Any:
    """The results of ``tasks`` as one ``pyarrow.Table``, rows in task order (metadata dropped)."""
    import pyarrow as pa

    tables = [t.replace_schema_metadata(None) for t in read_results(directory, tasks)]
    if not tables:
        raise ParameterError("read_sweep needs at least one task")
    return pa.concat_tables(tables)


def task_metadata(table: Any) -> Mapping[str, Any]:
    """The ``numstd.sweep`` metadata of a result table (task, label, fn, worker, placement, seconds, attempt)."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    return json.loads(raw) if raw else {}
