"""The Ray executor on a 3-node Ray cluster on this machine, kept on loopback.

One module-scoped :class:`ray.cluster_utils.Cluster`: a CPU-only head node, a node advertising a
GPU (``num_gpus=1``) and a node advertising ``neuron_cores`` (one CPU each, 80 MiB object stores,
no dashboard, every address 127.0.0.1).  Tests that remove a node add a spare node of their own.

* placement: GPU tasks run only on the GPU node, Neuron tasks only on the Neuron node, and every
  result file records the node (ID, IP, resources) and the accelerator IDs Ray pinned;
* node loss: a node removed while running tasks of a sweep — they run again on the other nodes,
  every task has exactly one result, none written after the removal comes from the removed node,
  the toy results are exact, and a calibration's draft and evidence equal the local executor's
  byte for byte;
* two drivers: a driver killed mid-sweep, then two drivers started together on the same
  dataset — one resumes (runs exactly the missing tasks), the other is refused by the lock;
  run again, it reuses every task;
* unschedulable: a task needing a resource no node has fails at once naming it; a task queued for
  a GPU when the only GPU node leaves fails naming ``GPU`` within the timeout, not a hang;
* loopback: every node's address is 127.0.0.1 and Ray takes 127.0.0.1 as this machine's address.

Truth: toy tasks ``i -> i²`` that leave one marker file per execution naming the node they ran
on (executions are counted, not taken from the report); the local executor's files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray (pip install 'numstd[ray]')")
pa = pytest.importorskip("pyarrow")

from numstd.errors import NumstdError  # noqa: E402
from numstd.executor import CPU, GPU, NEURON, RayExecutor, Resources, Task  # noqa: E402
from numstd.sweep import completed_ids, read_results, read_sweep, run_sweep, task_id, task_metadata  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LOOPBACK = "127.0.0.1"
STORE = 80 * 2**20
pytestmark = pytest.mark.slow


# ------------------------------------------------------------------ toy task (imported by workers)
def placed(i: int, marks: str, sleep: float = 0.0) -> "pa.Table":
    """i -> i², leaving a marker ``<i>.<node id>.<uuid>`` per execution."""
    import pyarrow

    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
    (Path(marks) / f"{i}.{node}.{uuid.uuid4().hex}").touch()
    time.sleep(sleep)
    return pyarrow.table({"i": [i], "square": [i * i]})


def _tasks(n: int, marks: Path, resources: Resources = CPU, sleep: float = 0.0, kind: str = "toy") -> list[Task]:
    marks.mkdir(parents=True, exist_ok=True)
    return [Task(task_id(kind, {"i": i, "r": resources.describe()}), f"{__name__}:placed",
                 {"i": i, "marks": str(marks), "sleep": sleep}, resources, f"{kind} {i}") for i in range(n)]


def _runs(marks: Path) -> list[tuple[int, str]]:
    """(i, node ID) of every execution, from the marker files."""
    return [(int(p.name.split(".")[0]), p.name.split(".")[1]) for p in marks.iterdir() if p.name[0].isdigit()]


def _placement(d: Path, tasks: list[Task]) -> dict[str, dict]:
    return {t.id: task_metadata(tab)["placement"] for t, tab in zip(tasks, read_results(d, tasks))}


def _node_args(**kw) -> dict:
    return {"num_cpus": 1, "node_ip_address": LOOPBACK, "object_store_memory": STORE, **kw}


def _node_id(node) -> str:  # noqa: ANN001 - ray._private.node.Node
    return node.node_id


def _add_warm_node(cluster, **kw) -> str:  # noqa: ANN001 - ray.cluster_utils.Cluster
    """A node added to the cluster, with a worker already started on it (one task pinned there):
    without it, a node that joins mid-run gets no task until its first worker has started, and
    by then the warm nodes have taken them all.  Returns the node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = cluster.add_node(**_node_args(**kw))
    cluster.wait_for_nodes()
    pin = NodeAffinitySchedulingStrategy(_node_id(node), soft=False)
    opts = {"resources": {k: 1 for k in kw.get("resources", {})}}
    assert ray.get(_where.options(scheduling_strategy=pin, **opts).remote(), timeout=60) == _node_id(node)
    return node


