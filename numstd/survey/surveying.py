"""Accuracy surveys of elementwise functions: every input of a narrow format, or stratified samples.

``survey(op, fmt, fn)`` runs an implementation of an elementwise catalog op (``fn``, or a backend
by name) on

* ``inputs="exhaustive"``: every finite value of an 8- or 16-bit format (all bit patterns, NaN and
  ±inf dropped; ±0 and the inputs outside the function's domain kept, where the correctly rounded
  result is NaN or ±inf and must be matched), or
* ``inputs=N``: N seeded samples — a random subset of those values for 8/16-bit formats; for
  float32 a stratified set: ±0, the extreme subnormals and normals, ±1, the shipped hard cases
  (:func:`numstd.tables.load_hardcases`), about a quarter of the samples spread over the input
  intervals where the correctly rounded result changes class (NaN / 0 / subnormal / normal / inf:
  ``exp`` near 88.7 and -87.3 and -103.3, where ``gelu`` underflows, …, located on a coarse grid
  of every binade), and the rest evenly over all 2 × 255 binades (both signs, subnormals as one
  binade) with uniformly random significands,

and measures each output against the exact value:

* 8/16-bit formats: a *table lookup* of the shipped mpmath tables (:mod:`numstd.tables`), which hold
  the correctly rounded result's bits and the float64 nearest the exact value — no mpmath at run
  time;
* float32: the float64 reference :func:`numstd.reference.reference` (its error, a few units of
  2^-53 relative, is below 2^-28 float32 ulp).

The signed ULP error ``(actual - exact) / ulp(exact)`` (:func:`numstd.ulp.ulp_error`) of every
element whose output and correctly rounded result are both finite feeds a
:class:`~numstd.distribution.UlpDistribution` — the type of ``Verdict.ulp``.  The other elements
are classified (NaN where a finite result was due, ±inf where a finite one was due, a finite value
where NaN/±inf was due, the wrong non-finite value).  A function *flushes to zero* where its output
is ±0 but the correctly rounded result is not; the survey reports the input interval where that
happens.  Finally the outputs are judged with :func:`numstd.check` against the op's standard for
the format, when one exists.

A correctly rounded implementation has ``max_ulp <= 0.5``.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.arrays import to_numpy
from ..core.distribution import DistributionAccumulator, UlpDistribution
from ..core.errors import (
    AmbiguousStandard,
    BackendUnavailable,
    DtypeError,
    FormatError,
    NumstdError,
    ParameterError,
    ShapeError,
    StandardNotFound,
)
from ..core.formats import Format, get_format, round_to
from ..core.ulp import ulp_error
from ..judge.verdict import _num

__all__ = ["Survey", "WorstCase", "FlushRegion", "survey", "survey_inputs", "SCHEMA", "WORST"]

SCHEMA = "numstd.survey/1"
WORST = 10  # worst inputs reported
_TRANSITION_SHARE = 0.25  # of the free float32 samples, spent where the result changes class
_GRID_POINTS = 8  # grid points per binade when locating those transitions

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class WorstCase:
    """One of the inputs with the largest ``|ULP error|``."""

    input: float
    output: float
    exact: float
    ulp_error: float

    def to_dict(self) -> dict:
        return {k: _num(getattr(self, k)) for k in ("input", "output", "exact", "ulp_error")}



def _in_its_bin(x: float, edges: Sequence[float]) -> str:
    """``x`` to 4 significant digits, or more where 4 would move it into another histogram bin
    ``(lo, hi]``: exp's largest bfloat16 error 0.50001196 printed as ``0.5`` beside a histogram
    with one element in (0.5, 1]."""
    import bisect

    if not math.isfinite(x):
        return f"{x:g}"
    where = bisect.bisect_left(edges, x)
    for digits in range(4, 18):
        text = f"{x:.{digits}g}"
        if bisect.bisect_left(edges, float(text)) == where:
            return text
    return repr(x)

@dataclass(frozen=True)
class FlushRegion:
    """Where the output is ±0 although the correctly rounded result is not.

    Attributes
    ----------
    lo, hi : float
        Smallest and largest such input.
    max_abs_input : float
        Largest ``|x|`` among them.
    count : int
        How many inputs flush.
    largest_result : float
        Largest ``|correctly rounded result|`` that came out as zero (below the smallest normal:
        a subnormal flush; above it: normal results lost).
    """

    lo: float
    hi: float
    max_abs_input: float
    count: int
    largest_result: float

    def to_dict(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "max_abs_input": self.max_abs_input, "count": self.count,
                "largest_result": self.largest_result}


@dataclass(frozen=True)
class Survey:
    """Result of :func:`survey`.

    Attributes
    ----------
    op, params : str, mapping
        The op and its parameters (defaults filled).
    format : str
        The input format, in whose ULPs errors are measured.
    output_format : str
        The format of the outputs (normally the same).
    backend : str
        The backend name, or ``"fn:<name>"`` for a callable.
    inputs_kind : str
        ``"exhaustive"`` or ``"sampled"``.
    seed : int or None
        Seed of the samples (``None`` when exhaustive).
    reference : str
        Where the exact values come from (table file and sha256, or the float64 reference).
    n : int
        Inputs surveyed.
    ulp : UlpDistribution
        Over the elements whose output and correctly rounded result are finite.
    worst : tuple of WorstCase
        The :data:`WORST` largest ``|ULP error|``, largest first.
    nonfinite : mapping of str to int
        ``nan_where_finite``, ``inf_where_finite``, ``finite_where_nan``, ``finite_where_inf``,
        ``wrong_nonfinite`` (NaN vs ±inf, or +inf vs -inf).
    ftz : FlushRegion or None
    verdict : Verdict or None
        :func:`numstd.check` of the outputs against the op's standard.
    verdict_note : str
        Why there is no verdict, or "".
    inputs, outputs, expected, exact, errors : numpy.ndarray of float64
        Per input: the input, the output, the correctly rounded result, the float64 nearest the
        exact result, the signed ULP error (NaN where not comparable).
    """

    op: str
    params: Mapping[str, Any]
    format: str
    output_format: str
    backend: str
    inputs_kind: str
    seed: int | None
    reference: str
    n: int
    ulp: UlpDistribution
    worst: tuple[WorstCase, ...]
    nonfinite: Mapping[str, int]
    ftz: FlushRegion | None
    verdict: Any
    verdict_note: str
    inputs: np.ndarray = field(repr=False)
    outputs: np.ndarray = field(repr=False)
    expected: np.ndarray = field(repr=False)
    exact: np.ndarray = field(repr=False)
    errors: np.ndarray = field(repr=False)

    @property
    def max_ulp(self) -> float:
        """Largest ``|ULP error|`` over the finite comparable outputs (``ulp.max``)."""
        return self.ulp.max

    @property
    def nonfinite_mismatches(self) -> int:
        """Total of :attr:`nonfinite`."""
        return int(sum(self.nonfinite.values()))

    @property
    def correctly_rounded(self) -> bool:
        """``max_ulp <= 0.5``, no non-finite mismatch and no flush to zero."""
        return self.ulp.max <= 0.5 and self.nonfinite_mismatches == 0 and self.ftz is None

    def to_dict(self) -> dict:
        """JSON-ready dict (arrays left out; non-finite floats as "nan", "inf", "-inf")."""
        return {
            "schema": SCHEMA, "op": self.op, "params": dict(self.params), "format": self.format,
            "output_format": self.output_format, "backend": self.backend, "inputs_kind": self.inputs_kind,
            "seed": self.seed, "reference": self.reference, "n": self.n, "max_ulp": _num(self.max_ulp),
            "ulp": self.ulp.to_dict(), "worst": [w.to_dict() for w in self.worst],
            "nonfinite": dict(self.nonfinite), "ftz": self.ftz.to_dict() if self.ftz else None,
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
            "verdict_note": self.verdict_note,
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def summary(self) -> str:
        """A human-readable table of the survey."""
        u = self.ulp
        what = "exhaustive" if self.inputs_kind == "exhaustive" else f"sampled, seed {self.seed}"
        par = "".join(f", {k}={v!r}" for k, v in self.params.items())
        lines = [
            f"survey of {self.op}{par} in {self.format} on {self.backend} ({what}: {self.n:,} inputs)",
            f"  reference        {self.reference}",
            f"  compared         {u.count:,} finite outputs"
            + (f" (outputs in {self.output_format})" if self.output_format != self.format else ""),
            f"  max |ULP error|  {_in_its_bin(u.max, u.histogram['edges'])}",
            "  quantiles |ULP|  " + ", ".join(f"{q:g}: {v:.3g}" for q, v in u.quantiles.items()),
            f"  mean |ULP|       {u.mean:.4g}",
            f"  mean signed      {u.mean_signed:+.4f} (sd {u.std_signed:.3g}; + away from zero)",
            "  histogram        " + ", ".join(
                f"({lo:g}, {hi:g}]: {c:,}" for lo, hi, c in zip(u.histogram["edges"], u.histogram["edges"][1:],
                                                               u.histogram["counts"]) if c),
            f"  non-finite       {self.nonfinite_mismatches:,} mismatches"
            + (" (" + ", ".join(f"{k} {v:,}" for k, v in self.nonfinite.items() if v) + ")"
               if self.nonfinite_mismatches else ""),
        ]
        if self.ftz is None:
            lines.append("  flush to zero    none")
        else:
            z = self.ftz
            lines.append(f"  flush to zero    {z.count:,} inputs in [{z.lo:.4g}, {z.hi:.4g}] give 0 where the "
                         f"correctly rounded result is not (largest lost result {z.largest_result:.4g})")
        if self.worst:
            lines.append(f"  worst inputs     {'input':>14} {'output':>14} {'exact':>22} {'ULP error':>11}")
            for w in self.worst:
                lines.append(f"                   {w.input:>14.7g} {w.output:>14.7g} {w.exact:>22.15g} "
                             f"{w.ulp_error:>+11.4g}")
        if self.verdict is not None:
            lines.append(f"  verdict          {self.verdict.message}")
        else:
            lines.append(f"  verdict          none: {self.verdict_note}")
        return "\n".join(lines)

    def plot(self, path: str) -> None:
        """Save a scatter plot of the signed ULP error against the input (needs matplotlib)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise BackendUnavailable(f"plotting needs matplotlib ({exc}); pip install matplotlib") from None
        fig, ax = plt.subplots(figsize=(9, 4.5))
        mag = np.abs(self.inputs)
        shown = np.isfinite(self.errors) & (mag > 0)
        for sign, colour in ((1, "tab:blue"), (-1, "tab:orange")):
            sel = shown & (np.sign(self.inputs) == sign)
            ax.scatter(mag[sel], self.errors[sel], s=1.5, lw=0, alpha=0.6, c=colour,
                       label="x > 0" if sign > 0 else "x < 0")
        bad = (mag > 0) & ~np.isfinite(self.errors) & ~(np.isnan(self.outputs) & np.isnan(self.expected)) \
            & ~(self.outputs == self.expected)
        if bad.any():
            ax.scatter(mag[bad], np.zeros(int(bad.sum())), s=8, c="red", marker="x", label="non-finite mismatch")
        ax.legend(loc="upper right", markerscale=4)
        ax.set_xscale("log")
        ax.axhline(0.5, c="gray", lw=0.5, ls="--")
        ax.axhline(-0.5, c="gray", lw=0.5, ls="--")
        ax.set_xlabel("|x|")
        ax.set_ylabel(f"ULP error ({self.format})")
        ax.set_title(f"{self.op} {self.format} on {self.backend}: max {self.max_ulp:.3g} ULP, n = {self.n:,}")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


