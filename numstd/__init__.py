"""numstd — cross-platform numerical-correctness standards for ML kernels.

``import numstd`` loads numpy, ml_dtypes and the standard library only; references, standards,
backends (torch, jax, NKI) and plotting load when first used.

>>> import numstd
>>> v = numstd.check(out, op="softmax", inputs=[x], axis=-1)      # doctest: +SKIP
>>> v.passed, v.standard_id, v.ulp.max                            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from . import _aliases
from ._version import __version__

_aliases.install()  # the module paths before the layer packages (numstd.formats, numstd.registry, ...)

from .judge.check import assert_conforms, check
from .core.errors import (
    AmbiguousStandard,
    BackendUnavailable,
    DataIntegrityError,
    DtypeError,
    FormatError,
    NonConformance,
    NumstdError,
    ParameterError,
    SchemaError,
    ShapeError,
    StandardNotFound,
    UnknownOpError,
)
from .core.formats import FORMATS, Format, get_format, round_to
from .core.ulp import ulp_distance, ulp_error
from .judge.verdict import Verdict

__all__ = [
    "__version__",
    "check",
    "assert_conforms",
    "Verdict",
    "reference",
    "get_standard",
    "find_standard",
    "list_standards",
    "survey",
    "grade",
    "ulp_error",
    "ulp_distance",
    "round_to",
    "get_format",
    "Format",
    "FORMATS",
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

# name -> (module, attribute), imported on first access (PEP 562)
_LAZY = {
    "reference": ("numstd.reference", "reference"),
    "get_standard": ("numstd.catalog.registry", "get_standard"),
    "find_standard": ("numstd.catalog.registry", "find_standard"),
    "list_standards": ("numstd.catalog.registry", "list_standards"),
    "survey": ("numstd.survey", None),  # the package is also the function (numstd.core._callable)
    "grade": ("numstd.grade", None),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        module = importlib.import_module(mod)
        value = module if attr is None else getattr(module, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'numstd' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
