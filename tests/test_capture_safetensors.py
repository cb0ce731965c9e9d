"""Captures exported as safetensors: bit for bit in every numstd format, read back as the capture.

Truth: the capture's own ``output_bits`` (what the backend wrote), compared with the bytes of the
export as the safetensors spec lays them out (an 8-byte little-endian header length, a JSON
header with ``dtype``/``shape``/``data_offsets`` per tensor, then the data), read here by hand;
with the spec's dtype codes written out below (not taken from numstd); and, where torch is
installed, with what ``safetensors.torch`` reads.
"""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest

from numstd.authoring.capture import (
    EXPORT_CASES_KEY, SCHEMA, _table, capture, export_safetensors, read_capture, read_safetensors_export,
    write_capture,
)
from numstd.core.errors import DataIntegrityError, ParameterError, SchemaError
from numstd.core.formats import get_format

#: the spec's dtype codes (safetensors README) for the formats that have one; the others are raw bytes
SPEC_CODE = {"float64": "F64", "float32": "F32", "tf32": "F32", "float16": "F16", "bfloat16": "BF16",
             "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "U8", "float8_e5m2fnuz": "U8"}
ITEMSIZE = {"float64": 8, "float32": 4, "tf32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}


def _synthetic_capture() -> object:
    """A capture with one case per format (every byte value in the data: NaN payloads, −0,
    infinities and subnormals where the format has them), a scalar, an empty output and a case
    whose backend raised."""
    rng = np.random.default_rng(22)
    rows = []
    shapes = {"float64": [3, 5], "float32": [64], "tf32": [4, 4], "float16": [2, 3, 7], "bfloat16": [16, 33],
              "float8_e4m3fn": [256], "float8_e5m2": [16, 16], "float8_e4m3fnuz": [256], "float8_e5m2fnuz": [8, 32]}
    for i, (fmt, shape) in enumerate(shapes.items()):
        n = int(np.prod(shape)) * ITEMSIZE[fmt]
        bits = (np.arange(n) % 256).astype(np.uint8) if ITEMSIZE[fmt] == 1 else rng.integers(0, 256, n, dtype=np.uint8)
        if fmt == "tf32":  # tf32 values: the low 13 mantissa bits of each float32 are zero
            bits = (bits.view("<u4") & np.uint32(0xFFFFE000)).view(np.uint8)
        rows.append((f"op/{fmt}/s{i}", fmt, shape, bits.tobytes(), None))
    rows.append(("op/scalar/s0", "bfloat16", [], bytes([0x80, 0x3F]), None))
    rows.append(("op/empty/s0", "float32", [0, 4], b"", None))
    rows.append(("op/raised/s0", "", [], b"", "RuntimeError: kernel launch failed"))
    cols: dict[str, list] = {k: [] for k in ("case_id", "op", "shape", "distribution", "seed", "params",
                                             "input_formats", "output_format", "output_shape", "output_bits",
                                             "output_sha256", "error")}
    for cid, fmt, shape, bits, err in rows:
        for k, v in (("case_id", cid), ("op", "op"), ("shape", shape), ("distribution", "normal"), ("seed", 0),
                     ("params", "{}"), ("input_formats", [fmt or "float32"]), ("output_format", fmt),
                     ("output_shape", shape), ("output_bits", bits), ("output_sha256", hashlib.sha256(bits).hexdigest()),
                     ("error", err)):
            cols[k].append(v)
    meta = {"schema": SCHEMA, "backend": "synthetic", "device": "cpu", "versions": "test", "flags": {}, "env": {},
            "selector": {}, "numstd_version": "0", "standard": "NS-TEST@0", "standard_sha256": "0" * 64,
            "quick": True, "seeds": [0], "n_cases": len(rows), "date": "2000-01-01T00:00:00+00:00", "host": "h",
            "platform": "p", "python": "3"}
    return _table(cols, meta)


def _same(a, b) -> bool:
    """Two capture tables hold the same rows and metadata (a Parquet round trip renames the list
    item field, which ``Table.equals`` would count)."""
    return a.to_pylist() == b.to_pylist() and a.schema.metadata == b.schema.metadata


def _header(path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def test_every_format_round_trips_bit_for_bit(tmp_path):
    table = _synthetic_capture()
    path = export_safetensors(table, tmp_path / "cap.safetensors")
    back = read_safetensors_export(path)
    assert _same(back, table)  # the capture itself, metadata included
    # the file as the spec lays it out, read by hand
    header, data = _header(path)
    meta = header.pop("__metadata__")
    formats = json.loads(meta["numstd.formats"])
    rows = {r["case_id"]: r for r in table.to_pylist()}
    assert set(header) == {cid for cid, r in rows.items() if r["error"] is None}  # no tensor for the raised case
    for cid, t in header.items():
        r = rows[cid]
        fmt = r["output_format"]
        assert formats[cid] == fmt and t["dtype"] == SPEC_CODE[fmt]
        lo, hi = t["data_offsets"]
        assert data[lo:hi] == r["output_bits"]  # little-endian storage, as the capture's bits
        raw_bytes = SPEC_CODE[fmt] == "U8" and ITEMSIZE[fmt] > 1
        assert t["shape"] == r["output_shape"] + ([ITEMSIZE[fmt]] if raw_bytes else [])
    assert json.loads(meta["numstd.capture"])["standard"] == "NS-TEST@0"
    assert [r["case_id"] for r in json.loads(meta[EXPORT_CASES_KEY])] == list(rows)


def test_bf16_and_fp8_read_by_safetensors_torch_are_the_captured_bits(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    table = _synthetic_capture()
    tensors = load_file(str(export_safetensors(table, tmp_path / "cap.safetensors")))
    rows = {r["case_id"]: r for r in table.to_pylist()}
    want = {"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
            "float32": torch.float32, "float16": torch.float16, "float64": torch.float64}
    for cid, t in tensors.items():
        fmt = rows[cid]["output_format"]
        if fmt in want:
            assert t.dtype == want[fmt] and list(t.shape) == rows[cid]["output_shape"]
            assert t.reshape(-1).view(torch.uint8).numpy().tobytes() == rows[cid]["output_bits"]


def test_a_real_capture_round_trips_through_the_cli(tmp_path, capsys):
    from numstd.cli import main

    pq_path = tmp_path / "softmax.parquet"
    table = capture("NS-SOFTMAX-BF16", "numpy", quick=True)
    write_capture(table, pq_path)
    out = tmp_path / "softmax.safetensors"
    assert main(["export", str(pq_path), "--out", str(out)]) == 0
    assert f"{table.num_rows} tensors" in capsys.readouterr().out
    assert _same(read_safetensors_export(out), read_capture(pq_path))
    from numstd.core import tensorio

    loaded = tensorio.load(out)
    assert set(loaded.formats.values()) == {"bfloat16"}
    r0 = table.slice(0, 1).to_pylist()[0]
    a = loaded.arrays[r0["case_id"]]
    assert a.dtype == get_format("bfloat16").dtype and a.tobytes() == r0["output_bits"]
    # capture --safetensors writes the same export
    both = tmp_path / "relu.safetensors"
    assert main(["capture", "--standard", "NS-RELU-FP32", "--backend", "numpy", "--out", str(tmp_path / "relu.parquet"),
                 "--quick", "--safetensors", str(both)]) == 0
    assert _same(read_safetensors_export(both), read_capture(tmp_path / "relu.parquet"))


def test_altered_or_foreign_files_are_refused(tmp_path):
    from numstd.core import tensorio

    with pytest.raises(ParameterError):
        export_safetensors(_synthetic_capture(), tmp_path / "cap.npz")
    plain = tensorio.save(tmp_path / "plain.safetensors", {"x": np.zeros(3, np.float32)})
    with pytest.raises(SchemaError):
        read_safetensors_export(plain)
    path = export_safetensors(_synthetic_capture(), tmp_path / "cap.safetensors")
    header, data = _header(path)
    lo, _ = header["op/bfloat16/s4"]["data_offsets"]
    raw = bytearray(path.read_bytes())
    raw[len(raw) - len(data) + lo] ^= 1  # one flipped bit of one output
    (tmp_path / "flipped.safetensors").write_bytes(bytes(raw))
    with pytest.raises(DataIntegrityError):
        read_safetensors_export(tmp_path / "flipped.safetensors")
    with pytest.raises(ParameterError):
        tensorio.save(tmp_path / "m.npz", {"x": np.zeros(2)}, metadata={"k": "v"})
    with pytest.raises(ParameterError):
        tensorio.save(tmp_path / "m.safetensors", {"x": np.zeros(2)}, metadata={tensorio.FORMATS_KEY: "{}"})