# ------------------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------------------

def _uint(f: Format) -> np.dtype:
    return np.dtype(f"uint{8 * f.dtype.itemsize}")


def _finite_patterns(f: Format) -> np.ndarray:
    """Every finite value of an 8/16-bit format, in bit-pattern order."""
    x = np.arange(1 << f.bits, dtype=_uint(f)).view(f.dtype)
    with np.errstate(invalid="ignore"):
        return x[np.isfinite(x)]


def _float32_from_ordered(o: np.ndarray) -> np.ndarray:
    """float32 values from ordered integers (``+mag`` / ``-mag`` of the bit pattern)."""
    o = np.asarray(o, dtype=np.int64)
    bits = (np.abs(o).astype(np.uint32)) | np.where(o < 0, np.uint32(1 << 31), np.uint32(0))
    return bits.view(np.float32)


def _result_class(values: np.ndarray, f: Format) -> np.ndarray:
    """0 NaN, 1 zero, 2 subnormal, 3 normal, 4 infinite — of the values rounded into ``f``."""
    r = np.abs(round_to(values, f).astype(np.float64))
    cls = np.full(r.shape, 3, dtype=np.int8)
    cls[r < f.smallest_normal] = 2
    cls[r == 0] = 1
    cls[np.isinf(r)] = 4
    cls[np.isnan(r)] = 0
    return cls


