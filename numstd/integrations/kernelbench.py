"""KernelBench drop-in: ``eval_kernel_against_ref`` with KernelBench's contract, judged by numstd.

KernelBench (github.com/ScalingIntelligence/KernelBench, ``src/kernelbench/eval.py``) compares a
generated ``ModelNew`` with the problem's ``Model`` by ``torch.allclose`` at one tolerance per
precision.  This function takes the same arguments (the original and custom sources as strings,
``seed_num``, ``num_correct_trials``, ``measure_performance``, ``device``, ``precision``, …) and
returns a :class:`KernelExecResult` with KernelBench's fields (``compiled``, ``correctness``,
``metadata``, ``runtime``, ``runtime_stats``, ``ref_runtime``, ``ref_runtime_stats``) plus
``numstd``, the :class:`~numstd.grade_report.GradeReport`.  A KernelBench user changes one import::

    from numstd.integrations.kernelbench import eval_kernel_against_ref

Correctness is :func:`numstd.grade.files.grade_files` on the two sources (written to a temporary
folder): ``num_correct_trials`` trials of every input distribution of the module standard, the
anti-gaming protocol of :func:`numstd.grade.grade` (secret seed, order swap, cached and constant
outputs, input mutation, second shape set), the candidate in a subprocess unless
``isolate=False``.  On a machine with CUDA (``device`` None picks ``cuda:0``) the grade and the
timing run there; on CPU they run on the CPU, where KernelBench itself refuses to run.

Which of KernelBench's own adversarial kernels (``src/kernelbench/unit_tests/test_eval_adversarial.py``)
the protocol catches:

* **result reuse** (``torch.empty`` output that holds the reference's freed result): caught — in
  a subprocess the reference never runs beside the candidate, and in-process every other case
  runs the candidate first;
* **input zeroing** (the candidate zeros its inputs and returns zeros): caught by
  ``inputs_unchanged`` (each run gets its own copy, compared bitwise afterwards) and by
  ``constant_output``;
* **cached results** (the output of the first call returned again): caught by ``input_dependence``;
* **non-default streams** (work left running on another CUDA stream): numstd copies outputs to
  the host on the current stream, so an unfinished result is judged as it is then and fails when
  wrong; a stream exploit aimed at the *timer* is out of scope (numstd judges numbers; the
  timing here synchronises the device before reading the clock, as KernelBench's ``cuda_event``).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["KernelExecResult", "eval_kernel_against_ref"]


@dataclass
class KernelExecResult:
    """KernelBench's result fields (``runtime`` in microseconds, -1 when not measured) and ``numstd``."""

    compiled: bool = False
    correctness: bool = False
    metadata: dict = field(default_factory=dict)
    runtime: float = -1.0
    runtime_stats: dict = field(default_factory=dict)
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = field(default_factory=dict)
    numstd: Any = None

    def model_dump(self) -> dict:
        """The KernelBench fields as a dict (pydantic's name), the report as its JSON dict."""
        return {"compiled": self.compiled, "correctness": self.correctness, "metadata": dict(self.metadata),
                "runtime": self.runtime, "runtime_stats": dict(self.runtime_stats), "ref_runtime": self.ref_runtime,
                "ref_runtime_stats": dict(self.ref_runtime_stats),
                "numstd": None if self.numstd is None else self.numstd.to_dict()}


def _device(device: Any) -> str:
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if isinstance(device, int):
        return f"cuda:{device}"
    return str(device)


def _time(model: Any, inputs: list, trials: int, device: str) -> dict:
    """Wall time of ``model(*inputs)`` per call in µs (CUDA events on a GPU, perf_counter on the CPU)."""
    import statistics

    import torch

    times = []
    with torch.no_grad():
        model(*inputs)  # warm-up
        for _ in range(max(1, trials)):
            if device.startswith("cuda"):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3)
            else:
                t = time.perf_counter()
                model(*inputs)
                times.append((time.perf_counter() - t) * 1e6)
    return {"mean": statistics.fmean(times), "std": statistics.pstdev(times), "min": min(times), "max": max(times),
            "num_trials": len(times), "device": device}


