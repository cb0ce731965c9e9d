"""The sweep: every corpus variant on every benchmark case, judged by numstd and the fixed rules.

What runs
---------
*Standards*: for each op of the corpus, every active standard (latest version) that
:func:`numstd.check` selects **by default** for its formats — ``find_standard(op, inputs, output,
accumulate)`` without selector parameters returns it.  Standards reached only through a selector
(``allow_tf32=True``) are left out: the benchmark scores what a grading tool gets when it calls
``numstd.check(out, op=..., inputs=...)``, with ``accumulate=<16-bit format>`` for the
16-bit-arithmetic (``arith16``) standards, which that declaration selects.

*Cases*: the standard's ``[suite]`` shapes × distributions with one seed, :data:`SEED` = 101, which
no calibration run uses (the shipped suites use seeds 0–2), so numstd is not scored on the data its
constants were fitted on.  Inputs come from :func:`numstd.suites.make_case` (signed, offset, large,
heavy-tailed, wide-range and, for elementwise ops, special values).  ``quick`` keeps the two
smallest shapes of each suite.

*Subjects*: a (standard, variant) pair for each corpus variant whose ``applies`` and
``acc_formats`` accept the standard's formats.  The standard's template may *exclude* a corpus
variant ("not evidence for this standard", e.g. sigmoid via tanh for its absolute error) or *allow*
a bug; as in calibration, an excluded variant is not counted as legitimate (it is reported
separately) and an allowed bug counts as legitimate.  Likewise a third-party library variant
(``torch-cpu``) that the standard's calibration declared non-conforming — its evidence rows
(``reference_data/evidence/<ID>@<N>.evidence.parquet``) carry family ``backend-excluded``
because it needed more than 10× what every numpy model of the corpus needs — is reported
separately, not counted.

*Runs*: a legitimate subject runs on every case its ``observable`` predicate (if any) says it models; a
bug runs where its ``observable`` predicate says it can manifest (elsewhere it computes the right answer) — a bug never observable on any case is
listed, not counted.  The variant's seed is ``1000·seed + 7`` as in calibration.

Each run yields a :class:`Run`: numstd's verdict (``numstd.check`` with the inputs of the case, no
``standard=``) and each fixed rule's result against the reference rounded to the output format.
"""

from __future__ import annotations

import functools
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["SEED", "Unit", "Run", "benchmark_standards", "calibration_exclusions", "subjects_for", "units",
           "run_unit", "sweep"]

SEED = 101
"""Suite seed of the benchmark cases (calibration uses the suites' own seeds, 0–2)."""


@dataclass(frozen=True)
class Unit:
    """One case of one standard: the unit of parallel work."""

    standard: str
    op: str
    shape: tuple
    distribution: str
    seed: int

    @property
    def cost(self) -> float:
        """A rough cost estimate (elements touched) used to schedule the largest units first."""
        n = float(np.prod(self.shape))
        return n * (4.0 if self.op in ("matmul", "linear", "attention") else 1.0)


@dataclass
class Run:
    """One subject on one case.

    ``observable`` is False for a bug that cannot manifest on the case (then nothing ran and the
    verdict fields are empty).  ``numstd_failed`` lists ``name value/limit`` of each failed
    criterion; ``methods`` maps a fixed rule's name to ``[passed, metric]``.
    """

    standard: str
    op: str
    output: str
    variant: str
    legit: bool
    family: str
    case: str
    observable: bool
    numstd_passed: bool | None = None
    numstd_standard: str = ""
    numstd_failed: list = field(default_factory=list)
    normalized_max: float | None = None
    ulp_max: float | None = None
    ulp_mean_signed: float | None = None
    methods: dict = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _is_default(std: Any) -> bool:
    from numstd.errors import NumstdError
    from numstd.registry import find_standard

    if std.selector:
        return False
    try:
        found = find_standard(std.op, inputs=list(std.inputs), output=std.output, accumulate=std.accumulate)
    except NumstdError:
        return False
    return found.key == std.key


