"""The numstd error hierarchy.

Every error numstd raises derives from :class:`NumstdError` and also from the matching built-in
exception, so ``except ValueError`` keeps working for callers that do not know numstd.  Each
message says what was expected and how to fix the call (the Hypothesis style: an error proposes
its fix).  Numerical *non-conformance* of a kernel is not an error of the call: ``check`` returns
a failing :class:`~numstd.verdict.Verdict`; only ``assert_conforms`` raises
:class:`NonConformance`.
"""

from __future__ import annotations

__all__ = [
    "NumstdError",
    "UnknownOpError",
    "ParameterError",
    "ShapeError",
    "DtypeError",
    "FormatError",
    "StandardNotFound",
    "AmbiguousStandard",
    "SchemaError",
    "DataIntegrityError",
    "BackendUnavailable",
    "NonConformance",
]


class NumstdError(Exception):
    """Base class of every error raised by numstd."""


class UnknownOpError(NumstdError, KeyError):
    """An op name that is not in the catalog."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ParameterError(NumstdError, TypeError):
    """A missing, unknown or invalid op parameter."""


class ShapeError(NumstdError, ValueError):
    """Arrays whose shapes do not fit the op (or the expected output)."""


class DtypeError(NumstdError, TypeError):
    """An array dtype numstd cannot use where it was given (e.g. integers where floats are needed)."""


class FormatError(NumstdError, ValueError):
    """An unknown floating-point format name or an invalid rounding request."""


class StandardNotFound(NumstdError, LookupError):
    """No standard matches the request."""


class AmbiguousStandard(NumstdError, LookupError):
    """Several standards match a request that has no single default."""


class SchemaError(NumstdError, ValueError):
    """A standard (or data) file that does not follow its schema; the message names file and field."""


class DataIntegrityError(NumstdError, RuntimeError):
    """Shipped data whose sha256 does not match its manifest or LOCK entry."""


class BackendUnavailable(NumstdError, RuntimeError):
    """A backend that cannot run here (its package or device is missing); the message says why."""


class NonConformance(NumstdError, AssertionError):
    """Raised by :func:`numstd.assert_conforms` when a verdict fails; carries the verdict."""

    def __init__(self, message: str, verdict: object = None) -> None:
        super().__init__(message)
        self.verdict = verdict
