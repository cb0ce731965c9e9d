"""Hypothesis strategies that draw inputs the way numstd's suites do.

Importing this module imports :mod:`hypothesis` (``import numstd`` does not).  Every example is
a seeded regeneration: Hypothesis draws a distribution name and a 32-bit seed, and the arrays
come from :func:`numstd.suites.make_case` / :func:`numstd.suites.draw` with
``np.random.default_rng`` — so Hypothesis shrinks toward seed 0 and the first distribution, a
failing example is reproducible from the printed ``(distribution, seed)`` alone, and the values
are the ones ``python -m numstd calibrate`` judged when it fitted the standard.

>>> from hypothesis import given
>>> from numstd.strategies import inputs_for
>>> @given(inputs_for("softmax", "bfloat16", shape=(4, 64)))        # doctest: +SKIP
... def test_my_softmax(inputs):
...     numstd.assert_conforms(my_softmax(*inputs), op="softmax", inputs=inputs, axis=-1)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st

from ..core.errors import NumstdError, ParameterError

__all__ = ["inputs_for", "arrays_in", "cases_for_op", "DEFAULT_DISTRIBUTIONS"]

#: used when no standard covers the op and format (every suite distribution except U[0, 1))
DEFAULT_DISTRIBUTIONS: tuple[str, ...] = ("normal", "uniform", "heavy", "offset", "large", "rowscale", "wide",
                                          "smallvar", "specials")
_SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def _names(distribution: Any) -> list[str]:
    from ..catalog.suites import DISTRIBUTIONS

    names = list(DISTRIBUTIONS) if distribution is None else (
        [distribution] if isinstance(distribution, str) else list(distribution))
    bad = [d for d in names if d not in DISTRIBUTIONS]
    if bad or not names:
        raise ParameterError(f"unknown distribution(s) {bad or names}; use names from {', '.join(DISTRIBUTIONS)}")
    return names


def arrays_in(fmt: Any, shape: Sequence[int], *, distribution: Any = "normal") -> st.SearchStrategy:
    """Arrays of ``shape`` in format ``fmt``, drawn from a suite distribution and rounded (RNE).

    Parameters
    ----------
    fmt : format-like
        ``"bfloat16"``, ``np.float32``, ``"fp8_e4m3"``, … (the array's dtype is the format's).
    shape : tuple of int
    distribution : str, sequence of str, or None
        One of :data:`numstd.suites.DISTRIBUTIONS`, several (Hypothesis picks), or None for all.
        Values beyond the format's range are clipped to ±max before rounding.

    Returns
    -------
    SearchStrategy of numpy.ndarray
    """
    from ..core.formats import get_format, round_to
    from ..catalog.suites import draw

    f = get_format(fmt)
    names = _names(distribution)
    shape = tuple(int(s) for s in shape)

    def build(choice: tuple[str, int]) -> np.ndarray:
        dist, seed = choice
        x = draw(np.random.default_rng(seed), shape, dist, f)
        return np.asarray(round_to(np.clip(x, -f.max_finite, f.max_finite), f))

    return st.tuples(st.sampled_from(names), _SEEDS).map(build)


def _standard_for(op: str, fmts: list, standard: Any) -> Any:
    from ..catalog.registry import find_standard, get_standard

    if standard is not None:
        return get_standard(standard)
    try:
        return find_standard(op, inputs=fmts, output=fmts[0])
    except NumstdError:
        return None


def cases_for_op(op: str, fmt: Any, shape: Sequence[int] | None = None, *, distribution: Any = None,
                 params: Any = None, standard: Any = None) -> st.SearchStrategy:
    """Like :func:`inputs_for` but yields whole :class:`numstd.suites.Case` objects (``case.id`` names it)."""
    from ..core.formats import get_format
    from ..ops.catalog import get_op
    from ..catalog.suites import make_case

    spec = get_op(op)
    fmts = [get_format(f).name for f in (fmt if isinstance(fmt, (list, tuple)) else [fmt])]
    std = _standard_for(spec.name, fmts, standard)
    if std is not None and std.op != spec.name:
        raise ParameterError(f"standard {std.key} is for op {std.op!r}, not {spec.name!r}")
    suite = dict(std.suite) if std is not None else {}
    if distribution is None:
        names = [d for d in suite.get("distributions", DEFAULT_DISTRIBUTIONS)]
    else:
        names = _names(distribution)
    if std is not None and len(fmts) == 1:
        fmts = [f.name for f in std.inputs]
    case_params = dict(suite.get("params", {}))
    case_params.update(params or {})
    if shape is None:
        shapes = [tuple(s) for s in suite.get("shapes", [])]
        if not shapes:
            raise ParameterError(f"{spec.name}: no standard suite gives shapes here; pass shape=, e.g. "
                                 "(rows, n) for row ops or (M, K, N) for matmul")
        shape_st = st.sampled_from(shapes)
    else:
        shape_st = st.just(tuple(int(s) for s in shape))

    def build(choice: tuple) -> Any:
        sh, dist, seed = choice
        return make_case(spec.name, sh, dist, seed, fmts, case_params)

    return st.tuples(shape_st, st.sampled_from(_names(names)), _SEEDS).map(build)


def inputs_for(op: str, fmt: Any, shape: Sequence[int] | None = None, *, distribution: Any = None,
               params: Any = None, standard: Any = None) -> st.SearchStrategy:
    """Input lists for ``op`` in format ``fmt``, from the distributions of the op's standard suite.

    Parameters
    ----------
    op : str
        Catalog op (``numstd.ops.OPS``).
    fmt : format-like or list of them
        Input format(s); one format applies to every float input.  With a standard, its input
        formats are used.
    shape : tuple of int, optional
        The case shape of :mod:`numstd.suites`: ``x``'s shape for row and elementwise ops,
        ``(M, K, N)`` for matmul, ``(rows, in, out)`` for linear, ``(B, L, S, E)`` for attention,
        ``(N, C)`` for cross_entropy.  Default: one of the standard suite's shapes.
    distribution : str, sequence of str, optional
        Default: the standard's suite distributions (or :data:`DEFAULT_DISTRIBUTIONS` when no
        standard covers ``op`` in ``fmt``).
    params : mapping, optional
        Op parameters recorded with the case (the suite's ``params`` otherwise).
    standard : str or Standard, optional
        Take the suite from this standard instead of the one :func:`numstd.find_standard` picks.

    Returns
    -------
    SearchStrategy of list
        The inputs in the op's order (numpy arrays in their formats; integer class targets for
        cross_entropy), exactly as :func:`numstd.suites.make_case` regenerates them.
    """
    return cases_for_op(op, fmt, shape, distribution=distribution, params=params, standard=standard).map(
        lambda case: list(case.inputs))
