"""Tensor files: safetensors, ``.npy`` and ``.npz`` with every numstd format, bit for bit.

The command line (``check``, ``grade``) reads inputs and outputs from these files; nothing here
ever unpickles (``allow_pickle=False`` throughout; safetensors has no code in it by design).

safetensors (https://github.com/huggingface/safetensors, the format's README: an 8-byte header
length, a JSON header of ``dtype``/``shape``/``data_offsets`` per tensor plus a free
``__metadata__`` map of strings, then raw little-endian bytes):

- float64/32/16, bfloat16, float8_e4m3fn and float8_e5m2 are written with the spec's own dtype
  codes (``F64 F32 F16 BF16 F8_E4M3 F8_E5M2``), so ``safetensors.torch.load_file`` reads them as
  the matching torch dtypes;
- the formats without a code every reader knows (float8_e4m3fnuz, float8_e5m2fnuz) are written
  as raw bytes (``U8``; one trailing axis of ``itemsize`` bytes where that is over 1);
- tf32 is written as ``F32`` (its storage);
- numstd's format name of every floating tensor is stored in ``__metadata__["numstd.formats"]``
  (JSON ``{tensor: format}``), which is how raw bytes and tf32 read back as what they were.

Reading accepts any safetensors file (torch's ``BF16`` and ``F8_*`` included: the bytes are
viewed as the ml_dtypes type, as safetensors' numpy API cannot do for BF16), plus integer and
boolean tensors (class indices of ``cross_entropy``).

``.npy``/``.npz``: ``np.save`` stores an ml_dtypes array as void bytes (``|V2`` for bfloat16,
``|V1`` for some fp8 types; others get a ``<f1`` header numpy cannot read back), exact but
nameless.  :func:`save` writes such an array as its bits (``uint16``/``uint8``) with the format
name beside the data (``X.npy`` gets the text file ``X.npy.format``; an ``.npz`` gets the entry
``__numstd_formats__``, JSON in a unicode array), and :func:`load` views the bits as that format
again (void bytes too).  A void array with no name beside it is refused with a message that says
how to save it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .errors import DtypeError, NumstdError, ParameterError, SchemaError
from .formats import FORMATS, format_of, get_format

__all__ = ["TensorFile", "load", "save", "read_array", "SUFFIXES", "SAFETENSORS_CODES", "FORMATS_KEY"]

#: file suffixes this module reads and writes
SUFFIXES = (".safetensors", ".npy", ".npz")

#: numstd format -> the safetensors dtype code it is written with (the others: raw bytes, U8)
SAFETENSORS_CODES = {"float64": "F64", "float32": "F32", "tf32": "F32", "float16": "F16", "bfloat16": "BF16",
                     "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}

#: the ``__metadata__`` key (safetensors) / array name (``.npz``) holding ``{tensor: format}``
FORMATS_KEY = "numstd.formats"
_NPZ_KEY = "__numstd_formats__"

# safetensors dtype code -> numpy dtype name, for reading (floats through numstd's formats)
_READ_CODES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
               "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
               "F8_E5M2FNUZ": "float8_e5m2fnuz", "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
               "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}

_HOW_TO_SAVE = ("save it with numstd.tensorio.save(path, {'x': array}) (which stores the format name beside "
                "the data), or as .safetensors (safetensors.numpy.save_file / safetensors.torch.save_file)")


@dataclass(frozen=True)
class TensorFile:
    """The tensors of one file, in file order, with numstd's format name of each floating one.

    Attributes
    ----------
    path : the file
    arrays : ``{name: numpy array}`` (ml_dtypes arrays for bfloat16 and fp8; tf32 in float32)
    formats : ``{name: format name}`` for the floating tensors (``"tf32"`` where the file says so)
    metadata : a safetensors file's ``__metadata__`` (strings; empty for ``.npy``/``.npz``)
    """

    path: Path
    arrays: dict[str, np.ndarray]
    formats: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    def array(self, name: str | None = None) -> np.ndarray:
        """The tensor ``name``; without a name, the file's only tensor.

        Raises
        ------
        ParameterError
            For an unknown name, or no name in a file of several tensors (the message lists them).
        """
        names = list(self.arrays)
        if name is None:
            if len(names) == 1:
                return self.arrays[names[0]]
            raise ParameterError(f"{self.path} holds {len(names)} tensors ({', '.join(sorted(names)) or 'none'}): "
                                 f"name one as {self.path}:NAME")
        if name not in self.arrays:
            raise ParameterError(f"{self.path} has no tensor {name!r}; it holds {', '.join(names) or 'none'}")
        return self.arrays[name]


# ------------------------------------------------------------------------------------ writing
def _format_name(name: str, arr: np.ndarray, formats: Mapping[str, str]) -> str | None:
    """numstd's format of a tensor: the declared one (checked against the dtype) or its dtype's."""
    if name in formats:
        fmt = get_format(formats[name])
        if arr.dtype != fmt.dtype:
            raise DtypeError(f"tensor {name!r}: declared format {fmt.name} is stored as {fmt.dtype}, but the array "
                             f"is {arr.dtype}; convert it first (numstd.round_to(x, {fmt.name!r}))")
        return fmt.name
    if arr.dtype.kind in "iub":
        return None
    try:
        return format_of(arr).name
    except DtypeError:
        raise DtypeError(f"tensor {name!r}: dtype {arr.dtype} is neither a numstd format ({', '.join(FORMATS)}) "
                         "nor an integer or boolean type; convert it first") from None


def save(path: str | Path, arrays: Mapping[str, Any] | np.ndarray, formats: Mapping[str, str] | None = None,
         metadata: Mapping[str, str] | None = None) -> Path:
    """Write tensors to ``path`` (``.safetensors``, ``.npy`` or ``.npz``, by its suffix), exactly.

    Parameters
    ----------
    path : destination; ``.npy`` holds one tensor
    arrays : ``{name: array}`` (numpy, ml_dtypes, torch or jax arrays), or one array (named ``"x"``)
    formats : ``{name: format}``, optional
        Format names for tensors whose dtype does not say it (``"tf32"`` for a float32 array of
        tf32 values); the others are found from the dtype.
    metadata : ``{key: text}``, optional
        More entries of a safetensors file's ``__metadata__`` (strings, as the format requires;
        :data:`FORMATS_KEY` is numstd's own).  ``.npy``/``.npz`` have no such map.

    Returns
    -------
    The path written.

    Raises
    ------
    ParameterError
        For an unknown suffix, several tensors for a ``.npy``, or ``metadata`` for a file that is
        not ``.safetensors``, with :data:`FORMATS_KEY` among its keys, or with a value that is
        not a string.
    DtypeError
        For a dtype that is no numstd format, integer or boolean type.
    """
    from .formats import _as_numpy

    p = Path(path)
    if isinstance(arrays, Mapping):
        items = {str(k): _contiguous(_as_numpy(v, str(k))) for k, v in arrays.items()}
    else:
        items = {"x": _contiguous(_as_numpy(arrays, "x"))}
    declared = dict(formats or {})
    unknown = sorted(set(declared) - set(items))
    if unknown:
        raise ParameterError(f"formats names {unknown}, which are not among the tensors {sorted(items)}")
    names = {k: _format_name(k, a, declared) for k, a in items.items()}
    fmts = {k: v for k, v in names.items() if v is not None}
    suffix = p.suffix.lower()
    extra = dict(metadata or {})
    if extra and suffix != ".safetensors":
        raise ParameterError(f"{p}: metadata is kept only by .safetensors files (their __metadata__)")
    if FORMATS_KEY in extra or not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        raise ParameterError(f"metadata must map strings to strings, without numstd's own key {FORMATS_KEY!r}")
    if suffix == ".safetensors":
        _save_safetensors(p, items, fmts, extra)
    elif suffix == ".npy":
        if len(items) != 1:
            raise ParameterError(f"{p}: a .npy file holds one array, got {len(items)}; use .npz or .safetensors")
        (key, arr), = items.items()
        np.save(p, _numpy_storage(arr), allow_pickle=False)
        side = p.with_name(p.name + ".format")
        if key in fmts and fmts[key] not in ("float64", "float32", "float16"):
            side.write_text(fmts[key] + "\n", encoding="utf-8")
        elif side.exists():
            side.unlink()  # (a stale name beside new data would misread it)
    elif suffix == ".npz":
        extra = {_NPZ_KEY: np.array(json.dumps(fmts, sort_keys=True))}
        if _NPZ_KEY in items:
            raise ParameterError(f"{_NPZ_KEY!r} is reserved for the format names; rename that tensor")
        np.savez(p, **{k: _numpy_storage(a) for k, a in items.items()}, **extra)
    else:
        raise ParameterError(f"{p}: unknown suffix {p.suffix!r}; write {', '.join(SUFFIXES)}")
    return p


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` in C order with its own shape (``np.ascontiguousarray`` makes a 0-d array 1-d)."""
    return np.ascontiguousarray(a).reshape(a.shape)


