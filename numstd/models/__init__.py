"""Error models: per-element absolute bounds ``B_i`` from an op's error analysis.

A standard's model has three parts (see ``docs/methodology.md`` for the derivations):

``error``
    a formula (:mod:`numstd.models.formula`) for ``E_i``, the bound on the error of the value
    *before* the final rounding to the output format: accumulation (``u_acc * sqrt(K) * absdot``,
    Higham & Mary 2019 probabilistic form, or ``K * u_acc * absdot``, Higham 2002 eq. 3.5 worst
    case), input rounding the standard allows (TF32: ``2 * u_in * absdot``), conditioning
    (softmax ``dev``, layer norm ``(absx + abs(mean)) / sigma``), and for elementwise functions the
    input-conditioning floor ``u_comp * cond`` with ``cond = |x f'(x)|``.
``rho``
    the final rounding, in ULPs of the output format at ``|r_i| + E_i``: 0.5 for round-to-nearest,
    1 for stochastic rounding or a double rounding, the library ULP budget for elementwise functions.
``ftz``
    whether subnormal outputs may be flushed: adds the smallest normal of the output format.

The bound is

.. math:: B_i = E_i + \\rho \\cdot \\mathrm{ulp}_{out}(|r_i| + E_i) + [\\mathrm{ftz}]\\, 2^{e_{min}} + R_i

where ``R_i`` is the reference's own error bound.  ``ulp`` is monotone in the magnitude, so
``rho * ulp(|r_i| + E_i)`` covers a rounding of any value within ``E_i`` of ``r_i``.
"""

from __future__ import annotations

import collections
import collections.abc
import types
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import numpy as np

from ..core.errors import SchemaError
from ..ops import OPS
from .formula import Formula

__all__ = ["ErrorModel", "INPUT_ROUNDING_KEY", "COMMON_TERMS", "OP_TERMS", "terms_for", "environment", "Environment", "Formula"]

#: terms every model may use: magnitudes of the reference and unit roundoffs of the formats.
COMMON_TERMS = ("absref", "ulp", "u_out", "u_acc", "u_in", "tiny_out", "min_normal_out")

#: private parameter under which a model's ``input_rounding`` reaches the op's reference
#: (:meth:`ErrorModel.reference_params`; read by numstd.reference.rounded_operands)
INPUT_ROUNDING_KEY = "_input_rounding"

#: op-specific terms, read from :attr:`numstd.reference.Reference.aux` under the same names (each
#: op's entry in :mod:`numstd.ops` lists them).
OP_TERMS: Mapping[str, tuple[str, ...]] = types.MappingProxyType({name: e.terms for name, e in OPS.items()})


def terms_for(op: str) -> frozenset:
    """Names a formula for ``op`` may use (constants come on top)."""
    return frozenset(COMMON_TERMS) | frozenset(OP_TERMS.get(op, ()))


