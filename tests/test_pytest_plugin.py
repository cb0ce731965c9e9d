"""The pytest plugin, run through pytester: fixtures, failure messages, --numstd-report files."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["pytester"]

PROBLEMS = Path(__file__).parent / "problems"

# the inner sessions judge softmax by the published standard, or by one built from the template
CONFTEST = '''
import numpy as np
import pytest


@pytest.fixture
def softmax_std():
    from numstd.errors import NumstdError
    from numstd.registry import find_standard

    try:
        return find_standard("softmax", inputs=["float32"], output="float32")
    except NumstdError:  # not published yet: the template's model with its starting constants
        from numstd.calibrate import _standard_from_table
        from numstd.templates import find_template

        table = dict(find_template("NS-SOFTMAX-FP32").table, provenance={"method": "test"})
        return _standard_from_table(table, 1, status="active")


@pytest.fixture
def case():
    from numstd.reference import reference

    x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
    return x, reference("softmax", [x], axis=-1).values
'''

TESTS = '''
import numpy as np


def test_good(numstd_check, softmax_std, case):
    x, r = case
    v = numstd_check(r.astype(np.float32), op="softmax", inputs=[x], axis=-1, standard=softmax_std)
    assert v.passed


def test_scaled(numstd_check, softmax_std, case):
    x, r = case
    numstd_check((r * 1.01).astype(np.float32), op="softmax", inputs=[x], axis=-1, standard=softmax_std)


def test_nan(numstd_check, softmax_std, case):
    x, r = case
    out = r.astype(np.float32)
    out[3, 7] = np.nan
    numstd_check(out, op="softmax", inputs=[x], axis=-1, standard=softmax_std)
'''


@pytest.fixture
def softmax_session(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_softmax=TESTS)
    return pytester


def test_failure_messages_and_json_report(softmax_session):
    result = softmax_session.runpytest("-q", "--numstd-report", "verdicts.json")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "NonConformance" in out
    # the failure message: snippet, criteria with value and limit, worst elements with indices
    result.stdout.fnmatch_lines(["*NS-SOFTMAX-FP32@* FAIL — bound criterion*", "*FAIL bound*value*limit*",
                                 "*worst elements*"])
    result.stdout.fnmatch_lines(["*specials*1 non-finite mismatch*1 NaN where the reference is finite*"])
    assert "[3, 7]" in out
    result.stdout.fnmatch_lines(["numstd: 3 verdict(s), 2 failing written to verdicts.json*"])
    data = json.loads((softmax_session.path / "verdicts.json").read_text())
    assert [d["test"].split("::")[1] for d in data] == ["test_good", "test_scaled", "test_nan"]
    assert [d["passed"] for d in data] == [True, False, False]
    assert all(d["schema"] == "numstd.verdict/1" and d["standard_id"].startswith("NS-SOFTMAX-FP32@") for d in data)


def test_parquet_report_round_trips_to_verdicts(softmax_session):
    pq = pytest.importorskip("pyarrow.parquet")
    from numstd.verdict import Verdict

    softmax_session.runpytest("-q", "--numstd-report", "verdicts.parquet")
    table = pq.read_table(softmax_session.path / "verdicts.parquet")
    assert table.num_rows == 3 and table.column("test").to_pylist()[0].endswith("::test_good")
    v = Verdict.from_arrow(table, 2)
    assert not v.passed and v.criterion("specials").value == 1


def test_empty_session_still_writes_a_readable_report(pytester, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from numstd.pytest_plugin import _write

    pytester.makepyfile("def test_nothing():\n    pass\n")
    pytester.runpytest("-q", "--numstd-report", "none.parquet")
    assert pq.read_table(pytester.path / "none.parquet").num_rows == 0
    _write(str(tmp_path / "none.json"), [])
    assert json.loads((tmp_path / "none.json").read_text()) == []


def test_numstd_grade_fixture_records_every_case(pytester):
    torch = pytest.importorskip("torch")
    from numstd.grade_cli import load_module

    fallback = load_module(PROBLEMS / "standards_fallback.py")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:  # the in-process session sees the same module standards
        fallback.install(mp)
        pytester.makepyfile(test_grade_it=f'''
from numstd.grade_cli import load_module

P = load_module({str(PROBLEMS / "relu" / "problem.py")!r})
GOOD = load_module({str(PROBLEMS / "relu" / "faithful.py")!r})
BAD = load_module({str(PROBLEMS / "relu" / "identity.py")!r})


def test_faithful(numstd_grade):
    numstd_grade(P.Model, GOOD.ModelNew, P.get_inputs, trials=1)


def test_identity(numstd_grade):
    numstd_grade(P.Model, BAD.ModelNew, P.get_inputs, trials=1)
''')
        result = pytester.runpytest_inprocess("-q", "--numstd-report", "grade.json")
    torch.set_num_threads(threads)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAIL NS-MODULE-FP32@*on normal, uniform*", "*first failure (trial 0, normal)*"])
    data = json.loads((pytester.path / "grade.json").read_text())
    module = [d for d in data if d["test"].endswith(", module]")]
    assert len(module) == 2 * 7 and all("[trial 0, " in d["test"] for d in module)
    assert sum(not d["passed"] for d in module) == 5  # the five signed redraws; U[0,1) and smallvar pass
    op = [d for d in data if d["test"].endswith(", op]")]  # NS-RELU-* once published
    assert all(d["standard_id"].startswith("NS-RELU-FP32@") for d in op)


def test_plugin_import_is_light():
    import subprocess
    import sys

    code = ("import sys, numstd.pytest_plugin; "
            "bad = [m for m in ('torch', 'jax', 'matplotlib', 'hypothesis', 'numstd.grade', 'numstd.reference') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(Path(__file__).parents[1]))


def test_explain_lists_failed_criteria_and_offenders():
    from numstd.pytest_plugin import explain
    from numstd.verdict import CriterionResult, Offender, Verdict
    from numstd.distribution import UlpDistribution

    v = Verdict(passed=False, standard_id="NS-X@1", standard_sha256="0" * 64, op="exp", shape=(4,), formats={},
                params={}, criteria=(CriterionResult("bound", False, 3.0, 0.0, "3 of 4 elements exceed"),),
                ulp=UlpDistribution(count=4, max=9.0), normalized_max=2.5,
                worst=(Offender((2,), 1.5, 1.0, 9.0, 2.5, 0.2),), n_elements=4, n_nonfinite=0, message="FAIL.")
    text = explain(v)
    assert "FAIL bound" in text and "[2]: 1.5 vs 1.0, +9 ulp, 2.5× the bound" in text
    assert np.isfinite(v.normalized_max)
