"""Captures: a standard's suite run on one machine's backend, as exact bits in one Parquet file,
and ``compare``, which judges captures against the reference and against each other.

A capture regenerates the standard's seeded suite (:func:`numstd.suites.cases_for`; the inputs are
bit-identical on every machine), runs every case on a backend and stores, per case, the output's
exact bit pattern — never a pickle — so that captures from a GPU and a Trainium join by case ID.

Schema ``numstd.capture/1`` (one row per case; a change of any column bumps the version):

=================  ================  ==========================================================
column             type              meaning
=================  ================  ==========================================================
case_id            string            :attr:`numstd.suites.Case.id`, e.g. ``softmax/8x1000/large/s0``
op                 string            catalog op
shape              list<int64>       the suite shape (``[M, K, N]`` for matmul)
distribution       string            input distribution (:data:`numstd.suites.DISTRIBUTIONS`)
seed               int64             suite seed
params             string            op parameters, JSON with sorted keys
input_formats      list<string>      the formats the inputs were rounded to
output_format      string            format of the output bits ("" when the backend raised)
output_shape       list<int64>       shape of the output
output_bits        binary            the output, C order, little-endian storage bytes
output_sha256      string            sha256 of ``output_bits``
error              string (null)     the backend's exception, when it raised
=================  ================  ==========================================================

File metadata (key ``numstd.capture``, JSON): ``schema``, ``backend``, ``device``, ``versions``,
``flags`` (TF32, matmul precision, thread count, …), ``env`` (rounding-related environment
variables, e.g. ``NEURON_RT_STOCHASTIC_ROUNDING_EN``), ``selector`` (flag parameters passed to the
backend, e.g. ``allow_tf32``), ``numstd_version``, ``standard`` (``ID@N``; ``ID@0`` is the
uncalibrated template instance of a standard not yet published), ``standard_sha256``, ``quick``,
``seeds``, ``n_cases``, ``date`` (UTC; ``SOURCE_DATE_EPOCH`` when set), ``host``, ``platform``,
``python``.  :func:`read_capture` refuses any file whose columns, types or metadata differ, and any
row whose bits do not match their length or sha256.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .._version import __version__
from ..core.errors import BackendUnavailable, DataIntegrityError, NumstdError, SchemaError, StandardNotFound

__all__ = [
    "SCHEMA", "METADATA_KEY", "capture", "write_capture", "read_capture", "capture_metadata",
    "capture_outputs", "export_safetensors", "read_safetensors_export", "EXPORT_CASES_KEY", "resolve_standard", "compare", "Comparison", "CaptureReport", "PairReport",
    "CaseVerdict", "PairCase",
]

SCHEMA = "numstd.capture/1"
METADATA_KEY = b"numstd.capture"

#: environment variables recorded in every capture (they change rounding or precision)
ENV_VARS: tuple[str, ...] = (
    "NEURON_RT_STOCHASTIC_ROUNDING_EN", "NEURON_RT_STOCHASTIC_ROUNDING_SEED", "NEURON_CC_FLAGS",
    "NKI_PRECISE_FP", "NEURON_PLATFORM_TARGET_OVERRIDE", "XLA_USE_BF16", "XLA_DOWNCAST_BF16",
    "XLA_FLAGS", "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS",
)
_REQUIRED_META = ("schema", "backend", "device", "versions", "flags", "env", "selector", "numstd_version",
                  "standard", "standard_sha256", "quick", "seeds", "n_cases", "date", "host", "platform",
                  "python")


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("case_id", pa.string()), ("op", pa.string()), ("shape", pa.list_(pa.int64())),
        ("distribution", pa.string()), ("seed", pa.int64()), ("params", pa.string()),
        ("input_formats", pa.list_(pa.string())), ("output_format", pa.string()),
        ("output_shape", pa.list_(pa.int64())), ("output_bits", pa.binary()),
        ("output_sha256", pa.string()), ("error", pa.string()),
    ])


# ------------------------------------------------------------------------------ standards
def resolve_standard(key: Any) -> Any:
    """A :class:`~numstd.registry.Standard` for ``key``: a Standard, a published ``ID`` / ``ID@N``,
    or ``ID`` / ``ID@0`` of a standard that exists only as a template instance (not yet calibrated).

    The template instance gets version 0 and status ``draft``; its constants are the template's
    starting values, so verdicts against it are provisional — recompare against the published
    standard (``compare --standard ID@N``); the suite, hence every case ID, is the same.

    Raises
    ------
    StandardNotFound
        When neither the registry nor the templates know ``key``.
    """
    from ..catalog.registry import Standard, get_standard

    if isinstance(key, Standard):
        return key
    text = str(key).strip()
    if not text.endswith("@0"):
        try:
            return get_standard(text)
        except StandardNotFound:
            if "@" in text:
                raise
    from ..catalog.registry import load_standard
    from ..catalog.templates import _ORDER, find_template, to_toml

    tmpl = find_template(text.split("@")[0])  # raises StandardNotFound listing the fix
    table = dict(tmpl.table, version=1, status="draft", provenance={
        "method": "uncalibrated template instance used by numstd.capture (constants are the template's "
                  "starting values); judge again against the published standard"})
    std = load_standard(to_toml({k: table[k] for k in _ORDER if k in table}).encode(), f"{tmpl.id}@1.toml")
    return dataclasses.replace(std, version=0)


# ------------------------------------------------------------------------------ capture
def _le_bytes(arr: np.ndarray) -> bytes:
    arr = np.ascontiguousarray(arr)
    if sys.byteorder == "big" and arr.dtype.itemsize > 1:
        arr = arr.byteswap()
    return arr.tobytes()


def _date() -> str:
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    when = _dt.datetime.fromtimestamp(int(sde), _dt.timezone.utc) if sde else _dt.datetime.now(_dt.timezone.utc)
    return when.replace(microsecond=0).isoformat()


def _json_params(params: Mapping[str, Any]) -> str:
    return json.dumps({k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}, sort_keys=True)


def capture(standard: Any, backend: Any, quick: bool = False, *, seeds: Sequence[int] | None = None,
            progress: Any = None, executor: Any = None, workers: int | None = None, ray_address: str | None = None,
            retries: int = 2, chunk: int = 4, sweep_dir: str | os.PathLike | None = None) -> Any:
    """Run ``standard``'s suite on ``backend`` and return the capture as a ``pyarrow.Table``.

    Parameters
    ----------
    standard : str or Standard
        ``ID@N`` / ``ID`` (see :func:`resolve_standard`).
    backend : str or Backend
        A backend name (``"torch:cuda"``) or object.
    quick : bool
        Only the suite's first shape and first seed (every distribution).
    seeds : sequence of int, optional
        Replace the suite's seeds.
    progress : callable, optional
        ``progress(done, total)`` after each case (each task with an executor).
    executor : {"serial", "local", "ray"} or numstd.executor.Executor, optional
        Run the cases as tasks of ``chunk`` cases (:mod:`numstd.sweep`) — on a local process pool,
        or on the Ray nodes that have the backend's device (``num_gpus`` for CUDA,
        ``neuron_cores`` for Neuron backends).  None: in this process, as one loop.  The table is
        the same either way (the device, versions and flags then come from the workers, which
        must agree).
    workers, ray_address, retries
        See :func:`numstd.sweep.run_sweep`.
    sweep_dir : path, optional
        The tasks' dataset (default: a temporary directory); the same call on the same directory
        resumes.

    Returns
    -------
    pyarrow.Table
        Schema :data:`SCHEMA` with the metadata of the module docstring.  A case on which the
        backend raises is recorded with its ``error`` (and no bits); it fails in :func:`compare`.

    Raises
    ------
    BackendUnavailable
        When the backend cannot run here (with the reason).
    StandardNotFound
    """
    from .. import backends as B
    from ..catalog.suites import cases_for

    std = resolve_standard(standard)
    cases = cases_for(std, quick=quick, seeds=seeds)
    if executor is not None:
        return _capture_sweep(std, B.get(backend).name, cases, quick, progress, executor, workers, ray_address,
                              retries, chunk, sweep_dir)
    be = B.get(backend)
    cols, selector = _capture_cases(std, be, cases, progress)
    meta = dict(_machine(be), selector=selector, numstd_version=__version__, standard=std.key,
                standard_sha256=std.sha256, quick=bool(quick), seeds=sorted({c.seed for c in cases}),
                n_cases=len(cases), date=_date())
    return _table(cols, meta)


def _table(cols: Mapping[str, list], meta: Mapping[str, Any]) -> Any:
    import pyarrow as pa

    table = pa.table(dict(cols), schema=_arrow_schema())
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(dict(meta), sort_keys=True, default=str).encode()})


def _machine(be: Any) -> dict:
    """What identifies the machine and software a capture ran on (part of the metadata)."""
    import platform
    import socket

    return {"schema": SCHEMA, "backend": be.name, "device": be.device(), "versions": be.version(),
            "flags": be.flags(), "env": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
            "host": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version()}


def _capture_cases(std: Any, be: Any, cases: Sequence[Any], progress: Any = None) -> tuple[dict, dict]:
    """Run ``cases`` on ``be``: the capture columns, and the selector flags passed to the backend."""
    from ..core.formats import format_of

    be.require()
    if std.op not in be.ops():
        raise NumstdError(f"backend {be.name!r} does not implement {std.op!r} (it implements "
                          f"{', '.join(sorted(be.ops()))}); capture {std.key} on another backend")
    selector = {k: v for k, v in dict(std.selector).items() if k in be.flag_params}
    cols: dict[str, list] = {name: [] for name in _arrow_schema().names}
    for i, case in enumerate(cases):
        error = None
        bits, fmt_name, out_shape = b"", "", []
        try:
            y = np.asarray(be.run(std.op, list(case.inputs), **dict(case.params), **selector))
            fmt_name = format_of(y).name
            bits, out_shape = _le_bytes(y), list(y.shape)
        except NumstdError as exc:
            if isinstance(exc, BackendUnavailable):
                raise
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # the library raised: record it, go on with the next case
            error = f"{type(exc).__name__}: {exc}"
        cols["case_id"].append(case.id)
        cols["op"].append(case.op)
        cols["shape"].append(list(case.shape))
        cols["distribution"].append(case.distribution)
        cols["seed"].append(int(case.seed))
        cols["params"].append(_json_params(case.params))
        cols["input_formats"].append([a.dtype.name for a in case.inputs if a is not None and a.dtype.kind not in "iu"])
        cols["output_format"].append(fmt_name)
        cols["output_shape"].append(out_shape)
        cols["output_bits"].append(bits)
        cols["output_sha256"].append(hashlib.sha256(bits).hexdigest())
        cols["error"].append(error)
        if progress is not None:
            progress(i + 1, len(cases))
    return cols, selector


_TASK_META = b"numstd.capture.task"


def _capture_task(*, standard: str, sha256: str, backend: str, cases: list, fingerprint: str) -> Any:
    """(Task) run some cases of a capture on this worker's backend; the rows, with the machine in
    the metadata."""
    from .. import backends as B
    from ..catalog.suites import make_case
    from ..sweeps.sweep import require_fingerprint

    require_fingerprint(fingerprint)
    std = resolve_standard(standard)
    if std.sha256 != sha256:
        raise DataIntegrityError(f"{standard} on this worker has sha256 {std.sha256[:12]}…, the driver's has "
                                 f"{sha256[:12]}…: install the same standards on every node")
    be = B.get(backend)
    made = [make_case(std.op, c["shape"], c["distribution"], c["seed"], [f.name for f in std.inputs], c["params"])
            for c in cases]
    cols, selector = _capture_cases(std, be, made)
    meta = dict(_machine(be), selector=selector)
    table = _table(cols, meta)
    return table.replace_schema_metadata({_TASK_META: table.schema.metadata[METADATA_KEY]})


def _capture_sweep(std: Any, backend: str, cases: Sequence[Any], quick: bool, progress: Any, executor: Any,
                   workers: int | None, address: str | None, retries: int, chunk: int,
                   sweep_dir: str | os.PathLike | None) -> Any:
    import tempfile

    import pyarrow as pa

    from ..sweeps.executor import Task, resources_for
    from ..sweeps.sweep import code_fingerprint, read_results, run_sweep, task_id

    if int(chunk) < 1:
        raise NumstdError(f"chunk={chunk}: pass a positive number of cases per task")
    fp = code_fingerprint()
    tasks = []
    for i in range(0, len(cases), int(chunk)):
        part = [{"shape": [int(x) for x in c.shape], "distribution": c.distribution, "seed": int(c.seed),
                 "params": json.loads(_json_params(c.params))} for c in cases[i:i + int(chunk)]]
        key = {"standard": std.key, "sha256": std.sha256, "backend": backend, "cases": part, "fingerprint": fp}
        tasks.append(Task(task_id("capture", key), "numstd.capture:_capture_task",
                          {"standard": std.key, "sha256": std.sha256, "backend": backend, "cases": part, "fingerprint": fp},
                          resources_for(backend), f"{backend} {cases[i].id}" + (f" (+{len(part) - 1})" if len(part) > 1 else "")))
    tmp = tempfile.TemporaryDirectory(prefix="numstd-capture-") if sweep_dir is None else None
    try:
        where = tmp.name if tmp is not None else sweep_dir
        run_sweep(tasks, where, executor, retries=retries, progress=progress, workers=workers,
                  address=address).raise_for_failures()
        parts = read_results(where, tasks)
    finally:
        if tmp is not None:
            tmp.cleanup()
    machines = [json.loads(t.schema.metadata[_TASK_META]) for t in parts]
    same = ("backend", "device", "versions", "flags", "env", "selector", "platform", "python")
    for key in same:
        seen = sorted({json.dumps(m[key], sort_keys=True) for m in machines})
        if len(seen) > 1:
            raise NumstdError(f"the capture's tasks ran on machines that differ in {key} ({', '.join(seen[:3])}): a "
                              "capture is one machine's output; capture on one kind of node at a time")
    meta = {k: machines[0][k] for k in ("schema",) + same}
    meta.update(host=",".join(sorted({m["host"] for m in machines})), numstd_version=__version__,
                standard=std.key, standard_sha256=std.sha256, quick=bool(quick),
                seeds=sorted({c.seed for c in cases}), n_cases=len(cases), date=_date())
    rows = pa.concat_tables([t.replace_schema_metadata(None) for t in parts])
    return _table(rows.to_pydict(), meta)


def write_capture(table: Any, path: str | os.PathLike) -> Path:
    """Write a capture table to ``path`` (Parquet, zstd) after validating it; returns the path."""
    import pyarrow.parquet as pq

    _validate(table, "capture table")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out, compression="zstd", write_statistics=False)
    return out


def read_capture(path: str | os.PathLike) -> Any:
    """Read and validate a capture file; returns the ``pyarrow.Table``.

    Raises
    ------
    SchemaError
        Not Parquet, columns or types other than :data:`SCHEMA`'s, missing or unreadable metadata.
    DataIntegrityError
        A row whose bits do not have the length of its shape and format, or whose sha256 differs.
    """
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise SchemaError(f"{path}: not a readable Parquet capture ({type(exc).__name__}: {exc})") from None
    _validate(table, str(path))
    return table


def _validate(table: Any, where: str) -> None:
    want = _arrow_schema()
    got = table.schema
    if got.names != want.names:
        missing = [n for n in want.names if n not in got.names]
        extra = [n for n in got.names if n not in want.names]
        raise SchemaError(f"{where}: columns differ from {SCHEMA}" + (f"; missing {missing}" if missing else "")
                          + (f"; unexpected {extra}" if extra else "")
                          + ("" if missing or extra else f"; order {got.names} ≠ {want.names}")
                          + ". Write captures with numstd.capture.write_capture.")
    for f in want:
        if not got.field(f.name).type.equals(f.type):
            raise SchemaError(f"{where}: column {f.name} has type {got.field(f.name).type}, {SCHEMA} needs {f.type}")
    meta = capture_metadata(table, where)
    missing = [k for k in _REQUIRED_META if k not in meta]
    if missing:
        raise SchemaError(f"{where}: capture metadata lacks {missing}")
    if meta["schema"] != SCHEMA:
        raise SchemaError(f"{where}: schema {meta['schema']!r}; this numstd reads {SCHEMA}")
    if meta["n_cases"] != table.num_rows:
        raise DataIntegrityError(f"{where}: metadata says {meta['n_cases']} cases, the file holds {table.num_rows}")
    from ..core.formats import get_format

    d = table.select(["case_id", "output_format", "output_shape", "output_bits", "output_sha256", "error"]).to_pydict()
    seen: set[str] = set()
    for cid, fmt, shape, bits, sha, err in zip(*d.values()):
        if cid in seen:
            raise DataIntegrityError(f"{where}: case {cid} appears twice")
        seen.add(cid)
        if hashlib.sha256(bits).hexdigest() != sha:
            raise DataIntegrityError(f"{where}: case {cid}: output bits do not match their sha256 (file altered?)")
        if err is None:
            try:
                itemsize = get_format(fmt).dtype.itemsize
            except NumstdError:
                raise SchemaError(f"{where}: case {cid}: unknown output format {fmt!r}") from None
            if len(bits) != itemsize * math.prod(shape):
                raise DataIntegrityError(f"{where}: case {cid}: {len(bits)} bytes for shape {shape} of {fmt}")


def capture_metadata(table: Any, where: str = "capture") -> dict:
    """The capture's file-level metadata (a dict; see the module docstring)."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise SchemaError(f"{where}: no {METADATA_KEY.decode()} metadata: not a numstd capture")
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{where}: capture metadata is not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise SchemaError(f"{where}: capture metadata must be a JSON object")
    return meta


