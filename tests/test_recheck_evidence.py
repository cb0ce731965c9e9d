"""scripts/recheck_evidence.py, the quick re-check of published standards against their evidence: it
reproduces what the evidence files record, and it notices a row that no longer does."""

import copy
import importlib.util
from importlib import resources
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet")

_SPEC = importlib.util.spec_from_file_location("recheck_evidence", Path(__file__).resolve().parents[1] / "scripts" / "recheck_evidence.py")
recheck = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(recheck)


def _rows(key):
    path = resources.files("numstd.reference_data") / "evidence" / f"{key}.evidence.parquet"
    return pq.read_table(str(path)).to_pylist()


@pytest.mark.parametrize("key", ["NS-SOFTMAX-BF16@1", "NS-EXP-FP32@1", "NS-NLLLOSS-BF16-STORED16@2"])
def test_published_evidence_reproduces(key):
    out = recheck.recheck_file(key, f"{key}.evidence.parquet")
    assert out["checked"] >= 5 and out["problems"] == [] and out["missing"] == [], out


def test_a_row_that_no_longer_holds_is_reported():
    """Independent truth: the evidence file as written by calibration; a copy that claims one bug was
    never caught (a verdict: fails the run) and one legitimate variant's errors half what they are (a
    ratio: reported as drift) must be reported."""
    key = "NS-SOFTMAX-BF16@1"
    rows = copy.deepcopy(_rows(key))
    chosen = recheck.select_rows(rows)
    bug = next(r for r in chosen if not r["legit"] and not r["passed"])["variant"]
    legit = next(r for r in chosen if r["legit"] and r["normalized_max"] > 0)["variant"]
    for r in rows:
        if r["variant"] == bug:
            r["passed"] = True
        if r["variant"] == legit:
            r["normalized_max"] = r["normalized_max"] / 2
    out = recheck.recheck_rows(key, rows)
    assert len(out["problems"]) == 1 and f": {bug} on " in out["problems"][0], out  # the verdict claim
    assert any(f": {legit} on " in d for d in out["drift"]), out  # the ratio, reported as drift


def test_selection_is_the_claims():
    rows = _rows("NS-SOFTMAX-BF16@1")
    chosen = recheck.select_rows(rows)
    names = {r["variant"] for r in rows if r["family"] != "backend-excluded" and not r["variant"].startswith("backend:")}
    assert {r["variant"] for r in chosen} == names
    for r in chosen:
        same = [x for x in rows if x["variant"] == r["variant"]]
        if r["legit"]:
            assert r["normalized_max"] == max(x["normalized_max"] for x in same)
        elif any(not x["passed"] for x in same):
            assert not r["passed"]