@dataclass(frozen=True)
class ErrorModel:
    """A standard's error model (see the module docstring for the bound).

    Parameters
    ----------
    op : str
    error : Formula
        ``E_i``, the error before the final rounding.
    rho : float
        Final-rounding allowance in ULPs of the output format.
    ftz : bool
        Subnormal outputs may be flushed to zero.
    constants : mapping of str to float
        The constants the formula names.
    calibrated : str
        The constant ``python -m numstd calibrate`` fits ("" for analytic-only models).
    margin : float
        Fitted value = margin × the largest value the legitimate evidence needs.
    input_rounding : str
        The format to which a legitimate kernel may round its operands first (TF32 mode, autocast's
        bf16/fp16), "" for none. The reference then provides the terms ``indev``, ``insum`` and
        ``inrms`` of that rounding (:mod:`numstd.reference.rounded_operands`), which the formula
        must use; no other model may name them.
    """

    op: str
    error: Formula
    rho: float
    ftz: bool
    constants: Mapping[str, float] = field(default_factory=dict)
    calibrated: str = ""
    margin: float = 2.0
    input_rounding: str = ""

    @classmethod
    def from_table(cls, op: str, table: Mapping[str, Any], where: str) -> "ErrorModel":
        """Build from the ``[model]`` table of a standard file, validating every field."""
        known = {"error", "rho", "ftz", "constants", "calibrated", "margin", "input_rounding"}
        unknown = set(table) - known
        if unknown:
            raise SchemaError(f"{where}: unknown key(s) {sorted(unknown)} in [model]; allowed: {sorted(known)}")
        for key in ("error", "rho", "ftz"):
            if key not in table:
                raise SchemaError(f"{where}: [model] is missing {key!r}")
        constants = dict(table.get("constants", {}))
        for k, v in constants.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise SchemaError(f"{where}: [model.constants] {k} must be a finite number ≥ 0, got {v!r}")
        clash = set(constants) & terms_for(op)
        if clash:
            raise SchemaError(f"{where}: constant name(s) {sorted(clash)} shadow model terms; rename them")
        formula = Formula.parse(table["error"], terms_for(op) | set(constants), f"{where} [model] error")
        unused = set(constants) - formula.names
        if unused:
            raise SchemaError(f"{where}: constant(s) {sorted(unused)} are not used by the error formula")
        rho = table["rho"]
        if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not (0 <= rho < 1e6):
            raise SchemaError(f"{where}: [model] rho must be a number of ULPs ≥ 0, got {rho!r}")
        if not isinstance(table["ftz"], bool):
            raise SchemaError(f"{where}: [model] ftz must be true or false, got {table['ftz']!r}")
        calibrated = table.get("calibrated", "")
        if calibrated and calibrated not in constants:
            raise SchemaError(f"{where}: [model] calibrated = {calibrated!r} is not one of the constants")
        margin = table.get("margin", 2.0)
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 1:
            raise SchemaError(f"{where}: [model] margin must be a number ≥ 1, got {margin!r}")
        rounding = _input_rounding(table.get("input_rounding", ""), formula, where)
        return cls(op=op, error=formula, rho=float(rho), ftz=table["ftz"],
                   constants={k: float(v) for k, v in constants.items()},
                   calibrated=calibrated, margin=float(margin), input_rounding=rounding)

    def with_constants(self, **constants: float) -> "ErrorModel":
        """The same model with some constants replaced (used by calibration)."""
        merged = dict(self.constants)
        merged.update({k: float(v) for k, v in constants.items()})
        return ErrorModel(self.op, self.error, self.rho, self.ftz, merged, self.calibrated, self.margin,
                          self.input_rounding)

    def reference_params(self) -> dict:
        """Private parameters the op's reference needs to provide this model's terms (the operands'
        rounding, ``input_rounding``); merged into the op's parameters by ``check`` and calibration."""
        return {INPUT_ROUNDING_KEY: self.input_rounding} if self.input_rounding else {}

    def pre_rounding(self, env: Mapping[str, Any]) -> np.ndarray:
        """``E_i``: the formula evaluated on the terms in ``env`` and the constants."""
        scope = self._scope(env)
        missing = self.error.names - set(scope)
        if missing:
            raise SchemaError(f"model for {self.op}: terms {sorted(missing)} are not provided by the reference")
        return np.asarray(self.error.evaluate(scope), dtype=np.float64)

    def _scope(self, env: Mapping[str, Any]) -> Mapping[str, Any]:
        """The names a formula may read: the constants, then the terms (read only when used)."""
        return collections.ChainMap(self.constants, env)

    def evaluate(self, env: Mapping[str, Any], out_fmt: Any, ref_error: Any = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(E_i, B_i)``: :meth:`pre_rounding` and :meth:`bound` together.

        With the compiled loops and an :class:`Environment`, both come from one pass of
        ``numstd._native.model_eval`` over the formula compiled by
        :meth:`~numstd.models.formula.Formula.program` (the same operations in the same order: the
        same bits, ``tests/test_native.py``); otherwise from numpy, one pass per operation.
        """
        from ..core.native import compiled

        nat = compiled()
        if nat is not None and isinstance(env, Environment):
            values = env.values
            rf = np.asarray(ref_error, dtype=np.float64)
            if (values.size and values.dtype == np.float64 and values.flags.c_contiguous
                    and (rf.size == 1 or (rf.shape == values.shape and rf.flags.c_contiguous))):
                prog = self.error.program(self._scope(env), values.shape)
                if prog is not None:
                    from ..core.ulp import _spacing_params

                    e, b = np.empty(values.shape), np.empty(values.shape)
                    nat.model_eval(prog.code, prog.consts, prog.arrays, prog.rowlen, values, rf, e, b, self.rho,
                                   self.ftz, out_fmt.smallest_normal, *_spacing_params(out_fmt))
                    return e, b
        e = self.pre_rounding(env)
        return e, self.bound(env, out_fmt, ref_error, pre=e)

    def bound(self, env: Mapping[str, Any], out_fmt: Any, ref_error: Any = 0.0, pre: Any = None) -> np.ndarray:
        """Per-element bound ``B_i`` (module docstring) for the output format ``out_fmt``
        (``pre``: ``E_i`` when the caller has it already)."""
        from ..core.native import compiled
        from ..core.ulp import _spacing_params, ulp

        e = self.pre_rounding(env) if pre is None else pre
        absref = np.asarray(env["absref"])
        nat = compiled()
        if nat is not None and _one_pass(absref, e, ref_error):  # the same operations, in C
            out = np.empty(absref.shape)
            nat.model_bound(np.asarray(e, dtype=np.float64), absref, np.asarray(ref_error, dtype=np.float64), out,
                            self.rho, self.ftz, out_fmt.smallest_normal, *_spacing_params(out_fmt))
            return out
        b = e + self.rho * ulp(absref + e, out_fmt)
        if self.ftz:
            b = b + out_fmt.smallest_normal
        return b + ref_error


#: the terms only a model with ``input_rounding`` may name (numstd.reference.rounded_operands.TERMS)
_ROUNDING_TERMS = frozenset({"indev", "insum", "inrms"})


def _input_rounding(value: Any, formula: Formula, where: str) -> str:
    """``[model] input_rounding``: "" or a format name, consistent with the terms the formula uses."""
    from ..core.formats import get_format

    uses = formula.names & _ROUNDING_TERMS
    if not value:
        if uses:
            raise SchemaError(f"{where}: [model] error uses {sorted(uses)}, which exist only with "
                              f"[model] input_rounding = <format> (the rounding the kernel may apply to its operands)")
        return ""
    if not isinstance(value, str):
        raise SchemaError(f"{where}: [model] input_rounding must be a format name such as \"bfloat16\", got {value!r}")
    try:
        name = get_format(value).name
    except Exception as exc:  # the formats module's own error names the known formats
        raise SchemaError(f"{where}: [model] input_rounding: {exc}") from None
    if not uses:
        raise SchemaError(f"{where}: [model] input_rounding = {value!r} but the error formula uses none of "
                          f"{sorted(_ROUNDING_TERMS)}; name them or drop input_rounding")
    return name


def _one_pass(absref: np.ndarray, *terms: Any) -> bool:
    """Whether the compiled bound applies: float64 C-contiguous ``absref`` and terms of its shape
    or single values, float64 (the C loop reads them as they are)."""
    if absref.dtype != np.float64 or not absref.flags.c_contiguous or absref.ndim == 0:
        return False
    for t in terms:
        t = np.asarray(t)
        if t.dtype != np.float64 or not (t.size == 1 or (t.shape == absref.shape and t.flags.c_contiguous)):
            return False
    return True


class Environment(collections.abc.Mapping):
    """The terms of a model for one reference (a read-only mapping, see :func:`environment`).

    ``absref`` (``|r|``) and ``ulp`` (``ulp(r)`` in the output format) are computed on first
    access and kept: the compiled model and judge derive both from ``r`` inside their loops, so on
    that path the two arrays are never built (two passes over every chunk fewer).
    """

    __slots__ = ("_terms", "_values", "_out")

    def __init__(self, terms: dict, values: np.ndarray, out: Any) -> None:
        self._terms, self._values, self._out = terms, values, out

    def __getitem__(self, key: str) -> Any:
        v = self._terms.get(key, _LAZY)
        if v is _LAZY:
            if key == "absref":
                v = np.abs(self._values)
            elif key == "ulp":
                from ..core.ulp import ulp

                v = ulp(self._values, self._out)
            else:
                raise KeyError(key)
            self._terms[key] = v
        return v

    def __iter__(self) -> Iterator[str]:
        return iter(self._terms)

    def __len__(self) -> int:
        return len(self._terms)

    def computed(self, key: str) -> Any:
        """The term ``key`` if it is given or was computed already, else None (nothing is computed)."""
        v = self._terms.get(key)
        return None if v is _LAZY else v

    @property
    def values(self) -> np.ndarray:
        """The reference values ``r`` the terms describe."""
        return self._values


_LAZY = object()


def environment(reference: Any, formats: Mapping[str, Any]) -> Environment:
    """Terms for a model: the reference's aux arrays plus the common magnitudes and roundoffs.

    Parameters
    ----------
    reference : numstd.reference.Reference
    formats : mapping with keys ``output``, ``accumulate``, ``input`` (Format objects)

    Returns
    -------
    Environment
        A mapping from term names (:func:`terms_for`) to float64 arrays or numbers; ``absref`` and
        ``ulp`` are computed when first read.
    """
    out = formats["output"]
    terms = {k: np.asarray(v, dtype=np.float64) for k, v in reference.aux.items()}
    terms.update(absref=_LAZY, ulp=_LAZY, u_out=out.u, u_acc=formats["accumulate"].u, u_in=formats["input"].u,
                 tiny_out=out.smallest_subnormal, min_normal_out=out.smallest_normal)
    return Environment(terms, reference.values, out)
