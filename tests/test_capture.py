"""Captures: capture → write → read → compare across two backends, exact bits, metadata, refusal of
altered files, failing and raising backends, and the ``capture`` / ``compare`` commands.

Captures cite the published standard (``ID@N``); template instances (``ID@0``) still resolve, so
captures can be taken before a standard is published; the suite and case IDs are the same.  Truth: the backend's own output, compared bit for bit with what the file
returns; for the cross-capture statistics, direct comparison of the two bit patterns.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numstd import backends as B
from numstd.capture import (
    SCHEMA, capture, capture_metadata, capture_outputs, compare, read_capture, resolve_standard, write_capture,
)
from numstd.errors import BackendUnavailable, DataIntegrityError, SchemaError, StandardNotFound

STANDARD = "NS-SOFTMAX-BF16"


def _second_backend() -> str:
    return "torch:cpu" if B.get("torch:cpu").available()[0] else "numpy"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("captures")
    a = write_capture(capture(STANDARD, "numpy", quick=True), d / "numpy.parquet")
    b = write_capture(capture(STANDARD, _second_backend(), quick=True), d / "second.parquet")
    return a, b


def test_capture_holds_exact_bits_and_metadata(files):
    table = read_capture(files[0])
    meta = capture_metadata(table)
    std = resolve_standard(STANDARD)
    assert meta["schema"] == SCHEMA and meta["backend"] == "numpy"
    assert meta["standard"] == std.key and meta["standard_sha256"] == std.sha256
    assert meta["numstd_version"] and meta["date"] and meta["host"] and "numpy" in meta["versions"]
    assert meta["device"].startswith("cpu") and isinstance(meta["flags"], dict) and meta["quick"] is True
    from numstd.suites import cases_for

    cases = cases_for(std, quick=True)
    assert table.column("case_id").to_pylist() == [c.id for c in cases] and meta["n_cases"] == len(cases)
    outputs = capture_outputs(table)
    for case in cases[:3]:  # the file returns the backend's output bit for bit
        direct = B.get("numpy").run(std.op, list(case.inputs), **case.params)
        got = outputs[case.id]
        assert got.dtype == direct.dtype and np.array_equal(got.view(np.uint16), direct.view(np.uint16))
    row = table.slice(0, 1).to_pylist()[0]
    assert row["output_sha256"] == hashlib.sha256(row["output_bits"]).hexdigest() and row["error"] is None
    assert json.loads(row["params"]) == {"axis": -1} and row["input_formats"] == ["bfloat16"]


def _n_quick_cases(standard=STANDARD):
    """Cases of the standard's quick suite: one shape × every distribution × one seed."""
    from numstd.suites import cases_for

    return len(cases_for(resolve_standard(standard), quick=True))


def test_compare_round_trip_across_backends(files):
    result = compare(list(files))
    assert result.passed, result.text()
    n = _n_quick_cases()
    assert [len(c.verdicts) for c in result.captures] == [n, n]
    assert all(v.passed and v.ulp_max <= 1 for c in result.captures for v in c.verdicts)
    (pair,) = result.pairs
    assert len(pair.cases) == _n_quick_cases() and not pair.only_a and not pair.only_b and not pair.skipped
    oa, ob = (capture_outputs(read_capture(f)) for f in files)
    for pc in pair.cases:  # the ULP statistics agree with the raw bit patterns
        same = oa[pc.case_id].view(np.uint16) == ob[pc.case_id].view(np.uint16)
        assert pc.equal_fraction == pytest.approx(float(same.mean()))
        assert (pc.max_abs == 0) == bool(same.all()) and pc.n == same.size and pc.format == "bfloat16"
    doc = result.to_dict()
    json.dumps(doc)  # JSON-ready
    assert doc["passed"] and doc["pairs"][0]["cases"][0]["case_id"].startswith("softmax/")


def _rewrite(dst, table):
    pq.write_table(table, dst)
    return dst


