#!/usr/bin/env python
"""Benchmark: ``scripts/calibrate_all.py`` on a local 3-node Ray cluster against the local executor.

The cluster is the one of tests/test_ray_cluster.py: ``ray.cluster_utils.Cluster`` on this machine,
loopback only (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, every node on 127.0.0.1), a CPU-only head,
a node advertising ``num_gpus=1`` and one advertising ``neuron_cores`` — one CPU each, so 3 Ray
CPUs.  The local executor is numstd's default: one process per core (``os.cpu_count()``).

Timed, each ``--repeats`` times from an empty output directory, medians reported:

* ``calibrate_all``: ``scripts/calibrate_all.py --quick --only IDS --out DIR`` run by its own
  ``main()``, with its ``calibrate`` bound to the executor (the script has no executor option) and
  its ``docs/calibration.md`` writer switched off (the benchmark must not rewrite the docs);
  the drafts and evidence of both executors are compared byte for byte;
* ``noop``: a sweep of ``--noop`` tasks that return a one-row table (per-task cost of the
  executor and the sweep: submit, run, return, write the result file).

Derived: the ratio ``ray / local`` of the medians, and the per-task overhead of the cluster,
``(ray - local) / tasks`` of calibrate_all and ``ray / tasks`` of the no-op sweep.  Cluster start
and ``ray.init`` are timed separately, not counted.  Writes ``benchmarks/results/scale_out.json``.

    python benchmarks/scale_out.py [--only NS-RMSNORM-BF16 ...] [--repeats 1] [--noop 200] [--full]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is imported: loopback only (one machine)
# a Ray directory of this run: no other process's ray.init() joins this cluster through
# /tmp/ray/ray_current_cluster while it runs (as tests/conftest.py does for the tests)
_RAY_TMP = None if "RAY_TMPDIR" in os.environ else tempfile.mkdtemp(prefix="nsray-", dir="/tmp")
if _RAY_TMP:
    os.environ["RAY_TMPDIR"] = _RAY_TMP
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]
DEFAULT_ONLY = ["NS-RMSNORM-BF16", "NS-SOFTMAX-BF16", "NS-MATMUL-BF16"]
LOOPBACK = "127.0.0.1"


def noop(i: int):  # noqa: ANN201 - pyarrow.Table
    """The no-op task: a one-row table."""
    import pyarrow as pa

    return pa.table({"i": [i]})


def _calibrate_all():  # noqa: ANN202 - module
    spec = importlib.util.spec_from_file_location("calibrate_all", ROOT / "scripts" / "calibrate_all.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_calibrate_all(executor, only: list[str], quick: bool) -> tuple[float, int, str]:  # noqa: ANN001
    """Seconds, tasks and a digest of every draft and evidence file of one calibrate_all run."""
    from numstd.calibrate import calibrate

    mod = _calibrate_all()
    rows: list = []
    mod.calibrate = functools.partial(calibrate, executor=executor)
    mod._write_doc = rows.extend  # keep the rows, leave docs/calibration.md alone
    with tempfile.TemporaryDirectory() as out:
        argv = ["--out", out, "--date", "2025-01-01", "--only", *only] + (["--quick"] if quick else [])
        t = time.perf_counter()
        code = mod.main(argv)
        took = time.perf_counter() - t
        h = hashlib.sha256()
        for _, res, _ in rows:
            h.update(res.evidence_path.read_bytes())
            if res.draft_path is not None:
                h.update(res.draft_path.read_bytes())
    if code != 0:
        raise SystemExit(f"calibrate_all failed on {executor.describe()}")
    return took, sum(r.sweep.total for _, r, _ in rows), h.hexdigest()[:16]


def _run_noop(executor, n: int) -> float:  # noqa: ANN001
    from numstd.executor import Task
    from numstd.sweep import run_sweep, task_id

    tasks = [Task(task_id("noop", {"i": i, "t": time.time_ns()}), f"{Path(__file__).stem}:noop", {"i": i})
             for i in range(n)]
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        rep = run_sweep(tasks, d, executor, retries=0)
        took = time.perf_counter() - t
    assert rep.complete, rep.summary()
    return took


def _cluster():  # noqa: ANN202 - (Cluster, seconds)
    import ray
    from ray.cluster_utils import Cluster

    node = dict(num_cpus=1, node_ip_address=LOOPBACK, object_store_memory=80 * 2**20)
    t = time.perf_counter()
    c = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    c.add_node(**node, num_gpus=1)
    c.add_node(**node, resources={"neuron_cores": 2})
    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(address=c.address, _node_ip_address=LOOPBACK, logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    c.wait_for_nodes()
    assert all(n["NodeManagerAddress"] == LOOPBACK for n in ray.nodes())
    return c, time.perf_counter() - t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=DEFAULT_ONLY, help="standard IDs given to calibrate_all --only")
    p.add_argument("--full", action="store_true", help="full calibrations (default: calibrate_all --quick)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--noop", type=int, default=200, help="tasks of the no-op sweep")
    p.add_argument("--out", default=str(HERE / "results" / "scale_out.json"))
    args = p.parse_args()

    import ray

    from numstd.executor import LocalExecutor, RayExecutor

    cluster, start_s = _cluster()
    executors = {"local": LocalExecutor(), "ray-3-nodes": RayExecutor()}
    result: dict = {"benchmark": "scale_out", "machine_cpus": os.cpu_count(), "only": args.only,
                    "quick": not args.full, "repeats": args.repeats, "cluster_start_s": round(start_s, 3),
                    "ray_cpus": ray.cluster_resources().get("CPU"), "local_workers": executors["local"].workers,
                    "load_average_before": os.getloadavg()[0], "calibrate_all": {}, "noop": {}}
    try:
        digests = set()
        for name, ex in executors.items():
            _run_noop(ex, min(args.noop, 8))  # start the workers (pool processes, Ray workers): not timed
            runs, tasks = [], 0
            for _ in range(args.repeats):
                took, tasks, digest = _run_calibrate_all(ex, args.only, not args.full)
                runs.append(took)
                digests.add(digest)
            noop_runs = [_run_noop(ex, args.noop) for _ in range(args.repeats)]
            result["calibrate_all"][name] = {"median_s": round(statistics.median(runs), 3), "tasks": tasks,
                                             "times_s": [round(x, 3) for x in runs]}
            result["noop"][name] = {"median_s": round(statistics.median(noop_runs), 3), "tasks": args.noop,
                                    "per_task_ms": round(1e3 * statistics.median(noop_runs) / args.noop, 2)}
            print(name, result["calibrate_all"][name], result["noop"][name], flush=True)
    finally:
        for ex in executors.values():
            ex.close()
        ray.shutdown()
        cluster.shutdown()
        if _RAY_TMP:
            shutil.rmtree(_RAY_TMP, ignore_errors=True)
    cal, nop = result["calibrate_all"], result["noop"]
    tasks = cal["local"]["tasks"]
    result["identical_drafts_and_evidence"] = len(digests) == 1
    result["ratio_ray_over_local"] = round(cal["ray-3-nodes"]["median_s"] / cal["local"]["median_s"], 3)
    result["overhead_per_task_ms"] = round(1e3 * (cal["ray-3-nodes"]["median_s"] - cal["local"]["median_s"]) / tasks, 2)
    result["noop_ratio_ray_over_local"] = round(nop["ray-3-nodes"]["median_s"] / nop["local"]["median_s"], 3)
    result["load_average_after"] = os.getloadavg()[0]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return 0 if result["identical_drafts_and_evidence"] else 1


if __name__ == "__main__":
    sys.exit(main())