def _numpy_storage(a: np.ndarray) -> np.ndarray:
    """What a .npy/.npz stores: numpy's own dtypes as they are, an ml_dtypes array as its bits
    (unsigned integers of its size: numpy would write ``|V2``, or for some fp8 types a ``<f1``
    header that it cannot read back)."""
    if a.dtype.kind in "iubf" and a.dtype.name in ("float64", "float32", "float16") or a.dtype.kind in "iub":
        return a
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _save_safetensors(p: Path, items: Mapping[str, np.ndarray], fmts: Mapping[str, str],
                      extra: Mapping[str, str]) -> None:
    from safetensors.numpy import save_file

    out = {}
    for k, a in items.items():
        f = fmts.get(k)
        if f is None or f in SAFETENSORS_CODES:
            out[k] = a
        else:  # raw bytes, read back through the format name
            raw = a.reshape(-1).view(np.uint8)
            out[k] = raw.reshape(a.shape if a.dtype.itemsize == 1 else (*a.shape, a.dtype.itemsize))
    save_file(out, str(p), metadata={**extra, FORMATS_KEY: json.dumps(dict(fmts), sort_keys=True)})


# ------------------------------------------------------------------------------------ reading
def _void_message(p: Path, dtype: np.dtype, where: str) -> str:
    return (f"{p}{where}: dtype {dtype.str} is raw bytes with no format name (numpy saves an ml_dtypes bfloat16 "
            f"array as |V2 and an fp8 one as |V1); {_HOW_TO_SAVE}")


