"""Shared helpers of the speed benchmarks: timing, profiles, the machine's description.

Timing convention: one warm-up call, then ``repeats`` timed calls (``time.perf_counter``); the
reported figure is the median.  Where two things are compared (``check`` against a baseline) their
calls are interleaved (:func:`interleaved_times`), so that a burst of load from other processes on
a shared machine hits both sides alike.  Every benchmark prints one JSON object on its last stdout
line.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["ROOT", "median_time", "interleaved_times", "profile_top", "profile_stages", "CHECK_STAGES", "machine",
           "blas_info", "emit", "clean_env", "loadavg", "two_core_probe", "cross_core_probe"]

#: the steps of ``numstd.check``: label -> (file path suffix, function name) of the function doing it
CHECK_STAGES: dict[str, tuple[str, str]] = {
    "validate inputs": ("numstd/ops.py", "validate"),
    "float64 reference": ("numstd/reference/__init__.py", "validated_reference"),
    "error-model environment": ("numstd/models/__init__.py", "environment"),
    "per-element bound": ("numstd/models/__init__.py", "evaluate"),
    "judge (ULP errors, distribution, worst)": ("numstd/criteria.py", "add"),
}

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def median_time(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> tuple[float, list[float]]:
    """Median wall time of ``fn()`` over ``repeats`` calls after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def interleaved_times(fns: dict[str, Callable[[], Any]], repeats: int = 5) -> dict[str, list[float]]:
    """Wall times of each function over ``repeats`` rounds; every round calls each function once,
    in order, after one untimed warm-up round."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(max(1, repeats)):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return times


@contextlib.contextmanager
def _serial() -> Iterator[None]:
    """``check`` without its prefetch thread: it normally prepares the next chunk's reference on a
    worker thread (:func:`numstd.chunks.prefetch`), which cProfile does not see, so profiles
    (which attribute time to steps) run the chunks serially."""
    ck = sys.modules.get("numstd.check")
    orig = getattr(ck, "prefetch", None)
    if orig is not None:
        ck.prefetch = lambda items, prepare, background=True, **kw: orig(items, prepare, background=False, **kw)
    try:
        yield
    finally:
        if orig is not None:
            ck.prefetch = orig


def _profiled(fn: Callable[[], Any]) -> cProfile.Profile:
    """One call of ``fn`` under cProfile, with ``check``'s chunks run serially (:func:`_serial`)."""
    prof = cProfile.Profile()
    with _serial():
        prof.enable()
        fn()
        prof.disable()
    return prof


def profile_top(fn: Callable[[], Any], n: int = 8) -> list[dict]:
    """The ``n`` functions with the largest own time in one profiled call of ``fn`` (cProfile).

    Each entry: ``function`` (file:line(name)), ``tottime_s``, ``cumtime_s`` and ``share`` of
    the call's total own time.
    """
    st = pstats.Stats(_profiled(fn), stream=io.StringIO())
    total = sum(v[2] for v in st.stats.values()) or 1.0
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:n]
    out = []
    for (file, line, name), (_, _, tottime, cumtime, _) in rows:
        where = f"{Path(file).name}:{line}({name})" if file != "~" else name
        out.append({"function": where, "tottime_s": round(tottime, 4), "cumtime_s": round(cumtime, 4),
                    "share": round(tottime / total, 3)})
    return out


def profile_stages(fn: Callable[[], Any], stages: dict[str, tuple[str, str]] = CHECK_STAGES) -> dict:
    """Cumulative time of each stage (a function, summed over its calls) in one profiled call of
    ``fn``, and its share of the whole call: which step of a ``check`` dominates.

    Profiled serially (:func:`_serial`).
    """
    t = time.perf_counter()
    prof = _profiled(fn)
    total = time.perf_counter() - t
    st = pstats.Stats(prof, stream=io.StringIO())
    out = {}
    for label, (suffix, name) in stages.items():
        cum = sum(v[3] for (file, _, func), v in st.stats.items()
                  if func == name and file.replace("\\", "/").endswith(suffix))
        out[label] = {"cumtime_s": round(cum, 4), "share": round(cum / total, 3) if total else 0.0}
    out["total (profiled)"] = {"cumtime_s": round(total, 4), "share": 1.0}
    return out


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages (other processes sharing the cores skew timings)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return None