def benchmark_standards(ops: Sequence[str] | None = None) -> list:
    """The standards the benchmark scores (module docstring), in (op, ID) order."""
    from numstd.corpus import VARIANTS
    from numstd.registry import list_standards

    wanted = set(ops) if ops else set(VARIANTS)
    latest: dict[str, Any] = {}
    for s in list_standards(status="active"):
        if s.op in wanted and (s.id not in latest or s.version > latest[s.id].version):
            latest[s.id] = s
    return [s for s in sorted(latest.values(), key=lambda s: (s.op, s.id)) if _is_default(s)]


@functools.lru_cache(maxsize=None)
def calibration_exclusions(key: str) -> dict[str, str]:
    """Variants the calibration of standard ``key`` declared non-conforming (its evidence file)."""
    from importlib import resources

    from numstd.registry import get_standard

    name = Path(get_standard(key).provenance.get("evidence", "")).name
    if not name:
        return {}
    try:
        f = resources.files("numstd.reference_data") / "evidence" / name
        if not f.is_file():
            return {}
        import pyarrow.parquet as pq

        with f.open("rb") as fh:
            rows = pq.read_table(fh, columns=["variant", "family"]).to_pylist()
    except (ImportError, OSError, ModuleNotFoundError):
        return {}
    return {r["variant"]: "calibration declared it non-conforming (needs > 10× the largest constant any numpy "
                          "model of the corpus needs; evidence family backend-excluded)"
            for r in rows if r["family"] == "backend-excluded"}


def subjects_for(std: Any, arrays: Sequence[Any], params: dict) -> list[tuple[Any, bool, str, str]]:
    """``(variant, legit, family, note)`` for each corpus variant that applies to ``std``'s formats.

    ``legit``/``family`` are as the standard's template makes them (allowed bugs become legitimate,
    family suffixed ``(allowed)``); ``note`` is the template's reason for an exclusion or an
    allowance.  Excluded variants are returned with family ``excluded``.
    """
    from numstd.corpus import input_formats, variants_for
    from numstd.templates import find_template

    try:
        tmpl = find_template(std.id)
        allow, exclude = dict(tmpl.allow or {}), dict(tmpl.exclude or {})
    except Exception:  # a standard without a template: no policy
        allow, exclude = {}, {}
    exclude.update(calibration_exclusions(std.key))
    fmts = input_formats(arrays)
    out = []
    for v in variants_for(std.op):
        if v.acc_formats is not None and std.accumulate.name not in v.acc_formats:
            continue
        if v.applies is not None and not v.applies(std.output, fmts, params):
            continue
        if v.name in exclude:
            out.append((v, v.legit, "excluded", exclude[v.name]))
        elif v.name in allow and not v.legit:
            out.append((v, True, v.family + " (allowed)", allow[v.name]))
        else:
            out.append((v, v.legit, v.family, ""))
    return out


def units(standards: Sequence[Any], *, seed: int = SEED, quick: bool = False) -> list[Unit]:
    """Every (standard, shape, distribution) of the benchmark, the costliest first."""
    out = []
    for s in standards:
        shapes = [tuple(int(d) for d in sh) for sh in s.suite.get("shapes", [])]
        if quick:
            shapes = sorted(shapes, key=lambda sh: (int(np.prod(sh)), sh))[:2]
        for sh in shapes:
            for d in s.suite.get("distributions", ["normal"]):
                out.append(Unit(s.key, s.op, sh, d, seed))
    return sorted(out, key=lambda u: -u.cost)


def _failed(verdict: Any) -> list[str]:
    return [f"{c.name} {c.value:.4g}/{c.limit:.4g}" for c in verdict.criteria if not c.passed]


