"""Sweeps and executors: every task's result lands exactly once, interrupted sweeps resume with only
the missing tasks, failing tasks are retried then reported, and calibration gives byte-identical
drafts and evidence whatever the executor and number of workers.

Truth: toy tasks whose results are known (``i → i²``) and that leave one marker file per execution
(so the number of runs is counted, not trusted from the report); for calibration, the draft and
evidence bytes of one run against another, and the evidence rows against the suite × corpus.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numstd.errors import DataIntegrityError, NumstdError, ParameterError
from numstd.executor import LocalExecutor, Resources, Task, get_executor, resources_for
from numstd.sweep import SweepFailed, _lock, completed_ids, read_results, read_sweep, run_sweep, task_id

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CAL = "NS-RMSNORM-BF16"  # a quick calibration of about a second: 30 tasks, legit and bug variants


class Interrupted(Exception):
    """Stands for Ctrl-C or a killed driver."""


# ------------------------------------------------------------------ toy tasks (imported by workers)
def square(i: int, marks: str, sleep: float = 0.0, kill: int = -1, fail: int = -1) -> pa.Table:
    """i → i², leaving a marker per execution; ``kill``: SIGKILL its own worker on the first try;
    ``fail``: raise until the file ``fixed`` exists."""
    m = Path(marks)
    (m / f"{i}-{os.getpid()}-{uuid.uuid4().hex}").touch()
    if i == kill:
        try:
            fd = os.open(m / "killed", os.O_CREAT | os.O_EXCL)
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
        except FileExistsError:
            pass
    if i == fail and not (m / "fixed").exists():
        raise ValueError(f"boom on {i}")
    time.sleep(sleep)
    return pa.table({"i": [i], "square": [i * i]})


def not_a_table(i: int) -> list:
    return [i]


def _tasks(n: int, marks: Path, **kw) -> list[Task]:
    marks.mkdir(parents=True, exist_ok=True)
    return [Task(task_id("toy", {"i": i}), f"{__name__}:square", {"i": i, "marks": str(marks), **kw},
                 label=f"square {i}") for i in range(n)]


def _runs(marks: Path) -> dict[int, int]:
    """Executions per task counted from the marker files."""
    out: dict[int, int] = {}
    for p in marks.iterdir():
        if p.name[0].isdigit():
            i = int(p.name.split("-")[0])
            out[i] = out.get(i, 0) + 1
    return out


def _check_complete(d: Path, n: int) -> None:
    table = read_sweep(d, [task_id("toy", {"i": i}) for i in range(n)])
    assert table.column("i").to_pylist() == list(range(n))  # every task once, in task order
    assert table.column("square").to_pylist() == [i * i for i in range(n)]
    assert len(completed_ids(d)) == n
    assert not [p for p in d.iterdir() if p.name.startswith(".tmp-")]


@pytest.fixture(scope="module")
def pool():
    ex = LocalExecutor(2)
    yield ex
    ex.close()


# ------------------------------------------------------------------ task IDs, resources, executors
def test_task_id_is_canonical_and_sensitive():
    assert task_id("toy", {"a": 1, "b": [1, 2]}) == task_id("toy", {"b": (1, 2), "a": 1})
    assert task_id("toy", {"a": 1}) != task_id("toy", {"a": 2}) != task_id("other", {"a": 2})
    with pytest.raises(ParameterError, match="kind"):
        task_id("Bad Kind/", {})
    with pytest.raises(ParameterError, match="JSON"):
        task_id("toy", {"a": object()})


def test_resources_follow_the_backend():
    assert resources_for(None) == Resources() == resources_for("numpy") == resources_for("torch")
    assert resources_for("torch:cuda").ray_options() == {"num_cpus": 1.0, "num_gpus": 1.0}
    for name in ("nki", "torch-neuronx", "jax:neuron"):
        assert resources_for(name).ray_options() == {"num_cpus": 1.0, "resources": {"neuron_cores": 1.0}}
    assert resources_for("nki").fits({"CPU": 8, "neuron_cores": 32}) and not resources_for("nki").fits({"CPU": 64})
    with pytest.raises(ParameterError, match="executor"):
        get_executor("threads")


# ------------------------------------------------------------------ sweeps
def test_local_pool_writes_every_result_once(tmp_path, pool):
    d = tmp_path / "ds"
    rep = run_sweep(_tasks(12, tmp_path / "m"), d, pool)
    assert rep.complete and (rep.ran, rep.reused) == (12, 0)
    _check_complete(d, 12)
    assert _runs(tmp_path / "m") == {i: 1 for i in range(12)}
    meta = [json.loads(t.schema.metadata[b"numstd.sweep"]) for t in read_results(d, [task_id("toy", {"i": 3})])]
    assert meta[0]["task"] == task_id("toy", {"i": 3}) and meta[0]["label"] == "square 3"
    assert meta[0]["worker"].split(":")[1] != str(os.getpid())  # ran in a worker process
    assert json.loads((d / "_report.json").read_text())["ran"] == 12


def test_interrupted_sweep_resumes_with_only_the_missing_tasks(tmp_path):
    d, n, k = tmp_path / "ds", 10, 4

    def stop_after_k(done: int, total: int) -> None:
        if done >= k:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_sweep(_tasks(n, tmp_path / "m1"), d, "serial", progress=stop_after_k)
    assert len(completed_ids(d)) == k
    rep = run_sweep(_tasks(n, tmp_path / "m2"), d, "serial")
    assert (rep.reused, rep.ran) == (k, n - k)
    runs = _runs(tmp_path / "m2")
    assert sum(runs.values()) == n - k and set(runs) == set(range(k, n))  # only the missing ones re-ran
    _check_complete(d, n)
    again = run_sweep(_tasks(n, tmp_path / "m3"), d, "serial")
    assert (again.reused, again.ran) == (n, 0) and _runs(tmp_path / "m3") == {}


def test_driver_killed_mid_sweep_resumes(tmp_path, pool):
    d, marks, n = tmp_path / "ds", tmp_path / "m1", 12
    marks.mkdir()
    script = textwrap.dedent(f"""
        import sys; sys.path[:0] = [{str(HERE)!r}, {str(ROOT)!r}]
        from pathlib import Path
        from test_sweep import _tasks
        from numstd.sweep import run_sweep
        run_sweep(_tasks({n}, Path({str(marks)!r}), sleep=0.15), {str(d)!r}, "serial")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + 60
        while len(completed_ids(d)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    present = completed_ids(d)
    assert 3 <= len(present) < n
    rep = run_sweep(_tasks(n, tmp_path / "m2"), d, pool)
    assert (rep.reused, rep.ran) == (len(present), n - len(present))
    assert sum(_runs(tmp_path / "m2").values()) == n - len(present)
    _check_complete(d, n)


def test_killed_worker_is_retried_and_nothing_is_written_twice(tmp_path, pool):
    d, n = tmp_path / "ds", 8
    rep = run_sweep(_tasks(n, tmp_path / "m", kill=5, sleep=0.05), d, pool, retries=2)
    assert rep.complete and rep.ran == n
    killed = task_id("toy", {"i": 5})
    assert rep.attempts[killed] == 2 and (tmp_path / "m" / "killed").exists()
    assert max(rep.attempts.values()) <= 2  # only tasks in flight when the worker died ran twice
    _check_complete(d, n)
    attempts = {json.loads(t.schema.metadata[b"numstd.sweep"])["task"]: json.loads(t.schema.metadata[b"numstd.sweep"])["attempt"]
                for t in read_results(d, [task_id("toy", {"i": i}) for i in range(n)])}
    assert attempts[killed] == 2


def test_failing_task_is_retried_then_reported(tmp_path):
    d, n, marks = tmp_path / "ds", 6, tmp_path / "m"
    rep = run_sweep(_tasks(n, marks, fail=2), d, "serial", retries=2)
    bad = task_id("toy", {"i": 2})
    assert not rep.complete and set(rep.failed) == {bad} and rep.ran == n - 1
    assert _runs(marks)[2] == 3 and len(rep.failed[bad]) == 3  # 1 + 2 retries, each error kept
    assert all("ValueError: boom on 2" in e for e in rep.failed[bad])
    with pytest.raises(SweepFailed, match="square 2") as err:
        rep.raise_for_failures()
    assert err.value.report is rep and isinstance(err.value, NumstdError)
    assert json.loads((d / "_report.json").read_text())["failed"][bad]
    with pytest.raises(DataIntegrityError, match="missing"):
        read_sweep(d, [task_id("toy", {"i": i}) for i in range(n)])
    (marks / "fixed").touch()
    again = run_sweep(_tasks(n, marks), d, "serial")
    assert (again.reused, again.ran) == (n - 1, 1) and again.complete and _runs(marks)[2] == 4
    _check_complete(d, n)


def test_a_result_that_is_not_a_table_is_a_failure(tmp_path):
    t = Task(task_id("toy", {"bad": 1}), f"{__name__}:not_a_table", {"i": 1}, label="bad")
    rep = run_sweep([t], tmp_path, "serial", retries=0)
    assert "not a pyarrow.Table" in rep.failed[t.id][0] and not completed_ids(tmp_path)


def test_foreign_or_damaged_result_files_are_refused(tmp_path):
    d = tmp_path / "ds"
    run_sweep(_tasks(3, tmp_path / "m"), d, "serial")
    a, b = (d / f"{task_id('toy', {'i': i})}.parquet" for i in (0, 1))
    b.write_bytes(a.read_bytes())
    with pytest.raises(DataIntegrityError, match="holds the result of task"):
        read_sweep(d, [task_id("toy", {"i": 1})])
    a.write_bytes(b"not parquet")
    with pytest.raises(DataIntegrityError, match="not a readable Parquet"):
        read_sweep(d, [task_id("toy", {"i": 0})])


def test_second_driver_on_the_same_directory_is_refused(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    with _lock(d):
        with pytest.raises(NumstdError, match="another sweep is running"):
            run_sweep(_tasks(2, tmp_path / "m"), d, "serial")
    assert _runs(tmp_path / "m") == {}
    with pytest.raises(ParameterError, match="duplicate"):
        run_sweep(_tasks(2, tmp_path / "m") * 2, d, "serial")


# ------------------------------------------------------------------ calibration
@pytest.fixture(scope="module")
def cal_two_workers(tmp_path_factory, pool):
    from numstd.calibrate import calibrate

    out = tmp_path_factory.mktemp("cal2")
    return calibrate(template=CAL, quick=True, out=out, date="2025-01-01", executor=pool), out


def _files(res) -> tuple[bytes, bytes]:
    return res.draft_path.read_bytes(), res.evidence_path.read_bytes()


def test_calibration_with_one_and_two_workers_is_byte_identical(tmp_path, cal_two_workers):
    from numstd.calibrate import calibrate
    from numstd.suites import cases_for

    two, _ = cal_two_workers
    with LocalExecutor(1) as one_proc:
        one = calibrate(template=CAL, quick=True, out=tmp_path, date="2025-01-01", executor=one_proc)
    assert one.ok and two.ok
    assert _files(one) == _files(two)
    ev = pq.read_table(one.evidence_path).to_pydict()
    pairs = list(zip(ev["variant"], ev["case"]))
    assert len(pairs) == len(set(pairs))  # one row per (variant, case)
    cases = {c.id for c in cases_for(_standard(CAL), seeds=[0])}
    assert set(ev["case"]) == cases and one.sweep.total == two.sweep.total > len(cases)


def _standard(tid):
    from numstd.calibrate import _standard_from_table
    from numstd.templates import find_template

    return _standard_from_table(dict(find_template(tid).table), 1)


def test_interrupted_calibration_resumes_to_the_same_draft(tmp_path, cal_two_workers):
    from numstd.calibrate import calibrate

    two, _ = cal_two_workers
    k = 7

    def stop(done: int, total: int) -> None:
        if done >= k:
            raise Interrupted

    with pytest.raises(Interrupted):
        calibrate(template=CAL, quick=True, out=tmp_path, date="2025-01-01", executor="serial", progress=stop)
    assert not list(tmp_path.glob("*.toml"))
    res = calibrate(template=CAL, quick=True, out=tmp_path, date="2025-01-01", executor="serial")
    assert (res.sweep.reused, res.sweep.ran) == (k, res.sweep.total - k)
    assert _files(res) == _files(two)  # serial after an interruption = a 2-process pool in one go


def raising_variant(inputs, params, out, acc, seed):  # noqa: ANN001 - a corpus fn signature
    raise RuntimeError("kernel exploded")


def test_calibration_task_failures_are_reported_not_dropped(tmp_path):
    from numstd.calibrate import calibrate
    from numstd.corpus import Variant

    bad = Variant(op="rms_norm", name="exploding", family="formula", legit=True, description="raises", fn=raising_variant)
    with pytest.raises(SweepFailed, match="exploding") as err:
        calibrate(template=CAL, quick=True, executor="serial", extra_variants=[bad], retries=1)
    assert all(len(e) == 2 and "kernel exploded" in e[-1] for e in err.value.report.failed.values())



def test_closure_variants_run_in_the_driver_and_count_as_evidence(pool):
    import dataclasses

    from numstd.calibrate import calibrate
    from numstd.corpus import variants_for

    # a numpy variant: the "library" family (torch-cpu) needs torch, which a bare install lacks
    v0 = next(v for v in variants_for("rms_norm", legit=True) if v.family != "library")
    wrapped = dataclasses.replace(v0, name="wrapped", fn=lambda *a: v0.fn(*a))  # cannot be pickled
    res = calibrate(template=CAL, quick=True, executor=pool, extra_variants=[wrapped])
    assert res.ok
    mine = [r for r in res.evidence if r.variant == "wrapped"]
    theirs = [r for r in res.evidence if r.variant == v0.name]
    assert mine and [dataclasses.replace(r, variant=v0.name) for r in mine] == theirs  # same outputs, same rows


# ------------------------------------------------------------------ capture and survey
def test_capture_on_a_pool_equals_the_in_process_capture(tmp_path, pool):
    from numstd.capture import capture, capture_metadata

    one = capture("NS-SOFTMAX-BF16", "numpy", quick=True)
    many = capture("NS-SOFTMAX-BF16", "numpy", quick=True, executor=pool, chunk=2, sweep_dir=tmp_path / "cap")
    assert many.drop(["output_bits"]).equals(one.drop(["output_bits"]))
    assert many.column("output_bits").to_pylist() == one.column("output_bits").to_pylist()
    ma, mb = capture_metadata(one), capture_metadata(many)
    for key in ("backend", "device", "versions", "standard", "standard_sha256", "n_cases", "seeds"):
        assert ma[key] == mb[key]
    again = capture("NS-SOFTMAX-BF16", "numpy", quick=True, executor="serial", chunk=2, sweep_dir=tmp_path / "cap")
    assert again.column("output_sha256").to_pylist() == one.column("output_sha256").to_pylist()


def test_survey_on_a_pool_equals_the_in_process_survey(pool):
    from numstd.survey import survey

    one = survey("exp", "bfloat16")
    many = survey("exp", "bfloat16", executor=pool, chunk=10_000)
    assert np.array_equal(one.outputs, many.outputs, equal_nan=True)
    assert one.to_dict() == many.to_dict()
    with pytest.raises(ParameterError, match="executor"):
        survey("exp", "bfloat16", fn=np.exp, executor=pool)