def capture_outputs(table: Any) -> dict[str, np.ndarray | None]:
    """case ID -> output array (exact bits, its format's dtype), None where the backend raised."""
    from ..core.formats import get_format

    d = table.select(["case_id", "output_format", "output_shape", "output_bits", "error"]).to_pydict()
    out: dict[str, np.ndarray | None] = {}
    for cid, fmt, shape, bits, err in zip(*d.values()):
        if err is not None:
            out[cid] = None
            continue
        arr = np.frombuffer(bits, dtype=get_format(fmt).dtype).reshape(shape)
        out[cid] = arr.byteswap() if sys.byteorder == "big" and arr.dtype.itemsize > 1 else arr
    return out


# ------------------------------------------------------------------------------ safetensors
#: ``__metadata__`` key of an export holding the capture's rows without their bits (JSON list)
EXPORT_CASES_KEY = "numstd.capture.cases"


def export_safetensors(capture_: Any, path: str | os.PathLike) -> Path:
    """Write a capture's outputs as one safetensors file, bit for bit (DESIGN.md: captures stay
    Parquet; this is their export for tools that read tensors).

    One tensor per case that produced an output, named by its case ID, in the case's output
    format, written by :func:`numstd.core.tensorio.save`: float64/32/16, bfloat16 and the OCP fp8
    formats with safetensors' own dtype codes, the fnuz fp8 formats as raw bytes, tf32 as F32,
    and numstd's name of every format in ``__metadata__["numstd.formats"]``.  ``__metadata__``
    also holds the capture's file metadata (``"numstd.capture"``, JSON) and every row without its
    bits (:data:`EXPORT_CASES_KEY`, JSON; cases where the backend raised have their ``error``
    there and no tensor), so that :func:`read_safetensors_export` rebuilds the capture exactly.

    Parameters
    ----------
    capture_ : pyarrow.Table or path
        A capture (:func:`capture`) or its Parquet file (read with :func:`read_capture`).
    path : the ``.safetensors`` file to write

    Returns
    -------
    The path written.

    Raises
    ------
    SchemaError, DataIntegrityError
        For a capture that :func:`read_capture` would refuse.
    ParameterError
        For a path without the ``.safetensors`` suffix.
    """
    from ..core import tensorio
    from ..core.errors import ParameterError

    table = capture_ if hasattr(capture_, "schema") else read_capture(capture_)
    _validate(table, "capture table")
    out = Path(path)
    if out.suffix.lower() != ".safetensors":
        raise ParameterError(f"{out}: the export is a .safetensors file; name it OUT.safetensors")
    outputs = capture_outputs(table)
    rows = table.drop_columns(["output_bits"]).to_pylist()
    arrays = {cid: a for cid, a in outputs.items() if a is not None}
    formats = {r["case_id"]: r["output_format"] for r in rows if r["error"] is None}
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = (table.schema.metadata or {})[METADATA_KEY].decode()
    return tensorio.save(out, arrays, formats=formats,
                         metadata={METADATA_KEY.decode(): meta, EXPORT_CASES_KEY: json.dumps(rows, sort_keys=True)})


