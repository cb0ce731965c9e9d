"""calibrate: deterministic drafts, recalibration reproduces shipped constants, evidence moves bounds."""

import dataclasses
import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from numstd.calibrate import calibrate
from numstd.corpus import variants_for
from numstd.formats import round_to
from numstd.registry import get_standard, load_standard


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_command_same_draft_byte_for_byte(tmp_path):
    a = calibrate("softmax", "bfloat16", quick=True, out=tmp_path / "a", date="2026-11-30")
    b = calibrate("softmax", "bfloat16", quick=True, out=tmp_path / "b", date="2026-11-30")
    assert a.ok and b.ok
    assert a.draft_path.read_bytes() == b.draft_path.read_bytes()
    assert _digest(a.evidence_path) == _digest(b.evidence_path)
    d = load_standard(a.draft_path.read_bytes(), str(a.draft_path))
    assert d.status == "draft" and d.provenance["date"] == "2026-11-30"
    assert d.provenance["evidence_sha256"] == _digest(a.evidence_path)


def test_recalibrating_a_shipped_standard_reproduces_its_constant(tmp_path):
    shipped = get_standard("NS-SOFTMAX-FP32")
    res = calibrate(standard=shipped.key, out=tmp_path, date="2026-11-30")
    assert res.ok, res.problems
    assert res.version == shipped.version + 1
    assert res.table["supersedes"] == shipped.key
    c = shipped.model.calibrated
    # same suite, same corpus, same seeds: the same constant (the margin is the stated tolerance)
    assert res.fitted == pytest.approx(shipped.model.constants[c], rel=1 / shipped.model.margin)


def _legit_but_sloppier(op_variant):
    """A legitimate-looking variant with 3× the accumulation error of sequential fp32 summation."""

    def fn(inputs, params, out, acc, seed):
        a = np.asarray(inputs[0], dtype=np.float64)
        b = np.asarray(inputs[1], dtype=np.float64)
        exact = a @ b
        seq = np.asarray(op_variant.fn(inputs, params, out, acc, seed), dtype=np.float64)
        return round_to(exact + 3.0 * (seq - exact), out)

    return dataclasses.replace(op_variant, name="sloppy-3x", description="3x sequential error", fn=fn)


def test_injected_legitimate_variant_widens_the_bound(tmp_path):
    base = calibrate("matmul", "float32", quick=True, date="2026-11-30")
    seq = next(v for v in variants_for("matmul") if v.name == "sequential")
    wide = calibrate("matmul", "float32", quick=True, date="2026-11-30", extra_variants=[_legit_but_sloppier(seq)])
    assert base.ok and wide.ok, wide.problems
    assert wide.fitted > base.fitted * 1.5
    row = [r for r in wide.evidence if r.variant == "sloppy-3x"]
    assert row and all(r.passed for r in row)


def test_injected_undetectable_bug_makes_calibration_refuse(tmp_path):
    seq = next(v for v in variants_for("matmul") if v.name == "sequential")
    fake_bug = dataclasses.replace(seq, name="harmless-bug", legit=False, family="test", observable=None)
    res = calibrate("matmul", "bfloat16", quick=True, date="2026-11-30", out=tmp_path, extra_variants=[fake_bug])
    assert not res.ok
    assert any("harmless-bug" in p and "not separated" in p for p in res.problems)
    assert res.draft_path is None and not list(tmp_path.glob("*.toml"))


def test_every_published_standard_has_headroom_on_its_evidence():
    """Issue: a standard with headroom below 1.5× on its own evidence is not done."""
    import pyarrow.parquet as pq
    from importlib import resources

    from numstd.registry import list_standards

    root = resources.files("numstd.reference_data") / "evidence"
    checked = 0
    for s in list_standards(status="active"):
        if s.op == "module" or not s.model.calibrated:
            continue
        f = root / Path(s.provenance["evidence"]).name  # (reused by a version that only adds a criterion)
        rows = pq.read_table(str(f)).to_pylist()
        assert hashlib.sha256(f.read_bytes()).hexdigest() == s.provenance["evidence_sha256"]
        need = max((r["needed"] for r in rows if r["legit"] and math.isfinite(r["needed"])), default=0.0)
        fitted = s.model.constants[s.model.calibrated]
        assert need == 0 or fitted / need >= 1.5 - 1e-9, s.key
        assert all(r["passed"] for r in rows if r["legit"]), s.key
        bugs = {r["variant"] for r in rows if not r["legit"] and r["family"] != "backend-excluded"}
        for b in bugs:
            assert any(not r["passed"] for r in rows if r["variant"] == b), (s.key, b)
        checked += 1
    assert checked >= 40
