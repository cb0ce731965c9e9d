"""The variant corpus: legitimate implementations of each op and realistic bugs, in numpy.

The corpus is the evidence numstd's standards rest on.  Calibration fits a standard's constants
on the **legitimate** variants of its op (other accumulation orders, hardware accumulation
models, other libraries' formulas) and refuses to publish unless every **bug** variant fails;
the discrimination benchmark scores numstd and fixed tolerances on the same variants.

A :class:`Variant` computes its op as a real kernel would: operands exactly as the kernel receives
them, products exact, every partial sum rounded to the accumulation format ``acc`` in the
variant's order (:mod:`numstd.emulate`), elementwise math in ``acc`` precision (numpy float32
functions for ``acc = float32``), and one final rounding to the output format ``out``
(:func:`numstd.formats.round_to`, round to nearest even unless the variant is about rounding).
Bugs are what real kernels get wrong (dropped tiles, wrong accumulation format, truncation, a
missing max-subtraction, a misplaced eps, ...), each described in one sentence.

Two predicates say where a variant is meaningful:

``applies(out, input_formats, params)``
    format-level applicability, e.g. TF32 input rounding only for float32 inputs, "accumulate in
    the output format" only when the output is narrower than the accumulator.
``observable(inputs, params, out)``
    for bugs whose effect depends on the data: True when the bug *can* change the result on these
    inputs by more than legitimate variation (a dropped K remainder needs ``K % 64 != 0``, a
    missing eps needs rows whose mean square is near eps, a missing max-subtraction needs logits
    large enough to overflow ``exp``).  A bug that cannot manifest on an input computes the right
    answer there and must not be counted as a miss.

Modules (one per op family): :mod:`.contraction` (matmul, linear), :mod:`.scaled` (scaled_matmul), :mod:`.conv` (conv), :mod:`.reductions` (sum,
mean, cumsum), :mod:`.extrema` (amax, amin, argmax, argmin), :mod:`.softmax` (softmax, log_softmax), :mod:`.losses` (cross_entropy),
:mod:`.normalization`
(layer_norm, rms_norm), :mod:`.elementwise`, :mod:`.attention`.  Nothing is built at
``import numstd.corpus``: the family modules load on the first access to :data:`VARIANTS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..ops import OPS

__all__ = ["Variant", "VARIANTS", "FAMILIES", "FAMILY_CAUSES", "MODULES", "variants_for", "input_formats", "with_causes"]

#: family modules of the corpus (each op's entry in :mod:`numstd.ops` names its module), loaded on
#: first use of :data:`VARIANTS`.
MODULES: tuple[str, ...] = tuple(dict.fromkeys(e.corpus for e in OPS.values() if e.corpus))

#: what a variant's ``family`` names (legitimate variation or kind of bug).
FAMILIES: Mapping[str, str] = {
    "accumulation-order": "another order of the same additions in the same format (legitimate)",
    "hardware": "a hardware accumulation model: tensor-core block FMA, Trainium PSUM (legitimate)",
    "library": "another library's implementation of the op (torch CPU; legitimate)",
    "formula": "an algebraically equivalent formula evaluated in the working precision (legitimate)",
    "rounding": "another placement or kind of rounding (double rounding, stochastic; legitimate)",
    "accumulation-precision": "accumulating in a narrower format than the standard declares (bug)",
    "dropped-tile": "a tile or tail of the reduction is skipped or added twice (bug)",
    "truncation": "round toward zero instead of to nearest (bug)",
    "corruption": "a wrong value in one output element (bug)",
    "scale": "a wrong scale factor (bug)",
    "input-rounding": "inputs rounded to a narrower format the standard does not allow (bug)",
    "max-subtraction": "a missing or wrong max-subtraction in exp-normalise (bug)",
    "variance": "a numerically unstable or wrong variance (bug)",
    "eps": "eps missing, misplaced or added where it does not belong (bug)",
    "approximation": "an approximation less accurate than the standard allows (bug)",
    "missing-branch": "a missing clamp or case split (bug)",
    "scan": "a wrong prefix-sum structure (bug)",
    "indexing": "wrong indices, axes, masks or transposes (bug)",
    "formula-error": "a wrong formula (bug)",
    "zeros": "returns zeros (bug)",
}

#: the diagnosis cause (:data:`numstd.judge.diagnosis.CAUSES`) a bug of each family has unless its module
#: labels it otherwise (:func:`with_causes`); families absent here (``corruption``, ``eps``,
#: ``formula-error``, ``indexing``, ``missing-branch``, ``scan``) name no single cause by themselves.
FAMILY_CAUSES: Mapping[str, str] = {
    "accumulation-precision": "low-precision-accumulation",
    "dropped-tile": "dropped-terms",
    "truncation": "truncation",
    "scale": "scale",
    "input-rounding": "precision-downgrade",
    "max-subtraction": "missing-max-subtraction",
    "variance": "one-pass-variance",
    "approximation": "approximation",
    "zeros": "constant-output",
}


@dataclass(frozen=True)
class Variant:
    """One implementation of an op: legitimate, or a realistic bug.

    Attributes
    ----------
    op : str
        Catalog op name (:data:`numstd.ops.OPS`).
    name : str
        Unique within the op, e.g. ``"sequential"``, ``"trainium-psum"``, ``"acc-bf16"``.
    family : str
        A key of :data:`FAMILIES`.
    legit : bool
        True for a legitimate implementation, False for a bug.
    description : str
        One sentence: what it does and why it is (il)legitimate.
    fn : callable
        ``fn(inputs, params, out, acc, seed) -> numpy.ndarray``: ``inputs`` in their formats,
        ``params`` with the op's defaults filled (:func:`numstd.ops.validate`), ``out`` and
        ``acc`` :class:`~numstd.formats.Format` objects; returns an array of ``out.dtype`` with
        the op's output shape.  Deterministic given ``seed``.
    applies : callable or None
        ``applies(out, input_formats, params) -> bool`` (``input_formats``: one Format per input,
        None for integer inputs); None means always.
    observable : callable or None
        ``observable(inputs, params, out) -> bool``: whether a bug can manifest on these inputs
        (see the module docstring); None means always.
    acc_formats : tuple of str or None
        The accumulation formats the variant models (hardware models and libraries accumulate in
        float32 only; their ``fn`` raises :class:`~numstd.errors.ParameterError` for another
        ``acc``); None means any.
    cause : str or None
        For a bug, the :data:`numstd.judge.diagnosis.CAUSES` class it belongs to (its family's
        :data:`FAMILY_CAUSES` entry unless its module labels it, :func:`with_causes`); None for
        legitimate variants and for bugs of no named class.  The diagnosis benchmark scores
        :func:`numstd.judge.diagnosis.diagnose` against it.
    """

    op: str
    name: str
    family: str
    legit: bool
    description: str
    fn: Callable[..., np.ndarray]
    applies: Callable[..., bool] | None = None
    observable: Callable[..., bool] | None = None
    acc_formats: tuple[str, ...] | None = None
    cause: str | None = None

    @property
    def key(self) -> str:
        """``"op/name"``, unique in the corpus."""
        return f"{self.op}/{self.name}"

    def applicable(self, inputs: Sequence[Any], params: Mapping[str, Any], out: Any,
                   acc: Any = "float32") -> bool:
        """Every predicate on concrete inputs: the variant models ``acc``, applies to the formats
        and (for bugs) can manifest on these inputs.

        ``inputs`` and ``params`` as :func:`numstd.ops.validate` returns them (numpy arrays,
        defaults filled), as :attr:`fn` receives them.
        """
        from ..core.formats import get_format

        out_fmt = get_format(out)
        if self.acc_formats is not None and get_format(acc).name not in self.acc_formats:
            return False
        if self.applies is not None and not self.applies(out_fmt, input_formats(inputs), params):
            return False
        return self.observable is None or bool(self.observable(inputs, params, out_fmt))

    def __call__(self, inputs: Sequence[Any], params: Mapping[str, Any] | None = None, *,
                 out: Any, acc: Any = "float32", seed: int = 0) -> np.ndarray:
        """Run the variant with the op's parameters validated and defaults filled.

        Parameters
        ----------
        inputs : sequence of arrays
            The op's inputs (numpy, ml_dtypes, torch or jax arrays).
        params : mapping, optional
            Op parameters; validated by :func:`numstd.ops.validate`.
        out, acc : format-like
            Output and accumulation formats.
        seed : int
            Seed of the variant's randomness (stochastic rounding, corrupted position).
        """
        from ..core.formats import get_format
        from ..ops.catalog import validate

        _, arrays, full = validate(self.op, list(inputs), dict(params or {}))
        return self.fn(arrays, full, get_format(out), get_format(acc), int(seed))


def with_causes(store: Sequence[Variant], labels: Mapping[str, str | None]) -> tuple[Variant, ...]:
    """The variants of ``store`` with their ``cause``: ``labels[name]`` where given (None: no named
    class), else the family's :data:`FAMILY_CAUSES` entry for bugs; legitimate variants get None."""
    from dataclasses import replace

    out = []
    for v in store:
        cause = None if v.legit else labels.get(v.name, FAMILY_CAUSES.get(v.family))
        out.append(replace(v, cause=cause))
    return tuple(out)


