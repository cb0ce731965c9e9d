"""Ops with several outputs: ``check`` of a tuple, each output judged by its own standard.

:data:`numstd.ops.reduction.MULTI_OUTPUT` names the ops and, per output, the op that judges it:
``max``/``min`` with an int ``axis`` return ``(values, indices)`` like ``torch.max(x, dim)``; the
values are judged as ``amax``/``amin`` (NS-AMAX-*/NS-AMIN-*: bit-exact), the indices as
``argmax``/``argmin`` (NS-ARGMAX-*/NS-ARGMIN-*: the value at the index exact, the tie rule), each by
the public :func:`numstd.judge.check.check` with the same inputs and parameters.  A third criterion,
``consistency``, requires each index to point to the returned value: ``x[..., i, ...] == value``
(NaN matching NaN; ``-0 == +0``, the sign of a zero value is not judged, as for amax), judged where
both outputs could be read.

The combined verdict passes when every output's verdict and ``consistency`` pass.  Its criteria are
the outputs' criteria prefixed by the output's name (``values.bound``, ``indices.ties``) then
``consistency``, so the first failing criterion names the failing output, and the message lists the
failing outputs; ``outputs`` holds each output's full verdict.  ``ulp``, ``n_elements`` and
``n_nonfinite`` are the values' (the first output's), ``normalized_max`` the largest of the outputs',
``worst`` the worst elements of the first failing output (else the values').  ``standard_id`` joins the outputs' standards with ``+``
(``NS-AMAX-BF16@1+NS-ARGMAX-BF16@1``), as does ``standard_sha256``.  A non-tuple output, or a tuple
of the wrong length, is a failing verdict whose one criterion, ``outputs``, says what was expected.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._version import __version__
from ..core.distribution import UlpDistribution
from ..core.errors import NumstdError, ParameterError
from .verdict import CriterionResult, Verdict

__all__ = ["check_multi"]


def check_multi(actual: Any, *, op: str, inputs: Sequence[Any], standard: Any = None, accumulate: Any = "float32",
                policy: str | None = None, chunk_size: int | None = None, **params: Any) -> Verdict:
    """Judge the tuple ``actual`` of op ``op`` (a key of MULTI_OUTPUT); see the module docstring.

    ``standard`` is None (each output's default standard) or one standard per output (None for the
    default).  ``axis`` (an int) is required; ``ties`` applies to the indices only.
    """
    from ..ops.reduction import MULTI_OUTPUT
    from .check import check

    outs = MULTI_OUTPUT[op]
    names = tuple(n for n, _ in outs)
    if params.get("axis") is None or isinstance(params.get("axis"), (tuple, list)):
        raise ParameterError(f"{op}: axis must be one int: {op} with an axis returns (values, indices) like "
                             f"torch.{op}(x, dim); for the {op}imum over all axes use op='a{op}' (one output)")
    if standard is None:
        stds: list = [None] * len(outs)
    elif isinstance(standard, (list, tuple)) and len(standard) == len(outs):
        stds = list(standard)
    else:
        raise ParameterError(f"{op}: standard= takes one standard per output {names} (e.g. "
                             f"('NS-AMAX-BF16@1', 'NS-ARGMAX-BF16@1')) or None, got {standard!r}")
    ties = params.pop("ties", "first")
    common = dict(accumulate=accumulate, policy=policy, chunk_size=chunk_size)
    per = {n: ({"ties": ties} if sub.startswith("arg") else {}) for n, sub in outs}
    if not isinstance(inputs, (list, tuple)) or isinstance(inputs, (str, bytes)):
        inputs = [inputs]

    got = _structure(actual, names, op)
    if got is not None:  # the whole tuple is wrong: each output's standard, one failing criterion
        subs = [(n, check(None, op=sub, inputs=inputs, standard=s, **common, **params, **per[n]))
                for (n, sub), s in zip(outs, stds)]
        crit = (CriterionResult("outputs", False, float(got[0]), float(len(outs)), got[1]),)
        return _combine(op, subs, crit, params, ties, judged=False)
    subs = [(n, check(a, op=sub, inputs=inputs, standard=s, **common, **params, **per[n]))
            for (n, sub), s, a in zip(outs, stds, actual)]
    crit = tuple(CriterionResult(f"{n}.{c.name}", c.passed, c.value, c.limit, c.message)
                 for n, v in subs for c in v.criteria)
    cons = _consistency(actual, inputs, params, subs)
    return _combine(op, subs, crit + ((cons,) if cons is not None else ()), params, ties, judged=True)


def _structure(actual: Any, names: tuple, op: str) -> tuple[int, str] | None:
    """None for a tuple of the right length, else (its length or 0, the problem)."""
    want = f"op {op!r} with an axis has {len(names)} outputs ({', '.join(names)}), as torch.{op}(x, dim) returns"
    if not isinstance(actual, (tuple, list)):
        shape = getattr(actual, "shape", None)
        what = f"one array of shape {tuple(shape)}" if shape is not None else f"a {type(actual).__name__}"
        return 0, f"{want}; got {what}, not a tuple (pass (values, indices), or use op='a{op}' for the values alone)"
    if len(actual) != len(names):
        return len(actual), f"{want}; got a tuple of {len(actual)}"
    return None


def _consistency(actual: Sequence[Any], inputs: Sequence[Any], params: dict, subs: list) -> CriterionResult | None:
    """Each index points to the returned value (module docstring); None where an output cannot be read."""
    from ..core.arrays import to_numpy
    from .indices import gather
    from ..ops.catalog import validate

    try:
        values = to_numpy(actual[0], name="values")
        idx = to_numpy(actual[1], name="indices")
        _, arrays, full = validate(subs[1][1].op, list(inputs), dict(params, ties="first"))
    except NumstdError:
        return None
    shape = tuple(subs[1][1].shape)
    g = gather(subs[1][1].op, idx, arrays[0], full, shape)
    if g.problem is not None or values.shape != shape or values.dtype.kind not in "fV":
        return None
    with np.errstate(invalid="ignore"):
        a = np.asarray(g.values, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        bad = ~((a == v) | (np.isnan(a) & np.isnan(v)))
    n = int(np.count_nonzero(bad))
    if n:
        where = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
        msg = (f"{n:,} of {bad.size:,} indices do not point to the returned value (first at {list(where)}: x at index "
               f"{int(g.indices[where])} is {float(a[where])!r}, the value returned is {float(v[where])!r})")
    else:
        msg = "every index points to the returned value"
    return CriterionResult("consistency", n == 0, float(n), 0.0, msg)


def _combine(op: str, subs: list, crit: tuple, params: dict, ties: str, judged: bool) -> Verdict:
    """The verdict of the tuple from the outputs' verdicts (module docstring)."""
    first = subs[0][1]
    passed = all(c.passed for c in crit)
    ids = "+".join(v.standard_id for _, v in subs)
    failed = [c for c in crit if not c.passed]
    names = [n for n, v in subs if not v.passed] + [c.name for c in failed if c.name == "consistency"]
    bad = next((v for _, v in subs if not v.passed), first)  # (its worst elements lead the snippet)
    head = f"{'PASS' if passed else 'FAIL'} against {ids}"
    if passed:
        msg = f"{head}: every output passes its standard and every index points to its value."
    elif not judged:
        msg = f"{head}: {failed[0].message}. Nothing else was judged."
    else:
        which = f" (failing output: {', '.join(names)})" if names else ""
        msg = f"{head}{which}: " + "; ".join(f"{c.name} — {c.message}" for c in failed) + "."
    return Verdict(
        passed=passed, standard_id=ids, standard_sha256="+".join(v.standard_sha256 for _, v in subs), op=op,
        shape=first.shape, formats=dict(first.formats, index=subs[1][1].formats.get("actual")),
        params=dict(first.params, ties=ties), criteria=crit, ulp=first.ulp if judged else UlpDistribution(),
        normalized_max=max(v.normalized_max for _, v in subs) if judged else float("inf"),
        worst=tuple(bad.worst) if judged else (), n_elements=first.n_elements if judged else 0,
        n_nonfinite=first.n_nonfinite if judged else 0, message=msg, numstd_version=__version__,
        outputs=tuple(subs) if judged else (),
    )
