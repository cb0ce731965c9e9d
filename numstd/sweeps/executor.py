"""Executors: where the tasks of a sweep run — this process, a local process pool, or a Ray cluster.

A :class:`Task` is a small picklable spec: a deterministic ID, the function to call as a
``"module:function"`` string, keyword arguments that describe the work (a case ID and seed, a
variant name, a backend name — numstd regenerates the inputs itself on the worker, no user data
travels) and the :class:`Resources` it needs.  An executor runs a batch of tasks and yields one
:class:`Outcome` per task, in completion order; it never retries (retrying, storing and resuming
are :mod:`numstd.sweep`'s job) and it never raises for a task's failure — a task that raises, or
whose worker process dies, comes back as ``Outcome(ok=False, error=...)``.

============  ===========================================================================
name          where tasks run
============  ===========================================================================
``serial``    in this process, one after the other (debugging, the 1-process baseline)
``local``     a :class:`concurrent.futures.ProcessPoolExecutor` (``spawn`` context) over
              all cores for CPU tasks, plus one process per accelerator kind (GPU, Neuron)
``ray``       a Ray cluster: ``ray.init(address=...)`` (``--ray-address`` or ``RAY_ADDRESS``),
              or a local Ray started for the run; each task asks for its :class:`Resources`
============  ===========================================================================

Resources follow the backend a task runs (:func:`resources_for`): CUDA backends ask for
``num_gpus=1``, NKI, torch-neuronx and jax on Neuron for ``resources={"neuron_cores": 1}`` (the
resource Ray detects on Trn1/Trn2 nodes), numpy, the emulators and the CPU libraries for one CPU.
Ray is imported only by :class:`RayExecutor`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

from ..core.errors import BackendUnavailable, ParameterError

__all__ = [
    "Resources", "CPU", "GPU", "NEURON", "Task", "Outcome", "Executor", "SerialExecutor",
    "LocalExecutor", "RayExecutor", "EXECUTORS", "get_executor", "resources_for", "call", "check_picklable",
]


@dataclass(frozen=True)
class Resources:
    """What one task needs: CPUs, GPUs and custom (Ray) resources such as ``neuron_cores``.

    Attributes
    ----------
    cpus, gpus : float
    custom : tuple of (name, amount)
        Sorted pairs (hashable), e.g. ``(("neuron_cores", 1.0),)``.
    """

    cpus: float = 1.0
    gpus: float = 0.0
    custom: tuple[tuple[str, float], ...] = ()

    @property
    def kind(self) -> str:
        """``"cpu"``, ``"gpu"`` or the custom resource names joined by ``+``: the local executor
        keeps one process pool per kind."""
        if self.gpus:
            return "gpu"
        if self.custom:
            return "+".join(name for name, _ in self.custom)
        return "cpu"

    def ray_options(self) -> dict:
        """Keyword arguments of Ray's ``.options()`` for this request."""
        opts: dict[str, Any] = {"num_cpus": self.cpus}
        if self.gpus:
            opts["num_gpus"] = self.gpus
        if self.custom:
            opts["resources"] = dict(self.custom)
        return opts

    def fits(self, node: Mapping[str, float]) -> bool:
        """Whether a node offering ``node`` (Ray's resource totals: ``CPU``, ``GPU``, custom) can run it."""
        need = {"CPU": self.cpus, "GPU": self.gpus, **dict(self.custom)}
        return all(float(node.get(k, 0.0)) >= v for k, v in need.items() if v)

    def missing(self, nodes: Sequence[Mapping[str, float]]) -> list[str]:
        """The resource names of this request that no node in ``nodes`` offers in the amount asked
        (``[]`` when each is offered somewhere, even if no single node offers them all)."""
        need = {"CPU": self.cpus, "GPU": self.gpus, **dict(self.custom)}
        return [k for k, v in need.items() if v and not any(float(n.get(k, 0.0)) >= v for n in nodes)]

    def describe(self) -> str:
        parts = [f"{self.cpus:g} CPU"] + ([f"{self.gpus:g} GPU"] if self.gpus else []) \
            + [f"{v:g} {k}" for k, v in self.custom]
        return ", ".join(parts)


