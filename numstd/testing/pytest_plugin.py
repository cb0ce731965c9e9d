"""pytest plugin (entry point ``pytest11``): ``numstd_check``, ``numstd_grade`` and ``--numstd-report``.

``numstd_check(actual, op=..., inputs=..., **params)`` asserts conformance like
:func:`numstd.assert_conforms` and records the verdict; ``numstd_grade(reference, candidate,
make_inputs, **kwargs)`` asserts that :func:`numstd.grade` passes and records every verdict of the
grade.  A failure shows the reviewer snippet, the failed criteria with their measured values and
limits, and the worst elements.  ``--numstd-report PATH`` writes every verdict of the session as
JSON (``.json``: a list of verdicts, each with a ``test`` label) or Arrow/Parquet (``.parquet``: one
row per verdict plus a ``test`` column) — the input of ``python -m numstd report``.

Loading the plugin imports nothing beyond pytest; numstd's engine loads when a fixture is used.
Fixtures are safe to call from several threads of one test.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "pytest_sessionfinish", "pytest_terminal_summary",
           "numstd_check", "numstd_grade", "explain"]

_RECORDS = pytest.StashKey[list]()
_LOCK = pytest.StashKey[threading.Lock]()
_WRITTEN = pytest.StashKey[str]()


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("numstd")
    group.addoption("--numstd-report", default=None, metavar="PATH",
                    help="write every numstd verdict of the session to PATH (.json or .parquet); "
                         "render it with `python -m numstd report PATH --out DIR`")


def pytest_configure(config: Any) -> None:
    config.stash[_RECORDS] = []
    config.stash[_LOCK] = threading.Lock()


def _record(config: Any, label: str, verdict: Any) -> None:
    with config.stash[_LOCK]:
        config.stash[_RECORDS].append((label, verdict))


def explain(verdict: Any) -> str:
    """A multi-line failure message: snippet, failed criteria (value vs limit), worst elements."""
    lines = [verdict.snippet(), "", verdict.message, "", f"criteria of {verdict.citation}:"]
    for c in verdict.criteria:
        mark = "ok  " if c.passed else "FAIL"
        lines.append(f"  {mark} {c.name:<16} value {c.value:<12.4g} limit {c.limit:<12.4g} {c.message}")
    if verdict.worst:
        lines.append("worst elements (index: actual vs reference, ULP error, error/bound):")
        for w in list(verdict.worst)[:5]:
            lines.append(f"  {list(w.index)}: {w.actual!r} vs {w.reference!r}, {w.ulp_error:+.4g} ulp, "
                         f"{w.normalized:.3g}× the bound")
    return "\n".join(lines)


@pytest.fixture
def numstd_check(request: Any) -> Callable[..., Any]:
    """Assert that an output conforms to its numstd standard; returns the (passing) verdict.

    ``numstd_check(actual, op="softmax", inputs=[x], axis=-1)`` — the arguments of
    :func:`numstd.check`.  Raises :class:`numstd.NonConformance` (an ``AssertionError``).
    """
    from ..judge.check import check
    from ..core.errors import NonConformance

    def _check(actual: Any, *, op: str, inputs: Any, standard: Any = None, **params: Any) -> Any:
        __tracebackhide__ = True
        v = check(actual, op=op, inputs=inputs, standard=standard, **params)
        _record(request.config, request.node.nodeid, v)
        if not v.passed:
            raise NonConformance(explain(v), v)
        return v

    return _check


@pytest.fixture
def numstd_grade(request: Any) -> Callable[..., Any]:
    """Assert that :func:`numstd.grade` passes; returns the GradeReport.

    ``numstd_grade(Model, ModelNew, get_inputs, init_inputs=get_init_inputs, dtype="bf16")``.
    Every verdict of the grade is recorded (label ``nodeid [trial t, distribution]``).
    """
    from ..core.errors import NonConformance
    from ..grade.grading import grade

    def _grade(reference: Any, candidate: Any, make_inputs: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        report = grade(reference, candidate, make_inputs, **kwargs)
        for c in report.cases:
            _record(request.config, f"{request.node.nodeid} [{c.label}, {c.kind}]", c.verdict)
        if not report.passed:
            first = report.failures[0]
            raise NonConformance(f"{report.snippet()}\n\n{report.message}\n\nfirst failure ({first.label}):\n"
                                 + explain(first.verdict), first.verdict)
        return report

    return _grade


def _write(path: str, records: list) -> None:
    if str(path).endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = [v.to_arrow().append_column("test", pa.array([label], pa.string())) for label, v in records]
        if tables:
            table = pa.concat_tables(tables)
        else:  # an empty table with the verdict columns, so readers need no special case
            table = _empty_verdict_table()
        pq.write_table(table, path)
        return
    with open(path, "w", encoding="utf-8") as fh:
        json.dump([dict(v.to_dict(), test=label) for label, v in records], fh, indent=1)


def _empty_verdict_table() -> Any:
    import pyarrow as pa

    from ..core.distribution import UlpDistribution
    from ..judge.verdict import Verdict

    probe = Verdict(passed=True, standard_id="", standard_sha256="", op="", shape=(), formats={}, params={},
                    criteria=(), ulp=UlpDistribution(), normalized_max=0.0, worst=(), n_elements=0,
                    n_nonfinite=0, message="")
    return probe.to_arrow().append_column("test", pa.array([""], pa.string())).slice(0, 0)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = session.config.getoption("--numstd-report", default=None)
    if not path:
        return
    records = list(session.config.stash.get(_RECORDS, []))
    _write(path, records)
    session.config.stash[_WRITTEN] = f"{len(records)} verdict(s), {sum(not v.passed for _, v in records)} failing"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    written = config.stash.get(_WRITTEN, None)
    if written:
        path = config.getoption("--numstd-report")
        terminalreporter.write_line(f"numstd: {written} written to {path} "
                                    f"(render: python -m numstd report {path} --out DIR)")