def read_safetensors_export(path: str | os.PathLike) -> Any:
    """The capture an :func:`export_safetensors` file holds, as the ``pyarrow.Table`` it was
    (validated as :func:`read_capture` validates a Parquet capture: bits against their sha256).

    Raises
    ------
    SchemaError
        For a safetensors file that is no numstd capture export, or whose tensors and rows differ.
    DataIntegrityError
        For bits that do not match their recorded sha256.
    """
    from ..core import tensorio

    tf = tensorio.load(path)
    try:
        meta = json.loads(tf.metadata[METADATA_KEY.decode()])
        rows = json.loads(tf.metadata[EXPORT_CASES_KEY])
    except (KeyError, ValueError):
        raise SchemaError(f"{path}: no capture metadata ({METADATA_KEY.decode()}, {EXPORT_CASES_KEY}): "
                          "not written by numstd's capture export") from None
    with_bits = {r["case_id"] for r in rows if r["error"] is None}
    if with_bits != set(tf.arrays):
        raise SchemaError(f"{path}: tensors {sorted(set(tf.arrays) ^ with_bits)[:3]} … do not match the rows")
    cols: dict[str, list] = {name: [] for name in _arrow_schema().names}
    for r in rows:
        bits = _le_bytes(tf.arrays[r["case_id"]]) if r["error"] is None else b""
        for name in cols:
            cols[name].append(bits if name == "output_bits" else r[name])
    table = _table(cols, meta)
    _validate(table, str(path))
    return table