CPU = Resources()
GPU = Resources(gpus=1.0)
NEURON = Resources(custom=(("neuron_cores", 1.0),))

#: backend name -> what its tasks ask for (any other backend: one CPU)
_BACKEND_RESOURCES: Mapping[str, Resources] = {
    "torch:cuda": GPU, "jax:gpu": GPU,
    "nki": NEURON, "torch-neuronx": NEURON, "jax:neuron": NEURON,
}


def resources_for(backend: str | None) -> Resources:
    """The resources a task running ``backend`` asks for (``None``: numpy corpus variants, one CPU).

    Raises
    ------
    BackendUnavailable
        For a name that is not a backend (listing the names).
    """
    if backend is None:
        return CPU
    from .. import backends

    return _BACKEND_RESOURCES.get(backends.get(backend).name, CPU)


@dataclass(frozen=True)
class Task:
    """One unit of work of a sweep.

    Attributes
    ----------
    id : str
        Deterministic (:func:`numstd.sweep.task_id`); the name of its result file.
    fn : str
        ``"package.module:function"``, imported on the worker; called as ``fn(**args)`` and
        returning a ``pyarrow.Table``.
    args : mapping
        Picklable keyword arguments: specs (names, seeds, shapes), never user arrays.
    resources : Resources
    label : str
        Human-readable, for progress and failure reports.
    inline : bool
        Run in the driver's process whatever the executor (its arguments cannot travel, e.g. a
        variant injected as a closure).
    """

    id: str
    fn: str
    args: Mapping[str, Any] = field(default_factory=dict)
    resources: Resources = CPU
    label: str = ""
    inline: bool = False


@dataclass(frozen=True)
class Outcome:
    """What became of one run of a task.

    Attributes
    ----------
    worker : str
        ``host:pid`` of the process that ran it.
    placement : mapping
        Where a Ray task ran (``{}`` for the other executors): ``node_id``, ``node_ip``,
        ``node_resources`` (the node's totals: ``CPU``, ``GPU``, custom such as ``neuron_cores``),
        ``assigned`` (what Ray gave the task) and ``accelerators`` (the device IDs Ray pinned:
        ``{"GPU": ["0"]}``, ``{"neuron_cores": ["0"]}``).
    """

    task: Task
    ok: bool
    value: Any = None
    error: str = ""
    worker: str = ""
    seconds: float = 0.0
    placement: Mapping[str, Any] = field(default_factory=dict)


def call(fn: str, args: Mapping[str, Any]) -> tuple[bool, Any, str, str, float]:
    """Run ``fn(**args)`` here (the worker side of every executor).

    Returns ``(ok, value, error, worker, seconds)``; an exception becomes ``ok=False`` with its type,
    message and the last frames of the traceback (exceptions are not pickled back: they may not be
    picklable).
    """
    start = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        module, _, qual = fn.partition(":")
        obj: Any = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
        value = obj(**dict(args))
    except Exception as exc:  # reported to the driver, which retries and then reports the task
        tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
        return False, None, f"{type(exc).__name__}: {exc}\n{tail}", worker, time.perf_counter() - start
    return True, value, "", worker, time.perf_counter() - start


def _outcome(task: Task, res: tuple) -> Outcome:
    ok, value, error, worker, seconds = res
    return Outcome(task, bool(ok), value, error, worker, float(seconds))


