"""Golden verdicts: a citation of ``ID@N`` means the same thing in every release.

``reference_data/golden/<ID>@<N>.json`` (written once by ``scripts/make_golden.py``) records cases
and their verdict JSON; every verdict must come out identical today (``diagnosis``, advisory,
and ``numstd_version`` left out; floats to a relative 1e-6, which absorbs the last bit of numpy's
float64 exp on another CPU and nothing a changed criterion does: scripts/make_golden.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "reference_data" / "golden"
_spec = importlib.util.spec_from_file_location("make_golden", ROOT / "scripts" / "make_golden.py")
make_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_golden)
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
FILES = sorted(MANIFEST["files"])


def test_manifest_records_every_golden_file_with_its_sha256():
    on_disk = sorted(p.name for p in GOLDEN.glob("NS-*.json"))
    assert on_disk == FILES
    for name in FILES:
        assert hashlib.sha256((GOLDEN / name).read_bytes()).hexdigest() == MANIFEST["files"][name]["sha256"], name


def test_every_published_standard_has_goldens():
    missing = [s.key for s in make_golden.published() if f"{s.key}.json" not in MANIFEST["files"]]
    assert not missing, f"no golden verdicts for {missing}: run python scripts/make_golden.py"


@pytest.mark.parametrize("name", FILES)
def test_golden_verdicts_are_byte_identical(name):
    doc = json.loads((GOLDEN / name).read_text())
    import numstd

    assert numstd.get_standard(doc["standard"]).sha256 == doc["sha256"]  # the same bytes are cited
    for case in doc["cases"]:
        diff = make_golden.differences(case["verdict"], make_golden.judge(case, doc["standard"]))
        assert not diff, f"{name}: {case['name']}: {diff[:5]}"


def test_golden_comparison_absorbs_a_float64_last_bit_and_nothing_more():
    v = json.loads(json.loads((GOLDEN / FILES[0]).read_text())["cases"][1]["verdict"])
    rec = make_golden.canonical(v)
    u = dict(v["ulp"])
    key = next(k for k, x in u.items() if isinstance(x, float) and x != 0.0)
    assert not make_golden.differences(rec, make_golden.canonical(dict(v, ulp=dict(u, **{key: u[key] * (1 + 1e-10)}))))
    assert make_golden.differences(rec, make_golden.canonical(dict(v, ulp=dict(u, **{key: u[key] * (1 + 1e-4)}))))
    assert make_golden.differences(rec, make_golden.canonical(dict(v, passed=not v["passed"])))
    assert make_golden.differences(rec, make_golden.canonical(dict(v, n_elements=v["n_elements"] + 1)))


def test_golden_comparison_ignores_only_the_advisory_diagnosis_and_the_release():
    v = json.loads(json.loads((GOLDEN / FILES[0]).read_text())["cases"][2]["verdict"])
    with_diag = dict(v, diagnosis={"likely": "anything"}, numstd_version="9.9")
    assert make_golden.canonical(with_diag) == make_golden.canonical(v)
    assert make_golden.canonical(dict(v, passed=not v["passed"])) != make_golden.canonical(v)
