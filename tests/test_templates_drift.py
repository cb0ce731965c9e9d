"""The templates are the calibration inputs of the published standards: recalibrating from a
template (``python -m numstd calibrate --op/--template``, ``scripts/calibrate_all.py``) must give a
standard with the same criteria as the latest published version, apart from the constants
calibration fits.  A criterion added by a criteria-only version (``scripts/derive_version.py``:
``tail_n``, ``bias_rows_t``) that never reached the template would be silently dropped by the
next recalibration.

Independent truth here is the published files themselves (immutable, sha256 in standards/LOCK)
and the definition of ``tail_n`` (the largest output size of the suite the constants were
calibrated on, docs/methodology.md "Many outputs")."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from importlib import resources

import pytest

from numstd.catalog.registry import Criteria, _latest_published, load_registry
from numstd.catalog.templates import instances

#: criteria that calibration fits (authoring/calibrate.py) rather than copies from the template
FITTED = {"bias_tau", "row_bias_tau"}

_DEFAULTS = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
             for f in dataclasses.fields(Criteria)}


_LATEST = {s.id: s for s in _latest_published(load_registry().by_key.values())}
_PAIRS = [(t, _LATEST[t.id]) for t in instances() if t.id in _LATEST]


def _published_criteria(std) -> dict:
    rel = std.path.split("standards/", 1)[1] if std.path.startswith("standards/") else std.path
    return tomllib.loads((resources.files("numstd.standards") / rel).read_text(encoding="utf-8")).get("criteria", {})


def _norm(key: str, value):
    if key == "output_rounding" and value is not None:
        return tuple(value)
    if key == "ulp_quantiles" and value is not None:
        return {float(k): float(v) for k, v in dict(value).items()}
    return value


def test_every_published_standard_has_a_template():
    ids = {t.id for t in instances()}
    missing = sorted(set(_LATEST) - ids - {k for k in _LATEST if k.startswith("NS-MODULE")})
    assert not missing, f"published standards with no template instance: {missing}"


@pytest.mark.parametrize("tpl,std", _PAIRS, ids=[t.id for t, _ in _PAIRS])
def test_template_criteria_equal_the_latest_published(tpl, std):
    pub = _published_criteria(std)
    mine = tpl.table["criteria"]
    diff = {}
    for key in (set(pub) | set(mine)) - FITTED:
        a = _norm(key, mine.get(key, _DEFAULTS.get(key)))
        b = _norm(key, pub.get(key, _DEFAULTS.get(key)))
        if a != b:
            diff[key] = (a, b)
    assert not diff, (f"{tpl.source} [[standards]] {tpl.id}: criteria (template, {std.key}) differ: {diff}; "
                      f"a recalibration from the template would change the standard's meaning")


def _suite_output_size(tpl) -> int:
    from numstd.catalog.suites import make_case
    from numstd.ops.catalog import output_shape, validate

    table = tpl.table
    suite = table["suite"]
    dist = suite.get("distributions", ["normal"])[0]
    seed = list(suite.get("seeds", [0]))[0]
    best = 0
    for shape in suite.get("shapes", []):
        case = make_case(table["op"], shape, dist, seed, list(table["formats"]["inputs"]), dict(suite.get("params", {})))
        _, arrays, full = validate(table["op"], list(case.inputs), dict(case.params))
        best = max(best, math.prod(output_shape(table["op"], arrays, full)))
    return best


_TAILED = [t for t in instances() if t.table["criteria"].get("tail_n", 0)]


@pytest.mark.parametrize("tpl", _TAILED, ids=[t.id for t in _TAILED])
def test_tail_n_is_the_largest_calibrated_output(tpl):
    assert tpl.table["criteria"]["tail_n"] == _suite_output_size(tpl), tpl.id
