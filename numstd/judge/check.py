"""``numstd.check`` and ``numstd.assert_conforms``: judge a kernel's output against a standard.

Flow: validate the call (op catalog) → choose the standard (registry) → for each chunk of the
output (:mod:`numstd.chunks`): float64 reference from the kernel's exact inputs
(:mod:`numstd.reference`), per-element bound (:mod:`numstd.models`), per-element judging
(:mod:`numstd.criteria`) → criteria → :class:`~numstd.verdict.Verdict`.

Bad *numbers* in the output never raise: NaN, ±inf, wrong values, a wrong shape or dtype, even an
object that is not an array give a failing verdict.  An output format is wrong only when no
standard covers it for these inputs: the verdict's ``dtype`` criterion then lists the covered
(inputs → output) combinations.  A malformed *call* (unknown op, inputs of the
wrong shape or dtype, unknown parameters, no matching standard) raises a
:class:`~numstd.errors.NumstdError` whose message says how to fix it.
"""

from __future__ import annotations

import dataclasses

import numbers
from typing import Any, Sequence

import numpy as np

from .._version import __version__
from ..core.arrays import to_numpy
from .chunks import DEFAULT_CHUNK, chunk_params, default_chunk, plan, prefetch
from .criteria import Judge, chunk_pieces, evaluate, hull_violations, tail_factor
from ..core.distribution import UlpDistribution
from ..core.errors import AmbiguousStandard, DtypeError, NonConformance, NumstdError, ParameterError, StandardNotFound
from ..core.native import pool
from .verdict import CriterionResult, Verdict

__all__ = ["check", "assert_conforms", "selector_params"]


def selector_params(op: str) -> set[str]:
    """Call parameters that select a standard for ``op`` rather than change the op (e.g. ``allow_tf32``)."""
    from ..catalog.registry import list_standards

    names: set[str] = set()
    for s in list_standards(op):
        names.update(s.selector)
    return names


