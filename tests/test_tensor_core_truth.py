"""The tensor-core emulator against real GPU outputs (Khattak & Mikaitis, MATLAB-tensor-core).

Truth: 48 datasets of 5,000 block FMAs measured on V100, A100, A2, Ada, L40S, H100, H200 and B200
(``reference_data/tensor_core/``, converted by ``scripts/convert_tensor_core_truth.py``).  Every
dataset is replayed with one call of ``numstd.emulate.tensor_core_matmul`` and compared bit for
bit; every one must be reproduced on all its rows (docs/emulators.md, match table).  ``PARTIAL``
would list datasets not yet modelled exactly with the rows reproduced (the count may not drop; a
dataset that becomes exact must leave it): empty since the fp8 paths of issue 19.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import numstd.emulate as em
from numstd.emulate import tensor_core_truth as truth

# dataset -> rows reproduced today (of 5,000); none left (all 48 datasets are bit-exact)
PARTIAL: dict[str, int] = {}

_CACHE: dict[str, truth.TruthDataset] = {}


def data(name: str) -> truth.TruthDataset:
    if name not in _CACHE:
        _CACHE[name] = truth.load(name)
    return _CACHE[name]


def test_manifest_describes_the_shipped_files():
    root = truth.data_root()
    man = json.loads((root / "manifest.json").read_text())
    assert man["source"]["repository"].endswith("north-numerical-computing/MATLAB-tensor-core")
    assert len(man["source"]["commit"]) == 40
    assert man["licence"]["spdx"] == "BSD-2-Clause"
    licence = (root / "LICENSE").read_text()
    assert licence == man["licence"]["text"]
    assert "Copyright (c) 2025, Faizan A. Khattak and Mantas Mikaitis" in licence
    assert "Khattak" in man["attribution"] and "Mikaitis" in man["attribution"]
    for f in man["files"]:
        assert hashlib.sha256((root / f["file"]).read_bytes()).hexdigest() == f["sha256"], f
    assert len(man["datasets"]) == 48
    assert all(d["rows"] == 5000 for d in man["datasets"])
    assert man["total_outputs"] == 240_000
    assert set(PARTIAL) <= set(truth.datasets())


@pytest.mark.parametrize("name", [n for n in truth.datasets() if n not in PARTIAL])
def test_replay_is_bit_exact(name):
    ok = truth.replay(data(name))
    assert ok.size == 5000
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{name}: {bad.size} rows differ, first {bad[:5].tolist()}"


def test_partial_datasets_do_not_regress():
    # (one test over the dict, not a parametrization: PARTIAL is empty today)
    for name, rows in PARTIAL.items():
        ok = truth.replay(data(name))
        assert int(ok.sum()) >= rows, name
        assert not ok.all(), f"{name} is now bit-exact: remove it from PARTIAL"


def test_fp16_output_is_fp16_accumulation_not_a_final_conversion():
    # On the GPUs' fp16 -> fp16 datasets the block FMA rounds to fp16 itself: converting the
    # fp32-accumulator result at the end (acc="float32") misses rows the fp16 path reproduces.
    for name in ("V100/fp16/fp16", "H100/fp16/fp16", "B200/fp16/fp16"):
        ds = data(name)
        conv = em.tensor_core_matmul(ds.A, ds.B, arch=ds.arch, c=ds.c, out="float16",
                                     acc="float32")
        conv_ok = np.asarray(conv, dtype=np.float32).reshape(-1).view(np.uint32) == ds.d_bits
        assert truth.replay(ds).all()
        assert not conv_ok.all(), name


@pytest.mark.parametrize("name", ["H100/e4m3/fp16", "B200/e5m2/fp16", "B200/e5m2/fp32"])
def test_fp8_mma_sync_applies_the_register_halves_in_order_then_c(name):
    # The structure of the fitted fp8 mma.sync paths, on the even rows only (the fitting half):
    # positions k mod 4 in {0,1}, then {2,3}, each a block FMA, c added last.  Each alternative
    # -- the halves swapped, contiguous halves, one block of 32, c in the first half -- misses
    # rows that the model reproduces.  With fp32 output (n_eab = 2, RZ) only c's place shows:
    # the four splits of the products agree on every even row of B200/e5m2/fp32.
    from numstd.emulate._terms import ProductTerms
    from numstd.emulate.tensor_core import FP8_REGISTER_HALVES, _round_acc, block_fma
    from numstd.formats import round_to

    ds = data(name)
    path = em.TENSOR_CORES[ds.arch].path("fp8", ds.out)
    terms = ProductTerms(ds.A[0::2], ds.B[0::2])
    prods, sums = terms.terms(0, 32), terms.exponent_sums(0, 32)
    c = round_to(ds.c[0::2].astype(np.float64), ds.out).astype(np.float64).reshape(-1, 1, 1)
    p_acc, emin, emax = {"float32": (24, -126, 127), "float16": (11, -14, 15)}[ds.out]

    def chain(groups, c_first):
        x = c if c_first else np.zeros_like(c)
        for g in groups:
            x = block_fma(x, prods[list(g)], sums[list(g)], path.extra_bits,
                          rounding=path.rounding, min_exp=path.min_exp, acc=ds.out)
        if not c_first:
            x = _round_acc(c + x, p_acc, emin, emax, "rne")
        return int((x.reshape(-1).astype(np.float32).view(np.uint32) == ds.d_bits[0::2]).sum())

    lo, hi = FP8_REGISTER_HALVES
    assert chain((lo, hi), False) == 2500
    others = [((lo, hi), True)]
    if ds.out == "float16":
        others += [((hi, lo), False), ((range(16), range(16, 32)), False), ((range(32),), False)]
    else:
        assert chain((range(32),), False) == 2500
    for groups, c_first in others:
        assert chain(groups, c_first) < 2500, (groups, c_first)


def test_h100_fp8_fp32_kernels_ignore_c():
    # Reading rule of Validate_TC_models.m: the WGMMA fp8 kernels start from d = 0.  Adding the
    # c of the file would change nearly every output.
    ds = data("H100/e4m3/fp32")
    assert not ds.c.any()
    raw = truth.load("H100/e4m3/fp16")  # same inputs and c file, c used by mma.sync
    with_c = em.tensor_core_matmul(ds.A, ds.B, arch="h100", c=raw.c, out="float32")
    assert np.mean(np.asarray(with_c).reshape(-1).view(np.uint32) == ds.d_bits) < 0.01


def test_every_gpu_has_an_architecture():
    assert {truth.arch_of(g) for g in ("V100", "A100", "A2", "Ada", "L40S", "H100", "H200",
                                       "B200")} == {"v100", "a100", "ada", "h100", "b200"}
    with pytest.raises(em.tensor_core.ParameterError):
        truth.arch_of("T4")


def test_validated_formats_are_exactly_the_bit_exact_fp32_datasets():
    # TensorCoreModel.validated (what calibration takes as legitimate evidence) must list an
    # input format iff every fp32-output dataset of that arch and format is bit-exact.
    fmt_of = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "e4m3": "float8_e4m3fn",
              "e5m2": "float8_e5m2"}
    exact: dict[tuple[str, str], bool] = {}
    for name in truth.datasets():
        gpu, fmt, out = name.split("/")
        if out != "fp32":
            continue
        key = (truth.arch_of(gpu), fmt_of[fmt])
        exact[key] = exact.get(key, True) and name not in PARTIAL
    for arch in ("v100", "a100", "ada", "h100", "b200"):
        want = {f for (a, f), ok in exact.items() if a == arch and ok}
        assert set(em.TENSOR_CORES[arch].validated) == want, arch


def test_verify_checks_the_truth_data_by_its_manifest(tmp_path):
    """``numstd verify`` reads the tensor-core manifest's list of files: a flipped byte is reported."""
    import json
    import shutil
    from importlib import resources

    from numstd.catalog.integrity import _manifest_json

    src = Path(str(resources.files("numstd.reference_data"))) / "tensor_core"
    manifest = json.loads((src / "manifest.json").read_text())
    first = manifest["files"][0]["file"]
    shutil.copy(src / "manifest.json", tmp_path / "manifest.json")
    for e in manifest["files"]:
        shutil.copy(src / e["file"], tmp_path / e["file"])
    assert list(_manifest_json(tmp_path, "tc")) == []
    data = bytearray((tmp_path / first).read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / first).write_bytes(bytes(data))
    bad = list(_manifest_json(tmp_path, "tc"))
    assert [m.path for m in bad] == [f"tc/{first}"]
