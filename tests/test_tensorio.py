"""Tests of numstd.tensorio: tensor files in every numstd format, exactly.

Independent truth: the bit patterns themselves.  Every 8- and 16-bit pattern of each format is
written and read back and compared as unsigned integers (NaN payloads and -0 included), through
each file kind; files written by other libraries (safetensors' own numpy API, torch) are read as
the values they wrote; malformed files get a numstd error that says how to fix them.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from numstd import tensorio
from numstd.errors import DtypeError, NumstdError, ParameterError, SchemaError
from numstd.formats import FORMATS

pytest.importorskip("safetensors")

SMALL = [f.name for f in FORMATS.values() if f.bits <= 16]  # float16, bfloat16, the four fp8, the four OCP MX types
KINDS = [".safetensors", ".npy", ".npz"]


def _every_pattern(fmt: str) -> np.ndarray:
    dt = FORMATS[fmt].dtype
    bits = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint8 if dt.itemsize == 1 else np.uint16)
    return bits.view(dt)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def test_every_small_format_is_one_of_the_ten():
    assert sorted(SMALL) == sorted(["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                                    "float8_e4m3fnuz", "float8_e5m2fnuz", "float6_e2m3fn", "float6_e3m2fn",
                                    "float4_e2m1fn", "float8_e8m0fnu"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", SMALL)
def test_every_bit_pattern_round_trips(tmp_path, fmt, kind):
    a = _every_pattern(fmt).reshape(-1, 16)  # (2-D: the shape must come back too)
    p = tensorio.save(tmp_path / f"t{kind}", {"x": a})
    f = tensorio.load(p)
    b = f.array()
    assert b.dtype == a.dtype and b.shape == a.shape and b.flags.writeable  # (torch.from_numpy warns otherwise)
    assert np.array_equal(_bits(b), _bits(a))
    assert f.formats == {"x": fmt}


@pytest.mark.parametrize("kind", KINDS)
def test_wide_formats_tf32_and_integers_round_trip(tmp_path, kind):
    rng = np.random.default_rng(7)
    f64 = rng.integers(0, 2**64, 4096, dtype=np.uint64, endpoint=False).view(np.float64)
    f32 = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    tf32 = (rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    idx = rng.integers(-5, 1000, 37, dtype=np.int64)
    if kind == ".npy":
        for arr, fmt in ((f64, None), (f32, None), (tf32, "tf32"), (idx, None)):
            p = tensorio.save(tmp_path / "t.npy", arr, formats={"x": fmt} if fmt else None)
            back = tensorio.load(p)
            assert np.array_equal(_bits(back.array()), _bits(arr))
            assert back.formats.get("x") == (fmt or (None if arr.dtype.kind == "i" else arr.dtype.name))
        return
    p = tensorio.save(tmp_path / f"t{kind}", {"a": f64, "b": f32, "c": tf32, "i": idx}, formats={"c": "tf32"})
    back = tensorio.load(p)
    for k, arr in {"a": f64, "b": f32, "c": tf32, "i": idx}.items():
        assert back.arrays[k].dtype == arr.dtype and np.array_equal(_bits(back.arrays[k]), _bits(arr))
    assert back.formats == {"a": "float64", "b": "float32", "c": "tf32"}


def test_safetensors_uses_the_spec_codes_where_they_exist_and_raw_bytes_elsewhere(tmp_path):
    from safetensors import deserialize

    arrays = {f: _every_pattern(f)[:8] for f in SMALL}
    p = tensorio.save(tmp_path / "t.safetensors", arrays)
    codes = {name: t["dtype"] for name, t in deserialize(p.read_bytes())}
    assert codes == {"float16": "F16", "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
                     "float8_e4m3fnuz": "U8", "float8_e5m2fnuz": "U8", "float6_e2m3fn": "U8",
                     "float6_e3m2fn": "U8", "float4_e2m1fn": "U8", "float8_e8m0fnu": "U8"}
    # the format names are in __metadata__, readable by any safetensors reader
    header_len = int.from_bytes(p.read_bytes()[:8], "little")
    meta = json.loads(p.read_bytes()[8:8 + header_len])["__metadata__"]
    assert json.loads(meta[tensorio.FORMATS_KEY]) == {f: f for f in SMALL}


def test_reads_files_written_by_safetensors_numpy_api(tmp_path):
    from safetensors.numpy import save_file

    bf = _every_pattern("bfloat16")
    save_file({"w": bf, "y": np.arange(6, dtype=np.float32).reshape(2, 3)}, str(tmp_path / "ext.safetensors"))
    f = tensorio.load(tmp_path / "ext.safetensors")
    assert np.array_equal(_bits(f.arrays["w"]), _bits(bf)) and f.formats == {"w": "bfloat16", "y": "float32"}
    assert tensorio.read_array(f"{tmp_path / 'ext.safetensors'}:y").tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ParameterError, match=r"2 tensors \(w, y\).*:NAME"):
        tensorio.read_array(tmp_path / "ext.safetensors")
    with pytest.raises(ParameterError, match="no tensor 'z'"):
        tensorio.read_array(f"{tmp_path / 'ext.safetensors'}:z")


def test_reads_bf16_and_fp8_files_written_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    save_file({"b": bits.view(torch.bfloat16), "e": torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)},
              str(tmp_path / "t.safetensors"))
    f = tensorio.load(tmp_path / "t.safetensors")
    assert np.array_equal(f.arrays["b"].view(np.int16), bits.numpy())
    assert np.array_equal(f.arrays["e"].view(np.uint8), np.arange(256, dtype=np.uint8))
    assert f.formats == {"b": "bfloat16", "e": "float8_e4m3fn"}


def test_a_void_npy_gets_a_message_saying_how_to_save_bf16(tmp_path):
    np.save(tmp_path / "bf.npy", np.ones(4, dtype=ml_dtypes.bfloat16))  # loads back as |V2
    with pytest.raises(DtypeError, match=r"\|V2.*numstd\.tensorio\.save.*safetensors"):
        tensorio.load(tmp_path / "bf.npy")
    np.savez(tmp_path / "e4.npz", x=np.ones(4, dtype=ml_dtypes.float8_e4m3fn))  # |V1
    with pytest.raises(DtypeError, match=r"array 'x'.*\|V1.*numstd\.tensorio\.save"):
        tensorio.load(tmp_path / "e4.npz")
    for suffix, save in ((".npy", np.save), (".npz", np.savez)):  # e5m2: a '<f1' header numpy cannot read
        save(tmp_path / f"e5{suffix}", np.ones(4, dtype=ml_dtypes.float8_e5m2))
        with pytest.raises(DtypeError, match=r"'<f1'.*float8_e5m2.*numstd\.tensorio\.save"):
            tensorio.load(tmp_path / f"e5{suffix}")


def test_never_unpickles_and_refuses_bad_files_clearly(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(NumstdError, match="without unpickling"):
        tensorio.load(tmp_path / "obj.npy")
    (tmp_path / "junk.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}")
    with pytest.raises(NumstdError, match="not a readable safetensors file"):
        tensorio.load(tmp_path / "junk.safetensors")
    with pytest.raises(NumstdError, match="no such file"):
        tensorio.load(tmp_path / "missing.safetensors")
    with pytest.raises(NumstdError, match="unknown suffix"):
        tensorio.load(__file__)
    with pytest.raises(ParameterError, match="unknown suffix"):
        tensorio.save(tmp_path / "t.pt", {"x": np.ones(2)})
    with pytest.raises(ParameterError, match="one array"):
        tensorio.save(tmp_path / "t.npy", {"x": np.ones(2), "y": np.ones(2)})
    with pytest.raises(DtypeError, match="complex"):
        tensorio.save(tmp_path / "t.npz", {"x": np.ones(2, np.complex64)})
    with pytest.raises(DtypeError, match="declared format bfloat16"):
        tensorio.save(tmp_path / "t.npz", {"x": np.ones(2, np.float32)}, formats={"x": "bf16"})


def test_format_names_that_contradict_the_data_are_refused(tmp_path):
    from safetensors.numpy import save_file

    save_file({"x": np.ones(3, np.float32)}, str(tmp_path / "t.safetensors"),
              metadata={tensorio.FORMATS_KEY: json.dumps({"x": "bfloat16"})})
    with pytest.raises(SchemaError, match="cannot hold format bfloat16"):
        tensorio.load(tmp_path / "t.safetensors")


def test_a_stale_format_file_is_removed_when_plain_data_replaces_it(tmp_path):
    p = tmp_path / "t.npy"
    tensorio.save(p, np.ones(3, ml_dtypes.bfloat16))
    assert (tmp_path / "t.npy.format").read_text().strip() == "bfloat16"
    tensorio.save(p, np.ones(3, np.float16))
    assert not (tmp_path / "t.npy.format").exists()
    assert tensorio.load(p).array().dtype == np.float16


def test_cli_check_judges_bf16_outputs_read_from_safetensors_and_npz(tmp_path, capsys):
    # a correctly rounded bf16 softmax (float64 softmax rounded once, RNE) passes NS-SOFTMAX-BF16;
    # the same values truncated (round toward zero: a bias of about -0.5 ulp) fail
    from numstd.cli import main
    from numstd.formats import round_to

    rng = np.random.default_rng(3)
    x = round_to(rng.normal(size=(64, 256)), "bfloat16")
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    ref = e / e.sum(axis=-1, keepdims=True)
    good, trunc = round_to(ref, "bfloat16"), round_to(ref, "bfloat16", mode="rtz")
    tensorio.save(tmp_path / "case.safetensors", {"x": x, "good": good, "trunc": trunc})
    tensorio.save(tmp_path / "x.npz", {"x": x})
    case = str(tmp_path / "case.safetensors")
    assert main(["check", "--op", "softmax", "--inputs", f"{case}:x", "--actual", f"{case}:good"]) == 0
    assert main(["check", "--op", "softmax", "--inputs", str(tmp_path / "x.npz"), "--actual", f"{case}:trunc"]) == 1
    assert "NS-SOFTMAX-BF16" in capsys.readouterr().out
    np.save(tmp_path / "bf.npy", good)  # |V2: refused with how to save it, exit 2
    assert main(["check", "--op", "softmax", "--inputs", f"{case}:x", "--actual", str(tmp_path / "bf.npy")]) == 2
    assert "numstd.tensorio.save" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".safetensors", ".npz", ".npy"])
def test_a_scalar_keeps_its_empty_shape(tmp_path, suffix):
    # (np.ascontiguousarray turns a 0-d array into shape (1,): a scalar loss must come back 0-d)
    x = np.array(1.5, dtype=ml_dtypes.bfloat16)
    back = tensorio.load(tensorio.save(tmp_path / f"s{suffix}", {"x": x})).array("x")
    assert back.shape == () and back.dtype == x.dtype and back.tobytes() == x.tobytes()


def test_safetensors_metadata_is_kept_beside_the_format_names(tmp_path):
    p = tensorio.save(tmp_path / "m.safetensors", {"x": np.zeros(2, np.float32)}, metadata={"origin": "test"})
    header_len = int.from_bytes(p.read_bytes()[:8], "little")
    meta = json.loads(p.read_bytes()[8:8 + header_len])["__metadata__"]
    assert meta["origin"] == "test" and json.loads(meta[tensorio.FORMATS_KEY]) == {"x": "float32"}
    assert tensorio.load(p).metadata == meta
