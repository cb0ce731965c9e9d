"""Verdict serialisation round-trips exactly (JSON and Arrow) and refuses unknown schemas."""

import math

import pytest

from numstd.distribution import UlpDistribution
from numstd.errors import SchemaError
from numstd.verdict import CriterionResult, Offender, Verdict


def _verdict():
    return Verdict(
        passed=False, standard_id="NS-SOFTMAX-BF16@1", standard_sha256="ab" * 32, op="softmax", shape=(4, 8),
        formats={"inputs": ["bfloat16"], "accumulate": "float32", "output": "bfloat16", "actual": "bfloat16"},
        params={"axis": 1, "eps": 1e-5, "note": None},
        criteria=(CriterionResult("bound", False, 3.0, 0.0, "3 exceed"), CriterionResult("bias", True, -0.01, math.inf, "ok")),
        ulp=UlpDistribution(32, 7.5, 0.3, -0.01, 0.4, 30, {0.5: 0.25, 0.9: 0.5, 0.99: 2.0, 0.999: 7.5},
                            {"edges": [0.0, 0.5, 1.0, math.inf], "counts": [20, 10, 2]}),
        normalized_max=12.5,
        worst=(Offender((1, 2), 0.5, 0.25, 7.5, 12.5, 0.01), Offender((0, 0), float("nan"), 1.0, float("nan"), math.inf, 0.1)),
        n_elements=32, n_nonfinite=1, message="FAIL …", numstd_version="0.1.0",
    )


def _same(a, b):
    return a.to_json() == b.to_json()


def test_json_round_trip():
    v = _verdict()
    w = Verdict.from_json(v.to_json())
    assert _same(v, w)
    assert w.worst[0].index == (1, 2) and math.isnan(w.worst[1].actual)


def test_arrow_round_trip():
    v = _verdict()
    t = v.to_arrow()
    assert t.num_rows == 1 and t.column("standard_id")[0].as_py() == "NS-SOFTMAX-BF16@1"
    assert _same(v, Verdict.from_arrow(t))


def test_unknown_schema_is_refused():
    d = _verdict().to_dict()
    d["schema"] = "numstd.verdict/99"
    with pytest.raises(SchemaError, match="upgrade"):
        Verdict.from_dict(d)


def test_snippet_names_standard_criterion_and_worst_element():
    s = _verdict().snippet()
    assert s.startswith("NS-SOFTMAX-BF16@1: FAIL — bound criterion")
    assert "[1, 2]" in s