def test_altered_files_are_refused(files, tmp_path):
    table = pq.read_table(files[0])
    with pytest.raises(SchemaError, match="unexpected"):
        read_capture(_rewrite(tmp_path / "extra.parquet", table.append_column("x", pa.array([0] * table.num_rows))))
    with pytest.raises(SchemaError, match="missing"):
        read_capture(_rewrite(tmp_path / "drop.parquet", table.drop(["output_sha256"])))
    with pytest.raises(SchemaError, match="metadata"):
        read_capture(_rewrite(tmp_path / "meta.parquet", table.replace_schema_metadata(None)))
    seed32 = table.set_column(table.schema.get_field_index("seed"), "seed", table.column("seed").cast(pa.int32()))
    with pytest.raises(SchemaError, match="seed"):
        read_capture(_rewrite(tmp_path / "type.parquet", seed32))
    bits = table.column("output_bits").to_pylist()
    bits[0] = bytes([bits[0][0] ^ 1]) + bits[0][1:]
    flipped = table.set_column(table.schema.get_field_index("output_bits"), "output_bits", pa.array(bits, pa.binary()))
    with pytest.raises(DataIntegrityError, match="sha256"):
        read_capture(_rewrite(tmp_path / "bits.parquet", flipped))
    (tmp_path / "not.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(SchemaError, match="Parquet"):
        read_capture(tmp_path / "not.parquet")


class _Zeros(B.Backend):
    """A broken softmax: returns zeros (passes fixed-tolerance checks on small outputs)."""

    name = "zeros"

    def _probe(self):
        return True, ""

    def _compute(self, op, arrays, params, flags):
        return np.zeros_like(arrays[0])


class _Raises(_Zeros):
    name = "raises"

    def _compute(self, op, arrays, params, flags):
        raise RuntimeError("kernel launch failed")


def test_failing_and_raising_backends_fail_compare(files, tmp_path):
    from numstd.cli import main

    bad = write_capture(capture(STANDARD, _Zeros(), quick=True), tmp_path / "zeros.parquet")
    result = compare([files[0], bad])
    assert not result.passed and result.captures[0].passed and result.captures[1].n_failed == _n_quick_cases()
    assert all("FAIL" in v.message for v in result.captures[1].verdicts)
    assert main(["compare", str(files[0]), str(bad)]) == 1
    raised = capture(STANDARD, _Raises(), quick=True)
    assert all(e.startswith("RuntimeError: kernel launch failed") for e in raised.column("error").to_pylist())
    r = compare([raised])
    assert not r.passed and all(v.failed == ["backend"] for v in r.captures[0].verdicts)


def test_cli_capture_and_compare(tmp_path, capsys):
    from numstd.cli import main

    out = tmp_path / "relu.parquet"
    assert main(["capture", "--standard", "NS-RELU-FP32", "--backend", "numpy", "--out", str(out), "--quick"]) == 0
    assert "NS-RELU-FP32@1" in capsys.readouterr().out
    assert main(["compare", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] and len(doc["captures"][0]["verdicts"]) == _n_quick_cases("NS-RELU-FP32")
    # a standard for another op cannot judge it; an unavailable backend cannot capture
    assert main(["compare", str(out), "--standard", "NS-EXP-FP32"]) == 2
    unavailable = next((b.name for b in B.all_backends() if not b.available()[0]), None)
    if unavailable:
        assert main(["capture", "--standard", "NS-RELU-FP32", "--backend", unavailable, "--out",
                     str(tmp_path / "x.parquet")]) == 2
        with pytest.raises(BackendUnavailable):
            capture("NS-RELU-FP32", unavailable)


def test_resolve_standard():
    std = resolve_standard("NS-MATMUL-FP32-TF32@0")
    assert std.version == 0 and std.op == "matmul" and dict(std.selector) == {"allow_tf32": True}
    assert resolve_standard(std) is std
    with pytest.raises(StandardNotFound):
        resolve_standard("NS-NOPE-FP32")


def test_gpu_capture_script_runs_on_the_cpu(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "gpu_capture.py"
    spec = importlib.util.spec_from_file_location("gpu_capture", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rc = script.main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--backends", "numpy", _second_backend(),
                      "--standards", "NS-MATMUL-FP32-TF32", "NS-SOFTMAX-BF16"])
    assert rc == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    kinds = [f["kind"] for f in manifest["files"]]
    assert kinds.count("capture") == 4
    for f in manifest["files"]:  # every file is listed with its sha256, and captures read back
        data = (tmp_path / f["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["bytes"]
        if f["kind"] == "capture":
            meta = capture_metadata(read_capture(tmp_path / f["path"]))
            assert meta["standard"] == f["standard"]
    tf32 = [f for f in manifest["files"] if str(f.get("standard", "")).startswith("NS-MATMUL-FP32-TF32@")]
    assert tf32 and all(f["selector"] == {"allow_tf32": True} for f in tf32)
    if "torch" in manifest["environment"] and manifest["environment"]["torch"]:
        assert "tensor_core" in kinds and manifest["tensor_core"]["summary"]["bfloat16/same"]
