"""Calibration: earn a standard's constants from evidence, write a draft (:func:`calibrate`; the
command ``python -m numstd calibrate`` is its parser, :mod:`numstd.cli.calibrate`).

For one standard (a template instance, or a shipped standard to recalibrate):

1. regenerate its suite (:mod:`numstd.suites`: shapes with the reduction length across decades,
   distributions, seeds) and compute each case's float64 reference once;
2. run every legitimate variant (:mod:`numstd.corpus`: accumulation orders, Trainium PSUM and
   tensor-core emulators, fp32-internal implementations; plus the requested backends) and every
   bug variant on every case;
3. for each legitimate (variant, case) the smallest value of the calibrated constant ``c`` that
   covers every element: the models are affine in ``c`` (``E = E0 + c·E1``), so element i needs
   ``c_i = (|a_i − r_i| − B_i(c=0)) / E1_i`` (using ``ulp`` at ``c = 0``, which over-estimates
   ``c_i`` slightly — conservative); the case needs ``max_i c_i``;
4. fitted ``c = max(floor, margin × max over the legitimate evidence)``, rounded up to two
   significant digits; the bias threshold ``τ`` is widened the same way if a legitimate variant
   needs it;
5. judge every (variant, case) with the fitted standard: every legitimate one must pass and every
   bug must fail on at least one case, otherwise calibration **refuses** (exit 1) and says which
   variant and by how much;
6. write ``DIR/<ID>@<N>.toml`` (status draft, provenance filled in), the evidence
   ``DIR/<ID>@<N>.evidence.parquet`` (one row per variant × case) and, with matplotlib,
   ``DIR/<ID>@<N>.png`` (normalized error against the reduction length per variant).

The same command and seed give the same draft and evidence, byte for byte: everything is seeded,
the date comes from ``--date`` or ``SOURCE_DATE_EPOCH`` (else today), and the recorded command line
is rebuilt from the parsed arguments (by :mod:`numstd.cli.calibrate`).

Scale-out (docs/scale-out.md).  Step 2 is a sweep (:mod:`numstd.sweep`) of tasks — one case and up
to ``chunk`` variants that need the same resources — run by an executor (:mod:`numstd.executor`:
a local process pool by default, or a Ray cluster whose GPU and Trainium nodes run the backends
that need them).  A task regenerates its case from (shape, distribution, seed), runs its
variants and returns their outputs' exact bits; the driver stores each task's result as one
Parquet file of ``OUT/<ID>.sweep/`` as it arrives.  Steps 3–6 then run here from that
dataset: the references (cheap next to the variants), the constant each case needs, the fit and
the judgement under the fitted standard — so ``needed`` and the verdict come from the same output
even for a backend that is not bit-reproducible, and the rows are built in the suite's case
order, then the corpus's variant order, whatever order the tasks finished in.  A task's ID hashes
what its outputs depend on (op, formats, case, variants, numstd's source), not the error model:
rerunning the command after an interruption, or after changing the model, runs only the missing
tasks.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .._version import __version__
from ..core.errors import NumstdError, ParameterError, StandardNotFound

__all__ = ["calibrate", "CalibrationResult", "EvidenceRow"]


@dataclass
class EvidenceRow:
    """One (variant, case) of the evidence."""

    variant: str
    legit: bool
    family: str
    case: str
    distribution: str
    seed: int
    K: int
    needed: float            # smallest calibrated constant covering this case (legit; inf if impossible)
    normalized_max: float    # max |err|/B under the fitted standard
    bias_ratio: float        # |mean signed ulp| / allowed
    ulp_max: float
    ulp_mean: float
    ulp_mean_signed: float
    ulp_q99: float
    ulp_q999: float
    passed: bool
    failed: str
    row_bias_ratio: float = 0.0  # |mean normalised signed row error| / allowed (standards with row_bias)


@dataclass
class CalibrationResult:
    """What :func:`calibrate` found; ``ok`` is False when it refuses to publish."""

    standard_id: str
    version: int
    constant: str
    fitted: float
    bias_tau: float
    evidence: list[EvidenceRow]
    table: dict
    ok: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    draft_path: Path | None = None
    evidence_path: Path | None = None
    plot_path: Path | None = None
    sweep: Any = None               # numstd.sweep.SweepReport of phase 1 (tasks reused, ran, failed)
    sweep_path: Path | None = None  # the dataset of the variants' outputs (None when temporary)

    def summary(self) -> str:
        """The end-of-run table: per legit variant the worst normalized error, per bug the strongest."""
        by: dict[str, list[EvidenceRow]] = {}
        for r in self.evidence:
            by.setdefault(r.variant, []).append(r)
        crit = self.table.get("criteria", {})
        row = f", row bias tau = {crit.get('row_bias_tau', 0.0):g}" if crit.get("row_bias") else ""
        lines = [f"{self.standard_id}@{self.version}: {self.constant} = {self.fitted:g}, bias tau = {self.bias_tau:g}{row}",
                 f"  {'variant':<34} {'kind':<5} {'cases':>5} {'worst |e|/B':>12} {'needs':>9}  outcome"]
        for name, rows in by.items():
            legit = rows[0].legit
            if rows[0].family == "backend-excluded":
                lines.append(f"  {name:<34} {'info':<5} {len(rows):>5} {max(r.normalized_max for r in rows):>12.3g} "
                             f"{'':>9}  excluded (see note)")
                continue
            worst = max(r.normalized_max for r in rows)
            if legit:
                need = max(r.needed for r in rows)
                out = "pass" if all(r.passed for r in rows) else "REJECTED"
                lines.append(f"  {name:<34} {'legit':<5} {len(rows):>5} {worst:>12.3g} {need:>9.3g}  {out}"
                             + (f" (model headroom {self.fitted / need:.2f}×)" if need > 0 and self.constant else ""))
            else:
                caught = [r for r in rows if not r.passed]
                strongest = max((max(r.normalized_max, r.bias_ratio, r.row_bias_ratio) for r in rows), default=0.0)
                out = f"caught on {len(caught)}/{len(rows)} cases ({', '.join(sorted({c for r in caught for c in r.failed.split(',') if c}))})" if caught else "NOT CAUGHT"
                lines.append(f"  {name:<34} {'bug':<5} {len(rows):>5} {worst:>12.3g} {'':>9}  {out}; strongest {strongest:.3g}× the limit")
        for n in self.notes:
            lines.append("  note: " + n)
        if self.problems:
            lines.append("  refused: " + "; ".join(self.problems))
        return "\n".join(lines)

    @property
    def legit_headroom(self) -> float:
        """Fitted constant over the largest value a legitimate case needs (the rounding allowance
        ρ·ulp is exact and has no headroom by design; this is the margin on the error model)."""
        need = max((r.needed for r in self.evidence if r.legit and math.isfinite(r.needed)), default=0.0)
        return math.inf if need <= 0 or not self.constant else self.fitted / need

    @property
    def bug_margin(self) -> float:
        """Smallest over bugs of the strongest violation (how far the mildest bug is outside)."""
        by: dict[str, float] = {}
        for r in self.evidence:
            if not r.legit and r.family != "backend-excluded":
                # caught by specials/shape/dtype (no ratio above 1): infinitely far outside
                strength = math.inf if (not r.passed and max(r.normalized_max, r.bias_ratio, r.row_bias_ratio) <= 1) \
                    else max(r.normalized_max, r.bias_ratio, r.row_bias_ratio)
                by[r.variant] = max(by.get(r.variant, 0.0), strength)
        return min(by.values(), default=math.inf)


def _ceil2(x: float) -> float:
    """Round up to two significant digits (readable, deterministic constants)."""
    if x <= 0 or not math.isfinite(x):
        return x
    e = math.floor(math.log10(x)) - 1
    return math.ceil(x / 10.0 ** e - 1e-9) * 10.0 ** e


def _k_of(op: str, shape: Sequence[int]) -> int:
    if op in ("matmul", "linear", "scaled_matmul"):
        return int(shape[-2]) if op != "linear" else int(shape[1])
    if op == "attention":
        return int(shape[2])
    if op in ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt"):
        return 1
    if op == "nll_loss":  # (the rows the loss sums)
        return int(shape[0])
    if op in ("mse_loss", "huber_loss", "smooth_l1_loss", "kl_div", "hinge_embedding_loss"):  # (the suite's reduction sums every squared difference)
        return math.prod(int(n) for n in shape)
    return int(shape[-1])


def _standard_from_table(table: dict, version: int, status: str = "draft") -> Any:
    from ..catalog.registry import load_standard
    from ..catalog.templates import to_toml

    t = dict(table)
    t["version"] = version
    t["status"] = status
    t.setdefault("provenance", {"method": "calibration in progress"})
    return load_standard(to_toml(_ordered(t)).encode(), f"{t['id']}@{version}.toml")


def _ordered(t: dict) -> dict:
    from ..catalog.templates import _ORDER

    return {k: t[k] for k in _ORDER if k in t}


def calibrate(op: str | None = None, inputs: str | None = None, output: str | None = None,
              accumulate: str = "float32", *, standard: str | None = None, template: str | None = None, backends: Sequence[str] = ("numpy",),
              quick: bool = False, seed: int = 0, out: str | os.PathLike | None = None,
              extra_variants: Iterable[Any] = (), date: str | None = None, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None, command: str | None = None,
              executor: Any = "local", ray_address: str | None = None, retries: int = 2, chunk: int = 8,
              sweep_dir: str | os.PathLike | None = None) -> CalibrationResult:
    """Calibrate one standard; see the module docstring.

    Parameters
    ----------
    op, inputs, output, accumulate : str
        Select the template instance (``inputs`` is the first input's format; ``output`` defaults
        to it).  Ignored when ``standard`` is given.
    template : str, optional
        Calibrate this template instance by ID (e.g. ``NS-MATMUL-FP32-TF32``, the way to reach
        instances chosen by a selector).
    standard : str, optional
        Recalibrate this standard (``ID`` or ``ID@N``): its model, criteria and suite are kept and
        the result is the next version, superseding it.
    backends : sequence of str
        Backends whose outputs join the legitimate evidence when available (``numpy``, ``torch``,
        ``jax``, ``torch:cuda``, ``nki`` …); unavailable ones are skipped and recorded.
    quick : bool
        The first seed only (every shape and distribution).
    seed : int
        Offsets every suite seed (the same seed gives the same draft).
    out : path, optional
        Where to write the draft, evidence and plot (nothing is written when None).
    extra_variants : iterable of corpus Variants
        Added to the corpus for this run (tests use it to inject variants).  Those that cannot be
        pickled (closures, lambdas) run in this process whatever the executor.
    workers : int, optional
        Processes of the local executor (default: every core), CPUs of a Ray started here.
    progress : callable, optional
        ``progress(done, total)`` over the tasks of the sweep.
    executor : {"local", "ray", "serial"} or numstd.executor.Executor
        Where the variant runs go (:mod:`numstd.executor`); the draft and evidence are the same
        byte for byte whatever the executor and number of workers.
    ray_address : str, optional
        Ray cluster to connect to (default ``RAY_ADDRESS``, else a local Ray).
    retries : int
        Extra runs of a task that fails before calibration gives up on it (and raises
        :class:`numstd.sweep.SweepFailed`, naming it).
    chunk : int
        Variants per task (each task runs them on one case).
    sweep_dir : path, optional
        The Parquet dataset of the variants' outputs (default ``OUT/<ID>.sweep``, shared by every
        version of the standard; a temporary directory when ``out`` is None).  Running the same
        calibration again on the same directory runs only the tasks whose result is missing.

    Raises
    ------
    SweepFailed
        A task still fails after its retries (the calibration cannot rest on partial evidence).
    """
    from ..corpus import variants_for
    from ..catalog.registry import get_standard, list_standards
    from ..catalog.templates import find_template, instances

    # --- what to calibrate
    if standard is not None:
        base = get_standard(standard)
        tmpl = find_template(base.id)
        table = _table_of(base)
        version = max(s.version for s in list_standards(base.op) if s.id == base.id) + 1
        table["supersedes"] = f"{base.id}@{max(s.version for s in list_standards(base.op) if s.id == base.id)}"
    elif template is not None:
        tmpl = find_template(template)
        table = {k: v for k, v in tmpl.table.items()}
        existing = [s for s in list_standards(table["op"]) if s.id == tmpl.id]
        version = max((s.version for s in existing), default=0) + 1
        if existing:
            table["supersedes"] = f"{tmpl.id}@{version - 1}"
    else:
        if op is None or inputs is None:
            raise ParameterError("calibrate needs --op and --inputs (or --standard ID to recalibrate)")
        from ..core.formats import get_format

        fin, fout, facc = get_format(inputs).name, get_format(output or inputs).name, get_format(accumulate).name
        matches = [t for t in instances() if t.table["op"] == op and t.table["formats"]["inputs"][0] == fin
                   and t.table["formats"]["output"] == fout and t.table["formats"]["accumulate"] == facc]
        if len(matches) > 1:
            matches = [t for t in matches if "selector" not in t.table] or matches
        if not matches:
            have = sorted(t.id for t in instances() if t.table["op"] == op)
            raise StandardNotFound(f"no template for {op} {fin}→{fout} (acc {facc}); templates for {op}: {have or 'none'}. "
                                   "Add a [[standards]] entry to standards/_templates/")
        tmpl = matches[0]
        table = {k: v for k, v in tmpl.table.items()}
        existing = [s for s in list_standards(op) if s.id == tmpl.id]
        version = max((s.version for s in existing), default=0) + 1
        if existing:
            table["supersedes"] = f"{tmpl.id}@{version - 1}"
    std0 = _standard_from_table(table, version)
    constant = std0.model.calibrated

    # --- the sweep
    from ..catalog.suites import cases_for

    cases = cases_for(std0, seeds=list(std0.suite.get("seeds", [0]))[:1] if quick else None)
    if seed:
        from ..catalog.suites import make_case

        cases = [make_case(c.op, c.shape, c.distribution, c.seed + seed, [f.name for f in std0.inputs], c.params) for c in cases]
    out_fmt = std0.output
    in_fmts = list(std0.inputs)
    extra_variants_list = list(extra_variants)
    corpus_names = {v.name for v in variants_for(std0.op)}
    clash = sorted(corpus_names & {v.name for v in extra_variants_list})
    if clash:
        raise ParameterError(f"extra variant name(s) {clash} already name corpus variants of {std0.op}; rename them")
    variants = [v for v in list(variants_for(std0.op)) + extra_variants_list
                if v.op == std0.op and (v.applies is None or v.applies(out_fmt, in_fmts, dict(std0.suite.get("params", {}))))]
    notes: list[str] = []
    import dataclasses as _dc

    for name, why in (tmpl.exclude or {}).items():
        if any(v.name == name for v in variants):
            notes.append(f"variant {name} is not evidence for this standard: {why}")
    variants = [v for v in variants if v.name not in (tmpl.exclude or {})]
    for name, why in (tmpl.allow or {}).items():
        if any(v.name == name for v in variants):
            notes.append(f"variant {name} is legitimate under this standard: {why}")
    variants = [_dc.replace(v, legit=True, family=v.family + " (allowed)") if v.name in (tmpl.allow or {}) else v
                for v in variants]
    from ..sweeps.executor import Executor, get_executor
    from ..sweeps.sweep import read_sweep, run_sweep

    ex = get_executor(executor, workers=workers, address=ray_address)
    owned = not isinstance(executor, Executor)
    tmp_dir = None
    try:
        backend_info, backend_variants = _backend_variants(std0, backends, ex)
        variants += backend_variants
        if not any(v.legit for v in variants):
            raise NumstdError(f"no legitimate variant for {std0.op} {in_fmts[0].name}→{out_fmt.name}; add some to numstd.corpus")
        # --- phase 1: run every applicable (variant, case) as tasks; their outputs stream into a dataset
        tasks = _sweep_tasks(std0, cases, variants, {v.name for v in extra_variants_list}, chunk)
        if sweep_dir is None:
            if out is None:
                import tempfile

                tmp_dir = tempfile.TemporaryDirectory(prefix="numstd-calibrate-")
                sweep_dir = tmp_dir.name
            else:
                sweep_dir = Path(out) / f"{std0.id}.sweep"
        report = run_sweep(tasks, sweep_dir, ex, retries=retries, progress=progress)
        report.raise_for_failures()
        ran = read_sweep(sweep_dir, tasks).to_pydict() if tasks else {k: [] for k in _RUN_COLUMNS}
    finally:
        if owned:
            ex.close()
        if tmp_dir is not None:
            tmp_dir.cleanup()
    stored = {(vn, cid): (dt, sh, bits) for vn, cid, dt, sh, bits in zip(*(ran[k] for k in _RUN_COLUMNS))}

    # --- phase 2 (here): references, then every stored output judged (order: case, then variant)
    workers_ = min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers_) as pool:
        prepared = dict(zip((c.id for c in cases), pool.map(lambda c: _prepare(std0, c), cases)))
    outputs = [(v, c, _unpack(*stored[(v.name, c.id)])) for c in cases for v in variants if (v.name, c.id) in stored]

    # --- fit
    needed: dict[tuple, float] = {}
    for v, c, actual in outputs:
        if v.legit:
            needed[(v.name, c.id)] = _needed(std0, prepared[c.id], actual, constant)
    problems: list[str] = []
    floor = tmpl.floor
    # a library or backend is evidence only if it computes what the standard declares: one that needs
    # far more than every numpy model of the corpus (jax on CPU accumulating bf16 in bf16, torch's
    # bf16 erf flushing tiny inputs to zero) is reported as non-conforming, not fitted
    third_party = {v.name for v in variants if v.name.startswith("backend:") or v.family == "library"}
    corpus_need = max((x for (vn, _), x in needed.items() if vn not in third_party and math.isfinite(x)), default=0.0)
    limit = 10.0 * max(corpus_need, floor, 1e-12)
    excluded = sorted({vn for (vn, _), x in needed.items() if vn in third_party and not x <= limit})
    for vn in excluded:
        worst = max(x for (v2, _), x in needed.items() if v2 == vn)
        notes.append(f"{vn} needs {constant} = {worst:.3g} (> 10× every numpy model in the corpus): it does not "
                     f"meet what the standard declares (accumulation in {std0.accumulate.name}, libm-quality math); "
                     "reported as non-conforming, not used for the fit")
        needed = {k: v for k, v in needed.items() if k[0] != vn}
    if constant:
        finite = [x for x in needed.values() if math.isfinite(x)]
        worst_need = max(finite, default=0.0)
        fitted = _ceil2(max(floor, std0.model.margin * worst_need))
        for (vn, cid), x in needed.items():
            if not math.isfinite(x):
                problems.append(f"legitimate variant {vn} on {cid} cannot be covered by any {constant} "
                                "(the model has no term for its error: fix the model or the variant)")
        model_table = dict(table["model"])
        consts = dict(model_table["constants"])
        consts[constant] = fitted
        model_table["constants"] = consts
        table["model"] = model_table
    else:
        fitted = float("nan")
    std1 = _standard_from_table(table, version)
    # bias: widen tau if a legitimate variant needs it (beyond the shifts of rounded constants)
    from ..judge.criteria import bias_excess, bias_standard_error, effective_sample_size

    tau = std1.criteria.bias_tau
    judged = [(v, c, actual, _judge(std1, prepared[c.id], actual)) for v, c, actual in outputs]
    tau_need = 0.0
    for v, c, actual, (res, crit) in judged:
        if (v.legit and v.name not in excluded and res.ulp.signed_count  # non-conforming backends widen nothing
                and effective_sample_size(std1.op, res.ulp.signed_count, res.n_distinct, res.rows)
                >= std1.criteria.bias_min_n):  # (nor do samples the bias test does not test)
            sd = max(res.ulp.std_signed, std1.model.rho / math.sqrt(3))
            excess = abs(bias_excess(res.ulp.mean_signed, res.constant_shifts))  # outside the constants' shifts
            allow = std1.criteria.bias_z * sd / math.sqrt(res.ulp.signed_count)
            if std1.criteria.bias_rows:  # (row-clustered: the judge's larger standard error, bias_standard_error)
                allow = max(allow, std1.criteria.bias_z * bias_standard_error(std1, res, res.ulp.signed_count)[2])
            tau_need = max(tau_need, excess - allow)
    if tau_need > tau:
        tau = _ceil2(std1.model.margin * tau_need)
        crit_t = dict(table["criteria"])
        crit_t["bias_tau"] = tau
        table["criteria"] = crit_t
        std1 = _standard_from_table(table, version)
        judged = [(v, c, actual, _judge(std1, prepared[c.id], actual)) for v, c, actual, _ in judged]
    # row bias (standards that declare it): tau_row = margin × the largest legitimate drift beyond noise
    row_tau = _fit_row_tau(std1, [(v, res) for v, _, _, (res, _) in judged if v.legit and v.name not in excluded])
    if row_tau is not None and row_tau > std1.criteria.row_bias_tau:
        crit_t = dict(table["criteria"])
        crit_t["row_bias_tau"] = row_tau
        table["criteria"] = crit_t
        std1 = _standard_from_table(table, version)
        judged = [(v, c, actual, _judge(std1, prepared[c.id], actual)) for v, c, actual, _ in judged]

    rows: list[EvidenceRow] = []
    for v, c, actual, (res, crit) in judged:
        failed = [x.name for x in crit if not x.passed]
        bias = next(x for x in crit if x.name == "bias")
        row = next((x for x in crit if x.name == "row_bias"), None)
        q = res.ulp.quantiles
        rows.append(EvidenceRow(
            variant=v.name, legit=v.legit, family=v.family, case=c.id, distribution=c.distribution, seed=c.seed,
            K=_k_of(std1.op, c.shape), needed=needed.get((v.name, c.id), float("nan")),
            normalized_max=res.normalized_max,
            bias_ratio=abs(bias.value) / bias.limit if bias.limit and math.isfinite(bias.limit) and bias.limit > 0 else 0.0,
            ulp_max=res.ulp.max, ulp_mean=res.ulp.mean, ulp_mean_signed=res.ulp.mean_signed,
            ulp_q99=q.get(0.99, 0.0), ulp_q999=q.get(0.999, 0.0), passed=not failed, failed=",".join(failed),
            row_bias_ratio=abs(row.value) / row.limit if row is not None and row.limit and math.isfinite(row.limit)
            and row.limit > 0 else 0.0))
    for r in rows:
        if r.variant in excluded:
            r.legit, r.family = False, "backend-excluded"
    rows = [r for r in rows if r.family != "backend-excluded"] + [r for r in rows if r.family == "backend-excluded"]
    for r in rows:
        if r.legit and not r.passed:
            problems.append(f"legitimate variant {r.variant} fails {r.failed} on {r.case}")
    bug_names = sorted({r.variant for r in rows if not r.legit and r.family != "backend-excluded"})
    for b in sorted({v.name for v in variants if not v.legit} - set(bug_names)):
        notes.append(f"bug variant {b} cannot show on any case of this suite (not observable); not tested")
    for b in bug_names:
        br = [r for r in rows if r.variant == b]
        if all(r.passed for r in br):
            strongest = max(max(r.normalized_max, r.bias_ratio, r.row_bias_ratio) for r in br)
            problems.append(f"bug variant {b} is not separated: it passes every case (at most {strongest:.3g}× the "
                            f"limit; the bound would have to shrink {1 / max(strongest, 1e-300):.3g}×)")
    ok = not problems
    table["provenance"] = _provenance(std1, command, backend_info, date, quick, seed, fitted, constant, tau,
                                      std1.criteria.row_bias_tau if std1.criteria.row_bias else None)
    from ..emulate.variants import hardware_provenance  # the tensor-core architectures behind the evidence

    hardware = hardware_provenance(sorted({r.variant for r in rows if r.legit}))
    if hardware:
        table["provenance"]["hardware"] = hardware
    result = CalibrationResult(std1.id, version, constant, fitted, tau, rows, table, ok, problems, notes)
    result.sweep = report
    result.sweep_path = None if tmp_dir is not None else Path(sweep_dir)
    if out is not None:
        _write(result, Path(out))
    return result


def _fit_row_tau(std: Any, legit: Sequence[tuple]) -> float | None:
    """The ``row_bias_tau`` a standard with ``row_bias`` needs (``None`` without the criterion):
    ``margin × max(|T| − ρ_row·D − z_R·s/√R)`` over the legitimate (variant, case) results (``T`` the mean
    normalised signed group error, ``s`` its across-group sd, :func:`numstd.judge.criteria.row_bias_limit`
    with τ = 0), rounded up to two significant digits; 0 when no legitimate case drifts beyond noise."""
    from ..judge.criteria import row_bias_limit

    if not std.criteria.row_bias:
        return None
    need = 0.0
    for _, res in legit:
        rb = res.row_bias
        if rb is None or rb.rows < 2:
            continue
        noise, _ = row_bias_limit(0.0, std.criteria.row_bias_z, rb, std.criteria.row_bias_rel)
        need = max(need, abs(rb.mean) - noise)
    return _ceil2(std.model.margin * need) if need > 0 else 0.0


def _table_of(std: Any) -> dict:
    """The table of a loaded standard (for recalibration), from its file."""
    from importlib import resources

    from ..catalog.registry import tomllib

    root = resources.files("numstd.standards")
    rel = std.path.split("standards/", 1)[1]
    doc = tomllib.loads((root / rel).read_text(encoding="utf-8"))
    for k in ("version", "status", "provenance", "supersedes"):
        doc.pop(k, None)
    return doc


@dataclass
class _Prepared:
    ref: Any
    env: dict
    params: dict
    shape: tuple
    arrays: list


def _prepare(std: Any, case: Any) -> _Prepared:
    from ..models import environment
    from ..ops.catalog import output_shape, validate
    from ..reference import validated_reference

    spec, arrays, full = validate(std.op, list(case.inputs), dict(case.params))
    # the reference at the standard's output resolution, as check computes it (numstd.judge.check): the
    # terms that depend on it (the losses' exact shift e16 of the stored 16-bit terms) are then the judged ones
    ref = validated_reference(spec.name, arrays, dict(full, **std.model.reference_params()), resolution=std.output)
    env = environment(ref, {"output": std.output, "accumulate": std.accumulate, "input": std.inputs[0]})
    return _Prepared(ref, env, full, tuple(output_shape(std.op, arrays, full)), arrays)


def _needed(std: Any, p: _Prepared, actual: np.ndarray, constant: str) -> float:
    """Smallest value of ``constant`` covering every finite element (module docstring, step 3)."""
    from ..core.ulp import ulp

    if not constant:
        return 0.0
    r = p.ref.values
    if actual.shape != r.shape:
        return math.inf
    m0 = std.model.with_constants(**{constant: 0.0})
    m1 = std.model.with_constants(**{constant: 1.0})
    with np.errstate(invalid="ignore", over="ignore"):  # (references beyond float64's range: inf terms)
        e0 = np.broadcast_to(m0.pre_rounding(p.env), r.shape)
        e1 = np.broadcast_to(m1.pre_rounding(p.env), r.shape) - e0
        b0 = e0 + std.model.rho * ulp(np.abs(r) + e0, std.output) + (std.output.smallest_normal if std.model.ftz else 0.0) \
            + p.ref.error_bound
    from ..judge.criteria import exit_mask, exit_split, rounded_specials, spill_mask

    expected = rounded_specials(r, std.output)
    fin = np.isfinite(actual) & np.isfinite(expected)
    mismatch = np.isfinite(actual) != np.isfinite(expected)
    spill = spill_mask(std, p.env)  # non-finite outputs the standard allows where intermediates overflow
    if spill is not None:
        mismatch &= ~(np.broadcast_to(spill, r.shape) & ~np.isfinite(actual))
    exited = exit_mask(std, p.env)  # 0 or non-finite outputs after a range exit: not judged (check's Judge.add)
    if exited is not None:
        # (a finite output there whose reference rounds beyond the output's range is judged by the bound)
        free, edge = exit_split(np.broadcast_to(exited, r.shape), actual, r, std.output)
        mismatch &= ~(free | edge)
        fin = (fin | edge) & ~free
    if mismatch.any():
        return math.inf
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(actual - r)[fin]
    excess = (err - np.broadcast_to(b0, r.shape)[fin])
    slope = e1[fin]
    over = excess > 0
    if not over.any():
        return 0.0
    if (slope[over] <= 0).any():
        return math.inf
    return float((excess[over] / slope[over]).max())


def _judge(std: Any, p: _Prepared, actual: np.ndarray) -> tuple:
    from ..ops import get_op

    if get_op(std.op).index_of:  # argmax/argmin: x at the indices, as check judges them
        return _judge_indices(std, p, actual)
    return _judge_values(std, p, actual)


def _judge_values(std: Any, p: _Prepared, actual: np.ndarray) -> tuple:
    from ..judge.criteria import Judge, evaluate, hull_violations, judge_chunk

    judge = Judge(std.output, p.shape, std.criteria.signed_zero)
    if actual.shape != p.shape:
        from ..judge.verdict import CriterionResult
        from ..core.distribution import UlpDistribution
        from ..judge.criteria import JudgeResult

        res = JudgeResult(UlpDistribution(), 0, 0, 0, 0, math.inf, 0, 0, 0)
        return res, [CriterionResult("shape", False, 1, 0, "shape"), CriterionResult("bias", True, 0, math.inf, "")]
    judge_chunk(judge, std, p.env, p.ref, actual, tuple(slice(None) for _ in p.shape))
    judge.add_hull(hull_violations(std, p.ref, actual))
    res = judge.result()
    return res, evaluate(std, res, std.output.name)


def _judge_indices(std: Any, p: _Prepared, actual: np.ndarray) -> tuple:
    """:func:`_judge` of an index output (numstd.judge.indices: the values at the indices judged as the
    op's ``index_of`` output, then the tie rule); indices that cannot be judged fail their criterion."""
    from ..judge.indices import gather, index_dtype_criterion, ties_criterion

    g = gather(std.op, np.asarray(actual), p.arrays[0], p.params, p.shape)
    if g.problem is not None:
        from ..judge.verdict import CriterionResult
        from ..core.distribution import UlpDistribution
        from ..judge.criteria import JudgeResult

        res = JudgeResult(UlpDistribution(), 0, 0, 0, 0, math.inf, 0, 0, 0)
        return res, [CriterionResult(g.criterion, False, 1, 0, g.problem), CriterionResult("bias", True, 0, math.inf, "")]
    res, crit = _judge_values(std, p, np.asarray(g.values, dtype=np.float64))
    crit = [index_dtype_criterion(g.dtype, std.output.name) if c.name == "dtype" else c for c in crit]
    return res, crit + [ties_criterion(std.op, g, p.arrays[0], p.params)]


def _backend_variants(std: Any, names: Sequence[str], executor: Any = None) -> tuple[list[dict], list[Any]]:
    """Available backends as legitimate variants (their output must be in the standard's output format).

    Availability is probed where the backend's tasks will run (a task with the backend's
    resources on ``executor``: a GPU node for ``torch:cuda``, a Trn node for ``nki``), so a driver
    without the device still calibrates with it.  The variants returned here describe the
    backend; the worker rebuilds the runnable one (:func:`_backend_variant`).
    """
    from ..sweeps.executor import SerialExecutor, Task, resources_for

    info: list[dict] = []
    out: list[Any] = []
    try:
        from .. import backends as B
    except ImportError:
        return [{"name": n, "available": False, "reason": "numstd.backends not installed"} for n in names], []
    from ..corpus import Variant

    probes = []
    for name in names:
        try:
            B.get(name)
        except NumstdError as exc:
            info.append({"name": name, "available": False, "reason": str(exc)})
            continue
        info.append({"name": name})
        probes.append(Task(f"probe-{len(probes)}", "numstd.calibrate:_probe_backend", {"name": name, "op": std.op},
                           resources_for(name), f"probe {name}"))
    found = {}
    # on this machine the answer is the same in this process; on a cluster ask a node with the resources
    for res in (executor if getattr(executor, "remote", False) else SerialExecutor()).run(probes):
        name = res.task.args["name"]
        found[name] = res.value if res.ok else {"available": False, "reason": (res.error.splitlines() or [""])[0],
                                                "version": "", "implements": False}
    for entry in info:
        name = entry["name"]
        if name not in found:
            continue
        p = found[name]
        entry.update({"available": bool(p["available"]), "reason": p["reason"] or "", "version": p["version"]})
        if not p["available"] or not p["implements"]:
            continue

        def fn(*_: Any, _name: str = name) -> np.ndarray:
            raise NumstdError(f"backend:{_name} runs in a sweep task (numstd.calibrate._run_task)")

        out.append(Variant(op=std.op, name=f"backend:{name}", family="backend", legit=True,
                           description=f"{name} backend's own implementation", fn=fn))
    return info, out


def _probe_backend(name: str, op: str) -> dict:
    """(Task) whether backend ``name`` runs here and implements ``op``, and its version."""
    from .. import backends as B

    be = B.get(name)
    ok, why = be.available()
    return {"available": bool(ok), "reason": why or "", "version": getattr(be, "version", lambda: "")(),
            "implements": bool(ok) and op in be.ops()}


def _backend_variant(op: str, name: str) -> Any:
    """The runnable variant of backend ``name`` (built on the worker that runs it)."""
    from .. import backends as B
    from ..corpus import Variant

    be = B.get(name)
    be.require()

    def fn(inputs, params, out_fmt, acc_fmt, seed, _be=be):  # noqa: ANN001
        from ..core.formats import format_of

        inputs = _autocast_inputs(op, inputs, out_fmt)
        y = np.asarray(_be.run(op, inputs, **params))
        if str(y.dtype) in _INDEX_DTYPES:  # argmax/argmin: the indices, judged through the values they point to
            return y
        if format_of(y) != out_fmt:
            return np.full(y.shape, np.nan)  # not this standard's output format: excluded
        return y

    return Variant(op=op, name=f"backend:{name}", family="backend", legit=True,
                   description=f"{name} backend's own implementation", fn=fn,
                   applies=lambda o, i, p, _be=be: (_be.output_format(op, i) == o if hasattr(_be, "output_format") else o == i[0])
                   or _autocast_formats(o, i))


#: ops torch.autocast runs in the 16-bit type, rounding float32 inputs to it (its "lower precision" list)
AUTOCAST_16 = ("matmul", "linear", "conv", "conv_transpose", "attention")


def _autocast_formats(out: Any, inputs: Sequence[Any]) -> bool:
    """Whether (input formats -> ``out``) is a torch.autocast combination: float32 output of 16-bit
    floating inputs (its fp32 list), or a 16-bit output of float32 inputs (its lower-precision list)."""
    fl = [f for f in inputs if f is not None]
    return bool(fl) and ((out.name == "float32" and fl[0].p < 24) or (out.p < 24 and fl[0].name == "float32"))


def _autocast_inputs(op: str, inputs: Sequence[Any], out_fmt: Any) -> list:
    """The floating inputs as torch.autocast hands them to the op for output format ``out_fmt``:
    16-bit inputs cast to float32 (exact) for a float32 output; float32 inputs rounded (RNE) to the
    16-bit output type for the ops of :data:`AUTOCAST_16`; otherwise unchanged."""
    from ..core.formats import format_of, round_to

    def cast(x: Any) -> Any:
        if not isinstance(x, np.ndarray) or x.dtype.kind not in "fV":
            return x
        p = format_of(x).p
        if out_fmt.name == "float32" and p < 24:
            return x.astype(np.float32)
        if out_fmt.p < 24 and p == 24 and op in AUTOCAST_16:
            return round_to(x, out_fmt)
        return x

    return [cast(x) for x in inputs]


# ------------------------------------------------------------------------------ sweep tasks
_RUN_COLUMNS = ("variant", "case", "dtype", "shape", "bits")


def _sweep_tasks(std: Any, cases: Sequence[Any], variants: Sequence[Any], extra: set, chunk: int) -> list:
    """Phase-1 tasks: per case, the variants grouped by the resources they need, ``chunk`` per task.

    A task's ID hashes what its outputs depend on — op, formats, the case (shape, distribution,
    seed, parameters), the variants' identities and numstd's code — not the error model, so a
    recalibration with another model reuses the outputs.  Injected variants that cannot be pickled
    (closures) get tasks of their own that run in this process (``Task.inline``).
    """
    from ..sweeps.executor import CPU, Task, resources_for
    from ..sweeps.sweep import code_fingerprint, task_id

    if int(chunk) < 1:
        raise ParameterError(f"chunk={chunk}: pass a positive number of variants per task")
    groups: dict[Any, list[tuple[str, dict]]] = {}
    for v in variants:
        if v.name.startswith("backend:"):
            name = v.name.split(":", 1)[1]
            groups.setdefault(resources_for(name), []).append((f"backend:{name}", {"source": "backend", "backend": name}))
        elif v.name in extra:
            fn = getattr(v, "fn", None)
            code = hashlib.sha256(getattr(getattr(fn, "__code__", None), "co_code", b"")).hexdigest()[:12]
            ident = f"object:{v.name}:{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}:{code}"
            groups.setdefault("inline" if not _picklable(v) else CPU, []).append((ident, {"source": "object", "variant": v}))
        else:
            groups.setdefault(CPU, []).append((f"corpus:{v.name}", {"source": "corpus", "name": v.name}))
    fp = code_fingerprint()
    fmts = {"inputs": [f.name for f in std.inputs], "output": std.output.name, "accumulate": std.accumulate.name}
    tasks = []
    for c in cases:
        spec = {"shape": [int(x) for x in c.shape], "distribution": c.distribution, "seed": int(c.seed)}
        params = _jsonable(dict(c.params))
        for res, refs in groups.items():
            for i in range(0, len(refs), int(chunk)):
                part = refs[i:i + int(chunk)]
                key = {"op": std.op, **fmts, "params": params, "case": spec, "variants": [r[0] for r in part],
                       "fingerprint": fp}
                args = {"op": std.op, **fmts, "params": params, "case": spec, "variants": [r[1] for r in part],
                        "fingerprint": fp}
                names = [r[0].split(":", 2)[1] if r[0].startswith("object:") else r[0].split(":", 1)[1] for r in part]
                label = f"{c.id}: {names[0]}" + (f" … {names[-1]} ({len(part)})" if len(part) > 1 else "")
                tasks.append(Task(task_id("calibrate-run", key), "numstd.calibrate:_run_task", args,
                                  CPU if res == "inline" else res, label, inline=res == "inline"))
    return tasks


def _picklable(obj: Any) -> bool:
    """Whether ``obj`` can travel to a worker process (a closure or lambda cannot: it runs inline)."""
    import pickle

    try:
        pickle.dumps(obj)
    except Exception:
        return False
    return True


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _run_task(*, op: str, inputs: list, output: str, accumulate: str, params: dict, case: dict,
              variants: list, fingerprint: str) -> Any:
    """(Task) regenerate one case, run the given variants where they apply, return their outputs.

    One row per applicable variant: ``variant``, ``case``, ``dtype`` (the output format when the
    output is exactly representable in it, else ``float64``), ``shape``, ``bits`` (C order,
    little-endian) — what phase 2 needs to compute the constant each case needs and to judge it.
    """
    import pyarrow as pa

    from ..corpus import variants_for
    from ..core.formats import get_format
    from ..ops.catalog import validate
    from ..catalog.suites import make_case
    from ..sweeps.sweep import require_fingerprint

    require_fingerprint(fingerprint)
    out_fmt, acc_fmt = get_format(output), get_format(accumulate)
    c = make_case(op, case["shape"], case["distribution"], case["seed"], inputs, params)
    _, arrays, full = validate(op, list(c.inputs), dict(c.params))
    corpus = {v.name: v for v in variants_for(op)}
    cols: dict[str, list] = {k: [] for k in _RUN_COLUMNS}
    for ref in variants:
        if ref["source"] == "corpus":
            v = corpus[ref["name"]]
        elif ref["source"] == "backend":
            v = _backend_variant(op, ref["backend"])
        else:
            v = ref["variant"]
        if hasattr(v, "applicable") and not v.applicable(arrays, full, out_fmt, acc_fmt):
            continue
        try:
            actual = np.asarray(v.fn([np.array(x) if x is not None else None for x in c.inputs], dict(full),
                                     out_fmt, acc_fmt, 1000 * c.seed + 7))
            if str(actual.dtype) not in _INDEX_DTYPES:  # (argmax's integer indices are stored as they are)
                actual = actual.astype(np.float64)
        except Exception as exc:
            raise NumstdError(f"variant {v.name} raised on {c.id}: {type(exc).__name__}: {exc}") from exc
        dtype, bits = _pack(actual, out_fmt)
        for k, val in zip(_RUN_COLUMNS, (v.name, c.id, dtype, list(actual.shape), bits)):
            cols[k].append(val)
    schema = pa.schema([("variant", pa.string()), ("case", pa.string()), ("dtype", pa.string()),
                        ("shape", pa.list_(pa.int64())), ("bits", pa.binary())])
    return pa.table(cols, schema=schema)


#: integer outputs (argmax/argmin indices) stored in their own dtype (numstd.ops.reduction.INDEX_DTYPES)
_INDEX_DTYPES = ("int64", "int32")


def _pack(actual: np.ndarray, fmt: Any) -> tuple[str, bytes]:
    """Float64 values as the bytes of ``fmt`` when that is exact (every value and zero sign), else float64;
    int64/int32 indices as themselves."""
    if str(actual.dtype) in _INDEX_DTYPES:
        arr = np.ascontiguousarray(actual)
        return str(arr.dtype), (arr.byteswap() if sys.byteorder == "big" else arr).tobytes()
    with np.errstate(all="ignore"):
        narrow = actual.astype(fmt.dtype)
        back = narrow.astype(np.float64)
    same = np.array_equal(back, actual, equal_nan=True) and np.array_equal(np.signbit(back), np.signbit(actual))
    arr, name = (narrow, fmt.name) if same else (actual, "float64")
    arr = np.ascontiguousarray(arr)
    if sys.byteorder == "big" and arr.dtype.itemsize > 1:
        arr = arr.byteswap()
    return name, arr.tobytes()


def _unpack(dtype: str, shape: Sequence[int], bits: bytes) -> np.ndarray:
    from ..core.formats import get_format

    dt = np.dtype(dtype) if dtype in _INDEX_DTYPES else np.dtype(get_format(dtype).dtype)
    arr = np.frombuffer(bits, dtype=dt).reshape(tuple(shape))
    if sys.byteorder == "big" and dt.itemsize > 1:
        arr = arr.byteswap()
    return arr.copy() if dtype in _INDEX_DTYPES else arr.astype(np.float64)


def _provenance(std: Any, command: str | None, backends: list, date: str | None, quick: bool, seed: int,
                fitted: float, constant: str, tau: float, row_tau: float | None = None) -> dict:
    if date is None:
        sde = os.environ.get("SOURCE_DATE_EPOCH")
        date = (_dt.datetime.fromtimestamp(int(sde), _dt.timezone.utc) if sde else _dt.datetime.now(_dt.timezone.utc)).date().isoformat()
    key = f"{std.id}@{std.version}"
    return {
        "method": (f"python -m numstd calibrate: {constant or 'no constant'} fitted as margin {std.model.margin:g} × the "
                   f"largest value needed by the legitimate variants of numstd.corpus"
                   + (" and the listed backends" if backends else "") + f" on the suite ({'quick' if quick else 'full'}, seed offset {seed}); "
                   f"every bug variant verified to fail; bias tau {tau:g}"
                   + ("" if row_tau is None else f"; row bias tau {row_tau:g} (margin {std.model.margin:g} × the largest "
                      "legitimate drift beyond z_R·sd/√R, numstd.authoring.calibrate._fit_row_tau)")),
        "command": command or f"python -m numstd calibrate --standard {std.id}" + (" --quick" if quick else "") + (f" --seed {seed}" if seed else ""),
        "date": date,
        "numstd_version": __version__,
        "backends": [f"{b['name']} {b.get('version', '')}".strip() + ("" if b["available"] else f" (unavailable: {b['reason']})") for b in backends],
        "evidence": f"reference_data/evidence/{key}.evidence.parquet",
    }


def _write(result: CalibrationResult, out: Path) -> None:
    from ..catalog.templates import to_toml

    out.mkdir(parents=True, exist_ok=True)
    key = f"{result.standard_id}@{result.version}"
    ev = out / f"{key}.evidence.parquet"
    _write_evidence(result.evidence, ev)
    table = dict(result.table)
    table["version"] = result.version
    table["status"] = "draft"
    prov = dict(table["provenance"])
    prov["evidence_sha256"] = hashlib.sha256(ev.read_bytes()).hexdigest()
    table["provenance"] = prov
    result.evidence_path = ev
    if result.ok:
        path = out / f"{key}.toml"
        path.write_text(to_toml(_ordered(table)), encoding="utf-8")
        result.draft_path = path
    result.plot_path = _plot(result, out / f"{key}.png")


def _write_evidence(rows: list[EvidenceRow], path: Path) -> None:
    import dataclasses

    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = [f.name for f in dataclasses.fields(EvidenceRow)]
    data = {c: [getattr(r, c) for r in rows] for c in cols}
    pq.write_table(pa.table(data), path, compression="zstd", use_dictionary=True, write_statistics=False)


#: markers of the calibration plot (12) and colours (Paul Tol's muted scheme and more, 10): variant i
#: gets marker i mod 12 and colour i mod 10, distinct for the first 60 variants
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p")
_COLOURS = ("#332288", "#88ccee", "#44aa99", "#117733", "#999933", "#ddcc77", "#cc6677", "#882255", "#aa4499",
            "#555555")


def _row_ratio(r: EvidenceRow) -> float:
    """How far a case is from failing, as the worst of its criteria: ``max(max|err|/B, |bias|/allowed)``,
    and above 1 for a case that failed any other criterion (specials, ulp budget, shape), so that a
    bug caught by any criterion is drawn above the pass line."""
    y = max(r.normalized_max, r.bias_ratio, r.row_bias_ratio)
    if not math.isfinite(y):
        y = 1e6
    if not r.passed and y <= 1.0:
        y = 1.5  # (failed a criterion that has no ratio here)
    return max(y, 1e-6)


def _plot(result: CalibrationResult, path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(9, 5))
    by: dict[str, list[EvidenceRow]] = {}
    for r in result.evidence:
        by.setdefault(r.variant, []).append(r)
    for i, (name, rows) in enumerate(sorted(by.items(), key=lambda kv: (not kv[1][0].legit, kv[0]))):
        ks = [max(r.K, 1) for r in rows]
        ys = [_row_ratio(r) for r in rows]
        legit = rows[0].legit
        colour, marker = _COLOURS[i % len(_COLOURS)], _MARKERS[i % len(_MARKERS)]
        ax.scatter(ks, ys, s=22, marker=marker, linewidths=1.1, label=f"{name} ({'legit' if legit else 'bug'})",
                   facecolors=colour if legit else "none", edgecolors=colour)
    ax.axhline(1.0, color="k", lw=1)
    ax.text(1.0, 1.0, " pass line", transform=ax.get_yaxis_transform(), fontsize=7, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("reduction length K (log scale)")
    ax.set_ylabel("worst criterion: max(max|err|/B, |bias|/allowed) (log)")
    ax.set_title(f"{result.standard_id}@{result.version}: legitimate (filled) vs bugs (hollow); "
                 "above 1 = fails a criterion", fontsize=9)
    ax.legend(fontsize=6, ncol=1 + len(by) // 24, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.subplots_adjust(left=0.09, right=0.62 if len(by) > 24 else 0.72, bottom=0.11, top=0.93)
    meta = {"Software": None, "Creation Time": None} if path.suffix == ".png" else None
    fig.savefig(path, dpi=110, metadata=meta)
    plt.close(fig)
    return path