def input_formats(inputs: Sequence[Any]) -> list:
    """One :class:`~numstd.formats.Format` per input (None for integer inputs and None inputs)."""
    from ..core.formats import FORMATS

    fmts = []
    for x in inputs:
        name = getattr(getattr(x, "dtype", None), "name", None)
        fmts.append(FORMATS.get(name) if name is not None else None)
    return fmts


class _Corpus(Mapping):
    """Read-only mapping op -> tuple of variants, built from :data:`MODULES` on first access."""

    def __init__(self) -> None:
        self._table: dict[str, tuple[Variant, ...]] | None = None

    def _load(self) -> dict[str, tuple[Variant, ...]]:
        if self._table is None:
            table: dict[str, list[Variant]] = {}
            for mod in MODULES:
                for v in importlib.import_module(f"{__name__}.{mod}").VARIANTS:
                    table.setdefault(v.op, []).append(v)
            from .autocast import derive  # torch.autocast's lower-precision list: rounded inputs, 16-bit kernel

            for op, vs in derive(table).items():
                table[op].extend(vs)
            for op, vs in table.items():
                names = [v.name for v in vs]
                dup = {n for n in names if names.count(n) > 1}
                if dup:  # pragma: no cover - a programming error caught by the tests
                    raise RuntimeError(f"corpus: duplicate variant name(s) {sorted(dup)} for op {op}")
            self._table = {op: tuple(vs) for op, vs in table.items()}
        return self._table

    def __getitem__(self, op: str) -> tuple[Variant, ...]:
        table = self._load()
        if op not in table:
            from ..core.errors import UnknownOpError

            raise UnknownOpError(
                f"the corpus has no variants for op {op!r}; it covers: {', '.join(table)}")
        return table[op]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"<numstd corpus: {len(self)} ops>"


VARIANTS: Mapping[str, tuple[Variant, ...]] = _Corpus()
"""op -> tuple of :class:`Variant` (legitimate ones first within each family module)."""


def variants_for(op: str, *, legit: bool | None = None) -> list[Variant]:
    """The variants of ``op``: all, only legitimate (``legit=True``) or only bugs (``False``).

    Raises
    ------
    UnknownOpError
        When the corpus has no variants for ``op``.
    """
    return [v for v in VARIANTS[op] if legit is None or v.legit == legit]