def two_core_probe(n: int = 1 << 20, rounds: int = 20, repeats: int = 3) -> dict:
    """How much of two cores this machine gives right now: the same numpy work (``rounds`` float64
    ``np.exp`` over ``n`` elements, GIL released) on one thread, then on two threads at once (each
    its own arrays); fastest of ``repeats``.  ``efficiency = one / two``: 1.0 when the second thread
    runs on a core of its own, 0.5 when both share one.  ``check`` runs two threads, the baselines
    mostly one, so a low value explains a slow run.  (It does not see two cores that share no
    cache — independent threads run as fast then — :func:`cross_core_probe` does.)  ~0.2 s."""
    import threading

    import numpy as np

    x = np.random.default_rng(0).standard_normal(n)
    outs = [np.empty_like(x), np.empty_like(x)]

    def work(out: Any) -> None:
        for _ in range(rounds):
            np.exp(x, out=out)

    def one() -> float:
        t = time.perf_counter()
        work(outs[0])
        return time.perf_counter() - t

    def two() -> float:
        t = time.perf_counter()
        th = threading.Thread(target=work, args=(outs[1],))
        th.start()
        work(outs[0])
        th.join()
        return time.perf_counter() - t

    one(), two()  # warm-up
    t1 = min(one() for _ in range(repeats))
    t2 = min(two() for _ in range(repeats))
    return {"one_thread_s": round(t1, 4), "two_threads_s": round(t2, 4), "efficiency": round(t1 / t2, 2)}


def cross_core_probe(n: int = 1 << 17, rounds: int = 30) -> dict:
    """How much it costs right now to read what the other thread just wrote: the main thread sums a
    1 MiB float64 buffer that a second thread has just filled, against summing one it filled itself
    (median over ``rounds``).  ``ratio = other / own``: about 1.1 when the two cores share a cache,
    about 2.3 when they do not — on this VM the host sometimes places the two virtual CPUs on
    different core complexes for seconds at a time, and ``check``'s pipeline, which hands each
    prepared chunk to the other thread, then slows down (``numstd.chunks.prefetch`` falls back to
    serial work; docs/benchmarks.md).  ~20 ms."""
    import threading

    import numpy as np

    buf = np.zeros(n)
    go, done = threading.Event(), threading.Event()

    def writer() -> None:
        for k in range(rounds):
            go.wait()
            go.clear()
            buf[:] = k
            done.set()

    th = threading.Thread(target=writer)
    th.start()
    other = []
    for _ in range(rounds):
        go.set()
        done.wait()
        done.clear()
        t = time.perf_counter()
        buf.sum()
        other.append(time.perf_counter() - t)
    th.join()
    own = []
    for k in range(rounds):
        buf[:] = k
        t = time.perf_counter()
        buf.sum()
        own.append(time.perf_counter() - t)
    o, m = statistics.median(other), statistics.median(own)
    return {"other_us": round(o * 1e6, 1), "own_us": round(m * 1e6, 1), "ratio": round(o / m, 2)}


def blas_info() -> list[dict]:
    """What threadpoolctl reports for the loaded BLAS libraries (empty when it is not installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "version", "architecture", "num_threads", "threading_layer")
    return [{k: d.get(k) for k in keep} for d in threadpool_info()]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(mod: str) -> str | None:
    try:
        m = __import__(mod)
    except Exception:
        return None
    return getattr(m, "__version__", "?")


def machine() -> dict:
    """CPU model, cores, memory, Python and library versions, BLAS kernel (threadpoolctl)."""
    import numpy as np

    import numstd

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    return {
        "cpu": _cpu_model(), "cores": os.cpu_count(), "usable_cores": usable, "memory_gib": _mem_total_gib(),
        "platform": platform.platform(), "python": platform.python_version(), "numpy": np.__version__,
        "numstd": numstd.__version__, "torch": _version("torch"), "jax": _version("jax"),
        "ml_dtypes": _version("ml_dtypes"), "blas": blas_info(),
        "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")},
    }


def clean_env() -> dict:
    """This process's environment without ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` (for a benchmark
    subprocess only: they force an old kernel on this machine and slow a current numpy)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    return env


def emit(result: dict) -> None:
    """Print ``result`` as the JSON line the runner reads."""
    print(json.dumps(result, default=float), flush=True)