def eval_kernel_against_ref(original_model_src: str, custom_model_src: str, seed_num: int = 42,
                            num_correct_trials: int = 1, num_perf_trials: int = 10, measure_performance: bool = False,
                            timing_method: str = "cuda_event", verbose: bool = False, build_dir: Any = None,
                            device: Any = None, backend: str = "cuda", precision: Any = None,
                            check_for_excessive_speedup: bool = True, excessive_speedup_threshold: float = 10, *,
                            isolate: bool = True, secret_seed: int | None = None, max_dim: int | None = None,
                            timeout_s: float = 120.0, **grade_kwargs: Any) -> KernelExecResult:
    """Grade ``custom_model_src``'s ``ModelNew`` against ``original_model_src``'s ``Model`` (module docstring).

    Parameters
    ----------
    original_model_src, custom_model_src : str
        Python sources: the problem (``Model``, ``get_inputs``, ``get_init_inputs``) and the candidate.
    seed_num : int
        The public seed (KernelBench's); the report records the secret seed mixed with it.
    num_correct_trials : int
        Trials (each with every input distribution of the module standard).
    num_perf_trials, measure_performance, timing_method :
        Timing of the candidate and the reference when ``measure_performance`` and it is correct.
    device : torch.device, int, str or None
        None: ``cuda`` when available, else the CPU.
    precision : torch.dtype or format-like, optional
        The working dtype (KernelBench's ``precision``; default: the inputs' dtype).
    backend, build_dir, verbose, check_for_excessive_speedup, excessive_speedup_threshold :
        Accepted for compatibility; ``backend`` and ``build_dir`` are recorded in the metadata.
    isolate : bool
        Run the candidate in a subprocess (default) or in this process (trusts the candidate).
    secret_seed, max_dim, timeout_s, **grade_kwargs :
        Passed to :func:`numstd.grade.files.grade_files`.

    Returns
    -------
    KernelExecResult
    """
    from ..core.errors import NumstdError
    from ..grade.files import CandidateLoadError, grade_files, load_module

    dev = _device(device)
    meta: dict = {"device": dev, "backend": backend, "grader": "numstd", "isolation": "subprocess" if isolate else
                  "in-process"}
    if build_dir is not None:
        meta["build_dir"] = str(build_dir)
    with tempfile.TemporaryDirectory(prefix="numstd-kb-") as tmp:
        prob, cand = Path(tmp) / "problem.py", Path(tmp) / "candidate.py"
        prob.write_text(original_model_src, encoding="utf-8")
        cand.write_text(custom_model_src, encoding="utf-8")
        if isolate:
            try:
                compile(custom_model_src, "candidate.py", "exec")
            except SyntaxError as exc:
                meta.update(compilation_error_name="SyntaxError", compilation_error=str(exc))
                return KernelExecResult(compiled=False, metadata=meta)
        try:
            report = grade_files(prob, cand, max_dim=max_dim, isolate=isolate, timeout_s=timeout_s, seed=seed_num,
                                 secret_seed=secret_seed, trials=num_correct_trials, dtype=precision, device=dev,
                                 **grade_kwargs)
        except CandidateLoadError as exc:
            text = str(exc)
            compiled = "while loading" not in text and "defines no ModelNew" not in text and \
                "ModelNew" not in text.split("raised", 1)[-1][:40]
            key = "runtime_error" if compiled else "compilation_error"
            meta.update({key: text, f"{key}_name": text.split("raised ", 1)[-1].split(":", 1)[0]})
            return KernelExecResult(compiled=compiled, correctness=False, metadata=meta)
        except NumstdError:
            raise
        meta["numstd_standards"] = list(report.standards)
        meta["numstd_snippet"] = report.snippet()
        if not report.passed:
            meta["correctness_issue"] = report.snippet()
            errs = [c.verdict.criteria[0].message for c in report.failures if c.verdict.criteria and
                    c.verdict.criteria[0].name == "runs"]
            if errs:
                meta["runtime_error"] = errs[0]
        result = KernelExecResult(compiled=True, correctness=report.passed, metadata=meta, numstd=report)
        if measure_performance and report.passed:
            import torch

            p = load_module(prob, max_dim=max_dim)
            c = load_module(cand)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_num)
                init = list(p.get_init_inputs()) if hasattr(p, "get_init_inputs") else []
                inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in p.get_inputs()]
                ref = p.Model(*init).to(dev)
                new = c.ModelNew(*init).to(dev)
            result.runtime_stats = _time(new, inputs, num_perf_trials, dev)
            result.ref_runtime_stats = _time(ref, inputs, num_perf_trials, dev)
            result.runtime, result.ref_runtime = result.runtime_stats["mean"], result.ref_runtime_stats["mean"]
            if check_for_excessive_speedup and result.runtime > 0 and \
                    result.ref_runtime / result.runtime > excessive_speedup_threshold:
                meta["excessive_speedup"] = True
        return result
