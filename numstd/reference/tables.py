"""Shipped exhaustive reference tables: which exist, and loading them with integrity checks.

For each elementwise function of :data:`TABLE_FUNCTIONS` and each 8- and 16-bit format of
:data:`TABLE_FORMATS`, ``reference_data/tables/<key>.<format>.parquet`` holds one row per input
bit pattern (row ``i`` is pattern ``i``):

========  =====================================================================
column    meaning
========  =====================================================================
``x``     the input bit pattern (uint8 / uint16)
``y``     the bits of the correctly rounded result (round to nearest, ties to even; overflow to
          ±inf, or NaN in formats without infinities, as :func:`numstd.formats.round_to`)
``exact`` the float64 nearest the exact result (a ULP error measured against it is exact up to
          one float64 rounding: ``|exact - f(x)| <= 2^-53 |f(x)|``)
========  =====================================================================

Both are computed by ``scripts/make_tables.py`` with mpmath in a Ziv loop (the precision is
raised until the rounding decision is certain in the table's format and in float64); the bits are
kept besides ``exact`` because rounding ``exact`` again could round twice where ``exact`` itself
lands on a midpoint.  ``manifest.json`` records each file's sha256, row count, generator and
mpmath versions, the precision used and the hardest rows.  :func:`load_table` reads a file's bytes
once, checks their sha256 against the manifest (a mismatch raises
:class:`~numstd.errors.DataIntegrityError`), parses them as Parquet (never unpickling) and caches
the result per process, thread-safely.

``hardcases_float32.json`` lists, per function, float32 inputs whose exact result is closest to a
float32 rounding midpoint (:func:`load_hardcases`); float32 surveys always include them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.errors import DataIntegrityError, ParameterError, SchemaError
from ..core.formats import Format, get_format

__all__ = [
    "SCHEMA",
    "MANIFEST",
    "HARDCASES_FILE",
    "TABLE_FUNCTIONS",
    "TABLE_FORMATS",
    "Table",
    "table_key",
    "table_filename",
    "tables_root",
    "read_manifest",
    "load_table",
    "load_hardcases",
]

SCHEMA = "numstd.tables/1"
MANIFEST = "manifest.json"
HARDCASES_FILE = "hardcases_float32.json"

#: table key -> (op, op parameters): the functions that have exhaustive tables
TABLE_FUNCTIONS: Mapping[str, tuple[str, Mapping[str, str]]] = types.MappingProxyType({
    "exp": ("exp", {}),
    "log": ("log", {}),
    "tanh": ("tanh", {}),
    "sigmoid": ("sigmoid", {}),
    "erf": ("erf", {}),
    "gelu-none": ("gelu", {"approximate": "none"}),
    "gelu-tanh": ("gelu", {"approximate": "tanh"}),
    "silu": ("silu", {}),
    "rsqrt": ("rsqrt", {}),
    "sqrt": ("sqrt", {}),
})

#: formats with exhaustive tables (every bit pattern)
TABLE_FORMATS: tuple[str, ...] = (
    "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
)

_LOCK = threading.Lock()
_CACHE: dict[tuple[str, str], "Table"] = {}
_HARD_CACHE: dict[str, Mapping[str, np.ndarray]] = {}


@dataclass(frozen=True)
class Table:
    """One verified exhaustive table (arrays are read-only).

    Attributes
    ----------
    key : str
        Table key (``"gelu-tanh"``), see :data:`TABLE_FUNCTIONS`.
    op : str
    params : mapping
    format : Format
    x_bits, y_bits : numpy.ndarray of uint8/uint16
        Input patterns (``arange(2**bits)``) and the correctly rounded results' patterns.
    exact : numpy.ndarray of float64
        The float64 nearest each exact result.
    sha256 : str
        The verified file hash.
    entry : mapping
        The file's manifest entry (precision used, hardest rows, …).
    """

    key: str
    op: str
    params: Mapping[str, Any]
    format: Format
    x_bits: np.ndarray
    y_bits: np.ndarray
    exact: np.ndarray
    sha256: str
    entry: Mapping[str, Any]

    @property
    def inputs(self) -> np.ndarray:
        """The inputs as values of the format (a view of :attr:`x_bits`)."""
        return self.x_bits.view(self.format.dtype)

    @property
    def outputs(self) -> np.ndarray:
        """The correctly rounded results as values of the format (a view of :attr:`y_bits`)."""
        return self.y_bits.view(self.format.dtype)


def table_key(op: str, **params: Any) -> str:
    """The table key of ``op`` with ``params`` (``gelu`` with ``approximate="tanh"`` -> ``"gelu-tanh"``).

    Raises
    ------
    UnknownOpError
        ``op`` is not in the catalog.
    ParameterError
        Unknown parameters, or an op without shipped tables (the message lists those that have).
    """
    from ..ops.catalog import get_op

    spec = get_op(op)
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise ParameterError(f"{spec.name}: unknown parameter(s) {', '.join(unknown)}; "
                             f"{spec.name} accepts: {', '.join(spec.params) or 'none'}")
    full = {k: params.get(k, d) for k, d in spec.params.items()}
    for key, (t_op, t_params) in TABLE_FUNCTIONS.items():
        if t_op == spec.name and dict(t_params) == full:
            return key
    have = ", ".join(f"{o}{'(' + ', '.join(f'{k}={v!r}' for k, v in p.items()) + ')' if p else ''}"
                     for o, p in TABLE_FUNCTIONS.values())
    raise ParameterError(f"no shipped exhaustive table for {spec.name} with {full or 'no parameters'}; "
                         f"tables exist for: {have}")


def table_filename(key: str, fmt: Any) -> str:
    """File name of a table: ``<key>.<format>.parquet``."""
    return f"{key}.{get_format(fmt).name}.parquet"


def tables_root() -> Any:
    """The shipped tables directory (an importlib.resources Traversable)."""
    from importlib import resources

    return resources.files("numstd.reference_data") / "tables"


def _root(root: Any) -> Any:
    return tables_root() if root is None else Path(root)


def _read(root: Any, name: str) -> bytes:
    try:
        return (root / name).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise DataIntegrityError(
            f"{name} is missing from {root}; the installation is incomplete: reinstall numstd, or "
            "regenerate the tables with `python scripts/make_tables.py`"
        ) from None


def read_manifest(root: Any = None) -> dict:
    """The tables' ``manifest.json`` as a dict.

    Raises
    ------
    DataIntegrityError
        Missing file; SchemaError for a manifest of another schema.
    """
    r = _root(root)
    data = json.loads(_read(r, MANIFEST))
    if data.get("schema") != SCHEMA or not isinstance(data.get("files"), dict):
        raise SchemaError(f"{r / MANIFEST}: expected schema {SCHEMA!r} with a 'files' object, "
                          f"got schema {data.get('schema')!r}")
    return data


def _verified_bytes(root: Any, name: str) -> tuple[bytes, str, Mapping[str, Any]]:
    """The bytes of ``name``, checked against its manifest entry's sha256."""
    manifest = read_manifest(root)
    entry = manifest["files"].get(name)
    if entry is None:
        raise DataIntegrityError(f"{name} is not listed in {root / MANIFEST}; regenerate the tables "
                                 "with `python scripts/make_tables.py`")
    data = _read(root, name)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.get("sha256"):
        raise DataIntegrityError(
            f"{root / name}: sha256 {digest} does not match the manifest's {entry.get('sha256')}; "
            "the shipped file was modified or corrupted: reinstall numstd, or regenerate it with "
            "`python scripts/make_tables.py`"
        )
    return data, digest, entry


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def _parse(data: bytes, name: str, f: Format, entry: Mapping[str, Any]) -> tuple[np.ndarray, ...]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(pa.BufferReader(data))
    uint = np.dtype(f"uint{8 * f.dtype.itemsize}")
    n = 1 << f.bits
    try:
        x = table.column("x").to_numpy()
        y = table.column("y").to_numpy()
        exact = table.column("exact").to_numpy()
    except KeyError as exc:
        raise SchemaError(f"{name}: missing column ({exc}); expected x, y, exact") from None
    if (x.dtype, y.dtype, exact.dtype) != (uint, uint, np.dtype(np.float64)) or x.size != n \
            or entry.get("rows") != n or not np.array_equal(x, np.arange(n, dtype=uint)):
        raise SchemaError(f"{name}: expected {n} rows of x, y ({uint}) and exact (float64) with row i "
                          f"holding pattern i; got {x.size} rows of {x.dtype}, {y.dtype}, {exact.dtype}")
    return _readonly(x), _readonly(y), _readonly(exact)