def _as_format(arr: np.ndarray, fmt_name: str, p: Path, where: str) -> np.ndarray:
    """View stored bytes (void, unsigned, or the format's own dtype) as the format's dtype."""
    fmt = get_format(fmt_name)
    dt = fmt.dtype
    if arr.dtype == dt:
        return arr
    if arr.dtype.kind in "Vu" and arr.dtype.itemsize == dt.itemsize:
        return arr.view(dt)
    if arr.dtype == np.uint8 and dt.itemsize > 1 and arr.shape[-1:] == (dt.itemsize,):
        return np.ascontiguousarray(arr).view(dt).reshape(arr.shape[:-1])
    raise SchemaError(f"{p}{where}: stored as {arr.dtype} ({arr.shape}), which cannot hold format {fmt.name} "
                      f"({dt}); the file's format names do not match its data")


def _load_safetensors(p: Path) -> TensorFile:
    try:
        from safetensors import deserialize, safe_open
    except ImportError:  # pragma: no cover - a dependency; an environment without it
        raise NumstdError("reading .safetensors needs safetensors: pip install safetensors") from None
    try:
        with safe_open(str(p), framework="np") as f:
            meta = f.metadata() or {}
        flat = deserialize(p.read_bytes())
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for bad files
        raise NumstdError(f"{p}: not a readable safetensors file ({exc})") from None
    try:
        fmts = json.loads(meta.get(FORMATS_KEY, "{}"))
    except json.JSONDecodeError:
        raise SchemaError(f"{p}: __metadata__[{FORMATS_KEY!r}] is not JSON; rewrite it with numstd.tensorio.save") from None
    arrays: dict[str, np.ndarray] = {}
    formats: dict[str, str] = {}
    for name, t in flat:
        code = t["dtype"]
        if code not in _READ_CODES:
            raise DtypeError(f"{p}: tensor {name!r} has safetensors dtype {code}, which numstd does not read; "
                             f"convert it to one of {', '.join(sorted(_READ_CODES))}")
        dname = _READ_CODES[code]
        dt = get_format(dname).dtype if dname in FORMATS else np.dtype(dname)
        data = t["data"] if isinstance(t["data"], bytearray) else bytearray(t["data"])  # (writable, as np.load's)
        arr = np.frombuffer(data, dtype=dt).reshape(t["shape"])  # (little-endian, as the spec)
        where = f" tensor {name!r}"
        if name in fmts:
            arr = _as_format(arr, fmts[name], p, where)
            formats[name] = get_format(fmts[name]).name
        elif arr.dtype.kind not in "iub":
            formats[name] = format_of(arr).name
        arrays[name] = arr
    return TensorFile(p, arrays, formats, dict(meta))