def run_unit(unit: Unit, methods: Sequence[Any]) -> list[Run]:
    """Run every subject of ``unit``'s standard on its case (module docstring)."""
    import numstd
    from numstd.ops import validate
    from numstd.registry import get_standard
    from numstd.suites import make_case

    from .methods import expected

    std = get_standard(unit.standard)
    params = dict(std.suite.get("params", {}))
    case = make_case(std.op, unit.shape, unit.distribution, unit.seed, [f.name for f in std.inputs], params)
    _, arrays, full = validate(std.op, list(case.inputs), dict(case.params))
    ref = numstd.reference(std.op, arrays, **full)
    expect = expected(ref.values, std.output)
    runs = []
    for v, legit, family, note in subjects_for(std, arrays, full):
        r = Run(std.key, std.op, std.output.name, v.name, legit, family, case.id, True, note=note)
        # a bug runs where it can manifest; a legitimate variant whose predicate says it does not model
        # these inputs (the stored16 nll/cross_entropy cascades where torch's fp16 partial sums overflow,
        # a documented defect) is not run either, as calibration and the corpus tests skip it
        if family != "excluded" and (not v.legit or v.observable is not None):
            try:
                r.observable = v.observable is None or bool(v.observable(arrays, full, std.output))
            except Exception as exc:  # a predicate that raises: record it, do not count the run
                r.observable, r.error = False, f"observable() raised {type(exc).__name__}: {exc}"
            if not r.observable:
                runs.append(r)
                continue
        t0 = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                y = v.fn([None if x is None else np.array(x) for x in case.inputs], dict(full), std.output,
                         std.accumulate, 1000 * unit.seed + 7)
        except Exception as exc:
            r.error = f"variant raised {type(exc).__name__}: {exc}"
            runs.append(r)
            continue
        try:
            # a 16-bit-arithmetic standard is what a caller gets by declaring it (accumulate=<16-bit>)
            declared = {"accumulate": std.accumulate.name} if std.policy == "arith16" else {}
            verdict = numstd.check(y, op=std.op, inputs=case.inputs, **declared, **case.params)
            r.numstd_passed, r.numstd_standard = bool(verdict.passed), verdict.standard_id
            r.numstd_failed = _failed(verdict)
            r.normalized_max = float(verdict.normalized_max)
            r.ulp_max, r.ulp_mean_signed = float(verdict.ulp.max), float(verdict.ulp.mean_signed)
        except Exception as exc:  # check must not raise on bad numbers: record it as a finding
            r.error = f"numstd.check raised {type(exc).__name__}: {exc}"
        for m in methods:
            res = m.judge(y, expect, std.output)
            r.methods[m.name] = [bool(res.passed), float(res.metric)]
        r.seconds = time.perf_counter() - t0
        runs.append(r)
    return runs


def _init_worker() -> None:
    """One BLAS/torch thread per worker process: the workers are the parallelism."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass
    os.environ["OMP_NUM_THREADS"] = "1"


def _run_unit_job(unit: Unit) -> list[dict]:
    from .methods import load_methods

    try:
        import torch  # only to cap its threads when the corpus' torch variants import it

        torch.set_num_threads(1)
    except ImportError:
        pass
    return [r.to_dict() for r in run_unit(unit, load_methods())]


def sweep(all_units: Sequence[Unit], *, jobs: int = 1,
          progress: Callable[[int, int, Unit], None] | None = None) -> list[dict]:
    """Run every unit (``jobs`` worker processes; 1 runs in this process) and return the runs as dicts."""
    out: list[dict] = []
    if jobs <= 1:
        for i, u in enumerate(all_units, 1):
            out.extend(_run_unit_job(u))
            if progress:
                progress(i, len(all_units), u)
        return out
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no inherited BLAS/torch thread state
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker) as pool:
        for i, (u, res) in enumerate(zip(all_units, pool.map(_run_unit_job, all_units, chunksize=1)), 1):
            out.extend(res)
            if progress:
                progress(i, len(all_units), u)
    return out
