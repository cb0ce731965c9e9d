"""Every published standard on fresh inputs (seed 77, never used by calibration), judged by the public
``numstd.check``: every legitimate corpus variant passes on every case of the suite's first shape,
every bug fails on a case of the first two shapes where it can show.

Independent truth: the corpus variants are implementations written against the op's definition
(accumulation orders, hardware models, realistic bugs), and the verdicts come from the float64
reference; calibration saw other seeds.
"""

from pathlib import Path

import numpy as np
import pytest

import numstd
from numstd.corpus import variants_for
from numstd.ops import validate
from numstd.registry import list_standards
from numstd.suites import cases_for

SEED = 77
_ACTIVE = [s for s in list_standards(status="active") if s.op != "module"]
# the newest version of each ID: an older version's meaning is pinned by its golden verdicts
# (tests/test_golden.py) and was tested on fresh inputs when it was the newest
STANDARDS = [s for s in _ACTIVE if s.version == max(x.version for x in _ACTIVE if x.id == s.id)]


def _third_party(v):
    return v.family == "library" or v.name.startswith("backend:")


@pytest.mark.parametrize("std", STANDARDS, ids=[s.key for s in STANDARDS])
def test_legitimate_variants_pass_and_bugs_fail(std):
    from importlib import resources

    import pyarrow.parquet as pq

    # libraries the calibration reported as non-conforming (e.g. torch's bf16 erf) are not evidence
    # (the file the standard cites: a version that only adds a criterion reuses the previous one's)
    ev = pq.read_table(str(resources.files("numstd.reference_data") / "evidence" / Path(std.provenance["evidence"]).name))
    excluded = {r["variant"] for r in ev.to_pylist() if r["family"] == "backend-excluded"}
    cases = cases_for(std, seeds=[SEED])
    shapes = [tuple(s) for s in std.suite.get("shapes", [])]
    # legitimate variants on every case of the suite's first shape; each bug until a case catches
    # it, on the first shape, then the second and so on (every variant on every case of two shapes was
    # half of the CI's time; a bug that shows only on a later shape, as truncation on the arith16
    # cosine suites' rows of 1024, is followed there)
    groups = [g for g in ([c for c in cases if c.shape == s] for s in shapes) if g] or [cases]
    out = std.output
    caught: dict[str, bool] = {}
    seen: set[str] = set()
    dropped = _excluded_by_template(std)
    allowed = _allowed_by_template(std)  # (once: reading the templates is 0.16 s, it was per variant and case)
    variants = [v for v in variants_for(std.op) if v.name not in excluded and v.name not in dropped]
    two = sum(len(g) for g in groups[:2])
    for k, case in enumerate(c for g in groups for c in g):
        first = k < len(groups[0])
        _, arrays, params = validate(std.op, list(case.inputs), dict(case.params))
        for v in variants:
            if not v.applicable(arrays, params, out, std.accumulate):
                continue
            legit = v.legit or v.name in allowed
            if caught.get(v.name, False) or (legit and not first) or (k >= two and v.name not in seen):
                continue  # a bug once caught, legitimate variants on later shapes, and (beyond the first two
                # shapes) bugs not seen on them are not judged again
            y = v.fn([np.array(a) if a is not None else None for a in arrays], params, out, std.accumulate, SEED)
            verdict = numstd.check(y, op=std.op, inputs=list(case.inputs), standard=std.key, **dict(case.params))
            if legit:
                assert verdict.passed, f"{std.key}: legitimate {v.name} rejected on {case.id}: {verdict.message}"
            else:
                seen.add(v.name)
                caught[v.name] = caught.get(v.name, False) or not verdict.passed
    missed = sorted(b for b in seen if not caught[b])
    assert not missed, f"{std.key}: bugs not caught on fresh inputs: {missed}"


def _template(std):
    from numstd.templates import find_template

    return find_template(std.id)


def _allowed_by_template(std):
    return set(_template(std).allow or {})


def _excluded_by_template(std):
    return set(_template(std).exclude or {})