# ------------------------------------------------------------------------------ compare
@dataclass
class CaseVerdict:
    """One case of one capture judged against its standard."""

    case_id: str
    passed: bool
    failed: list[str]
    ulp_max: float
    ulp_mean_signed: float
    normalized_max: float
    message: str


@dataclass
class CaptureReport:
    """Verdicts of every case of one capture."""

    label: str
    meta: dict
    standard: str
    verdicts: list[CaseVerdict]
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def n_failed(self) -> int:
        return sum(not v.passed for v in self.verdicts)


@dataclass
class PairCase:
    """ULP distances (:func:`numstd.ulp_distance`, output format) between two captures' outputs of one case."""

    case_id: str
    format: str
    n: int
    equal_fraction: float
    max_abs: float
    mean_abs: float
    q50: float
    q99: float
    nan_mismatch: int


@dataclass
class PairReport:
    """Cross-platform comparison of two captures, joined by case ID."""

    a: str
    b: str
    cases: list[PairCase]
    only_a: list[str]
    only_b: list[str]
    skipped: list[str]


@dataclass
class Comparison:
    """What :func:`compare` found: per-capture verdicts and per-pair ULP distributions."""

    captures: list[CaptureReport]
    pairs: list[PairReport]

    @property
    def passed(self) -> bool:
        """True when every case of every capture passes its standard."""
        return all(c.passed for c in self.captures)

    def to_dict(self) -> dict:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return str(x)
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x

        return clean({"passed": self.passed, "captures": [dataclasses.asdict(c) for c in self.captures],
                      "pairs": [dataclasses.asdict(p) for p in self.pairs]})

    def text(self) -> str:
        lines: list[str] = []
        for c in self.captures:
            m = c.meta
            lines.append(f"{c.label}: {m.get('backend')} on {m.get('device')} ({m.get('versions')}); "
                         f"judged by {c.standard}: {len(c.verdicts) - c.n_failed}/{len(c.verdicts)} cases pass")
            lines += [f"  note: {n}" for n in c.notes]
            for v in c.verdicts:
                if not v.passed:
                    lines.append(f"  FAIL {v.case_id}: {v.message}")
        for p in self.pairs:
            lines.append(f"{p.a} vs {p.b}: {len(p.cases)} cases joined by ID"
                         + (f", {len(p.only_a)} only in the first" if p.only_a else "")
                         + (f", {len(p.only_b)} only in the second" if p.only_b else "")
                         + (f", {len(p.skipped)} skipped" if p.skipped else ""))
            lines.append(f"  {'case':<40} {'format':<9} {'equal':>7} {'max|ulp|':>10} {'mean|ulp|':>10} {'q99':>8}")
            for pc in p.cases:
                lines.append(f"  {pc.case_id:<40} {pc.format:<9} {pc.equal_fraction:>7.1%} {pc.max_abs:>10.4g} "
                             f"{pc.mean_abs:>10.4g} {pc.q99:>8.4g}" + (f"  NaN mismatch {pc.nan_mismatch}" if pc.nan_mismatch else ""))
            lines += [f"  skipped {s}" for s in p.skipped]
        lines.append("PASS: every case conforms" if self.passed else "FAIL: some cases do not conform")
        return "\n".join(lines)


