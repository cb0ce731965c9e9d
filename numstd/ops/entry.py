"""One op's entry in the catalog (OpInfo-style): everything numstd needs to know about the op.

An entry says what the op is (name, inputs, parameters and their defaults, formula, output shape),
how numstd computes and judges it (where its float64 reference is, which magnitudes its error
models may use, how its suite draws inputs, where its
corpus variants are) and how each framework calls it (as data: a dotted function name and how the
op's parameters map onto the framework's).  The ideas come from PyTorch's OpInfo
(``torch/testing/_internal/opinfo/core.py``: one record per op that tests, references and sample
inputs read) and array-api-tests (spec-driven cases); the code is numstd's own.

Entries live in one module per op family (:mod:`numstd.ops.elementwise`, ``.contraction``, ...);
:mod:`numstd.ops.catalog` collects them.  Everything here is plain data and small functions of
numpy arrays: importing the catalog loads nothing heavier than numpy.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["OpInfo", "Call", "REQUIRED", "KINDS", "entry"]

#: what the error analysis of an op looks like (docs/methodology.md)
KINDS: tuple[str, ...] = (
    "contraction", "reduction", "scan", "softmax", "normalization", "elementwise", "attention",
    "loss", "exact", "module",
)


class _Required:
    """Sentinel default of a parameter that has to be given."""

    _instance: "_Required | None" = None

    def __new__(cls) -> "_Required":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class Call:
    """How a framework computes the op, as data.

    ``fn`` is a dotted name imported on first use (``"torch.nn.functional.softplus"``); it is called
    with the op's array inputs in order, then ``kwargs``: framework argument name -> numstd
    parameter name (``{"dim": "axis"}``) or, for a fixed value, ``("=", value)``.
    """

    fn: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def arguments(self, params: Mapping[str, Any]) -> dict:
        """The framework's keyword arguments for the op's (validated) ``params``."""
        out = {}
        for name, source in self.kwargs.items():
            out[name] = source[1] if isinstance(source, tuple) and source[:1] == ("=",) else params[source]
        return out


@dataclass(frozen=True)
class OpInfo:
    """One op of the catalog.

    Attributes
    ----------
    name : str
        The op name of ``check(op=...)`` and of standard files.
    kind : str
        One of :data:`KINDS`; it also says how ``check`` splits the output into chunks
        (:mod:`numstd.judge.chunks`: any axis for elementwise and exact ops, whole rows or whole
        contractions for the others).
    inputs : tuple of str
        Input names in call order, e.g. ``("x", "weight", "bias")``.
    optional_inputs : int
        How many trailing inputs may be omitted or ``None``.
    params : mapping of str to object
        Parameter names and their defaults (:data:`REQUIRED` where a value must be given).
    doc : str
        The op's formula and conventions (semantics of ``torch.nn.functional`` for the same name).
    shape : callable
        ``shape(info, arrays, params) -> output shape``; raises :class:`~numstd.core.errors.ShapeError`
        naming the input and the fix when the inputs do not fit together.
    reference : str
        ``"module:function"`` in :mod:`numstd.reference`: the float64 reference with its bound.
    corpus : str
        The module of :mod:`numstd.corpus` with the op's legitimate and buggy variants.
    terms : tuple of str
        Magnitudes of the reference's ``aux`` the op's error formulas may use (beside
        :data:`numstd.models.COMMON_TERMS`).
    integer_inputs : tuple of int
        Positions of inputs that are integer arrays (class indices); all others are floating point.
    param_checks : mapping of str to callable
        Validation of parameters the catalog's shared rules do not know: ``check(op, value) ->
        normalised value``, raising :class:`~numstd.core.errors.ParameterError` with the fix.
    check_params : callable, optional
        A rule between parameters (after ``param_checks``): ``check_params(op, full)`` raises
        :class:`~numstd.core.errors.ParameterError` when the values do not fit together
        (hardtanh's ``min_val <= max_val``, clamp's "min or max").
    positive : bool
        Suites draw ``|x|`` (domain ``x >= 0``: log, sqrt, rsqrt).
    calls : mapping of str to Call
        Framework name (``"torch"``, ``"jax"``, ``"numpy"``) -> how it computes the op, where that is
        mechanical; backends keep only the calls that are not.
    ref : callable, optional
        Elementwise ops: ``ref(x, params) -> (value, bound, cond)`` in float64 (``bound`` on
        ``|value - exact|``, ``cond = |x f'(x)|``); the family's reference module evaluates it.
    math : callable, optional
        Elementwise ops: the function in a working precision, ``math(x, w, params)`` with ``w`` a
        :class:`numstd.corpus._common.Work` (every operation rounded by ``w.q``): the corpus's
        legitimate "compute in the accumulation format, round once" variant and its relatives.
    variants : tuple
        Elementwise ops: op-specific corpus variants, each ``(name, family, legit, description,
        fn)`` with ``fn(x, w, params)`` a working-precision formula like ``math``; the corpus rounds
        the result to the output format.  Bugs are observable where they are 8 output ULPs from the
        reference somewhere (:mod:`numstd.corpus.elementwise`), or as many ULPs as an optional
        sixth field says (a bug whose small errors are of the size of a legitimate bound is named
        by the inputs where it is grossly wrong).
    constants : mapping of str to callable or None
        Elementwise ops: the scalars of the formula that a legitimate kernel holds in its compute
        format (torch converts ``negative_slope`` to the tensor's opmath type; ``x * (1/6)`` uses
        ``fl(1/6)``): name -> ``value(params)``, the exact float64 value, or ``None`` for the
        parameter of that name.  ``ref`` reads each constant from its ``params`` argument under
        that name (falling back to the exact value), so the reference can be evaluated with the
        constants rounded; standards whose criteria set ``rounded_constants`` allow the systematic
        error this causes (:func:`numstd.judge.criteria.constant_shifts`).
    spill : callable, optional
        Elementwise ops: ``spill(x, params) -> spillmag``, a bound on the magnitude of every
        intermediate that a legitimate evaluation of the formula forms (hardswish: ``x·(x + 3)``
        clamped, up to ``6|x|``).  The reference passes it as the aux term ``spillmag``; standards
        whose criteria set ``intermediate_overflow`` allow non-finite outputs where it reaches the
        accumulate format's overflow threshold (:func:`numstd.judge.criteria.spill_mask`).
    variant_params : tuple of str
        Parameters (bool, default False) and optional inputs that make a variant of the op
        (cumsum's ``reverse``, ``exclusive``, ``mask``): ``check`` passes each one that is set (an
        optional input: given) to the registry as a selector too, so only a standard whose
        ``selector`` names it judges that variant; standards published before the variant existed
        keep their meaning.
    stored : callable, optional
        stored16 ops: ``stored(values, aux, fmt) -> values'``, the float64 reference recomputed with the
        intermediates the framework's 16-bit kernel stores rounded to ``fmt`` (normalize: the norm,
        ``y·n/RN16(n)``).  A stored intermediate shared by many elements (one norm per row) shifts
        them all one way; standards whose criteria set ``stored_shift`` allow that systematic error
        in the bias test like a rounded constant's (:func:`numstd.judge.criteria.constant_shifts`).
    stored16_arith : callable, optional
        arith16 ops: as ``stored``, for standards with a 16-bit ``accumulate`` (policy arith16): the
        reference recomputed with the roundings XLA CPU's 16-bit kernel applies to the values a row
        shares (normalize: the stored sum, its square root, the clamp and the reciprocal), computed from
        the exact shared value; their ``stored_shift`` uses it instead of ``stored``.
    index_of : str
        Ops whose output is an index (argmax, argmin): the op whose value the index must point to
        (``"amax"``).  ``check`` judges ``x`` at the returned indices as that op's output, against the
        standard's ``output`` format (the input's), plus the tie rule (:mod:`numstd.judge.indices`).
    exact : bool
        The result is one of the inputs, whatever the order of the kernel's comparisons (amax, amin,
        argmax, argmin, max pooling): no rounding happens, so the op's bit-exact standards hold for
        every accumulation format and precision policy, and the registry matches them whatever
        ``accumulate`` a call declares (:func:`numstd.catalog.registry.find_standard`).
    """

    name: str
    kind: str
    inputs: tuple[str, ...]
    optional_inputs: int
    params: Mapping[str, object]
    doc: str
    shape: Callable[["OpInfo", list, Mapping[str, Any]], tuple[int, ...]]
    reference: str
    corpus: str
    terms: tuple[str, ...] = ()
    integer_inputs: tuple[int, ...] = ()
    param_checks: Mapping[str, Callable[[str, Any], Any]] = field(default_factory=dict)
    check_params: Callable[[str, dict], None] | None = None
    positive: bool = False
    calls: Mapping[str, Call] = field(default_factory=dict)
    ref: Callable[[np.ndarray, Mapping[str, Any]], tuple] | None = None
    math: Callable[..., np.ndarray] | None = None
    variants: tuple = ()
    constants: Mapping[str, Callable[[Mapping[str, Any]], float] | None] = field(default_factory=dict)
    spill: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray] | None = None
    variant_params: tuple[str, ...] = ()
    stored: Callable[[np.ndarray, Mapping[str, Any], Any], np.ndarray] | None = None
    stored16_arith: Callable[[np.ndarray, Mapping[str, Any], Any], np.ndarray] | None = None
    index_of: str = ""
    exact: bool = False

    @property
    def n_required(self) -> int:
        """Number of inputs that must be given."""
        return len(self.inputs) - self.optional_inputs

    def constant_values(self, params: Mapping[str, Any]) -> dict[str, float]:
        """The exact float64 value of each of :attr:`constants` for the op's (validated) ``params``."""
        return {name: float(params[name] if fn is None else fn(params)) for name, fn in self.constants.items()}


def entry(name: str, kind: str, inputs: Sequence[str], optional: int, params: Mapping[str, object], doc: str,
          **fields: Any) -> OpInfo:
    """An :class:`OpInfo` with read-only mappings (what the family modules call)."""
    for key in ("param_checks", "calls", "constants"):
        if key in fields:
            fields[key] = types.MappingProxyType(dict(fields[key]))
    return OpInfo(name, kind, tuple(inputs), optional, types.MappingProxyType(dict(params)), doc, **fields)
