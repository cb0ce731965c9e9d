"""Fixed-tolerance correctness rules of today's harnesses (the data is ``methods.toml``).

Each :class:`FixedTolerance` decides pass/fail for one output the way a grading harness does:

``allclose``
    element ``i`` is close when ``a_i == e_i`` (this covers the same infinity on both sides) or
    ``|a_i − e_i| ≤ atol + rtol·|e_i|`` with both finite; a NaN on either side is never close
    (``equal_nan=False``, as torch.testing.assert_close, ``np.allclose`` and ``torch.allclose``
    default to).  The output passes when every element is close.  This is the formula of
    ``np.isclose`` and of torch's ``_comparison.py`` (asymmetric in ``e``).
``rel_l2``
    ``‖a − e‖₂ / ‖e‖₂ < max_rel_l2`` (NKIBench), the norms taken in float64 over the elements
    where ``e`` is finite; any NaN, or a non-finite ``a_i`` not equal to ``e_i``, fails.  When
    ``‖e‖₂ = 0`` the output passes only if ``‖a − e‖₂ = 0``.

``e``, the *expected* tensor, is the float64 reference rounded (RNE) to the output format
(:func:`expected`), as a harness compares two tensors of the same dtype; a result with another
shape fails.  Tolerances are looked up by the output format, then ``default``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["FixedTolerance", "MethodResult", "load_methods", "expected", "METHODS_FILE"]

METHODS_FILE = Path(__file__).with_name("methods.toml")
_RULES = ("allclose", "rel_l2")


@dataclass(frozen=True)
class MethodResult:
    """Outcome of one fixed-tolerance rule on one output.

    Attributes
    ----------
    passed : bool
    metric : float
        ``allclose``: the largest ``|a − e| / (atol + rtol·|e|)`` over finite pairs (≤ 1 passes;
        ``inf`` for a NaN or mismatched special); ``rel_l2``: the relative L2 error.
    mismatched : int
        Elements that are not close (``allclose``), or non-finite mismatches (``rel_l2``).
    """

    passed: bool
    metric: float
    mismatched: int


@dataclass(frozen=True)
class FixedTolerance:
    """One harness's rule (an entry of ``methods.toml``).

    Attributes
    ----------
    name : str
        Short key (``"torch"``, ``"numpy"``, ...).
    label : str
        What tables print.
    rule : str
        ``"allclose"`` or ``"rel_l2"``.
    source : str
        Where the tolerances come from.
    tol : mapping
        format name (or ``"default"``) -> ``{"rtol": float, "atol": float}`` (``allclose``).
    max_rel_l2 : float
        Threshold of ``rel_l2``.
    """

    name: str
    label: str
    rule: str
    source: str
    tol: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    max_rel_l2: float = math.nan

    def tolerances(self, fmt: Any) -> tuple[float, float]:
        """``(rtol, atol)`` for output format ``fmt`` (a name or :class:`numstd.formats.Format`)."""
        name = getattr(fmt, "name", fmt)
        t = self.tol.get(str(name), self.tol.get("default"))
        if t is None:
            raise KeyError(f"method {self.name}: no tolerance for format {name!r} and no default")
        return float(t["rtol"]), float(t["atol"])

    def judge(self, actual: Any, expect: np.ndarray, fmt: Any) -> MethodResult:
        """Pass/fail of ``actual`` against ``expect`` (see the module docstring).

        Parameters
        ----------
        actual : array-like
            The kernel's output (any float dtype; compared as float64 values).
        expect : numpy.ndarray
            The expected tensor, already in the output format (:func:`expected`).
        fmt : format-like
            The output format (selects the tolerances).
        """
        a = np.asarray(actual)
        e = np.asarray(expect, dtype=np.float64)
        if a.shape != e.shape:
            return MethodResult(False, math.inf, int(e.size))
        a = a.astype(np.float64)
        if self.rule == "allclose":
            return _allclose(a, e, *self.tolerances(fmt))
        return _rel_l2(a, e, self.max_rel_l2)


def _allclose(a: np.ndarray, e: np.ndarray, rtol: float, atol: float) -> MethodResult:
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        allowed = atol + rtol * np.abs(e)
        diff = np.abs(a - e)
        finite = np.isfinite(a) & np.isfinite(e)
        close = (a == e) | (finite & (diff <= allowed))
        ratio = np.where(finite, diff / allowed, 0.0)
    bad = int((~close).sum())
    if (~finite & ~(a == e)).any():
        metric = math.inf
    else:
        metric = float(np.nan_to_num(ratio, nan=0.0, posinf=math.inf).max()) if ratio.size else 0.0
    return MethodResult(bad == 0, metric, bad)


def _rel_l2(a: np.ndarray, e: np.ndarray, limit: float) -> MethodResult:
    fin_e = np.isfinite(e)
    special_bad = int((np.isnan(a) | np.isnan(e) | (~np.isfinite(a) & (a != e)) | (~fin_e & (a != e))).sum())
    if special_bad:
        return MethodResult(False, math.inf, special_bad)
    with np.errstate(invalid="ignore", over="ignore"):
        d = (a - e)[fin_e]
    num = math.sqrt(math.fsum((d * d).tolist())) if d.size else 0.0
    den = math.sqrt(math.fsum((e[fin_e] ** 2).tolist())) if d.size else 0.0
    if den == 0.0:
        return MethodResult(num == 0.0, 0.0 if num == 0.0 else math.inf, 0)
    rel = num / den
    return MethodResult(rel < limit, rel, 0)


def expected(reference_values: np.ndarray, fmt: Any) -> np.ndarray:
    """The float64 reference rounded (RNE) to the output format ``fmt``, as float64 values."""
    from numstd.formats import get_format, round_to

    f = get_format(fmt)
    with np.errstate(invalid="ignore", over="ignore"):
        if f.name == "float64":
            return np.asarray(reference_values, dtype=np.float64)
        return np.asarray(round_to(np.asarray(reference_values, dtype=np.float64), f), dtype=np.float64)


def load_methods(path: str | Path | None = None) -> tuple[FixedTolerance, ...]:
    """The methods of ``methods.toml`` (or ``path``), in file order.

    Raises
    ------
    ValueError
        For an unknown rule, a missing field or an allclose method without tolerances.
    """
    p = Path(path) if path is not None else METHODS_FILE
    doc = tomllib.loads(p.read_text(encoding="utf-8"))
    out = []
    for i, m in enumerate(doc.get("method", [])):
        where = f"{p.name} method #{i + 1}"
        unknown = set(m) - {"name", "label", "rule", "source", "tol", "max_rel_l2"}
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}")
        for key in ("name", "label", "rule", "source"):
            if key not in m:
                raise ValueError(f"{where}: missing {key!r}")
        if m["rule"] not in _RULES:
            raise ValueError(f"{where}: rule {m['rule']!r} must be one of {_RULES}")
        if m["rule"] == "allclose" and not m.get("tol"):
            raise ValueError(f"{where}: an allclose rule needs [tol.<format>] tables")
        if m["rule"] == "rel_l2" and "max_rel_l2" not in m:
            raise ValueError(f"{where}: a rel_l2 rule needs max_rel_l2")
        out.append(FixedTolerance(m["name"], m["label"], m["rule"], m["source"],
                                  {k: dict(v) for k, v in m.get("tol", {}).items()},
                                  float(m.get("max_rel_l2", math.nan))))
    return tuple(out)