def _judge(std: Any, row: Mapping[str, Any], actual: np.ndarray | None) -> CaseVerdict:
    from ..judge.check import check
    from ..catalog.suites import make_case

    cid = row["case_id"]
    if actual is None:
        return CaseVerdict(cid, False, ["backend"], math.nan, math.nan, math.nan, f"the backend raised: {row['error']}")
    params = json.loads(row["params"])
    case = make_case(row["op"], row["shape"], row["distribution"], row["seed"], [f.name for f in std.inputs], params)
    if case.id != cid:
        return CaseVerdict(cid, False, ["case"], math.nan, math.nan, math.nan,
                           f"the case regenerates as {case.id}, not {cid}: the suite code changed")
    try:
        v = check(actual, op=row["op"], inputs=list(case.inputs), standard=std, **params)
    except Exception as exc:  # could not judge (a missing reference, a bad call): not a pass
        return CaseVerdict(cid, False, ["judge"], math.nan, math.nan, math.nan,
                           f"not judged: {type(exc).__name__}: {exc}")
    failed = [c.name for c in v.criteria if not c.passed]
    return CaseVerdict(cid, v.passed, failed, float(v.ulp.max), float(v.ulp.mean_signed),
                       float(v.normalized_max), v.message)


def _pair(la: str, ta: Any, lb: str, tb: Any) -> PairReport:
    from ..core.ulp import ulp_distance

    oa, ob = capture_outputs(ta), capture_outputs(tb)
    fa = dict(zip(ta.column("case_id").to_pylist(), ta.column("output_format").to_pylist()))
    fb = dict(zip(tb.column("case_id").to_pylist(), tb.column("output_format").to_pylist()))
    common = [c for c in oa if c in ob]
    cases, skipped = [], []
    for cid in common:
        a, b = oa[cid], ob[cid]
        if a is None or b is None:
            skipped.append(f"{cid}: a backend raised")
            continue
        if fa[cid] != fb[cid] or a.shape != b.shape:
            skipped.append(f"{cid}: outputs differ in format/shape ({fa[cid]} {a.shape} vs {fb[cid]} {b.shape})")
            continue
        d = np.asarray(ulp_distance(a, b, fa[cid]), dtype=np.float64).reshape(-1)
        nan = int(np.isnan(d).sum())
        ad = np.abs(d[~np.isnan(d)])
        if ad.size:
            q50, q99 = (float(x) for x in np.quantile(ad, [0.5, 0.99]))
            cases.append(PairCase(cid, fa[cid], int(d.size), float(np.mean(ad == 0)), float(ad.max()),
                                  float(ad.mean()), q50, q99, nan))
        else:
            cases.append(PairCase(cid, fa[cid], int(d.size), 1.0 if not nan else 0.0, 0.0, 0.0, 0.0, 0.0, nan))
    return PairReport(la, lb, cases, [c for c in oa if c not in ob], [c for c in ob if c not in oa], skipped)


