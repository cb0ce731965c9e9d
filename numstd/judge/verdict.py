"""The Verdict: what ``check`` returns, with a versioned JSON/Arrow schema.

Schema ``numstd.verdict/1`` (a change of any field's meaning bumps it).  ``to_json`` /
``from_json`` and ``to_arrow`` / ``from_arrow`` round-trip exactly (floats as IEEE doubles; the
Arrow form is a one-row table whose nested columns are structs and lists).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..core.distribution import UlpDistribution

__all__ = ["Verdict", "CriterionResult", "Offender", "SCHEMA"]

SCHEMA = "numstd.verdict/1"


@dataclass(frozen=True)
class CriterionResult:
    """One pass criterion: its name, outcome, measured value, allowed limit and a sentence."""

    name: str
    passed: bool
    value: float
    limit: float
    message: str

    def to_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "value": _num(self.value),
                "limit": _num(self.limit), "message": self.message}

    @classmethod
    def from_dict(cls, d: Mapping) -> "CriterionResult":
        return cls(d["name"], bool(d["passed"]), _unnum(d["value"]), _unnum(d["limit"]), d["message"])


@dataclass(frozen=True)
class Offender:
    """One of the worst elements, ranked by normalized error ``|e_i| / B_i``."""

    index: tuple
    actual: float
    reference: float
    ulp_error: float
    normalized: float
    bound: float

    def to_dict(self) -> dict:
        return {"index": list(self.index), "actual": _num(self.actual), "reference": _num(self.reference),
                "ulp_error": _num(self.ulp_error), "normalized": _num(self.normalized), "bound": _num(self.bound)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Offender":
        return cls(tuple(int(i) for i in d["index"]), _unnum(d["actual"]), _unnum(d["reference"]),
                   _unnum(d["ulp_error"]), _unnum(d["normalized"]), _unnum(d["bound"]))


@dataclass(frozen=True)
class Verdict:
    """The result of judging one output against one standard.

    Attributes
    ----------
    passed : bool
    standard_id : str
        ``"NS-…@N"``, the citable standard.
    standard_sha256 : str
        The standard file's sha256 (verdicts cite ``ID@N (sha256:prefix)``).
    op : str
    shape : tuple
    formats : mapping
        ``inputs`` / ``accumulate`` / ``output`` format names of the standard, and ``actual`` (the
        format the output came in).
    params : mapping
        The op parameters (defaults filled) and any seed used.
    criteria : sequence of CriterionResult
    ulp : UlpDistribution
    normalized_max : float
        ``max_i |actual_i − r_i| / B_i`` over the finite elements (≤ 1 passes the bound).
    worst : sequence of Offender
    n_elements, n_nonfinite : int
        Elements judged, and those excluded from the distribution because actual or reference is
        not finite (matching specials are fine; mismatches fail the specials criterion).
    message : str
        One paragraph for humans.
    diagnosis : tuple of numstd.judge.diagnosis.Diagnosis
        For a failing verdict, the likely causes (``cause``, ``confidence``, ``evidence``), most
        likely first (:func:`numstd.judge.diagnosis.diagnose`); empty for passing verdicts and where no
        diagnosis was made.  Written to JSON only when non-empty (an additive field of
        ``numstd.verdict/1``: passing verdicts' JSON is unchanged).
    outputs : tuple of (str, Verdict)
        Ops with several outputs (``max``/``min`` with an ``axis``: values and indices,
        :mod:`numstd.judge.multi`): each output's name and its own verdict, in output order.  Empty
        for single-output ops, and then not written to JSON (an additive field of
        ``numstd.verdict/1``: single-output verdicts' JSON is unchanged; docs/verdict-schema.md).
    """

    passed: bool
    standard_id: str
    standard_sha256: str
    op: str
    shape: tuple
    formats: Mapping[str, Any]
    params: Mapping[str, Any]
    criteria: Sequence[CriterionResult]
    ulp: UlpDistribution
    normalized_max: float
    worst: Sequence[Offender]
    n_elements: int
    n_nonfinite: int
    message: str
    schema: str = SCHEMA
    numstd_version: str = field(default="")
    diagnosis: tuple = ()
    outputs: tuple = ()

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failed_criteria(self) -> list[CriterionResult]:
        return [c for c in self.criteria if not c.passed]

    def criterion(self, name: str) -> CriterionResult:
        for c in self.criteria:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def citation(self) -> str:
        return f"{self.standard_id} (sha256:{self.standard_sha256[:12]})"

    def snippet(self) -> str:
        """One line a reviewer pastes into feedback: standard, outcome, first failing criterion."""
        if self.passed:
            return (f"{self.standard_id}: PASS — max {self.ulp.max:.3g} ulp, mean signed "
                    f"{self.ulp.mean_signed:+.3f} ulp over {self.ulp.count:,} elements; "
                    f"max normalized error {self.normalized_max:.3g} (≤ 1 allowed)")
        first = self.failed_criteria[0] if self.failed_criteria else CriterionResult("?", False, 0.0, 0.0, "")
        lead = ""
        if self.diagnosis:
            d = self.diagnosis[0]
            lead = f"likely {d.cause} ({d.confidence:.0%}: {d.evidence}); "
        tail = ""
        if self.worst:
            w = self.worst[0]
            tail = (f"; worst element {list(w.index)}: {w.actual!r} vs reference {w.reference!r} "
                    f"({w.ulp_error:+.3g} ulp, {w.normalized:.3g}× the bound)")
        return f"{self.standard_id}: FAIL — {lead}{first.name} criterion: {first.message}{tail}"

    def to_dict(self) -> dict:
        return {
            "schema": self.schema, "numstd_version": self.numstd_version, "passed": self.passed,
            "standard_id": self.standard_id, "standard_sha256": self.standard_sha256, "op": self.op,
            "shape": list(self.shape), "formats": _jsonable(self.formats), "params": _jsonable(self.params),
            "criteria": [c.to_dict() for c in self.criteria], "ulp": self.ulp.to_dict(),
            "normalized_max": _num(self.normalized_max), "worst": [w.to_dict() for w in self.worst],
            "n_elements": self.n_elements, "n_nonfinite": self.n_nonfinite, "message": self.message,
            **({"diagnosis": [d.to_dict() for d in self.diagnosis]} if self.diagnosis and not self.passed else {}),
            **({"outputs": [{"name": n, "verdict": v.to_dict()} for n, v in self.outputs]} if self.outputs else {}),
        }

    def to_json(self, **kwargs: Any) -> str:
        """JSON text (non-finite floats are written as the strings "nan", "inf", "-inf")."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping) -> "Verdict":
        if d.get("schema") != SCHEMA:
            from ..core.errors import SchemaError

            raise SchemaError(f"verdict schema {d.get('schema')!r} is not {SCHEMA!r}; upgrade numstd to read it")
        return cls(
            passed=bool(d["passed"]), standard_id=d["standard_id"], standard_sha256=d["standard_sha256"],
            op=d["op"], shape=tuple(d["shape"]), formats=dict(d["formats"]), params=dict(d["params"]),
            criteria=tuple(CriterionResult.from_dict(c) for c in d["criteria"]),
            ulp=UlpDistribution.from_dict(d["ulp"]), normalized_max=_unnum(d["normalized_max"]),
            worst=tuple(Offender.from_dict(w) for w in d["worst"]), n_elements=int(d["n_elements"]),
            n_nonfinite=int(d["n_nonfinite"]), message=d["message"], schema=d["schema"],
            numstd_version=d.get("numstd_version", ""), diagnosis=_diagnosis(d.get("diagnosis", ())),
            outputs=tuple((o["name"], cls.from_dict(o["verdict"])) for o in d.get("outputs", ())),
        )

    @classmethod
    def from_json(cls, text: str) -> "Verdict":
        return cls.from_dict(json.loads(text))

    def to_arrow(self) -> Any:
        """A one-row ``pyarrow.Table``; nested fields are JSON-compatible structs/lists."""
        import pyarrow as pa

        d = self.to_dict()
        flat = {k: d[k] for k in ("schema", "numstd_version", "passed", "standard_id", "standard_sha256",
                                  "op", "n_elements", "n_nonfinite", "message")}
        flat["normalized_max"] = _unnum(d["normalized_max"])
        flat["shape"] = d["shape"]
        for k in ("count", "max", "mean", "mean_signed", "std_signed", "signed_count"):
            flat[f"ulp_{k}"] = d["ulp"][k]
        flat["ulp_quantiles"] = [[float(q), v] for q, v in d["ulp"]["quantiles"].items()]
        flat["ulp_hist_edges"] = d["ulp"]["histogram"]["edges"]
        flat["ulp_hist_counts"] = d["ulp"]["histogram"]["counts"]
        flat["criteria"] = [dict(c, value=_unnum(c["value"]), limit=_unnum(c["limit"])) for c in d["criteria"]]
        flat["worst"] = [{k: (_unnum(v) if k != "index" else v) for k, v in w.items()} for w in d["worst"]]
        flat["formats_json"] = json.dumps(d["formats"])
        flat["params_json"] = json.dumps(d["params"])
        if "outputs" in d:  # (several outputs: their verdicts as JSON, a column only such verdicts have)
            flat["outputs_json"] = json.dumps(d["outputs"])
        schema = pa.schema([
            ("schema", pa.string()), ("numstd_version", pa.string()), ("passed", pa.bool_()),
            ("standard_id", pa.string()), ("standard_sha256", pa.string()), ("op", pa.string()),
            ("n_elements", pa.int64()), ("n_nonfinite", pa.int64()), ("message", pa.string()),
            ("normalized_max", pa.float64()), ("shape", pa.list_(pa.int64())),
            ("ulp_count", pa.int64()), ("ulp_max", pa.float64()), ("ulp_mean", pa.float64()),
            ("ulp_mean_signed", pa.float64()), ("ulp_std_signed", pa.float64()), ("ulp_signed_count", pa.int64()),
            ("ulp_quantiles", pa.list_(pa.list_(pa.float64()))), ("ulp_hist_edges", pa.list_(pa.float64())),
            ("ulp_hist_counts", pa.list_(pa.int64())),
            ("criteria", pa.list_(pa.struct([("name", pa.string()), ("passed", pa.bool_()),
                                             ("value", pa.float64()), ("limit", pa.float64()),
                                             ("message", pa.string())]))),
            ("worst", pa.list_(pa.struct([("index", pa.list_(pa.int64())), ("actual", pa.float64()),
                                          ("reference", pa.float64()), ("ulp_error", pa.float64()),
                                          ("normalized", pa.float64()), ("bound", pa.float64())]))),
            ("formats_json", pa.string()), ("params_json", pa.string()),
        ] + ([("outputs_json", pa.string())] if "outputs" in d else []))
        return pa.Table.from_pylist([flat], schema=schema)

    @classmethod
    def from_arrow(cls, table: Any, row: int = 0) -> "Verdict":
        r = table.slice(row, 1).to_pylist()[0]
        d = {k: r[k] for k in ("schema", "numstd_version", "passed", "standard_id", "standard_sha256",
                               "op", "n_elements", "n_nonfinite", "message", "normalized_max", "shape")}
        d["ulp"] = {k: r[f"ulp_{k}"] for k in ("count", "max", "mean", "mean_signed", "std_signed", "signed_count")}
        d["ulp"]["quantiles"] = {str(q): v for q, v in r["ulp_quantiles"]}
        d["ulp"]["histogram"] = {"edges": r["ulp_hist_edges"], "counts": r["ulp_hist_counts"]}
        d["criteria"] = r["criteria"]
        d["worst"] = r["worst"]
        d["formats"] = json.loads(r["formats_json"])
        d["params"] = json.loads(r["params_json"])
        if r.get("outputs_json"):
            d["outputs"] = json.loads(r["outputs_json"])
        return cls.from_dict(d)


def _diagnosis(entries: Sequence[Mapping]) -> tuple:
    if not entries:
        return ()
    from .diagnosis import Diagnosis

    return tuple(Diagnosis.from_dict(e) for e in entries)


def _num(x: float) -> Any:
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _unnum(x: Any) -> float:
    return float(x)


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        return _num(x)
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            return _jsonable(x.item())
        except Exception:
            return str(x)
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return str(x)