class Executor:
    """Runs batches of tasks (abstract).  Use as a context manager, or call :meth:`close`."""

    name: str = ""
    #: True when tasks may run on other machines (what this process sees may differ there)
    remote: bool = False

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        """Run every task once; yield one :class:`Outcome` per task as each finishes."""
        raise NotImplementedError

    def close(self) -> None:
        """Release processes or the cluster connection this executor started."""

    def describe(self) -> str:
        return self.name

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class SerialExecutor(Executor):
    """Every task in this process, in order (a task that kills its process kills the driver)."""

    name = "serial"

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        for t in tasks:
            yield _outcome(t, call(t.fn, t.args))

    def describe(self) -> str:
        return "serial (this process)"


# ------------------------------------------------------------------------------ local pool
_STARTED: Any = None  # the worker's queue of "task started" notices (set by _init_worker)


def _init_worker(queue: Any) -> None:
    global _STARTED
    _STARTED = queue


def _tracked_call(task_id: str, fn: str, args: Mapping[str, Any]) -> tuple:
    """:func:`call`, announcing the start first so the driver knows which tasks a dead worker held."""
    if _STARTED is not None:
        _STARTED.put(task_id)
    return call(fn, args)


#: math-library thread counts a worker inherits (read when the library loads, hence at process start)
THREAD_VARIABLES: tuple[str, ...] = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                     "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