def load_table(op: str, fmt: Any, *, root: Any = None, **params: Any) -> Table:
    """Load (once per process) and verify the exhaustive table of ``op`` in ``fmt``.

    Parameters
    ----------
    op : str
        An op of :data:`TABLE_FUNCTIONS` (``"erf"``, ``"gelu"``, …).
    fmt : format-like
        One of :data:`TABLE_FORMATS`.
    root : path, optional
        A tables directory other than the shipped one (holding ``manifest.json``).
    **params
        Op parameters (``approximate="tanh"`` for gelu).

    Returns
    -------
    Table

    Raises
    ------
    DataIntegrityError
        The file's sha256 differs from the manifest, or the file is missing.
    SchemaError
        The file parses but does not hold the documented columns.
    ParameterError, UnknownOpError, FormatError
        No table for this op / parameters / format.
    """
    key = table_key(op, **params)
    f = get_format(fmt)
    if f.name not in TABLE_FORMATS:
        raise ParameterError(f"no exhaustive table for format {f.name}; tables cover "
                             f"{', '.join(TABLE_FORMATS)} (wider formats are surveyed by sampling)")
    r = _root(root)
    cache_key = (str(r), f"{key}.{f.name}")
    with _LOCK:
        hit = _CACHE.get(cache_key)
        if hit is not None:
            return hit
        name = table_filename(key, f)
        data, digest, entry = _verified_bytes(r, name)
        x, y, exact = _parse(data, name, f, entry)
        op_name, t_params = TABLE_FUNCTIONS[key]
        table = Table(key=key, op=op_name, params=types.MappingProxyType(dict(t_params)), format=f,
                      x_bits=x, y_bits=y, exact=exact, sha256=digest,
                      entry=types.MappingProxyType(dict(entry)))
        _CACHE[cache_key] = table
        return table


def load_hardcases(op: str, *, root: Any = None, **params: Any) -> np.ndarray:
    """float32 inputs of ``op`` whose exact result is closest to a float32 rounding midpoint.

    Returns
    -------
    numpy.ndarray of float32 (read-only), from the verified ``hardcases_float32.json``.

    Raises
    ------
    DataIntegrityError
        The file's sha256 differs from the manifest, or it is missing.
    """
    key = table_key(op, **params)
    r = _root(root)
    with _LOCK:
        cases = _HARD_CACHE.get(str(r))
        if cases is None:
            data, _, _ = _verified_bytes(r, HARDCASES_FILE)
            doc = json.loads(data)
            try:
                cases = types.MappingProxyType({
                    k: _readonly(np.array([int(c["x"], 16) for c in v], dtype=np.uint32).view(np.float32))
                    for k, v in doc["functions"].items()})
            except (KeyError, TypeError, ValueError) as exc:
                raise SchemaError(f"{HARDCASES_FILE}: expected functions -> list of {{'x': '0x…'}} ({exc})") from None
            _HARD_CACHE[str(r)] = cases
    return cases.get(key, _readonly(np.zeros(0, dtype=np.float32)))
