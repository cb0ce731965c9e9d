"""``numstd.grade``: judge a whole candidate module against its reference, KernelBench style.

For every trial and every input distribution of the module standard's suite, three runs see the
same inputs (each its own copy):

* **truth** — the reference in float64 (a deep copy of the working-dtype reference, upcast, so
  its weights are exactly the ones the kernels use);
* **baseline** — the reference in the working dtype (what the framework itself delivers);
* **candidate** — the candidate in the working dtype, with the reference's weights.

The candidate is judged by ``NS-MODULE-<FORMAT>`` (:func:`judge_module`): for each quantile
``q`` in :data:`QUANTILES` the candidate's ``q``-quantile of ``|ULP error|`` against the truth
may not exceed ``factor · base_q + rho``, where ``base_q`` is the baseline's ``q``-quantile
(the standard's ``[model] error`` formula evaluated with ``base = base_q``, plus ``rho``), and its
sign-adjusted mean ULP error must be within ``τ + z·sd/√n`` of the baseline's (``sd`` the
standard deviation of the paired per-element differences).  A module that is a single catalog op
(detected from what its ``forward`` calls, or declared as ``NUMSTD_OP``/``op=``) is judged by
that op's own standard as well, through :func:`numstd.check`.

Inputs: the draw of ``make_inputs()`` (seeded, ``"original"``) and redraws of the same shapes
and dtypes from the suite's distributions (:func:`numstd.suites.draw`: signed normal, uniform ±1,
heavy-tailed, large offset, wide range, variance near eps); integer and boolean inputs are kept
as ``make_inputs()`` drew them.  Nothing here touches global RNG state outside
``torch.random.fork_rng`` blocks, which are serialised by a lock (``make_inputs`` and module
constructors draw from torch's global generator).  See ``docs/grading.md``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import sys
import threading
import time
import types
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ._version import __version__
from .arrays import to_numpy
from .errors import DtypeError, NumstdError, ParameterError
from .verdict import CriterionResult, Offender, Verdict

__all__ = [
    "grade",
    "GradeReport",
    "CaseVerdict",
    "CaseRun",
    "run_cases",
    "judge_module",
    "judge_case",
    "module_errors",
    "ModuleErrors",
    "quantiles",
    "paired_bias",
    "module_standard",
    "describe_module_standard",
    "QUANTILES",
    "ORIGINAL",
    "SCHEMA",
]

SCHEMA = "numstd.grade/1"
#: quantiles of |ULP error| the module standard compares (1.0 is the maximum)
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999, 1.0)
#: name of the make_inputs() draw among the distributions
ORIGINAL = "original"
_WORST_K = 10
_SEEDED = threading.Lock()  # make_inputs and constructors use torch's global RNG


# --------------------------------------------------------------------------------- the report
@dataclass(frozen=True)
class CaseVerdict:
    """One verdict of a grade: the case (trial, distribution, input seed) and the standard's verdict.

    ``kind`` is ``"module"`` (NS-MODULE-*) or ``"op"`` (the catalog op's own standard).
    """

    trial: int
    distribution: str
    seed: int
    kind: str
    verdict: Verdict

    @property
    def label(self) -> str:
        return f"trial {self.trial}, {self.distribution}"

    def to_dict(self) -> dict:
        return {"trial": self.trial, "distribution": self.distribution, "seed": self.seed,
                "kind": self.kind, "verdict": self.verdict.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping) -> "CaseVerdict":
        return cls(int(d["trial"]), d["distribution"], int(d["seed"]), d["kind"], Verdict.from_dict(d["verdict"]))


@dataclass(frozen=True)
class GradeReport:
    """What :func:`grade` returns: the outcome and every verdict behind it.

    Attributes
    ----------
    passed : bool
        Every verdict passed.
    standard_id : str
        The module standard, ``"NS-MODULE-<FMT>@N"``.
    dtype : str
        The working format.
    device, framework : str
    op : tuple or None
        ``(name, params)`` of the catalog op the module was judged as too, or None.
    op_note : str
        How the op was found (``"detected: torch.softmax"``, ``"declared"``) or why no op standard
        was applied.
    cases : tuple of CaseVerdict
        Every verdict, module and op, per (trial, distribution), in run order.
    trials : int
    distributions : tuple of str
    seconds : float
        Wall time of the grade.
    """

    passed: bool
    standard_id: str
    dtype: str
    device: str
    framework: str
    op: tuple | None
    op_note: str
    cases: tuple[CaseVerdict, ...]
    trials: int
    distributions: tuple[str, ...]
    seed: int
    seconds: float
    numstd_version: str = __version__
    schema: str = SCHEMA

    def __bool__(self) -> bool:
        return self.passed

    @property
    def verdicts(self) -> list[Verdict]:
        return [c.verdict for c in self.cases]

    @property
    def failures(self) -> list[CaseVerdict]:
        """The failing cases, in run order."""
        return [c for c in self.cases if not c.verdict.passed]

    @property
    def standards(self) -> tuple[str, ...]:
        """Every standard cited, ``ID@N``, module standard first."""
        seen = [self.standard_id]
        for c in self.cases:
            if c.verdict.standard_id not in seen:
                seen.append(c.verdict.standard_id)
        return tuple(seen)

    def reasons(self) -> list[str]:
        """One line per failing case: where, which standard, which criterion and why."""
        return [f"{c.label} (seed {c.seed}), {c.verdict.standard_id}: "
                + "; ".join(f"{x.name} — {x.message}" for x in c.verdict.failed_criteria) for c in self.failures]

    @property
    def message(self) -> str:
        n, bad = len(self.cases), len(self.failures)
        head = (f"{'PASS' if self.passed else 'FAIL'}: {self.dtype} on {self.device} judged by "
                f"{', '.join(self.standards)} over {self.trials} trial(s) × {len(self.distributions)} "
                f"input distribution(s) ({', '.join(self.distributions)}); {n - bad}/{n} verdicts pass.")
        if self.op_note:
            head += f" Op standard: {self.op_note}."
        if bad:
            head += " Failed: " + " | ".join(self.reasons()[:5]) + (f" | … {bad - 5} more" if bad > 5 else "")
        return head

    def snippet(self) -> str:
        """One line for written feedback: outcome, standards, and the first failure's reason."""
        cited = ", ".join(self.standards)
        if self.passed:
            worst = max((c.verdict.normalized_max for c in self.cases if c.kind == "module"), default=0.0)
            return (f"PASS {cited} ({self.dtype}): {len(self.cases)} verdicts over {self.trials} trial(s) × "
                    f"{len(self.distributions)} input distributions; worst quantile at {worst:.2f}× its allowance")
        first = self.failures[0]
        dists = [d for d in self.distributions if any(c.distribution == d for c in self.failures)]
        why = first.verdict.snippet().split(" — ", 1)[-1]
        return (f"FAIL {cited} ({self.dtype}): {len(self.failures)}/{len(self.cases)} verdicts fail, on "
                f"{', '.join(dists)} inputs; first ({first.label}, {first.verdict.standard_id}): {why}")

    def to_dict(self) -> dict:
        return {
            "schema": self.schema, "numstd_version": self.numstd_version, "passed": self.passed,
            "standard_id": self.standard_id, "standards": list(self.standards), "dtype": self.dtype,
            "device": self.device, "framework": self.framework,
            "op": None if self.op is None else [self.op[0], dict(self.op[1])], "op_note": self.op_note,
            "trials": self.trials, "distributions": list(self.distributions), "seed": self.seed,
            "seconds": self.seconds, "message": self.message, "snippet": self.snippet(),
            "cases": [c.to_dict() for c in self.cases],
        }

    def to_json(self, **kwargs: Any) -> str:
        """JSON text (schema ``numstd.grade/1``); each case holds a full ``numstd.verdict/1`` verdict."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping) -> "GradeReport":
        if d.get("schema") != SCHEMA:
            from .errors import SchemaError

            raise SchemaError(f"grade report schema {d.get('schema')!r} is not {SCHEMA!r}; upgrade numstd to read it")
        op = d.get("op")
        return cls(
            passed=bool(d["passed"]), standard_id=d["standard_id"], dtype=d["dtype"], device=d["device"],
            framework=d["framework"], op=None if op is None else (op[0], dict(op[1])), op_note=d["op_note"],
            cases=tuple(CaseVerdict.from_dict(c) for c in d["cases"]), trials=int(d["trials"]),
            distributions=tuple(d["distributions"]), seed=int(d["seed"]), seconds=float(d["seconds"]),
            numstd_version=d.get("numstd_version", ""),
        )

    @classmethod
    def from_json(cls, text: str) -> "GradeReport":
        return cls.from_dict(json.loads(text))


# ---------------------------------------------------------------------------- framework adapters
_TORCH_DTYPES = ("float64", "float32", "bfloat16", "float16")


class _Adapter:
    """How to cast, copy, compare and call in one framework (torch, jax or numpy)."""

    name = "numpy"

    def __init__(self, device: str) -> None:
        self.device = device

    # arrays
    def is_float(self, x: Any) -> bool:
        return isinstance(x, np.ndarray) and x.dtype.kind in "fV"

    def is_array(self, x: Any) -> bool:
        return isinstance(x, np.ndarray)

    def from_float64(self, values: np.ndarray, fmt: Any) -> Any:
        return np.asarray(values, dtype=np.float64).astype(fmt.dtype)

    def cast(self, x: Any, fmt: Any) -> Any:
        """A float array rounded (RNE) into ``fmt``; other values copied."""
        if self.is_float(x):
            from .formats import round_to

            return np.asarray(round_to(to_numpy(x, name="input"), fmt))
        return self.copy(x)

    def copy(self, x: Any) -> Any:
        return x.copy() if isinstance(x, np.ndarray) else copy.deepcopy(x)

    def same(self, a: Any, b: Any) -> bool:
        if self.is_array(a) and self.is_array(b):
            x, y = to_numpy(a, name="input"), to_numpy(b, name="input")
            return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - objects without a usable ==: assume unchanged
            return True

    # models
    def prepare(self, reference: Any, candidate: Any, fmt: Any) -> tuple[Callable, Callable, Callable]:
        return reference, reference, candidate

    def call(self, fn: Callable, inputs: Sequence[Any], *, float64: bool = False, recorder: Any = None) -> Any:
        return fn(*inputs)

    def seeded(self, seed: int) -> Any:
        import contextlib

        return contextlib.nullcontext()


class _Torch(_Adapter):
    name = "torch"

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        try:
            self.dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ParameterError(f"device {device!r} is not a torch device ({exc}); use 'cpu' or 'cuda'") from None
        if self.dev.type == "cuda" and not torch.cuda.is_available():
            from .errors import BackendUnavailable

            raise BackendUnavailable("device='cuda' but torch.cuda.is_available() is False; grade on device='cpu'")
        super().__init__(str(self.dev))

    def dtype(self, fmt: Any) -> Any:
        if fmt.name not in _TORCH_DTYPES:
            raise DtypeError(f"torch grading supports {', '.join(_TORCH_DTYPES)}, not {fmt.name}")
        return getattr(self.torch, fmt.name)

    def is_float(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor) and x.is_floating_point()

    def is_array(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor)

    def from_float64(self, values: np.ndarray, fmt: Any) -> Any:
        t = self.torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
        return t.to(device=self.dev, dtype=self.dtype(fmt))

    def cast(self, x: Any, fmt: Any) -> Any:
        if self.is_float(x):
            return x.detach().to(device=self.dev, dtype=self.dtype(fmt)).clone()
        if self.is_array(x):
            return x.detach().to(self.dev).clone()
        return copy.deepcopy(x)

    def copy(self, x: Any) -> Any:
        return x.clone() if self.is_array(x) else copy.deepcopy(x)

    def same(self, a: Any, b: Any) -> bool:
        if self.is_array(a) and self.is_array(b):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.is_floating_point():  # bitwise: NaN equals NaN, -0 differs from +0
                width = {8: self.torch.int64, 4: self.torch.int32, 2: self.torch.int16, 1: self.torch.uint8}
                view = width[a.element_size()]
                return bool(self.torch.equal(a.contiguous().view(view), b.contiguous().view(view)))
            return bool(self.torch.equal(a, b))
        return super().same(a, b)

    def prepare(self, reference: Any, candidate: Any, fmt: Any) -> tuple[Callable, Callable, Callable]:
        nn = self.torch.nn
        dt = self.dtype(fmt)
        if isinstance(reference, nn.Module):
            base = copy.deepcopy(reference).to(device=self.dev, dtype=dt)
            truth = copy.deepcopy(base).to(dtype=self.torch.float64)
        else:
            base = truth = reference
        if isinstance(candidate, nn.Module):
            cand = copy.deepcopy(candidate).to(device=self.dev, dtype=dt)
            if isinstance(base, nn.Module):
                _share_weights(base, cand)
        else:
            cand = candidate
        return truth, base, cand

    def call(self, fn: Callable, inputs: Sequence[Any], *, float64: bool = False, recorder: Any = None) -> Any:
        import contextlib

        with self.torch.no_grad(), (recorder if recorder is not None else contextlib.nullcontext()):
            return fn(*inputs)

    def seeded(self, seed: int) -> Any:
        import contextlib

        torch = self.torch

        @contextlib.contextmanager
        def block() -> Iterator[None]:
            with _SEEDED:
                devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
                with torch.random.fork_rng(devices=devices):
                    torch.manual_seed(seed)
                    yield

        return block()


class _Jax(_Adapter):
    name = "jax"

    def __init__(self, device: str) -> None:
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        super().__init__(device)

    def is_float(self, x: Any) -> bool:
        from .arrays import is_jax

        return is_jax(x) and self.jnp.issubdtype(x.dtype, self.jnp.floating)

    def is_array(self, x: Any) -> bool:
        from .arrays import is_jax

        return is_jax(x)

    def from_float64(self, values: np.ndarray, fmt: Any) -> Any:
        return self.jnp.asarray(np.asarray(values, dtype=np.float64).astype(fmt.dtype))

    def cast(self, x: Any, fmt: Any) -> Any:
        if self.is_float(x):
            from .formats import round_to

            if fmt.name == "float64":
                with self.jax.enable_x64(True):
                    return self.jnp.asarray(np.asarray(to_numpy(x, name="input"), dtype=np.float64))
            return self.jnp.asarray(np.asarray(round_to(to_numpy(x, name="input"), fmt)))
        return x  # jax arrays are immutable

    def copy(self, x: Any) -> Any:
        return x if self.is_array(x) else copy.deepcopy(x)

    def call(self, fn: Callable, inputs: Sequence[Any], *, float64: bool = False, recorder: Any = None) -> Any:
        if float64:
            with self.jax.enable_x64(True):
                out = fn(*inputs)
                return self.jax.tree_util.tree_map(np.asarray, out)
        return fn(*inputs)


def _share_weights(base: Any, cand: Any) -> bool:
    """Load the reference's state into the candidate when names and shapes match (else keep its own)."""
    src, dst = base.state_dict(), cand.state_dict()
    if set(src) != set(dst) or any(tuple(src[k].shape) != tuple(dst[k].shape) for k in src):
        return False
    cand.load_state_dict(src)
    return True


def _adapter_for(reference: Any, candidate: Any, sample: Sequence[Any], device: str) -> _Adapter:
    from .arrays import is_jax, is_torch

    mods = {type(x).__module__.split(".")[0] for x in (reference, candidate)}
    if "torch" in mods or any(is_torch(x) for x in sample) or _is_torch_class(reference):
        return _Torch(device)
    if any(is_jax(x) for x in sample):
        return _Jax(device)
    if device not in ("cpu", None):
        raise ParameterError(f"device={device!r} needs torch or jax models; numpy callables run on the cpu")
    return _Adapter("cpu")


def _is_torch_class(x: Any) -> bool:
    return isinstance(x, type) and any(c.__module__.startswith("torch.nn") for c in x.__mro__)


# ---------------------------------------------------------------------------------- the standard
def module_standard(fmt: Any, standard: Any = None) -> Any:
    """The NS-MODULE standard for the working format ``fmt`` (or ``standard``: ``ID@N`` or a Standard)."""
    from .formats import get_format
    from .registry import find_standard, get_standard

    if standard is not None:
        std = get_standard(standard)
        if std.op != "module":
            raise ParameterError(f"standard {std.key} is for op {std.op!r}; grade needs an NS-MODULE-* standard")
        return std
    f = get_format(fmt)
    return find_standard("module", inputs=[f], output=f, accumulate="float32")


def describe_module_standard(std: Any) -> list[str]:
    """Lines stating what an NS-MODULE standard's fields mean (for ``numstd show`` and the docs catalog)."""
    c = std.criteria
    qs = ", ".join("max" if q == 1 else f"{q:g}" for q in QUANTILES)
    return [
        f"  errors: e_i = (y_i − t_i) / ulp_out(max(|t_i|, F)), F = max|t| · u_acc/u_out "
        f"(= {std.accumulate.u / std.output.u:g}·max|t|), t the module in float64",
        f"  quantiles ({qs}) of |e|: candidate ≤ {std.model.error.text} + {std.model.rho:g} with base = the "
        "reference's quantile in the working format",
        f"          constants: {', '.join(f'{k} = {v:g}' for k, v in sorted(std.model.constants.items()))}",
        f"  bias: |m_candidate − m_reference| ≤ {c.bias_tau:g} + {c.bias_z:g}·se (paired differences; se the larger "
        "of the element-wise and row-wise standard errors)",
        "  specials: non-finite only where the exact result rounds to non-finite or the reference is non-finite",
        "  also: shape and dtype of the reference; inputs unchanged; the candidate runs",
    ]


def _allowed(std: Any, base_q: np.ndarray) -> np.ndarray:
    """``error(base = base_q) + rho`` for each quantile (the standard's ``[model]``)."""
    e = np.broadcast_to(std.model.pre_rounding({"base": np.asarray(base_q, dtype=np.float64)}), np.shape(base_q))
    return np.asarray(e, dtype=np.float64) + std.model.rho


# ---------------------------------------------------------------------------------- judging
def quantiles(abs_errors: np.ndarray) -> np.ndarray:
    """The :data:`QUANTILES` of ``abs_errors``: the ``ceil(q·n)``-th smallest value (0 when empty)."""
    a = np.asarray(abs_errors, dtype=np.float64).reshape(-1)
    if a.size == 0:
        return np.zeros(len(QUANTILES))
    ks = sorted({max(1, math.ceil(q * a.size)) - 1 for q in QUANTILES})
    part = np.partition(a, ks)
    return np.array([part[max(1, math.ceil(q * a.size)) - 1] for q in QUANTILES])


def _classes(v: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +inf, 3 −inf."""
    c = np.zeros(v.shape, dtype=np.int8)
    c[np.isnan(v)] = 1
    c[v == np.inf] = 2
    c[v == -np.inf] = 3
    return c


def _leaves(out: Any) -> list[np.ndarray]:
    """The arrays of a module's output (a tensor, a tuple/list/dict of them, or a scalar) as numpy."""
    if isinstance(out, Mapping):
        return [leaf for k in sorted(out) for leaf in _leaves(out[k])]
    if isinstance(out, (list, tuple)):
        return [leaf for x in out for leaf in _leaves(x)]
    return [to_numpy(out, name="output")]


@dataclass
class ModuleErrors:
    """Scaled ULP errors of baseline and candidate on the elements all three runs have finite.

    ``e_i = (y_i − t_i) / ulp_out(max(|t_i|, F))`` with ``F = max|t| · u_acc / u_out`` per output
    array (the magnitude floor: an error of one accumulation-format rounding of the output's
    largest value is about one ULP at the floor).  Above ``F`` this is the ordinary ULP error.

    Attributes
    ----------
    truth, candidate : float64 arrays of the compared elements
    baseline_err, candidate_err : signed scaled ULP errors
    spacing : the ULP each error is measured in
    position : index of each compared element in the concatenated flattened output
    row : the row (slice along the last axis, numbered across output arrays) of each compared element
    floors : F of each output array
    n_total, n_nonfinite, special_mismatch, nan_where_finite : counts
    """

    truth: np.ndarray
    candidate: np.ndarray
    baseline_err: np.ndarray
    candidate_err: np.ndarray
    spacing: np.ndarray
    position: np.ndarray
    row: np.ndarray
    floors: list
    n_total: int
    n_nonfinite: int
    special_mismatch: int
    nan_where_finite: int


def module_errors(truth: Sequence[np.ndarray], baseline: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                  std: Any) -> ModuleErrors:
    """:class:`ModuleErrors` of float output arrays of equal shapes (see :func:`judge_module`)."""
    from .formats import round_to
    from .ulp import ulp

    fmt = std.output
    ratio = std.accumulate.u / fmt.u
    parts: dict[str, list] = {k: [] for k in ("t", "c", "eb", "ec", "sp", "pos", "row")}
    floors, offset, row_offset, nonfinite, bad, nan_fin = [], 0, 0, 0, 0, 0
    for T, B, C in zip(truth, baseline, candidate):
        t = np.asarray(T, dtype=np.float64).reshape(-1)
        b = np.asarray(B, dtype=np.float64).reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            c = np.asarray(C, dtype=np.float64).reshape(-1)
        big = ~(np.abs(t) < fmt.max_finite)  # what the exact result rounds to: only huge t can overflow
        rt = t.copy()
        if big.any():
            rt[big] = np.asarray(round_to(t[big], fmt), dtype=np.float64)
        cc, ct, cb = _classes(c), _classes(rt), _classes(b)
        mism = (cc != ct) & (cc != cb)  # non-finite only where the exact result or the baseline is
        bad += int(mism.sum())
        nan_fin += int((mism & (cc == 1)).sum())
        comp = (cc == 0) & (ct == 0) & (cb == 0)
        nonfinite += int(t.size - comp.sum())
        tc = t[comp]
        floor = float(np.max(np.abs(tc))) * ratio if tc.size else 0.0
        sp = ulp(np.maximum(np.abs(tc), floor), fmt) if tc.size else np.empty(0)
        parts["t"].append(tc)
        parts["c"].append(c[comp])
        parts["eb"].append((b[comp] - tc) / sp if tc.size else np.empty(0))
        parts["ec"].append((c[comp] - tc) / sp if tc.size else np.empty(0))
        parts["sp"].append(sp)
        parts["pos"].append(np.flatnonzero(comp) + offset)
        width = max(int(np.shape(T)[-1]) if np.ndim(T) else 1, 1)
        parts["row"].append(np.flatnonzero(comp) // width + row_offset)
        floors.append(floor)
        offset += t.size
        row_offset += max(t.size // width, 1)
    cat = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in parts.items()}
    return ModuleErrors(cat["t"], cat["c"], cat["eb"], cat["ec"], cat["sp"], cat["pos"].astype(np.int64),
                        cat["row"].astype(np.int64), floors, offset, nonfinite, bad, nan_fin)


def judge_module(truth: Any, baseline: Any, candidate: Any, standard: Any, *,
                 params: Mapping[str, Any] | None = None) -> Verdict:
    """Judge one case by a module standard (``NS-MODULE-*``).

    Parameters
    ----------
    truth, baseline, candidate : array or sequence of arrays
        The module's output(s): the reference in float64, the reference in the working format,
        the candidate.
    standard : Standard or str
    params : mapping, optional
        Recorded in the verdict (trial, distribution, seed, …).

    Returns
    -------
    Verdict
        Criteria ``shape``, ``dtype``, ``specials`` (the candidate is non-finite only where the
        exact result rounds to a non-finite value or the baseline is non-finite, same class),
        ``ulp_q0.5`` … ``ulp_q1`` (the candidate's quantile of |scaled ULP error|, see
        :class:`ModuleErrors`, ≤ the standard's ``error`` at ``base`` = the baseline's quantile,
        plus ``rho``) and ``bias`` (``|m_c − m_b| ≤ τ + z·max(sd, ρ/√3)/√n``, ``sd`` the standard
        deviation of the paired differences ``sign(t_i)·(e_c,i − e_b,i)``).  Non-float outputs
        must equal the truth or the baseline exactly (criterion ``exact``).
    """
    from .distribution import DistributionAccumulator

    from .registry import get_standard

    std = get_standard(standard)
    rec = dict(params or {})
    T, B, C = (_as_list(x) for x in (truth, baseline, candidate))
    shape = T[0].shape if len(T) == 1 else (sum(t.size for t in T),)
    problem = _structure_problem(T, B, C)
    if problem:
        return _early(std, shape, None, rec, "shape", problem)
    c_fmts = sorted({str(c.dtype) for c in C if c.dtype.kind in "fV"})
    dtype_ok = all(c.dtype == b.dtype for c, b in zip(C, B))
    crit = [CriterionResult("dtype", dtype_ok, 0.0 if dtype_ok else 1.0, 0.0,
                            f"output dtype {', '.join(str(c.dtype) for c in C)} "
                            + ("matches the reference's" if dtype_ok else
                               f"is not the reference's {', '.join(str(b.dtype) for b in B)}"))]
    fl = [i for i in range(len(T)) if B[i].dtype.kind in "fV"]
    ints = [i for i in range(len(T)) if i not in fl]
    if ints:
        wrong = sum(int(((C[i] != T[i]) & (C[i] != B[i])).sum()) for i in ints)
        crit.append(CriterionResult("exact", wrong == 0, float(wrong), 0.0,
                                    f"{wrong} non-float output element(s) differ from the reference"))
    m = module_errors([T[i] for i in fl], [B[i] for i in fl], [C[i] for i in fl], std)
    crit.append(CriterionResult("specials", m.special_mismatch == 0, float(m.special_mismatch), 0.0,
                                f"{m.special_mismatch} non-finite mismatch(es) ({m.nan_where_finite} NaN where the "
                                "reference is finite)" if m.special_mismatch else
                                "non-finite values only where the reference has them"))
    base_q, cand_q = quantiles(np.abs(m.baseline_err)), quantiles(np.abs(m.candidate_err))
    allowed = _allowed(std, base_q)
    for q, v, lim, bq in zip(QUANTILES, cand_q, allowed, base_q):
        crit.append(CriterionResult(
            f"ulp_q{q:g}", bool(v <= lim), float(v), float(lim),
            f"{'max' if q == 1 else f'{q:g}-quantile of'} |ULP error| {v:.3g} (allowed {lim:.3g} = "
            f"{std.model.error.text} + {std.model.rho:g} with base = the reference's {bq:.3g})"))
    crit.append(_bias(std, m))
    acc = DistributionAccumulator()
    acc.add(m.candidate_err, m.truth)
    dist = acc.result()
    ratios = np.divide(cand_q, allowed, out=np.zeros_like(cand_q), where=cand_q > 0)
    worst = _worst(T if not ints else [T[i] for i in fl], m, float(allowed[-1]))
    rec.update(dtype=std.output.name, magnitude_floor=[float(f) for f in m.floors],
               baseline={**{f"q{q:g}": float(v) for q, v in zip(QUANTILES, base_q)},
                         "mean_signed": _signed_mean(m.baseline_err, m.truth)},
               allowed={f"q{q:g}": float(v) for q, v in zip(QUANTILES, allowed)})
    passed = all(x.passed for x in crit)
    n_int = sum(T[i].size for i in ints)
    return Verdict(passed=passed, standard_id=std.key, standard_sha256=std.sha256, op="module", shape=tuple(shape),
                   formats=dict(std.formats, actual=",".join(c_fmts) or None), params=rec, criteria=tuple(crit),
                   ulp=dist, normalized_max=float(ratios.max()) if ratios.size else 0.0, worst=tuple(worst),
                   n_elements=m.n_total + n_int, n_nonfinite=m.n_nonfinite,
                   message=_module_message(std, passed, crit, dist, base_q, cand_q, allowed, worst, m.n_total + n_int),
                   numstd_version=__version__)


def _as_list(x: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in (x if isinstance(x, (list, tuple)) else [x])]


def _signed_mean(err: np.ndarray, t: np.ndarray) -> float:
    nz = t != 0
    return float(np.mean(np.where(t[nz] > 0, err[nz], -err[nz]))) if nz.any() else 0.0


def paired_bias(m: ModuleErrors, rho: float) -> dict:
    """The bias statistic: mean and standard error of ``d_i = sign(t_i)·(e_c,i − e_b,i)``.

    The standard error is the larger of the element-wise ``max(sd(d), ρ/√3)/√n`` and the row-wise
    ``sd(row means of d)/√R`` (R rows ≥ 2): an error shared by a whole row — a softmax or layer
    norm normalizer computed in another order — shifts every element of the row together, so the
    elements are not independent samples of the bias and only the rows are.

    Returns ``{"n", "rows", "diff", "se", "candidate", "baseline"}`` (the last two: the signed means).
    """
    nz = m.truth != 0
    n = int(nz.sum())
    if n == 0:
        return {"n": 0, "rows": 0, "diff": 0.0, "se": math.inf, "candidate": 0.0, "baseline": 0.0}
    sgn = np.where(m.truth[nz] > 0, 1.0, -1.0)
    sc, sb = sgn * m.candidate_err[nz], sgn * m.baseline_err[nz]
    d = sc - sb
    se = max(float(np.std(d)), rho / math.sqrt(3.0)) / math.sqrt(n)
    _, inv = np.unique(m.row[nz], return_inverse=True)
    rows = int(inv.max()) + 1
    if rows >= 2:
        means = np.bincount(inv, weights=d) / np.bincount(inv)
        se = max(se, float(np.std(means, ddof=1)) / math.sqrt(rows))
    return {"n": n, "rows": rows, "diff": float(np.mean(d)), "se": se,
            "candidate": float(np.mean(sc)), "baseline": float(np.mean(sb))}


def _bias(std: Any, m: ModuleErrors) -> CriterionResult:
    b = paired_bias(m, std.model.rho)
    if b["n"] == 0:
        return CriterionResult("bias", True, 0.0, math.inf, "no nonzero finite reference values to test bias on")
    limit = std.criteria.bias_tau + std.criteria.bias_z * b["se"]
    return CriterionResult(
        "bias", abs(b["diff"]) <= limit, b["diff"], limit,
        f"mean signed error {b['candidate']:+.3f} ulp vs the reference's {b['baseline']:+.3f} over {b['n']:,} "
        f"elements in {b['rows']:,} row(s): difference {b['diff']:+.3f} (allowed ±{limit:.3f})")


def _structure_problem(T: list, B: list, C: list) -> str:
    if len(C) != len(T):
        return f"the candidate returned {len(C)} array(s), the reference {len(T)}"
    for i, (t, c) in enumerate(zip(T, C)):
        where = f"output {i} " if len(T) > 1 else "output "
        if c.shape != t.shape:
            return f"{where}shape {c.shape} is not the reference's {t.shape}"
        if c.dtype.kind not in "fViub":
            return f"{where}dtype {c.dtype} is not numeric"
        if (B[i].dtype.kind in "fV") != (c.dtype.kind in "fV"):
            return f"{where}dtype {c.dtype} is not of the reference's kind ({B[i].dtype})"
    return ""


def _worst(T: list, m: ModuleErrors, allowed_max: float) -> list[Offender]:
    e = m.candidate_err
    if e.size == 0:
        return []
    a = np.abs(e)
    k = min(_WORST_K, a.size)
    top = np.argpartition(-a, k - 1)[:k]
    top = top[np.lexsort((top, -a[top]))]
    out = []
    for j in top:
        flat = int(m.position[j])
        index = tuple(int(i) for i in np.unravel_index(flat, T[0].shape)) if len(T) == 1 else (flat,)
        out.append(Offender(index=index, actual=float(m.candidate[j]), reference=float(m.truth[j]),
                            ulp_error=float(e[j]), normalized=float(a[j] / allowed_max) if allowed_max > 0 else math.inf,
                            bound=float(allowed_max * m.spacing[j])))
    return out


def _module_message(std: Any, passed: bool, crit: list, dist: Any, base_q: np.ndarray, cand_q: np.ndarray,
                    allowed: np.ndarray, worst: list, n: int) -> str:
    head = f"{'PASS' if passed else 'FAIL'} against {std.citation} ({std.title})."
    qs = ", ".join(f"{'max' if q == 1 else f'q{q:g}'} {c:.3g}/{a:.3g}" for q, c, a in zip(QUANTILES, cand_q, allowed))
    body = (f" {n:,} elements, {dist.count:,} compared; candidate |ULP error| / allowed: {qs} "
            f"(reference: {', '.join(f'{b:.3g}' for b in base_q)}); mean signed {dist.mean_signed:+.3f}.")
    failed = [c for c in crit if not c.passed]
    tail = (" Failed: " + "; ".join(f"{c.name} — {c.message}" for c in failed) + ".") if failed else ""
    if failed and worst:
        w = worst[0]
        tail += f" Worst element {list(w.index)}: {w.actual!r} vs reference {w.reference!r} ({w.ulp_error:+.3g} ulp)."
    return head + body + tail


def _early(std: Any, shape: tuple, actual_fmt: Any, params: dict, name: str, problem: str) -> Verdict:
    from .distribution import UlpDistribution

    return Verdict(passed=False, standard_id=std.key, standard_sha256=std.sha256, op="module", shape=tuple(shape),
                   formats=dict(std.formats, actual=actual_fmt), params=params,
                   criteria=(CriterionResult(name, False, 1.0, 0.0, problem),), ulp=UlpDistribution(),
                   normalized_max=math.inf, worst=(), n_elements=0, n_nonfinite=0,
                   message=f"FAIL against {std.citation}: {problem}. Nothing else was judged.",
                   numstd_version=__version__)


# ------------------------------------------------------------------------------ op detection
#: torch function names → catalog op, and how its arguments map to the op's inputs and params
_UNARY = {"relu": "relu", "gelu": "gelu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp",
          "log": "log", "erf": "erf", "sqrt": "sqrt", "rsqrt": "rsqrt"}
_IGNORED = {"__get__", "size", "dim", "numel", "contiguous", "__len__", "is_floating_point", "type", "__format__"}


def _arg(args: Sequence, kwargs: Mapping, pos: int, name: str, default: Any = None) -> Any:
    return args[pos] if len(args) > pos else kwargs.get(name, default)


def _as_op(name: str, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``(op, inputs, params)`` for one recorded torch call, or None when it is no catalog op."""
    if kwargs.get("dtype") is not None or kwargs.get("out") is not None:
        return None
    x = args[0] if args else kwargs.get("input")
    if name in _UNARY:
        params = {}
        if name == "gelu":
            params["approximate"] = _arg(args, kwargs, 1, "approximate", "none")
        return name, [x], params
    if name in ("softmax", "log_softmax"):
        dim = _arg(args, kwargs, 1, "dim")
        return (name, [x], {"axis": int(dim)}) if dim is not None else None
    if name == "cumsum":
        dim = _arg(args, kwargs, 1, "dim")
        return ("cumsum", [x], {"axis": int(dim)}) if dim is not None else None
    if name in ("matmul", "__matmul__", "mm", "bmm"):
        return "matmul", [x, _arg(args, kwargs, 1, "other", kwargs.get("mat2"))], {}
    if name == "linear":
        return "linear", [x, _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias")], {}
    if name in ("sum", "mean"):
        dim = _arg(args, kwargs, 1, "dim")
        axis = None if dim is None else (tuple(dim) if isinstance(dim, (list, tuple)) else int(dim))
        return name, [x], {"axis": axis, "keepdims": bool(_arg(args, kwargs, 2, "keepdim", False))}
    if name == "layer_norm":
        shape = _arg(args, kwargs, 1, "normalized_shape")
        if shape is None or len(tuple(shape)) != 1:
            return None
        return "layer_norm", [x, _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")], \
            {"eps": float(_arg(args, kwargs, 4, "eps", 1e-5))}
    if name == "rms_norm":
        shape = _arg(args, kwargs, 1, "normalized_shape")
        if shape is None or len(tuple(shape)) != 1:
            return None
        return "rms_norm", [x, _arg(args, kwargs, 2, "weight")], {"eps": _arg(args, kwargs, 3, "eps")}
    if name == "cross_entropy":
        if _arg(args, kwargs, 2, "weight") is not None or float(kwargs.get("label_smoothing", 0.0)) != 0.0:
            return None
        return "cross_entropy", [x, _arg(args, kwargs, 1, "target")], {"reduction": kwargs.get("reduction", "mean")}
    if name == "scaled_dot_product_attention":
        if _arg(args, kwargs, 3, "attn_mask") is not None or float(_arg(args, kwargs, 4, "dropout_p", 0.0)) != 0.0:
            return None
        return "attention", [x, _arg(args, kwargs, 1, "key"), _arg(args, kwargs, 2, "value")], \
            {"causal": bool(_arg(args, kwargs, 5, "is_causal", False)), "scale": kwargs.get("scale")}
    return None


def _recorder() -> Any:
    """A TorchFunctionMode that records the calls a forward makes (not the calls inside them)."""
    return _recorder_class()()


@functools.lru_cache(maxsize=1)
def _recorder_class() -> type:
    from torch.overrides import TorchFunctionMode

    class _Record(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, tuple, dict]] = []

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name not in _IGNORED:
                self.calls.append((name, args, dict(kwargs)))
            return func(*args, **kwargs)

    return _Record


def _detected_op(calls: list) -> tuple[str, list, dict, str] | None:
    if len(calls) != 1:
        return None
    name, args, kwargs = calls[0]
    found = _as_op(name, args, kwargs)
    if found is None:
        return None
    op, inputs, params = found
    return op, [None if x is None else to_numpy(x, name="input").copy() for x in inputs], params, name


# ---------------------------------------------------------------------------------- the runs
@dataclass
class CaseRun:
    """One (trial, distribution): the three runs' outputs and what the candidate did.

    Attributes
    ----------
    truth, baseline : list of numpy arrays
    candidate : list of numpy arrays, or None when it raised or returned no arrays (``error`` says which)
    mutated : list of int
        Positions of inputs the candidate wrote into.
    op_call : tuple or None
        ``(op, inputs, params, torch function name)`` of the catalog op the reference's forward
        consisted of.
    inputs : list
        The working-format inputs as numpy (kept only when asked: a declared op needs them).
    """

    trial: int
    distribution: str
    seed: int
    truth: list
    baseline: list
    candidate: list | None
    error: str = ""
    mutated: list = field(default_factory=list)
    op_call: tuple | None = None
    inputs: list = field(default_factory=list)


def _seed_of(seed: int, trial: int, dist: str) -> int:
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, trial, zlib.crc32(dist.encode())]).generate_state(1)[0])


def _redraw(adapter: _Adapter, x: Any, rng: np.random.Generator, dist: str, fmt: Any) -> Any:
    from .formats import round_to
    from .suites import draw

    shape = tuple(x.shape)
    v = np.clip(draw(rng, shape, dist, fmt), -fmt.max_finite, fmt.max_finite)
    return adapter.from_float64(np.asarray(round_to(v, fmt), dtype=np.float64), fmt)


def _working_format(dtype: Any, sample: Sequence[Any], adapter: _Adapter) -> Any:
    from .formats import get_format

    if dtype is not None:
        return get_format(dtype)
    for x in sample:
        if adapter.is_float(x):
            return get_format(x.dtype)
    return get_format("float32")


def _instantiate(obj: Any, init_inputs: Sequence[Any]) -> Any:
    return obj(*init_inputs) if isinstance(obj, type) else obj


@dataclass
class _Setup:
    adapter: _Adapter
    reference: Any
    candidate: Any
    samples: list


def _setup(reference: Any, candidate: Any, make_inputs: Callable, init_inputs: Any, trials: int, seed: int,
           device: str) -> _Setup:
    """Construct module classes (seeded alike), pick the framework, draw ``make_inputs`` per trial (seeded)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ParameterError(f"trials must be an int ≥ 1, got {trials!r}")
    if not callable(make_inputs):
        raise ParameterError("make_inputs must be a function returning the list of inputs (e.g. get_inputs)")
    init = list(init_inputs() if callable(init_inputs) else init_inputs)
    adapter: _Adapter | None = None
    if _is_torch_class(reference) or _is_torch_class(candidate) or _is_torch_object(reference) \
            or _is_torch_object(candidate):
        adapter = _Torch(device)
        with adapter.seeded(_seed_of(seed, 0, "init")):
            reference = _instantiate(reference, init)
        with adapter.seeded(_seed_of(seed, 0, "init")):
            candidate = _instantiate(candidate, init)
    samples: list[list] = []
    for trial in range(trials):
        s = _seed_of(seed, trial, ORIGINAL)
        if adapter is None:  # plain callables: the inputs tell the framework
            adapter = _adapter_for(reference, candidate, list(make_inputs()), device)
        with adapter.seeded(s):
            samples.append(list(make_inputs()))
    assert adapter is not None
    return _Setup(adapter, reference, candidate, samples)


def _is_torch_object(x: Any) -> bool:
    return any(c.__module__.startswith("torch.nn") for c in type(x).__mro__)


def _run_all(setup: _Setup, fmt: Any, distributions: Sequence[str], seed: int, record: bool,
             keep_inputs: bool) -> list[CaseRun]:
    from .formats import get_format

    adapter = setup.adapter
    truth_fn, base_fn, cand_fn = adapter.prepare(setup.reference, setup.candidate, fmt)
    f64 = get_format("float64")
    runs: list[CaseRun] = []
    for trial, sample in enumerate(setup.samples):
        work0 = [adapter.cast(x, fmt) for x in sample]
        for dist in (ORIGINAL, *distributions):
            s = _seed_of(seed, trial, dist)
            if dist == ORIGINAL:
                work = work0
            else:
                rng = np.random.default_rng(s)
                work = [_redraw(adapter, x, rng, dist, fmt) if adapter.is_float(x) else adapter.copy(x) for x in work0]
            run = _run_one(adapter, truth_fn, base_fn, cand_fn, work, fmt, f64, trial, dist, s, record)
            if keep_inputs:
                run.inputs = [to_numpy(x, name="input").copy() if adapter.is_array(x) else x for x in work]
            runs.append(run)
    return runs


def run_cases(reference: Any, candidate: Any, make_inputs: Callable[[], Sequence[Any]], *,
              init_inputs: Any = (), dtype: Any = None, trials: int = 5, seed: int = 0,
              distributions: Sequence[str] = (), device: str = "cpu", detect_op: bool = False,
              keep_inputs: bool = False) -> tuple[Any, list[CaseRun], str]:
    """Run truth, baseline and candidate on every case without judging (grade and calibration use it).

    Parameters are those of :func:`grade`; ``distributions`` is a sequence of names (the original
    draw always comes first).

    Returns
    -------
    fmt : Format
        The working format.
    runs : list of CaseRun
    framework : str
        ``"torch"``, ``"jax"`` or ``"numpy"``.
    """
    setup = _setup(reference, candidate, make_inputs, init_inputs, trials, seed, device)
    fmt = _working_format(dtype, setup.samples[0], setup.adapter)
    runs = _run_all(setup, fmt, _distributions(list(distributions), None), seed,
                    detect_op and setup.adapter.name == "torch", keep_inputs)
    return fmt, runs, setup.adapter.name


def _run_one(adapter: _Adapter, truth_fn: Callable, base_fn: Callable, cand_fn: Callable, work: list, fmt: Any,
             f64: Any, trial: int, dist: str, seed: int, record: bool) -> CaseRun:
    truth_in = [adapter.cast(x, f64) if adapter.is_float(x) else adapter.copy(x) for x in work]
    base_in = [adapter.copy(x) for x in work]
    cand_in = [adapter.copy(x) for x in work]
    where = f"trial {trial}, {dist} inputs"
    try:
        truth = [np.asarray(x, dtype=np.float64) if x.dtype.kind in "fV" else x
                 for x in _leaves(adapter.call(truth_fn, truth_in, float64=True))]
    except Exception as exc:  # noqa: BLE001 - the reference must run: that is a usage error
        raise NumstdError(f"the reference raised {type(exc).__name__}: {exc} in float64 ({where}); "
                          "grade needs a reference that runs in float64 on the suite's inputs") from exc
    op_call = None
    try:
        if record:
            rec = _recorder()
            base_out = adapter.call(base_fn, base_in, recorder=rec)
            op_call = _detected_op(rec.calls)
        else:
            base_out = adapter.call(base_fn, base_in)
        baseline = _leaves(base_out)
    except Exception as exc:  # noqa: BLE001
        raise NumstdError(f"the reference raised {type(exc).__name__}: {exc} in {fmt.name} ({where})") from exc
    candidate, error = None, ""
    try:
        cand_out = adapter.call(cand_fn, cand_in)
    except Exception as exc:  # noqa: BLE001 - a candidate that crashes fails, it does not crash the grader
        error = f"the candidate raised {type(exc).__name__}: {exc}"
    else:
        try:
            candidate = _leaves(cand_out)
        except NumstdError as exc:
            error = f"the candidate returned {type(cand_out).__name__}, not arrays ({exc})"
    mutated = [i for i, (a, b) in enumerate(zip(cand_in, work)) if not adapter.same(a, b)]
    return CaseRun(trial, dist, seed, truth, baseline, candidate, error, mutated, op_call)


# ---------------------------------------------------------------------------------- grade
def _distributions(distributions: Any, std: Any) -> tuple[str, ...]:
    from .suites import DISTRIBUTIONS

    if distributions == "standard":
        names = [d for d in std.suite.get("distributions", ["normal"]) if d != ORIGINAL]
    elif distributions in (None, "original", ()):
        names = []
    elif isinstance(distributions, str):
        names = [distributions]
    else:
        names = [d for d in distributions if d != ORIGINAL]
    bad = [d for d in names if d not in DISTRIBUTIONS]
    if bad:
        raise ParameterError(f"unknown distribution(s) {bad}; use 'standard' or names from {', '.join(DISTRIBUTIONS)}")
    return tuple(names)


def _declared_op(op: Any) -> tuple[str, dict] | None:
    if op is None or op is False or op == "auto":
        return None
    if isinstance(op, str):
        return op, {}
    if isinstance(op, (list, tuple)) and len(op) == 2 and isinstance(op[0], str) and isinstance(op[1], Mapping):
        return op[0], dict(op[1])
    raise ParameterError(f"op={op!r}: declare the catalog op as ('softmax', {{'axis': -1}}) or a name")


def grade(reference: Any, candidate: Any, make_inputs: Callable[[], Sequence[Any]], *, init_inputs: Any = (),
          dtype: Any = None, trials: int = 5, seed: int = 0, distributions: Any = "standard",
          device: str = "cpu", op: Any = "auto", standard: Any = None) -> GradeReport:
    """Grade a candidate module against its reference; see the module docstring.

    Parameters
    ----------
    reference, candidate : torch.nn.Module (instance or class), or a callable (torch, jax or numpy)
        Classes are constructed from ``init_inputs`` with torch seeded identically; module weights are
        copied from the reference into the candidate when the state_dict names and shapes match.
        Neither object is modified (deep copies are moved to the working dtype and to float64).
    make_inputs : callable
        Returns the list of inputs (KernelBench ``get_inputs``); called once per trial, seeded.
    init_inputs : sequence or callable
        Constructor arguments for module classes (KernelBench ``get_init_inputs``).
    dtype : format-like, optional
        Working format (``"bf16"``, ``torch.float16``, …); default: the first float input's dtype.
        Float inputs are rounded (RNE) into it; models are cast with ``.to(dtype)``.
    trials : int
        Independent draws of ``make_inputs`` (each with every distribution's redraw).
    seed : int
        Seeds every draw; the same seed gives the same verdicts.
    distributions : "standard", sequence of names, or None
        Redraws besides the original draw: the module standard's suite (default), a list of
        :data:`numstd.suites.DISTRIBUTIONS` names, or None for the original draw only.
    device : str
        ``"cpu"`` or ``"cuda"`` (torch).
    op : "auto", None, str or (name, params)
        The catalog op the reference computes, judged by that op's standard as well: ``"auto"``
        detects a forward that is a single call of a catalog op (torch only); None disables it.
    standard : str or Standard, optional
        Pin the module standard (``"NS-MODULE-BF16@1"``); default: the one for the working format.

    Returns
    -------
    GradeReport
    """
    start = time.perf_counter()
    declared = _declared_op(op)
    if declared is None and op == "auto":
        declared = _declared_op(getattr(_module_of(reference), "NUMSTD_OP", None))
    setup = _setup(reference, candidate, make_inputs, init_inputs, trials, seed, device)
    fmt = _working_format(dtype, setup.samples[0], setup.adapter)
    std = module_standard(fmt, standard)
    dists = _distributions(distributions, std)
    detect = declared is None and op == "auto" and setup.adapter.name == "torch"
    runs = _run_all(setup, std.output, dists, seed, detect, keep_inputs=declared is not None)
    cases: list[CaseVerdict] = []
    op_used, op_note, op_failed = None, "", False
    for r in runs:
        params = {"trial": r.trial, "distribution": r.distribution, "seed": r.seed}
        v = judge_case(std, r, params)
        cases.append(CaseVerdict(r.trial, r.distribution, r.seed, "module", v))
        call = _op_call_for(declared, r)
        if call is None:
            if not op_note:
                op_note = ("disabled" if op is None else
                           "none: the reference is not a single catalog op (declare NUMSTD_OP to add one)"
                           if setup.adapter.name == "torch" else
                           "none: op detection needs torch; pass op=(name, params) to add the op's standard")
            continue
        if op_failed or r.candidate is None or r.mutated or len(r.candidate) != 1:
            continue
        name, inputs, oparams, how = call
        try:
            from .check import check

            ov = check(r.candidate[0], op=name, inputs=inputs, **oparams)
        except NumstdError as exc:
            op_failed, op_note = True, f"{name} not judged by an op standard: {exc}"
            continue
        op_used = (name, dict(oparams))
        op_note = f"{name} ({how}); judged by {ov.standard_id} too"
        ov = replace(ov, params=dict(ov.params, **params))
        cases.append(CaseVerdict(r.trial, r.distribution, r.seed, "op", ov))
    passed = all(c.verdict.passed for c in cases)
    return GradeReport(passed=passed, standard_id=std.key, dtype=std.output.name, device=device,
                       framework=setup.adapter.name, op=op_used, op_note=op_note, cases=tuple(cases), trials=trials,
                       distributions=(ORIGINAL, *dists), seed=seed, seconds=time.perf_counter() - start)


def _module_of(obj: Any) -> Any:
    """The Python module that defines ``obj`` (a class, an instance or a function), if loaded."""
    mod = getattr(obj, "__module__", None)
    return sys.modules.get(mod) if isinstance(mod, str) else None


def _op_call_for(declared: tuple | None, r: CaseRun) -> tuple | None:
    if declared is not None:
        return declared[0], _declared_inputs(r), declared[1], "declared"
    if r.op_call is not None:
        name, inputs, params, fname = r.op_call
        return name, inputs, params, f"detected: the reference's forward is one call of torch {fname}"
    return None


def _declared_inputs(r: CaseRun) -> list:
    """A declared op takes the module's array inputs, in call order."""
    return [x for x in r.inputs if isinstance(x, np.ndarray)]


def judge_case(std: Any, r: CaseRun, params: Mapping[str, Any] | None = None) -> Verdict:
    """The module verdict of one :class:`CaseRun`: ``runs``/``shape`` when the candidate raised or returned no
    arrays, ``inputs_unchanged`` when it wrote into its inputs, else :func:`judge_module`."""
    params = dict(params or {})
    shape = r.truth[0].shape if len(r.truth) == 1 else (sum(t.size for t in r.truth),)
    if r.candidate is None:
        return _early(std, shape, None, params, "runs" if " raised " in r.error else "shape", r.error)
    if r.mutated:
        which = ", ".join(f"inputs[{i}]" for i in r.mutated)
        return _early(std, shape, None, params, "inputs_unchanged",
                      f"the candidate wrote into {which}: a kernel must not modify its inputs (copy them first)")
    return judge_module(r.truth, r.baseline, r.candidate, std, params=params)


class _CallableModule(types.ModuleType):
    """``numstd.grade`` names both this module and its function: importing the submodule makes the
    package attribute the module, so the module forwards calls to :func:`grade`."""

    def __call__(self, *args: Any, **kwargs: Any) -> GradeReport:
        return grade(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