def _load_numpy(p: Path) -> TensorFile:
    try:
        loaded = np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "'<f1'" in str(exc):  # what np.save writes for ml_dtypes' float8_e5m2
            raise DtypeError(f"{p}: its header says dtype '<f1', which np.save writes for an ml_dtypes fp8 "
                             f"(float8_e5m2) array and numpy cannot read back; {_HOW_TO_SAVE}") from None
        raise NumstdError(f"{p}: cannot load without unpickling ({exc}); save plain numeric arrays "
                          f"(np.save of a float or integer array), or {_HOW_TO_SAVE}") from None
    except OSError as exc:
        raise NumstdError(f"{p}: cannot read ({exc})") from None
    if isinstance(loaded, np.ndarray):
        side = p.with_name(p.name + ".format")
        fmts = {"x": side.read_text(encoding="utf-8").strip()} if side.is_file() else {}
        raw = {"x": loaded}
    else:
        with loaded as z:
            try:
                raw = {k: z[k] for k in z.files if k != _NPZ_KEY}
            except ValueError as exc:
                if "'<f1'" in str(exc):
                    raise DtypeError(f"{p}: an array's header says dtype '<f1', which np.savez writes for an "
                                     f"ml_dtypes fp8 (float8_e5m2) array and numpy cannot read back; "
                                     f"{_HOW_TO_SAVE}") from None
                raise NumstdError(f"{p}: cannot load without unpickling ({exc}); {_HOW_TO_SAVE}") from None
            fmts = json.loads(str(z[_NPZ_KEY])) if _NPZ_KEY in z.files else {}
    arrays: dict[str, np.ndarray] = {}
    formats: dict[str, str] = {}
    for name, arr in raw.items():
        where = "" if p.suffix.lower() == ".npy" else f" array {name!r}"
        if name in fmts:
            arr = _as_format(arr, fmts[name], p, where)
            formats[name] = get_format(fmts[name]).name
        elif arr.dtype.kind == "V":
            raise DtypeError(_void_message(p, arr.dtype, where))
        elif arr.dtype.kind not in "iub":
            formats[name] = format_of(arr).name
        arrays[name] = arr
    return TensorFile(p, arrays, formats)


def load(path: str | Path) -> TensorFile:
    """Read a ``.safetensors``, ``.npy`` or ``.npz`` file (by its suffix) without unpickling.

    Raises
    ------
    NumstdError
        For a missing or unreadable file or an unknown suffix; :class:`~numstd.errors.DtypeError`
        for a void (``|V2``) array without its format name, or a dtype numstd does not read.
    """
    p = Path(path)
    if not p.is_file():
        raise NumstdError(f"{p}: no such file; pass a {', '.join(SUFFIXES)} file")
    suffix = p.suffix.lower()
    if suffix == ".safetensors":
        return _load_safetensors(p)
    if suffix in (".npy", ".npz"):
        return _load_numpy(p)
    raise NumstdError(f"{p}: unknown suffix {p.suffix!r}; numstd reads {', '.join(SUFFIXES)}")


def read_array(spec: str | Path) -> np.ndarray:
    """One tensor from ``FILE`` (a file with one tensor) or ``FILE:NAME`` (as the CLI takes them)."""
    text = str(spec)
    path, name = text, None
    if not Path(text).is_file() and ":" in text:
        path, name = text.rsplit(":", 1)
    return load(path).array(name)