def _class_boundaries(op: str, params: Mapping[str, Any], f: Format) -> np.ndarray:
    """Ordered float32 integers ``b`` where the correctly rounded result's class changes between
    ``b - 1`` and ``b`` (located on a grid of every binade, then by bisection)."""
    from ..reference import reference

    def classes(o: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return _result_class(reference(op, [_float32_from_ordered(o)], **params).values, f)

    expo = np.arange(255, dtype=np.uint32)
    mant = np.arange(_GRID_POINTS, dtype=np.uint32) << np.uint32(23 - 3)
    mags = ((expo[:, None] << np.uint32(23)) | mant[None, :]).ravel().astype(np.int64)
    mags = np.append(mags, int(np.float32(f.max_finite).view(np.uint32)))
    grid = np.unique(np.concatenate([-mags, mags]))
    cls = classes(grid)
    change = np.nonzero(cls[1:] != cls[:-1])[0]
    lo, hi = grid[change], grid[change + 1]
    c_lo = cls[change]
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        same = classes(mid) == c_lo
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    return hi


def _stratified_float32(op: str, params: Mapping[str, Any], n: int, seed: int) -> np.ndarray:
    from ..reference.tables import TABLE_FUNCTIONS, load_hardcases

    f = get_format("float32")
    rng = np.random.default_rng(seed)
    tiny, sub_max = f.smallest_subnormal, f.smallest_normal - f.smallest_subnormal
    specials = np.array([0.0, tiny, sub_max, f.smallest_normal, 1.0, f.max_finite], dtype=np.float32)
    specials = np.concatenate([specials, -specials])
    has_cases = any(o == op for o, _ in TABLE_FUNCTIONS.values())
    hard = load_hardcases(op, **params) if has_cases else np.zeros(0, np.float32)
    fixed = np.unique(np.concatenate([specials, hard]).view(np.uint32))
    n_strata = 2 * 255
    free = n - fixed.size
    if free < n_strata:
        raise ParameterError(
            f"inputs={n}: a float32 survey of {op} needs at least {fixed.size + n_strata} samples (one per "
            f"binade of both signs, {specials.size} special values and {hard.size} hard cases); "
            f"pass inputs=N with N >= {fixed.size + n_strata}"
        )
    boundaries = _class_boundaries(op, params, f)
    n_trans = int(free * _TRANSITION_SHARE) if boundaries.size else 0
    parts = [fixed]
    if n_trans:
        # log-uniform distance (1 .. 2^23 float32 steps) on either side of each boundary
        at = np.repeat(boundaries, n_trans // boundaries.size + 1)[:n_trans]
        dist = np.floor(np.exp2(rng.random(n_trans) * 23)).astype(np.int64)
        o = at + np.where(rng.random(n_trans) < 0.5, -dist, dist - 1)
        top = int(np.float32(f.max_finite).view(np.uint32))
        parts.append(_float32_from_ordered(np.clip(o, -top, top)).view(np.uint32))
    n_strat = free - n_trans
    per = np.full(n_strata, n_strat // n_strata)
    per[rng.permutation(n_strata)[: n_strat % n_strata]] += 1
    strata = np.repeat(np.arange(n_strata, dtype=np.uint32), per)
    sign, exponent = strata // 255, strata % 255
    m = rng.integers(0, 1 << 23, size=strata.size, dtype=np.uint32)
    parts.append((sign << np.uint32(31)) | (exponent << np.uint32(23)) | m)
    return np.unique(np.concatenate(parts)).view(np.float32)


def survey_inputs(op: str, fmt: Any, inputs: Any = "exhaustive", seed: int = 0, **params: Any) -> np.ndarray:
    """The inputs :func:`survey` uses (see the module docstring), as an array of ``fmt``'s dtype.

    Raises
    ------
    ParameterError
        ``inputs`` is neither ``"exhaustive"`` nor a positive int, exhaustive float32, or too few
        samples for a stratified float32 set.
    FormatError
        Formats wider than float32 (a float64 reference cannot measure their ULPs) or tf32.
    """
    f = get_format(fmt)
    exhaustive = isinstance(inputs, str) and inputs == "exhaustive"
    if not exhaustive and (isinstance(inputs, (bool, np.bool_)) or not isinstance(inputs, (int, np.integer))
                           or inputs <= 0):
        raise ParameterError(f"inputs={inputs!r}: pass 'exhaustive' (8/16-bit formats) or a positive "
                             "number of samples")
    if f.bits <= 16:
        x = _finite_patterns(f)
        if exhaustive or inputs >= x.size:
            return x
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(x.view(_uint(f)), size=int(inputs), replace=False)).view(f.dtype)
    if f.name == "float32":
        if exhaustive:
            raise ParameterError("an exhaustive float32 survey would take 2**32 inputs; pass inputs=N "
                                 "for N stratified samples (e.g. inputs=100_000)")
        return _stratified_float32(op, params, int(inputs), seed)
    raise FormatError(f"surveys cover formats up to float32 (exhaustive for 8/16-bit formats); "
                      f"{f.name} is not one of them")


# ------------------------------------------------------------------------------------------------
# the implementation under test
# ------------------------------------------------------------------------------------------------

def _framework_of(backend: str) -> str:
    head = backend.split(":")[0]
    return head if head in ("torch", "jax") else "numpy"


def _to_framework(x: np.ndarray, framework: str) -> Any:
    """``x`` as an array of ``framework`` (``"numpy"``, ``"torch"``, ``"jax"``), same format and bits."""
    if framework == "numpy":
        return x
    if framework == "torch":
        try:
            from ..backends.torch_backend import to_torch

            return to_torch(x, "cpu")
        except ImportError as exc:
            raise BackendUnavailable(f"fn takes torch tensors but torch is not installed ({exc}); "
                                     "pip install torch") from None
    if framework == "jax":
        try:
            import jax.numpy as jnp
        except ImportError as exc:
            raise BackendUnavailable(f"fn takes jax arrays but jax is not installed ({exc}); "
                                     "pip install jax") from None
        return jnp.asarray(x)
    raise ParameterError(f"framework={framework!r}: use 'numpy', 'torch' or 'jax'")


def _implementation(op: str, params: Mapping[str, Any], fn: Callable | None, backend: str,
                    framework: str | None) -> tuple[Callable[[np.ndarray], Any], str]:
    """(numpy array -> output, label) for the implementation under test."""
    if fn is not None:
        fw = framework or _framework_of(backend)
        if fw not in ("numpy", "torch", "jax"):
            raise ParameterError(f"framework={fw!r}: use 'numpy', 'torch' or 'jax'")
        label = f"fn:{getattr(fn, '__qualname__', type(fn).__name__)}"
        return (lambda x: fn(_to_framework(x, fw))), label
    from .. import backends

    be = backends.get(backend)
    be.require()
    return (lambda x: be.run(op, [x], **params)), be.name


def _backend_name(backend: str) -> str:
    from .. import backends

    return backends.get(backend).name


def _survey_task(*, op: str, fmt: str, inputs: Any, seed: int, params: dict, backend: str, start: int,
                 stop: int, fingerprint: str) -> Any:
    """(Task) run ``backend`` on inputs ``[start, stop)`` of the survey, regenerated here."""
    import pyarrow as pa

    from .. import backends
    from ..sweeps.sweep import require_fingerprint

    require_fingerprint(fingerprint)
    x = _cached_inputs(op, fmt, inputs, seed, json.dumps(params, sort_keys=True))[start:stop]
    be = backends.get(backend)
    be.require()
    y = np.ascontiguousarray(_run(lambda a: be.run(op, [a], **params), x, op, be.name))
    raw = y.byteswap() if sys.byteorder == "big" and y.dtype.itemsize > 1 else y
    return pa.table({"dtype": [y.dtype.name], "n": [int(y.size)], "bits": [raw.tobytes()]})


@functools.lru_cache(maxsize=4)
def _cached_inputs(op: str, fmt: str, inputs: Any, seed: int, params_json: str) -> np.ndarray:
    return survey_inputs(op, fmt, inputs, seed, **json.loads(params_json))


def _run_tasks(op: str, f: Format, inputs: Any, seed: int, params: Mapping[str, Any], backend: str, n: int, *,
               executor: Any, workers: int | None, address: str | None, retries: int, chunk: int,
               sweep_dir: Any) -> np.ndarray:
    """The backend's outputs for every survey input, computed in tasks of ``chunk`` inputs."""
    import tempfile

    from ..sweeps.executor import Task, resources_for
    from ..sweeps.sweep import code_fingerprint, read_sweep, run_sweep, task_id

    if int(chunk) < 1:
        raise ParameterError(f"chunk={chunk}: pass a positive number of inputs per task")
    fp = code_fingerprint()
    base = {"op": op, "fmt": f.name, "inputs": inputs if isinstance(inputs, str) else int(inputs), "seed": int(seed), "params": dict(params), "backend": backend,
            "fingerprint": fp}
    tasks = [Task(task_id("survey", {**base, "start": a, "stop": min(a + int(chunk), n)}), "numstd.survey:_survey_task",
                  {**base, "start": a, "stop": min(a + int(chunk), n)}, resources_for(backend),
                  f"{backend} {op} {f.name} [{a}, {min(a + int(chunk), n)})") for a in range(0, n, int(chunk))]
    tmp = tempfile.TemporaryDirectory(prefix="numstd-survey-") if sweep_dir is None else None
    try:
        where = tmp.name if tmp is not None else sweep_dir
        run_sweep(tasks, where, executor, retries=retries, workers=workers, address=address).raise_for_failures()
        parts = read_sweep(where, tasks).to_pydict()
    finally:
        if tmp is not None:
            tmp.cleanup()
    dtypes = set(parts["dtype"])
    if len(dtypes) != 1:
        raise DtypeError(f"{backend} returned outputs of several dtypes ({sorted(dtypes)}) for {op} on {f.name}")
    name = dtypes.pop()
    try:
        dt = np.dtype(get_format(name).dtype)
    except NumstdError:  # an output format numstd does not model (int, float64 …): numpy's own name
        dt = np.dtype(name)
    y = np.frombuffer(b"".join(parts["bits"]), dtype=dt)
    return y.byteswap() if sys.byteorder == "big" and dt.itemsize > 1 else y


def _run(impl: Callable[[np.ndarray], Any], x: np.ndarray, op: str, label: str) -> np.ndarray:
    y = to_numpy(impl(x), name="output")
    if y.shape != x.shape:
        raise ShapeError(f"{label} returned shape {y.shape} for {op} on inputs of shape {x.shape}; an "
                         "elementwise function must return one output per input")
    return y


# ------------------------------------------------------------------------------------------------
# the survey
# ------------------------------------------------------------------------------------------------

def _reference(op: str, params: Mapping[str, Any], x: np.ndarray, f: Format) -> tuple[np.ndarray, np.ndarray, str]:
    """(correctly rounded result, float64 nearest the exact result, description) per input."""
    x64 = x.astype(np.float64)
    if op == "relu":  # exact in every format
        exact = np.where(x64 > 0, x64, 0.0)
        return exact, exact, "exact (max(x, 0))"
    if f.bits <= 16:
        from ..reference.tables import load_table

        t = load_table(op, f, **params)
        bits = x.view(_uint(f))
        return (t.outputs[bits].astype(np.float64), t.exact[bits],
                f"table {t.key}.{f.name}.parquet (sha256:{t.sha256[:12]}, mpmath, correctly rounded)")
    from ..reference import reference

    exact = np.asarray(reference(op, [x], **params).values, dtype=np.float64)
    return round_to(exact, f).astype(np.float64), exact, "numstd.reference (float64)"


def _classify(act: np.ndarray, exp: np.ndarray) -> dict[str, int]:
    fa, fe = np.isfinite(act), np.isfinite(exp)
    na, ne = np.isnan(act), np.isnan(exp)
    both = ~fa & ~fe
    return {
        "nan_where_finite": int((na & fe).sum()),
        "inf_where_finite": int((np.isinf(act) & fe).sum()),
        "finite_where_nan": int((fa & ne).sum()),
        "finite_where_inf": int((fa & np.isinf(exp)).sum()),
        "wrong_nonfinite": int((both & ~(na & ne) & ~(act == exp)).sum()),
    }


def survey(op: str, fmt: Any, fn: Callable | None = None, backend: str = "numpy",
           inputs: Any = "exhaustive", seed: int = 0, *, framework: str | None = None,
           standard: Any = None, judge: bool = True, progress: Progress | None = None,
           executor: Any = None, workers: int | None = None, ray_address: str | None = None,
           retries: int = 2, chunk: int = 1 << 20, sweep_dir: Any = None, **params: Any) -> Survey:
    """Survey the accuracy of an elementwise op implementation over a format's inputs.

    Parameters
    ----------
    op : str
        Elementwise catalog op: exp, log, tanh, sigmoid, erf, gelu, silu, relu, rsqrt, sqrt.
    fmt : format-like
        Input (and expected output) format: an 8/16-bit format, or float32 with ``inputs=N``.
    fn : callable, optional
        The implementation: takes the input array and returns one output per input.  It receives
        a numpy array (ml_dtypes for bfloat16/fp8), or a torch tensor / jax array when
        ``framework`` says so.  Default: the op of ``backend``.
    backend : str
        Any name :func:`numstd.backends.get` knows: ``"numpy"``, ``"torch"`` (``"torch:cpu"``),
        ``"jax"`` (``"jax:cpu"``), ``"torch:cuda"``, …  With ``fn``, it only sets the default
        ``framework``.
    inputs : "exhaustive" or int
        Every finite value, or that many seeded samples (module docstring).
    seed : int
        Seed of the samples.
    framework : {"numpy", "torch", "jax"}, optional
        What kind of array ``fn`` takes (default: from ``backend``'s name, else numpy).
    standard : str, optional
        Standard to judge by (default: the one :func:`numstd.find_standard` picks).
    judge : bool
        Compute :attr:`Survey.verdict` (``False`` skips :func:`numstd.check`).
    progress : callable(stage, fraction), optional
        Called as the survey advances (the CLI draws a progress bar with it).
    executor : {"serial", "local", "ray"} or numstd.executor.Executor, optional
        Run ``backend`` on the inputs in tasks of ``chunk`` inputs (:mod:`numstd.sweep`): on a
        local process pool, or on the Ray node that has the backend's device; each worker
        regenerates the inputs from ``(op, fmt, inputs, seed)``.  None: in this process.  Not
        with ``fn`` (a callable runs here).
    workers, ray_address, retries
        See :func:`numstd.sweep.run_sweep`.
    chunk : int
        Inputs per task (the default, 2**20, runs a 16-bit format in one task).
    sweep_dir : path, optional
        The tasks' dataset (default: a temporary directory); the same call resumes from it.
    **params
        Op parameters (``approximate="tanh"`` for gelu).

    Returns
    -------
    Survey

    Raises
    ------
    UnknownOpError, ParameterError, FormatError
        Not an elementwise op, bad parameters, unsupported format or ``inputs``.
    BackendUnavailable
        The backend (or the framework ``fn`` takes) is not installed here.
    DtypeError
        The backend cannot compute the op on this format (e.g. torch on fp8).
    ShapeError
        The implementation returned a different number of outputs.
    DataIntegrityError
        A shipped table fails its sha256 check.
    """
    from ..ops.catalog import get_op, validate

    def tick(stage: str, frac: float) -> None:
        if progress is not None:
            progress(stage, frac)

    spec = get_op(op)
    if spec.kind != "elementwise":
        raise ParameterError(f"survey covers elementwise ops; {spec.name} is a {spec.kind} op "
                             "(judge it with numstd.check)")
    f = get_format(fmt)
    _, _, full = validate(spec.name, [np.zeros(1, dtype=np.float32)], params)
    op = spec.name
    tick("inputs", 0.0)
    x = survey_inputs(op, f, inputs, seed, **full)
    tick("reference", 0.15)
    expected, exact, ref_note = _reference(op, full, x, f)
    tick("running", 0.3)
    if executor is not None:
        if fn is not None:
            raise ParameterError("executor= runs a backend by name on workers; a callable fn runs in this "
                                 "process: drop executor=, or pass backend= instead of fn")
        label = _backend_name(backend)
        y = _run_tasks(op, f, inputs, seed, full, label, x.size, executor=executor, workers=workers,
                       address=ray_address, retries=retries, chunk=chunk, sweep_dir=sweep_dir)
    else:
        impl, label = _implementation(op, full, fn, backend, framework)
        y = _run(impl, x, op, label)
    try:
        out_fmt = get_format(y.dtype).name
    except NumstdError:
        out_fmt = str(y.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        act = y.astype(np.float64)
    tick("errors", 0.5)

    comparable = np.isfinite(act) & np.isfinite(expected)
    errors = np.full(act.shape, np.nan)
    errors[comparable] = ulp_error(act[comparable], exact[comparable], f)
    acc = DistributionAccumulator()
    acc.add(errors[comparable], exact[comparable])
    dist = acc.result()

    idx = np.nonzero(comparable)[0]
    mag = np.abs(errors[idx])
    top = idx[np.argsort(-mag, kind="stable")[:WORST]] if idx.size else idx
    x64 = x.astype(np.float64)
    worst = tuple(WorstCase(float(x64[i]), float(act[i]), float(exact[i]), float(errors[i])) for i in top)

    flushed = comparable & (act == 0) & (expected != 0)
    ftz = None
    if flushed.any():
        xf = x64[flushed]
        ftz = FlushRegion(lo=float(xf.min()), hi=float(xf.max()), max_abs_input=float(np.abs(xf).max()),
                          count=int(flushed.sum()), largest_result=float(np.abs(expected[flushed]).max()))
    tick("verdict", 0.7)

    verdict, note = None, ""
    if not judge:
        note = "not judged (judge=False)"
    else:
        from ..judge.check import check

        try:
            verdict = check(y, op=op, inputs=[x], standard=standard, **full)
        except (StandardNotFound, AmbiguousStandard) as exc:
            note = str(exc)
    tick("done", 1.0)
    return Survey(
        op=op, params=dict(full), format=f.name, output_format=out_fmt, backend=label,
        inputs_kind="exhaustive" if (isinstance(inputs, str) or x.size == _finite_count(f)) else "sampled",
        seed=None if isinstance(inputs, str) else seed, reference=ref_note, n=int(x.size), ulp=dist,
        worst=worst, nonfinite=_classify(act, expected), ftz=ftz, verdict=verdict, verdict_note=note,
        inputs=_frozen(x64), outputs=_frozen(act), expected=_frozen(expected), exact=_frozen(exact),
        errors=_frozen(errors),
    )


def _finite_count(f: Format) -> int:
    return int(_finite_patterns(f).size) if f.bits <= 16 else -1


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.flags.writeable = False
    return a


from ..core._callable import make_callable  # noqa: E402

make_callable(__name__, survey)
