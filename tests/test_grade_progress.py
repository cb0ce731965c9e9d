"""grade's per-case progress: one step per case run, the verdicts unchanged, no bar unless stderr
is a terminal (or ``NUMSTD_PROGRESS=1`` forces one).

Truth: the case count the protocol defines (trials × (original + each redraw distribution), twice
with the second shape set), and the verdicts of the same grade (same seed and secret seed) with no
progress callback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from numstd.grade.files import grade_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "tests" / "problems" / "relu"


def _verdicts(report) -> list:
    return [(c.trial, c.distribution, c.seed, c.kind, c.verdict.to_dict()) for c in report.cases]


def test_one_step_per_case_and_the_same_verdicts():
    calls: list[tuple[int, int]] = []
    kw = dict(trials=2, seed=3, secret_seed=11, shapes2=False)
    with_bar = grade_files(RELU / "problem.py", RELU / "faithful.py", progress=lambda d, t: calls.append((d, t)), **kw)
    without = grade_files(RELU / "problem.py", RELU / "faithful.py", **kw)
    n = 2 * len(with_bar.distributions)  # trials × (original + redraws)
    assert calls == [(k, n) for k in range(1, n + 1)] + [(n, n)]  # one per case, then the close
    assert _verdicts(with_bar) == _verdicts(without)


def test_second_shape_set_counts_its_cases_too():
    calls: list[tuple[int, int]] = []
    rep = grade_files(RELU / "problem.py", RELU / "faithful.py", trials=1, seed=0, secret_seed=5,
                      progress=lambda d, t: calls.append((d, t)))
    n = len({(c.trial, c.distribution) for c in rep.cases})  # the cases run, both shape sets
    assert rep.protocol["second_shapes_note"] == "graded" and n == 2 * len(rep.distributions)
    assert [d for d, _ in calls] == list(range(1, n + 1)) + [n] and {t for _, t in calls} == {n}


def _cli(env_progress: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMSTD_PROGRESS"}
    env["PYTHONPATH"] = str(ROOT)
    if env_progress is not None:
        env["NUMSTD_PROGRESS"] = env_progress
    cmd = [sys.executable, "-m", "numstd", "grade", "--problem", str(RELU / "problem.py"), "--candidate",
           str(RELU / "faithful.py"), "--trials", "1", "--no-shapes2", "--in-process", "--secret-seed", "7", "--json"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_no_bar_when_stderr_is_not_a_terminal_and_a_forced_one_changes_no_verdict():
    plain = _cli(None)  # stderr is a pipe here
    assert plain.returncode == 0 and plain.stderr == ""
    forced = _cli("1")
    assert forced.returncode == 0 and "grade" in forced.stderr and "case" in forced.stderr  # the tqdm bar
    a, b = json.loads(plain.stdout), json.loads(forced.stdout)
    assert [c["verdict"] for c in a["cases"]] == [c["verdict"] for c in b["cases"]]