@contextlib.contextmanager
def _worker_environment(threads: int | None) -> Iterator[None]:
    """While worker processes start: the thread variables not set by the user, set to ``threads``."""
    added = [k for k in THREAD_VARIABLES if k not in os.environ] if threads else []
    os.environ.update({k: str(int(threads)) for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class LocalExecutor(Executor):
    """A process pool on this machine.

    CPU tasks share one pool of ``workers`` processes; tasks that need a GPU or NeuronCores run in
    a pool of ``accelerator_workers`` processes per kind (one process per device kind by default:
    kernels on one device serialize anyway, and each process holds a device context).  For several
    devices per machine use Ray, which pins one device per task.

    A worker that dies (killed, segfault, out of memory) breaks its pool: the tasks that had
    started in it come back failed ("worker process died"); the pool is rebuilt and the tasks that
    had not started are run again without being charged an attempt.

    Parameters
    ----------
    workers : int, optional
        CPU processes (default: every core, ``os.cpu_count()``).
    start_method : {"spawn", "forkserver"}
        Worker start method (never ``fork``: the driver may hold threads and device contexts).
    accelerator_workers : int
        Processes per accelerator kind.
    threads : int or None
        Math-library threads per worker (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
        ``MKL_NUM_THREADS`` … set in the workers' environment at their start, unless already set
        here; as Ray does): one process per core with one thread each, not cores² threads.
        None leaves the libraries' defaults.
    """

    name = "local"

    def __init__(self, workers: int | None = None, *, start_method: str = "spawn",
                 accelerator_workers: int = 1, threads: int | None = 1) -> None:
        if start_method not in ("spawn", "forkserver"):
            raise ParameterError(f"start_method={start_method!r}: use 'spawn' or 'forkserver' "
                                 "(fork is unsafe with threads and device contexts)")
        if workers is not None and int(workers) < 1:
            raise ParameterError(f"workers={workers}: pass a positive number of processes")
        self.workers = int(workers) if workers else (os.cpu_count() or 1)
        self.accelerator_workers = max(1, int(accelerator_workers))
        self.start_method = start_method
        self.threads = threads
        self._pools: dict[str, Any] = {}
        self._queues: dict[str, Any] = {}

    def describe(self) -> str:
        return f"local ({self.workers} process{'es' if self.workers != 1 else ''}, {self.start_method})"

    def _pool(self, kind: str) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if kind not in self._pools:
            ctx = multiprocessing.get_context(self.start_method)
            q = ctx.SimpleQueue()
            size = self.workers if kind == "cpu" else self.accelerator_workers
            with _worker_environment(self.threads):
                pool = ProcessPoolExecutor(max_workers=size, mp_context=ctx, initializer=_init_worker, initargs=(q,))
                for _ in range(size):  # start every worker now, inside this environment
                    pool.submit(int)
            self._pools[kind] = pool
            self._queues[kind] = q
        return self._pools[kind]

    def _drop(self, kind: str) -> None:
        pool = self._pools.pop(kind, None)
        self._queues.pop(kind, None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _drain(self, held: dict[str, set[str]]) -> None:
        """Move the workers' "started" notices into ``held`` (kept small: the pipe must not fill)."""
        for kind, q in self._queues.items():
            while not q.empty():
                held.setdefault(kind, set()).add(q.get())

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        queue = list(tasks)
        held: dict[str, set[str]] = {}  # kind -> IDs of tasks started and not finished
        stillborn = 0  # pools broken before any task started in them
        while queue:
            futures: dict[Any, Task] = {}
            for t in queue:
                futures[self._pool(t.resources.kind).submit(_tracked_call, t.id, t.fn, t.args)] = t
            queue = []
            broken: dict[str, list[Task]] = {}
            remaining = set(futures)
            try:
                while remaining:
                    done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                    self._drain(held)
                    for fut in sorted(done, key=lambda f: futures[f].id):
                        t = futures[fut]
                        try:
                            res = fut.result()
                        except BrokenProcessPool:
                            broken.setdefault(t.resources.kind, []).append(t)
                            continue
                        except Exception as exc:  # the spec did not pickle, or the result did not
                            held.get(t.resources.kind, set()).discard(t.id)
                            yield Outcome(t, False, error=f"{type(exc).__name__}: {exc} (the task could not "
                                          "be sent to or returned from a worker process)")
                            continue
                        held.get(t.resources.kind, set()).discard(t.id)
                        yield _outcome(t, res)
            finally:
                for fut in remaining:  # the consumer stopped early (interrupted): drop what has not started
                    fut.cancel()
            for kind, lost in broken.items():
                self._drain(held)
                running = held.pop(kind, set())
                self._drop(kind)
                stillborn = stillborn + 1 if not running else 0
                if stillborn >= 3:
                    for t in lost:
                        yield Outcome(t, False, error="the worker processes die as they start (see their output "
                                      "above); from a script, call numstd under `if __name__ == '__main__':` "
                                      "(the spawn start method imports the main module in every worker)")
                    continue
                for t in lost:
                    if t.id in running:
                        yield Outcome(t, False, error="worker process died (killed, crashed or out of memory) "
                                      "while this task was running in its pool")
                    else:
                        queue.append(t)

    def close(self) -> None:
        for kind in list(self._pools):
            pool = self._pools.pop(kind)
            self._queues.pop(kind, None)
            pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------------------ Ray
def _placed_call(fn: str, args: Mapping[str, Any]) -> tuple:
    """:func:`call` on a Ray worker, followed by where it ran: the node's ID, the resources Ray
    assigned to the task and the accelerator IDs it pinned (``CUDA_VISIBLE_DEVICES``,
    ``NEURON_RT_VISIBLE_CORES``)."""
    res = call(fn, args)
    import ray

    ctx = ray.get_runtime_context()
    where = {"node_id": ctx.get_node_id(), "assigned": dict(ctx.get_assigned_resources()),
             "accelerators": {k: list(v) for k, v in ctx.get_accelerator_ids().items() if v}}
    return (*res, where)


def _node_table(ray: Any) -> dict[str, dict]:
    """Live nodes: node ID -> ``{"ip": ..., "resources": {...}}`` (Ray's totals without its
    bookkeeping entries ``memory``, ``object_store_memory``, ``node:<ip>``)."""
    out = {}
    for n in ray.nodes():
        if n.get("Alive"):
            res = {k: float(v) for k, v in n.get("Resources", {}).items()
                   if k not in ("memory", "object_store_memory") and not k.startswith("node:")}
            out[n["NodeID"]] = {"ip": n.get("NodeManagerAddress", ""), "resources": res}
    return out


class RayExecutor(Executor):
    """Tasks as Ray remote functions, each asking for its :class:`Resources`.

    Connects to ``address`` (``"auto"``, ``"ray://head:10001"``, ``"HEAD:6379"`` …), else to
    ``RAY_ADDRESS``, else starts a local Ray for the run (``workers`` CPUs, listening on 127.0.0.1
    only; its workers see this process's ``sys.path``).  When Ray is already initialised (a script
    called ``ray.init`` with its own ``runtime_env``), that connection is used and left open.

    Every node must run the same numstd (checked per task: see :func:`numstd.sweep.code_fingerprint`).
    Each outcome records where it ran (:attr:`Outcome.placement`: node ID and IP, the node's
    resources, the resources and accelerator IDs Ray assigned).  A task whose resources no live
    node offers fails at once, naming the missing resource, instead of waiting forever; so does,
    after ``unschedulable_timeout`` seconds, a queued task whose last fitting node left the
    cluster mid-run.  A task running on a node that dies comes back failed (``NodeDiedError``,
    ``WorkerCrashedError``): the sweep runs it again on the nodes left.

    Parameters
    ----------
    address : str, optional
    workers : int, optional
        CPUs of a local Ray started here.
    init_kwargs : mapping, optional
        Extra ``ray.init`` arguments.
    unschedulable_timeout : float
        Seconds a submitted task may wait while no live node offers its resources (a node that
        restarts within it keeps the task).
    poll : float
        Seconds between checks of the live nodes while tasks are pending.

    Raises
    ------
    BackendUnavailable
        When Ray is not installed (``pip install 'numstd[ray]'``).
    """

    name = "ray"
    remote = True

    def __init__(self, address: str | None = None, *, workers: int | None = None,
                 init_kwargs: Mapping[str, Any] | None = None, unschedulable_timeout: float = 30.0,
                 poll: float = 1.0) -> None:
        if not unschedulable_timeout >= 0 or not poll > 0:
            raise ParameterError(f"unschedulable_timeout={unschedulable_timeout}, poll={poll}: pass seconds "
                                 "(timeout >= 0, poll > 0)")
        self.address = address
        self.workers = workers
        self.init_kwargs = dict(init_kwargs or {})
        self.unschedulable_timeout = float(unschedulable_timeout)
        self.poll = float(poll)
        self._owns = False
        self._remote: Any = None

    def describe(self) -> str:
        where = self.address or os.environ.get("RAY_ADDRESS") or "local Ray"
        return f"ray ({where})"

    def _ray(self) -> Any:
        try:
            import ray
        except ImportError as exc:
            raise BackendUnavailable(f"executor 'ray' needs Ray ({exc}); pip install 'numstd[ray]' "
                                     "or use --executor local") from None
        if not ray.is_initialized():
            kwargs = dict(self.init_kwargs)
            kwargs.setdefault("include_dashboard", False)
            kwargs.setdefault("logging_level", "WARNING")
            address = self.address or os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, **kwargs)
            else:
                if self.workers:
                    kwargs.setdefault("num_cpus", int(self.workers))
                kwargs.setdefault("_node_ip_address", "127.0.0.1")  # a Ray of this run only: not reachable from outside
                path = os.pathsep.join(p for p in sys.path if p)
                kwargs.setdefault("runtime_env", {"env_vars": {"PYTHONPATH": path}})
                ray.init(**kwargs)
            self._owns = True
        if self._remote is None:
            self._remote = ray.remote(max_retries=0)(_placed_call)
        return ray

    @staticmethod
    def _unschedulable(t: Task, nodes: Mapping[str, dict], waited: float | None = None) -> Outcome:
        offers = [n["resources"] for n in nodes.values()]
        missing = t.resources.missing(offers)
        what = (f"no live node offers {', '.join(missing)}" if missing
                else "no single live node offers all of them")
        when = "" if waited is None else f" (waited {waited:.0f} s after the nodes offering it left)"
        return Outcome(t, False, error=f"unschedulable on the Ray cluster: the task needs {t.resources.describe()} "
                       f"and {what}{when}; add GPU nodes (num_gpus), or Trn nodes that expose neuron_cores, "
                       "or drop that backend")

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        ray = self._ray()
        nodes = _node_table(ray)
        refs: dict[Any, Task] = {}
        for t in tasks:
            if not any(t.resources.fits(n["resources"]) for n in nodes.values()):
                yield self._unschedulable(t, nodes)
                continue
            refs[self._remote.options(**t.resources.ray_options()).remote(t.fn, dict(t.args))] = t
        stranded: dict[Any, float] = {}  # ref -> when no live node fitting it was first seen
        next_check = time.monotonic() + self.poll
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=self.poll)
                for ref in ready:
                    t = refs.pop(ref)
                    stranded.pop(ref, None)
                    try:
                        res = ray.get(ref)
                    except Exception as exc:  # worker died, node lost, object lost: ray.exceptions.RayError
                        yield Outcome(t, False, error=f"{type(exc).__name__}: {str(exc)[:2000]}")
                        continue
                    *head, where = res
                    if where.get("node_id") not in nodes:  # a node that joined during the run
                        nodes = _node_table(ray)
                    node = nodes.get(where.get("node_id"), {})
                    yield replace(_outcome(t, tuple(head)), placement={
                        **where, "node_ip": node.get("ip", ""), "node_resources": node.get("resources", {})})
                now = time.monotonic()
                if refs and now >= next_check:
                    next_check = now + self.poll
                    nodes = _node_table(ray)
                    for ref, t in list(refs.items()):
                        if any(t.resources.fits(n["resources"]) for n in nodes.values()):
                            stranded.pop(ref, None)
                            continue
                        waited = now - stranded.setdefault(ref, now)
                        if waited >= self.unschedulable_timeout:
                            del refs[ref], stranded[ref]
                            with contextlib.suppress(Exception):
                                ray.cancel(ref)
                            yield self._unschedulable(t, nodes, waited)
        finally:
            for ref in refs:  # interrupted: do not leave work queued on the cluster
                try:
                    ray.cancel(ref)
                except Exception:  # pragma: no cover - already finished or gone
                    pass

    def close(self) -> None:
        if self._owns:
            import ray

            ray.shutdown()
            self._owns = False
        self._remote = None


#: executor name -> class
EXECUTORS: Mapping[str, type] = {"serial": SerialExecutor, "local": LocalExecutor, "ray": RayExecutor}


def get_executor(executor: str | Executor | None = "local", *, workers: int | None = None,
                 address: str | None = None) -> Executor:
    """An executor from its name (``"serial"``, ``"local"``, ``"ray"``) or an :class:`Executor` as is.

    Parameters
    ----------
    workers : int, optional
        Local processes (``local``), CPUs of a Ray started here (``ray``).
    address : str, optional
        Ray cluster address (``ray`` only; default ``RAY_ADDRESS``, else a local Ray).

    Raises
    ------
    ParameterError
        For another name.
    """
    if isinstance(executor, Executor):
        return executor
    name = "local" if executor is None else str(executor).strip().lower()
    if name == "serial":
        return SerialExecutor()
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(address, workers=workers)
    raise ParameterError(f"executor={executor!r}: use one of {', '.join(EXECUTORS)} (or pass an Executor)")


def check_picklable(tasks: Sequence[Task], executor: Executor) -> None:
    """Raise :class:`~numstd.errors.ParameterError` when a task's arguments cannot travel to a worker."""
    if isinstance(executor, SerialExecutor):
        return
    import pickle

    for t in tasks:
        try:
            pickle.dumps(t.args)
        except Exception as exc:
            raise ParameterError(f"task {t.label or t.id} cannot be sent to a worker process ({type(exc).__name__}: "
                                 f"{exc}); define variant functions at module level (importable by name), or run "
                                 "with executor='serial'") from None


