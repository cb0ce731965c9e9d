"""The Ray executor on a local Ray (``ray.init(num_cpus=2)``): a quick calibration gives the same
draft and evidence, byte for byte, as the local process pool; a Ray worker killed mid-sweep is
retried and the dataset ends complete with no duplicate; a task whose resources no node offers
fails at once instead of waiting forever; every node (the fixture's Ray, and a Ray the executor
starts itself) is on 127.0.0.1.

Truth: the local executor's files (themselves equal to the in-process ones, tests/test_sweep.py);
toy tasks with known results and one marker file per execution.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray (pip install 'numstd[ray]')")

from numstd.executor import NEURON, RayExecutor, Task  # noqa: E402
from numstd.sweep import completed_ids, run_sweep, task_id  # noqa: E402

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.slow


def test_a_local_ray_started_by_the_executor_listens_on_loopback(tmp_path):
    # first in the module: before the fixture below starts its Ray
    assert not ray.is_initialized(), "a Ray left running by another test module"
    from test_sweep import _tasks

    ex = RayExecutor(workers=1)
    try:
        rep = run_sweep(_tasks(2, tmp_path / "m"), tmp_path / "ds", ex)
        assert rep.complete
        assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in ray.nodes())
        assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    finally:
        ex.close()
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def cluster():
    started = not ray.is_initialized()
    if started:  # workers import numstd and the toy tasks of test_sweep from this checkout
        path = os.pathsep.join([str(HERE), str(HERE.parent)] + [p for p in sys.path if p])
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", _node_ip_address="127.0.0.1",
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    if started:
        ray.shutdown()


def test_local_ray_is_on_loopback(cluster):
    from ray._private import ray_constants, services

    assert ray_constants.ENABLE_RAY_CLUSTER is False  # tests/conftest.py set the variable before Ray loaded
    assert services.get_node_ip_address() == "127.0.0.1"
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert nodes and all(n["NodeManagerAddress"] == "127.0.0.1" for n in nodes)
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")


def test_ray_calibration_equals_the_local_executor(tmp_path, cluster):
    from numstd.calibrate import calibrate

    kw = dict(op="matmul", inputs="bfloat16", quick=True, date="2025-01-01")
    on_ray = calibrate(**kw, out=tmp_path / "ray", executor="ray")
    local = calibrate(**kw, out=tmp_path / "local", executor="local", workers=2)
    assert on_ray.ok and local.ok and on_ray.sweep.ran == on_ray.sweep.total > 20
    assert on_ray.draft_path.read_bytes() == local.draft_path.read_bytes()
    assert on_ray.evidence_path.read_bytes() == local.evidence_path.read_bytes()
    workers = {json_worker(p) for p in on_ray.sweep_path.glob("calibrate-run-*.parquet")}
    assert all(w.split(":")[1] != str(os.getpid()) for w in workers)  # the variants ran in Ray workers


def json_worker(path: Path) -> str:
    import json

    import pyarrow.parquet as pq

    return json.loads(pq.read_schema(path).metadata[b"numstd.sweep"])["worker"]


def test_ray_worker_killed_mid_sweep_leaves_a_complete_dataset(tmp_path, cluster):
    from test_sweep import _check_complete, _runs, _tasks

    d, n = tmp_path / "ds", 10
    rep = run_sweep(_tasks(n, tmp_path / "m", kill=4, sleep=0.05), d, "ray", retries=2)
    assert (tmp_path / "m" / "killed").exists()  # the worker really was killed
    killed = task_id("toy", {"i": 4})
    assert rep.complete and rep.ran == n and rep.attempts[killed] == 2
    assert all(a == 1 for t, a in rep.attempts.items() if t != killed)  # Ray charges only the dead task
    assert _runs(tmp_path / "m")[4] == 2
    _check_complete(d, n)


def test_task_no_node_can_run_fails_at_once(tmp_path, cluster):
    t = Task(task_id("toy", {"neuron": 1}), "test_sweep:square", {"i": 1, "marks": str(tmp_path)}, NEURON, "on trn")
    rep = run_sweep([t], tmp_path / "ds", RayExecutor(), retries=1)
    assert "neuron_cores" in rep.failed[t.id][-1] and len(rep.failed[t.id]) == 2
    assert not completed_ids(tmp_path / "ds")