def check(actual: Any, *, op: str, inputs: Sequence[Any], standard: Any = None,
          accumulate: Any = "float32", policy: str | None = None, chunk_size: int | None = None,
          **params: Any) -> Verdict:
    """Judge ``actual``, a kernel's output for ``op`` on ``inputs``, against a numstd standard.

    Parameters
    ----------
    actual : array-like (numpy/ml_dtypes, torch, jax), or a tuple of them
        The kernel's output; for an op with several outputs (``max``/``min`` with an ``axis``:
        ``(values, indices)`` as ``torch.max(x, dim)`` returns) a tuple, each judged by its own
        standard (:mod:`numstd.judge.multi`; ``standard`` is then one standard per output or None).
    op : str
        Op name from the catalog (``numstd.ops.OPS``).
    inputs : sequence of arrays
        The exact inputs the kernel received (their formats select the standard).
    standard : str or Standard, optional
        ``"ID@N"`` (or ``"ID"`` for its latest version).  Default: the one standard covering
        (op, input formats, output format, ``accumulate``, selector parameters).  Inputs in other
        formats than an explicit standard's are a :class:`~numstd.errors.DtypeError` (its bounds
        were calibrated for its formats only), so the verdict's formats are always the real ones.
    accumulate : str
        Declared accumulation format (default float32; a 16-bit format selects the ``arith16``
        policy, 16-bit arithmetic).
    policy : {"fp32", "stored16", "arith16"}, optional
        Precision policy (docs/methodology.md §2.1).  Default: :data:`numstd.registry.DEFAULT_POLICY`
        — ``stored16`` for 16-bit outputs where such a standard exists (what framework kernels do),
        else ``fp32``.  The verdict's ``formats["policy"]`` says which applied.
    chunk_size : int, optional
        Output elements per chunk (default :func:`numstd.chunks.default_chunk` of the op's kind:
        2^16; 2^19 for contractions, whose rows are rounded to whole blocks of 256); the verdict does
        not depend on it.
    **params
        Op parameters (numpy names: ``axis``, ``eps``, ``approximate``, …) and selector parameters
        (``allow_tf32=True``).

    Returns
    -------
    Verdict
    """
    from ..ops.reduction import MULTI_OUTPUT

    if isinstance(op, str) and op.lower() in MULTI_OUTPUT:  # several outputs (max/min with an axis): numstd.judge.multi
        from .multi import check_multi

        return check_multi(actual, op=op.lower(), inputs=inputs, standard=standard, accumulate=accumulate, policy=policy,
                           chunk_size=chunk_size, **params)
    from ..core.formats import format_of
    from ..ops.catalog import output_shape, validate
    from ..reference import validated_reference
    from ..catalog.registry import find_standard, get_standard
    from ..models import environment

    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    from ..ops import get_op

    try:
        op_params = get_op(op).params
    except NumstdError:
        op_params = {}  # (validate raises the error with its fix)
    # (a selector that is also an op parameter, a variant's flag, stays a parameter too)
    selector_names = selector_params(op)
    selectors = {k: (params[k] if k in op_params else params.pop(k)) for k in list(params) if k in selector_names}
    spec, arrays, full = validate(op, list(inputs), dict(params))
    op = spec.name  # (the catalog's spelling: "Exp" is exp)
    selectors.update({k: full[k] for k in selectors if k in full})  # (validated: cast's to="MXFP4" is "mxfp4")
    selectors.update(_variant_selectors(spec, arrays, full))
    shape = tuple(output_shape(op, arrays, full))
    chunk_size = _chunk_size(chunk_size)
    _check_selectors(op, selectors)
    n_req = len(spec.inputs) - spec.optional_inputs
    in_fmts = [format_of(a).name for a in arrays[:n_req] if a is not None and a.dtype.kind in "fV"]

    # the output: anything goes; what is wrong with it is a failing verdict, never an exception
    act, act_fmt, act_problem = _as_output(actual)
    gathered = None
    if spec.index_of and act_problem is None:  # argmax/argmin: judge x at the indices (numstd.judge.indices)
        from .indices import gather

        gathered = gather(op, act, arrays[0], full, shape)
        act_fmt = in_fmts[0]  # (the values' format selects the standard; the index dtype is reported)
    if standard is not None:
        std = get_standard(standard)
        if std.op != op:
            raise ParameterError(f"standard {std.key} is for op {std.op!r}, not {op!r}; drop standard= or pick one for {op}")
        _check_inputs_match(std, in_fmts)
        _check_variant_covered(std, _variant_selectors(spec, arrays, full))
        if policy is not None and policy != std.policy:
            raise ParameterError(f"standard {std.key} has policy {std.policy!r}, not {policy!r}; drop one of "
                                 "standard= and policy=")
    else:
        acc = _accumulate(accumulate)
        std, covered = _choose(op, in_fmts, act_fmt if act_problem is None else None, acc, selectors, policy)
        if covered:  # no standard covers this output for these inputs: a failing dtype verdict
            listing = "; ".join(f"inputs {s.formats['inputs']} → {s.output.name} ({s.key})" for s in covered)
            what = act_problem or f"output format {act_fmt}"
            return _early_fail(std, op, shape, act_fmt, _recorded(spec, full, selectors),
                               f"{what}: no standard covers it for inputs {in_fmts}; covered: {listing}", "dtype")
    record = _recorded(spec, full, selectors)
    if gathered is not None:
        if gathered.problem is not None:
            return _early_fail(std, op, shape, gathered.dtype, record, gathered.problem, gathered.criterion)
        act = gathered.values
    if act_problem is not None or act.shape != shape:
        problem = act_problem or f"output shape {act.shape} is not the expected {shape}"
        return _early_fail(std, op, shape, act_fmt, record, problem, "dtype" if act_problem else "shape")

    judge = Judge(std.output, shape, std.criteria.signed_zero)
    fmts = {"output": std.output, "accumulate": std.accumulate, "input": std.inputs[0]}
    cache: dict = {}  # shared operands converted once for all chunks (contractions)

    # With the compiled judge (no GIL) the next chunk's reference is computed on a worker thread
    # while this one is judged — not for contractions, whose BLAS calls keep every core busy
    # already.  The model's terms go to whichever side balances the two threads (prefetch's
    # ``finish``, from measured CPU times: the worker for exp, beside the judge for softmax).  The
    # chunks' temporaries reuse their memory (native.pool).
    background = judge.native and spec.kind not in ("contraction", "attention")

    # (chunk-independent terms: cross_entropy's N is the whole batch's rows, not the chunk's)
    from ..reference.loss import BATCH_KEY

    ref_params = dict(full, **{BATCH_KEY: arrays[0].shape[0]}) if op == "cross_entropy" else full
    ref_params = dict(ref_params, **std.model.reference_params())  # (the operands' rounding it allows)

    # a probabilistic bound judged on more elements than its constants were calibrated on
    tail = tail_factor(std.criteria.tail_n, int(np.prod(shape, dtype=object)))

    def prepare(ch: Any) -> tuple:
        ref = validated_reference(spec.name, ch.inputs, chunk_params(ref_params, ch), resolution=std.output,
                                  row_offset=ch.row_offset, cache=cache, piece=ch.piece)
        return ch, ref, environment(ref, fmts)

    def pieces_of(prepared: tuple) -> tuple:  # the model's terms: on the worker, or beside the judge
        ch, ref, env = prepared
        out = act[ch.out_index]
        return chunk_pieces(std, env, ref, out, ch.out_index, ref_params, tail), hull_violations(std, ref, out)  # (the judge widens the output)

    chunk = min(chunk_size or default_chunk(spec.kind), max(1, int(np.prod(shape, dtype=object))))
    # 16-bit arithmetic can make a standard's bound reach the result's own magnitude (a sequential
    # bf16 sum of K ≥ 256 terms): count the elements where an output of zeros would pass
    zeros_pass = [0, 0] if std.policy == "arith16" else None
    # (at least the default chunk's worth: a chunk of a few outputs may still reduce many inputs, whose
    # references work in groups of about 2^16 elements: cross_entropy's rows of logits)
    with pool(max_bytes=8 * 8 * max(chunk, DEFAULT_CHUNK)):
        for pieces, hull in prefetch(plan(spec.kind, op, arrays, full, shape, chunk), prepare, background=background,
                                     finish=pieces_of):
            for piece in pieces:
                judge.add(**piece)
                if zeros_pass is not None:
                    _count_zeros_pass(zeros_pass, piece["ref"], piece["bound"])
            judge.add_hull(hull)
    res = judge.result()
    criteria = evaluate(std, res, act_fmt)
    if tail != 1.0:
        criteria = [dataclasses.replace(c, message=f"{c.message} (model term E_i × {tail:.4g} = ln N / ln tail_n for "
                                        f"N = {int(np.prod(shape, dtype=object)):,} output elements > tail_n = "
                                        f"{std.criteria.tail_n:,})") if c.name == "bound" else c for c in criteria]
    if zeros_pass is not None:
        criteria.append(_discriminating(*zeros_pass))
    if gathered is not None:  # the index's dtype, and the tie rule
        from .indices import index_dtype_criterion, ties_criterion

        criteria = [index_dtype_criterion(gathered.dtype, act_fmt) if c.name == "dtype" else c for c in criteria]
        criteria.append(ties_criterion(op, gathered, arrays[0], full))
        act_fmt = gathered.dtype
    passed = all(c.passed for c in criteria)
    return Verdict(
        passed=passed, standard_id=std.key, standard_sha256=std.sha256, op=op, shape=shape,
        formats=dict(std.formats, actual=act_fmt, policy=std.policy), params=record, criteria=tuple(criteria), ulp=res.ulp,
        normalized_max=res.normalized_max, worst=tuple(res.worst), n_elements=res.n_elements,
        n_nonfinite=res.n_nonfinite, message=_message(std, passed, criteria, res), numstd_version=__version__,
    )