def compare(captures: Sequence[Any], *, standard: Any = None, labels: Sequence[str] | None = None) -> Comparison:
    """Judge each capture against its standard and compare every pair of captures by case ID.

    Parameters
    ----------
    captures : sequence of paths or pyarrow.Table
        Capture files (validated by :func:`read_capture`) or tables from :func:`capture`.
    standard : str or Standard, optional
        Judge every capture against this standard instead of the one each capture names (e.g. the
        published version of a standard captured as a template, ``ID@0``); its op must match.
    labels : sequence of str, optional
        Names in the report (default: the file names, or ``capture[i]``).

    Returns
    -------
    Comparison
        ``passed`` is False when any case of any capture fails (or could not be run or judged).
    """
    tables, names = [], []
    for i, cap in enumerate(captures):
        if isinstance(cap, (str, os.PathLike)):
            tables.append(read_capture(cap))
            names.append(Path(cap).name)
        else:
            _validate(cap, f"capture[{i}]")
            tables.append(cap)
            names.append(f"capture[{i}]")
    if labels is not None:
        names = list(labels)
    override = resolve_standard(standard) if standard is not None else None
    reports = []
    for name, table in zip(names, tables):
        meta = capture_metadata(table, name)
        notes = []
        std = override or resolve_standard(meta["standard"])
        if override is None and std.sha256 != meta["standard_sha256"]:
            notes.append(f"{std.key} now has sha256 {std.sha256[:12]}…, the capture was made against "
                         f"{meta['standard_sha256'][:12]}… (a template changed since?)")
        ops = set(table.column("op").to_pylist())
        if ops - {std.op}:
            raise NumstdError(f"{name}: holds {sorted(ops)} cases; {std.key} is a standard for {std.op}")
        outputs = capture_outputs(table)
        verdicts = [_judge(std, row, outputs[row["case_id"]]) for row in table.drop(["output_bits"]).to_pylist()]
        reports.append(CaptureReport(name, meta, std.key, verdicts, notes))
    pairs = [_pair(names[i], tables[i], names[j], tables[j])
             for i in range(len(tables)) for j in range(i + 1, len(tables))]
    return Comparison(reports, pairs)