@ray.remote(num_cpus=1, max_retries=0)
def _where() -> str:
    return ray.get_runtime_context().get_node_id()


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # another module's Ray: this module needs its own cluster
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args=_node_args(include_dashboard=False))
    gpu = c.add_node(**_node_args(num_gpus=1))
    trn = c.add_node(**_node_args(resources={"neuron_cores": 2}))
    path = os.pathsep.join([str(HERE), str(ROOT)] + [p for p in sys.path if p])
    ray.init(address=c.address, _node_ip_address=LOOPBACK, logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    c.wait_for_nodes()
    c.gpu, c.trn, c.path = gpu, trn, path
    yield c
    ray.shutdown()
    c.shutdown()


def test_every_node_is_on_loopback(cluster):
    from ray._private import ray_constants, services

    assert ray_constants.ENABLE_RAY_CLUSTER is False  # the variable was set before Ray was imported
    assert services.get_node_ip_address() == LOOPBACK
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 3
    for n in nodes:
        assert n["NodeManagerAddress"] == LOOPBACK and n["NodeManagerHostname"]
        tags = [k for k in n["Resources"] if k.startswith("node:") and k != "node:__internal_head__"]
        assert tags == [f"node:{LOOPBACK}"]
    assert cluster.address.split(":")[0] == LOOPBACK
    assert ray.get_runtime_context().gcs_address.split(":")[0] == LOOPBACK


def test_tasks_land_where_their_resource_is_and_record_it(tmp_path, cluster):
    gpu_id, trn_id = _node_id(cluster.gpu), _node_id(cluster.trn)
    groups = {k: _tasks(n, tmp_path / k, r, kind=k)
              for k, n, r in (("gpu", 3, GPU), ("trn", 3, NEURON), ("cpu", 4, CPU))}
    tasks = [t for g in groups.values() for t in g]
    d = tmp_path / "ds"
    rep = run_sweep(tasks, d, RayExecutor(), retries=0)
    assert rep.complete and rep.ran == len(tasks)
    where = _placement(d, tasks)
    for t in groups["gpu"]:
        p = where[t.id]
        assert p["node_id"] == gpu_id and p["node_resources"]["GPU"] == 1.0
        assert p["assigned"].get("GPU") == 1.0 and p["accelerators"] == {"GPU": ["0"]}
    for t in groups["trn"]:
        p = where[t.id]
        assert p["node_id"] == trn_id and p["node_resources"]["neuron_cores"] == 2.0
        assert p["assigned"].get("neuron_cores") == 1.0 and len(p["accelerators"]["neuron_cores"]) == 1
    live = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    for t in groups["cpu"]:
        assert where[t.id]["node_id"] in live and "GPU" not in where[t.id]["accelerators"]
    assert all(p["node_ip"] == LOOPBACK for p in where.values())
    # the markers (written by the tasks themselves) agree with what the files record
    for kind, group in groups.items():  # the markers, written by the tasks themselves, agree with the files
        runs = _runs(tmp_path / kind)
        assert sorted(i for i, _ in runs) == list(range(len(group)))
        assert all(node == where[group[i].id]["node_id"] for i, node in runs)
    assert sorted(read_sweep(d, groups["gpu"]).column("square").to_pylist()) == [0, 1, 4]


def test_task_needing_a_resource_no_node_has_is_reported_at_once(tmp_path, cluster):
    t = Task(task_id("toy", {"tpu": 1}), f"{__name__}:placed", {"i": 1, "marks": str(tmp_path)},
             Resources(custom=(("tpu_cores", 1.0),)), "on tpu")
    start = time.monotonic()
    rep = run_sweep([t], tmp_path / "ds", RayExecutor(), retries=1)
    assert time.monotonic() - start < 10
    err = rep.failed[t.id][-1]
    assert "tpu_cores" in err and "unschedulable" in err and len(rep.failed[t.id]) == 2
    assert not completed_ids(tmp_path / "ds") and not list(tmp_path.glob("1.*"))


def test_queued_task_whose_only_node_leaves_is_reported_not_left_hanging(tmp_path, cluster):
    spare = _add_warm_node(cluster, resources={"fpga": 1})
    fpga = Resources(custom=(("fpga", 1.0),))
    tasks = _tasks(3, tmp_path / "m", fpga, sleep=1.0, kind="fpga")  # one node, one slot: run one by one
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done == 1:  # the first result is in: the other two are queued on the spare node
            cluster.remove_node(spare)

    start = time.monotonic()
    rep = run_sweep(tasks, tmp_path / "ds", RayExecutor(unschedulable_timeout=2, poll=0.25), retries=0,
                    progress=progress)
    took = time.monotonic() - start
    assert rep.ran == 1 and len(rep.failed) == 2 and took < 30
    errs = [e[-1] for e in rep.failed.values()]
    # either still queued (stranded: reported after the timeout) or running when the node died
    assert all("fpga" in e or "NodeDied" in e or "WorkerCrashed" in e for e in errs)
    assert any("fpga" in e and "unschedulable" in e for e in errs)


def test_node_removed_mid_sweep_its_tasks_run_elsewhere(tmp_path, cluster):
    spare = _add_warm_node(cluster, num_cpus=2)  # two CPUs: the scheduler's first choice
    spare_id = _node_id(spare)
    marks, d, n = tmp_path / "m", tmp_path / "ds", 10
    tasks = _tasks(n, marks, sleep=1.0)
    removed: list[set[int]] = []
    finished: set[str] = set()
    stop = threading.Event()

    def watch() -> None:  # remove the spare node the moment it runs a task of the sweep
        while not stop.is_set():
            on_spare = {i for i, node in _runs(marks) if node == spare_id}
            if on_spare:
                finished.update(completed_ids(d))
                cluster.remove_node(spare)
                removed.append({i for i in on_spare if tasks[i].id not in finished})
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        rep = run_sweep(tasks, d, RayExecutor(), retries=2)
    finally:
        stop.set()
        watcher.join(60)
    assert removed, f"the spare node {spare_id} never ran a task of the sweep: {sorted(_runs(marks))}"
    assert rep.complete and rep.ran == n and completed_ids(d) == {t.id for t in tasks}
    assert not [p for p in d.iterdir() if p.name.startswith(".tmp-")]
    where = _placement(d, tasks)
    # results from the spare node: only tasks it had started before its removal
    assert {tid for tid, p in where.items() if p["node_id"] == spare_id} <= finished | {tasks[i].id for i in removed[0]}
    rerun = [i for i in removed[0] if rep.attempts[tasks[i].id] >= 2]
    assert rerun, "no task was running on the spare node when it was removed"
    for i in rerun:  # started on the removed node, finished on another one, one file
        assert where[tasks[i].id]["node_id"] != spare_id
    runs = _runs(marks)  # every execution was counted as an attempt (none ran unseen)
    assert all(1 <= sum(1 for j, _ in runs if j == i) <= rep.attempts[t.id] for i, t in enumerate(tasks))
    assert read_sweep(d, tasks).equals(pa.table({"i": list(range(n)), "square": [i * i for i in range(n)]}))


def test_calibration_with_a_node_removed_equals_the_local_executor(tmp_path, cluster):
    from numstd.calibrate import calibrate

    spare = _add_warm_node(cluster)
    state = {"removed_at": None}

    def progress(done: int, total: int) -> None:
        if state["removed_at"] is None and done >= 3:
            cluster.remove_node(spare)
            state["removed_at"] = done

    kw = dict(template="NS-RMSNORM-BF16", quick=True, date="2025-01-01")
    on_ray = calibrate(**kw, out=tmp_path / "ray", executor=RayExecutor(), progress=progress)
    assert state["removed_at"] is not None and state["removed_at"] < on_ray.sweep.total
    local = calibrate(**kw, out=tmp_path / "local", executor="local", workers=2)
    assert on_ray.ok and local.ok and on_ray.sweep.complete
    assert on_ray.draft_path.read_bytes() == local.draft_path.read_bytes()
    assert on_ray.evidence_path.read_bytes() == local.evidence_path.read_bytes()
    files = sorted(on_ray.sweep_path.glob("*.parquet"))
    assert len(files) == on_ray.sweep.total  # one file per task
    import pyarrow.parquet as pq

    nodes = {json.loads(pq.read_schema(p).metadata[b"numstd.sweep"])["placement"]["node_id"] for p in files}
    assert nodes <= {n["NodeID"] for n in ray.nodes()}  # every result names a node of the cluster


_DRIVER = textwrap.dedent("""
    import sys, ray
    sys.path[:0] = {path!r}
    from test_ray_cluster import _tasks
    from pathlib import Path
    from numstd.sweep import run_sweep
    ray.init(address={address!r}, _node_ip_address="127.0.0.1", logging_level="ERROR",
             runtime_env={{"env_vars": {{"PYTHONPATH": {env!r}}}}})
    if {wait!r}:  # connected: start the sweep when the test says so
        print("READY", flush=True)
        sys.stdin.readline()
    try:
        rep = run_sweep(_tasks({n}, Path({marks!r}), sleep={sleep}), {d!r}, "ray", retries=1)
    except Exception as exc:
        print("REFUSED", type(exc).__name__, exc, flush=True)
        raise SystemExit(3)
    print("REPORT", rep.reused, rep.ran, len(rep.failed), flush=True)
""")


def _driver(cluster, d: Path, marks: Path, n: int, sleep: float,  # noqa: ANN001 - Cluster
            wait: bool = False) -> subprocess.Popen:
    """Another driver process on the cluster running the sweep; ``wait``: once connected, it prints
    ``READY`` and starts when a line arrives on its stdin."""
    code = _DRIVER.format(path=[str(HERE), str(ROOT)], address=cluster.address, env=cluster.path, n=n,
                          marks=str(marks), sleep=sleep, d=str(d), wait=wait)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": cluster.path})


def test_two_drivers_resume_one_sweep_without_duplicate_work(tmp_path, cluster):
    d, marks, n = tmp_path / "ds", tmp_path / "m", 12
    tasks = _tasks(n, marks, sleep=0.5)
    other = _driver(cluster, d, marks, n, 0.5, wait=True)  # connects now, resumes later
    first = _driver(cluster, d, marks, n, 0.5)
    deadline = time.monotonic() + 120
    while len(completed_ids(d)) < 3 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # the driver dies mid-sweep
    first.wait()
    done_before = completed_ids(d)
    assert 3 <= len(done_before) < n, first.stdout.read()
    before = {i for i, _ in _runs(marks)}
    head = []
    for line in other.stdout:  # two drivers resume at once: the other process and this one
        head.append(line)
        if line.startswith("READY"):
            break
    other.stdin.write("go\n")
    other.stdin.flush()
    outs: list[str] = []
    try:
        here = run_sweep(tasks, d, RayExecutor(), retries=1)
        outs.append(f"REPORT {here.reused} {here.ran} {len(here.failed)}")
    except NumstdError as exc:
        outs.append(f"REFUSED {exc}")
    outs.append("".join(head) + other.communicate(timeout=120)[0])
    reports = sorted(tuple(map(int, o.split("REPORT")[1].split())) for o in outs if "REPORT" in o)
    refused = [o for o in outs if "REFUSED" in o]
    assert len(reports) + len(refused) == 2 and other.returncode in (0, 3), outs
    assert all("another sweep is running" in o for o in refused)  # refused by the lock, not by an error
    missing = n - len(done_before)
    # exactly one driver ran the missing tasks; the other was refused, or came after and reused all
    assert reports in ([(len(done_before), missing, 0)], [(len(done_before), missing, 0), (n, 0, 0)]), outs
    assert completed_ids(d) == {t.id for t in tasks}
    runs = _runs(marks)
    for i, t in enumerate(tasks):  # a task whose file existed never ran again
        count = sum(1 for j, _ in runs if j == i)
        assert count == 1 if t.id in done_before else 1 <= count <= 1 + (i in before)
    again = run_sweep(tasks, d, RayExecutor())  # a driver run again: nothing left to do
    assert (again.reused, again.ran) == (n, 0) and len(_runs(marks)) == len(runs)


@pytest.mark.parametrize("where", ["s3://bucket/sweep", "gs://bucket/sweep"])
def test_an_object_store_url_is_refused_with_the_fix(tmp_path, where):
    from numstd.errors import ParameterError

    with pytest.raises(ParameterError, match="not an object-store URL; mount the bucket"):
        run_sweep(_tasks(1, tmp_path / "m"), where, "serial")
    with pytest.raises(ParameterError, match="object-store URL"):  # as calibrate(out=...) passes it: a Path
        run_sweep(_tasks(1, tmp_path / "m"), Path(where) / "x.sweep", "serial")
    assert not Path(where.split(":")[0] + ":").exists()  # no local directory named after the scheme