#: chunk sizes above this are one chunk anyway (no output has 2^62 elements); keeps byte counts in range
_MAX_CHUNK = 1 << 62


def _recorded(spec: Any, full: dict, selectors: dict) -> dict:
    """The parameters a verdict records: the validated ones and the selectors, without the variant
    flags (``OpInfo.variant_params``) left at their defaults, so that a verdict of a standard published
    before the op had variants stays byte-identical (tests/test_golden.py)."""
    record = {k: v for k, v in full.items()
              if not (k in spec.variant_params and k in spec.params and v == spec.params[k] and k not in selectors)}
    record.update(selectors)
    return record


def _chunk_size(value: Any) -> int | None:
    """``chunk_size`` validated: None or an int ≥ 1 (clipped to :data:`_MAX_CHUNK`)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ParameterError(f"chunk_size must be a positive int (output elements per chunk) or None, got {value!r}; "
                             "e.g. chunk_size=1 << 16")
    return min(int(value), _MAX_CHUNK)


def _accumulate(value: Any) -> Any:
    """The declared accumulation format (a :class:`~numstd.formats.Format`), or a ParameterError naming it."""
    from ..core.formats import get_format

    if value is None:
        return None
    try:
        return get_format(value)
    except NumstdError as exc:
        raise ParameterError(f"accumulate={value!r} is not a floating-point format: {exc}") from None


def _variant_selectors(spec: Any, arrays: list, full: dict) -> dict:
    """The op's variant parameters that are set (True) and optional variant inputs that are given
    (``mask``: True), as selectors: only a standard that selects a variant judges it
    (:attr:`numstd.ops.entry.OpInfo.variant_params`), so a standard published before it keeps its
    meaning."""
    out = {}
    for name in spec.variant_params:
        if name in full:
            if full[name]:
                out[name] = True
        elif name in spec.inputs and arrays[spec.inputs.index(name)] is not None:
            out[name] = True
    return out


def _check_variant_covered(std: Any, variants: dict) -> None:
    """An explicit standard judges a variant (cumsum's reverse, exclusive, mask) only if it selects it."""
    missing = [k for k in variants if std.selector.get(k) is not True]
    if missing:
        raise ParameterError(
            f"standard {std.key} does not cover {std.op} with {', '.join(missing)} (it was calibrated for "
            f"{dict(std.selector) or 'the plain op'}); drop standard= to let numstd choose a standard for this variant")


def _check_selectors(op: str, selectors: dict) -> None:
    """Selector parameters have the type their standards declare (``allow_tf32`` is True or False, not 1)."""
    from ..catalog.registry import list_standards

    for s in list_standards(op):
        for k, want in s.selector.items():
            got = selectors.get(k)
            if got is not None and isinstance(want, bool) and not isinstance(got, (bool, np.bool_)):
                raise ParameterError(f"{op}: {k} must be True or False (it selects {s.key}), got {got!r}")


def _check_inputs_match(std: Any, in_fmts: list) -> None:
    """An explicit standard judges only inputs in its own formats (else a DtypeError with the fix)."""
    want = [f.name for f in std.inputs]
    if any(w != g for w, g in zip(want, in_fmts)):
        raise DtypeError(
            f"standard {std.key} is for inputs {want}, but the inputs are {in_fmts}: a standard's bounds hold only "
            f"for the input formats it was calibrated on. Pass the inputs the kernel received in {want}, or drop "
            "standard= to let numstd choose the standard for these inputs")


def _choose(op: str, in_fmts: list, act_fmt: str | None, acc: Any, selectors: dict,
            policy: str | None = None) -> tuple[Any, list]:
    """(standard, []) for a covered output; (a standard for the inputs, the covered ones) otherwise.

    An output format is wrong only when no standard covers it for these inputs: then every
    (inputs → output) combination that *is* covered is listed, and the verdict cites the inputs'
    default (or first) standard.  No standard for the inputs at all is a malformed call.
    """
    from ..core.formats import FORMATS
    from ..catalog.registry import find_standard, list_standards

    if act_fmt in FORMATS:
        try:
            return find_standard(op, inputs=in_fmts, output=act_fmt, accumulate=acc, policy=policy, **selectors), []
        except (StandardNotFound, AmbiguousStandard):
            pass
    covered = []
    for out in sorted({s.output.name for s in list_standards(op)}):
        try:
            covered.append(find_standard(op, inputs=in_fmts, output=out, accumulate=acc, policy=policy, **selectors))
        except (StandardNotFound, AmbiguousStandard):
            pass
    if not covered:  # the inputs (or accumulate, selectors) have no standard: raise its StandardNotFound
        find_standard(op, inputs=in_fmts, output=act_fmt if act_fmt in FORMATS else None, accumulate=acc, policy=policy,
                      **selectors)
        raise StandardNotFound(f"no standard for {op} with inputs {in_fmts}")  # pragma: no cover (raised above)
    default = [s for s in covered if s.default]
    return (default or covered)[0], covered


def _count_zeros_pass(acc: list, ref: np.ndarray, bound: Any) -> None:
    """Add to ``acc = [nonzero finite references, of them those where 0 is within the bound]``."""
    r = np.abs(np.asarray(ref, dtype=np.float64))
    live = np.isfinite(r) & (r > 0)
    acc[0] += int(np.count_nonzero(live))
    acc[1] += int(np.count_nonzero(live & (np.broadcast_to(bound, r.shape) >= r)))


def _discriminating(n: int, n_zero: int) -> CriterionResult:
    """The ``discriminating`` note of an arith16 verdict: not a pass criterion (it never fails), but
    where an all-zeros output would meet every element's bound the verdict says so."""
    frac = n_zero / n if n else 1.0
    if n and n_zero < n:
        msg = f"an output of zeros would exceed the bound on {n - n_zero:,} of {n:,} nonzero reference values"
    else:
        msg = ("not discriminating at this size: the bound reaches |r_i| on every nonzero reference value "
               "(16-bit arithmetic over this reduction length can lose the whole result, so an output of zeros "
               "would pass); shorten the reduction or declare fp32 accumulation")
    return CriterionResult("discriminating", True, frac, 1.0, msg)


def _as_output(actual: Any) -> tuple[np.ndarray | None, str | None, str | None]:
    """(array, format name or None, problem or None) for whatever the kernel returned."""
    from ..core.formats import format_of

    try:
        arr = to_numpy(actual, name="actual")
    except NumstdError as exc:
        return np.empty(0), None, f"the output is not a numeric array ({exc})"
    if arr.dtype.kind == "b" or arr.dtype.kind in "iu":
        return arr, str(arr.dtype), None
    try:
        return arr, format_of(arr).name, None
    except NumstdError as exc:
        return arr, str(arr.dtype), f"the output's dtype {arr.dtype} is not a floating-point format ({exc})"


def _early_fail(std: Any, op: str, shape: tuple, act_fmt: str | None, params: dict, problem: str,
                criterion: str = "shape") -> Verdict:
    crit = (CriterionResult(criterion, False, 1.0, 0.0, problem),)
    return Verdict(
        passed=False, standard_id=std.key, standard_sha256=std.sha256, op=op, shape=shape,
        formats=dict(std.formats, actual=act_fmt, policy=std.policy), params=params, criteria=crit, ulp=UlpDistribution(),
        normalized_max=float("inf"), worst=(), n_elements=0, n_nonfinite=0,
        message=f"FAIL against {std.citation}: {problem}. Nothing else was judged.", numstd_version=__version__,
    )


def _message(std: Any, passed: bool, criteria: list, res: Any) -> str:
    u = res.ulp
    head = f"{'PASS' if passed else 'FAIL'} against {std.citation} ({std.title}; policy {std.policy})."
    dist = (f" {res.n_elements:,} elements, {u.count:,} compared: max |ULP error| {u.max:.3g}, mean {u.mean:.3g}, "
            f"mean signed {u.mean_signed:+.3f}, 99.9% ≤ {u.quantiles.get(0.999, 0):.3g}; max |error|/bound "
            f"{res.normalized_max:.3g}.")
    failed = [c for c in criteria if not c.passed]
    if passed and any(c.name == "discriminating" and c.value >= 1.0 for c in criteria):
        head = head.replace("PASS against", "PASS (not discriminating at this size) against", 1)
    tail = " Failed: " + "; ".join(f"{c.name} — {c.message}" for c in failed) + "." if failed else ""
    if failed and res.worst:
        w = res.worst[0]
        tail += (f" Worst element {list(w.index)}: {w.actual!r} vs reference {w.reference!r} "
                 f"({w.ulp_error:+.3g} ulp, {w.normalized:.3g}× its bound {w.bound:.3g}).")
    return head + dist + tail


def assert_conforms(actual: Any, *, op: str, inputs: Sequence[Any], standard: Any = None, **params: Any) -> Verdict:
    """Like :func:`check`, but raise :class:`~numstd.errors.NonConformance` (an AssertionError) on failure.

    Returns the passing verdict.
    """
    v = check(actual, op=op, inputs=inputs, standard=standard, **params)
    if not v.passed:
        raise NonConformance(v.message, v)
    return v


# ``import numstd.check`` (the module path before the layers) binds the package attribute
# ``numstd.check`` to this module; making the module callable keeps ``numstd.check(...)`` the function.
from ..core._callable import make_callable  # noqa: E402

make_callable(__name__, check)
