"""argmax/argmin (index outputs) and the tuple outputs of max/min with an axis.

Truth is independent of numstd: a pure-Python loop over each row's float values gives the first
index of the extremum (the first NaN when the row holds one; ``-0 == +0``), on every bfloat16 bit
pattern in pairs and triples with chosen partners (itself, its negation, zeros of both signs, NaN,
±inf, its neighbours); torch's, numpy's and jax's argmax are cross-checked against that loop and
judged by the published standards; hand-derived ties, NaN and signed-zero cases; planted bugs
written here (not the corpus's) fail.
"""

from __future__ import annotations

import functools
import json
import math

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core.errors import ParameterError
from numstd.reference.exact import first_index

OPS = ("argmax", "argmin")
_DT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def _truth(rows: np.ndarray, op: str) -> np.ndarray:
    """The first index of each row's maximum (argmin: minimum) by a Python loop; NaN is the extremum."""
    out = []
    with np.errstate(invalid="ignore"):
        values = np.asarray(rows, dtype=np.float64).tolist()
    for row in values:
        nan = [i for i, v in enumerate(row) if math.isnan(v)]
        if nan:
            out.append(nan[0])
            continue
        best = 0
        for i, v in enumerate(row):
            if (v > row[best]) if op == "argmax" else (v < row[best]):
                best = i
        out.append(best)
    return np.array(out, dtype=np.int64)


def _bf16_triples() -> np.ndarray:
    """Every bfloat16 pattern p in the rows (p, q, p), with q = p (a three-way tie), -p, +0, -0, NaN and
    the next pattern p + 1: p ties with itself at indices 0 and 2, and meets each partner."""
    p = np.arange(1 << 16, dtype=np.uint16)
    partners = [p, p ^ 0x8000, np.zeros_like(p), np.full_like(p, 0x8000), np.full_like(p, 0x7FC0), p + 1]
    return np.concatenate([np.stack([p, q, p], -1) for q in partners]).view(ml_dtypes.bfloat16)


_ROWS = _bf16_triples()


@functools.lru_cache(maxsize=None)
def _truth_rows(op: str) -> np.ndarray:
    return _truth(_ROWS, op)


def _daz(rows: np.ndarray) -> np.ndarray:
    """The rows as float64 with subnormals flushed to (signed) zero (XLA CPU's comparisons)."""
    with np.errstate(invalid="ignore"):
        x = np.asarray(rows, dtype=np.float64)
    tiny = float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_normal)
    return np.where(np.abs(x) < tiny, np.copysign(0.0, x), x)


# ------------------------------------------------------------------ the first-index reference
@pytest.mark.parametrize("op", OPS)
def test_first_index_is_the_python_loop_on_every_bfloat16_pattern(op):
    with np.errstate(invalid="ignore"):
        assert np.array_equal(first_index(op, _ROWS, 1, False), _truth_rows(op))


@pytest.mark.parametrize("op", OPS)
def test_libraries_return_the_first_index_and_pass(op):
    """torch CPU and numpy against the Python loop on every pattern (the evidence for ties='first' as
    the default), then judged by NS-ARG*-BF16@1; int64 and int32 indices are both accepted."""
    torch = pytest.importorskip("torch")
    want = _truth_rows(op)
    t = torch.from_numpy(_ROWS.astype(np.float32)).to(torch.bfloat16)
    got = {"numpy": getattr(np, op)(_ROWS, axis=1), "torch": getattr(torch, op)(t, dim=1).numpy()}
    got["int32"] = got["numpy"].astype(np.int32)
    for lib, g in got.items():
        assert np.array_equal(g, want), lib
        v = numstd.check(g, op=op, inputs=[_ROWS], axis=1)
        assert v.passed and v.standard_id == f"NS-{op.upper()}-BF16@1", (lib, v.message)
        assert v.formats["actual"] == str(g.dtype)


@pytest.mark.parametrize("op", OPS)
def test_jax_flushes_subnormals_in_argmax(op):
    """XLA CPU compares subnormals as zero (known_library_defects.toml, xla-cpu-argmax-subnormals-as-zero):
    jax's indices are the first index of the rows with subnormals flushed, which differs from the
    true first index exactly where flushing changes the answer; there the standard fails them."""
    jnp = pytest.importorskip("jax.numpy")
    got = np.asarray(getattr(jnp, op)(jnp.asarray(_ROWS), axis=1))
    assert got.dtype == np.int32
    flushed = _truth(_daz(_ROWS), op)
    assert np.array_equal(got, flushed)
    differ = flushed != _truth_rows(op)
    assert 0 < differ.sum() < 2000
    assert numstd.check(got[~differ], op=op, inputs=[_ROWS[~differ]], axis=1).passed
    assert not numstd.check(got[differ], op=op, inputs=[_ROWS[differ]], axis=1).passed


@pytest.mark.parametrize("op", OPS)
def test_another_tied_index_fails_ties_first_and_passes_ties_any(op):
    # rows (p, p, p) and (q, p, q) with q = p: the last index of a tie is index 2
    # rows (p, q, p) with q != p and p the extremum: the first index is 0, the last tied one 2
    with np.errstate(invalid="ignore"):
        x = np.asarray(_ROWS, dtype=np.float64)
    tie = _ROWS[(x[:, 1] != x[:, 0]) & ~np.isnan(x[:, 0]) & (_truth_rows(op) == 0)]
    assert len(tie) > 10000
    last = np.full(len(tie), 2, dtype=np.int64)
    v = numstd.check(last, op=op, inputs=[tie], axis=1)
    assert not v.passed and [c.name for c in v.failed_criteria] == ["ties"]
    assert v.criterion("ties").value == len(tie)
    v = numstd.check(last, op=op, inputs=[tie], axis=1, ties="any")
    assert v.passed and v.criterion("ties").value == len(tie)
    # an index that is not extremal fails under both rules (value at index 1 is not the extremum)
    mid = np.ones(len(tie), dtype=np.int64)
    for rule in ("first", "any"):
        v = numstd.check(mid, op=op, inputs=[tie], axis=1, ties=rule)
        assert not v.passed and not v.criterion("bound").passed


def test_hand_derived_ties_nan_and_signed_zeros():
    x = np.array([[1.0, 3.0, 3.0, 2.0],        # ties: first index 1
                  [1.0, np.nan, 5.0, np.nan],  # NaN counts as the maximum: the first NaN, 1
                  [-0.0, 0.0, -0.0, -1.0],      # -0 == +0: index 0
                  [-np.inf, -np.inf, -np.inf, -np.inf]], dtype=np.float32)
    first = np.array([1, 1, 0, 0])
    assert numstd.check(first, op="argmax", inputs=[x], axis=1).passed
    for row, other, rule_any in ((0, 2, True), (1, 3, True), (2, 1, True), (2, 2, True), (3, 3, True),
                                 (0, 3, False), (1, 2, False), (2, 3, False)):
        y = first.copy()
        y[row] = other
        v = numstd.check(y, op="argmax", inputs=[x], axis=1)
        assert not v.passed  # not the first index
        assert numstd.check(y, op="argmax", inputs=[x], axis=1, ties="any").passed == rule_any, (row, other)
    # NaN ignored (index of 5.0) fails the specials criterion
    v = numstd.check(np.array([1, 2, 0, 0]), op="argmax", inputs=[x], axis=1, ties="any")
    assert not v.criterion("specials").passed
    # argmin of [-0, +0, -0, -1] is 3; of [1, 3, 3, 2] is 0
    assert numstd.check(np.array([0, 1, 3, 0]), op="argmin", inputs=[x], axis=1).passed


def test_axis_none_keepdims_and_other_axes():
    g = np.random.default_rng(3)
    x = g.integers(-3, 4, (5, 6, 7)).astype(np.float16)  # many ties
    for axis in (None, 0, 1, 2, -1):
        for keep in (False, True):
            y = np.argmax(x, axis=axis, keepdims=keep)
            v = numstd.check(y, op="argmax", inputs=[x], axis=axis, keepdims=keep)
            assert v.passed, (axis, keep, v.message)
            if axis is not None:  # the last index on ties (a bug planted here) fails
                flip = x.shape[axis] - 1 - np.argmax(np.flip(x, axis), axis=axis, keepdims=keep)
                assert not numstd.check(flip, op="argmax", inputs=[x], axis=axis, keepdims=keep).passed
    assert np.argmax(x).ndim == 0 and numstd.check(np.argmax(x), op="argmax", inputs=[x]).passed


def test_argmax_of_inputs_rounded_to_bf16_fails_for_fp32():
    # fp32 values that are distinct but round to one bfloat16 value: the planted bug picks the first of them
    x = np.array([[1.0, 1.0 + 2.0 ** -12, 1.0 + 2.0 ** -11, 0.5]], dtype=np.float32)
    rounded = np.argmax(x.astype(ml_dtypes.bfloat16), axis=1)
    assert rounded[0] == 0
    v = numstd.check(rounded, op="argmax", inputs=[x], axis=1)
    assert not v.passed and not v.criterion("bound").passed
    assert numstd.check(np.array([2]), op="argmax", inputs=[x], axis=1).passed


@pytest.mark.parametrize("bad, criterion", [
    (np.array([1.0, 1.0], dtype=np.float32), "dtype"),   # float indices
    (np.array([True, False]), "dtype"),
    (np.array([1, 1], dtype=np.int16), "dtype"),
    (np.array([1, 1], dtype=np.uint64), "dtype"),
    (np.array([1, 1, 1]), "shape"),
    (np.array([[1, 1]]), "shape"),
    (np.array([-1, 1]), "range"),
    (np.array([1, 4]), "range"),
    ("indices", "dtype"),
    (None, "dtype"),
])
def test_bad_index_outputs_fail_naming_the_problem(bad, criterion):
    x = np.array([[0.0, 2.0, 1.0, 0.0], [0.0, 5.0, 1.0, 0.0]], dtype=np.float32)
    v = numstd.check(bad, op="argmax", inputs=[x], axis=1)
    assert not v.passed and [c.name for c in v.criteria] == [criterion]
    assert v.standard_id == "NS-ARGMAX-FP32@1"
    json.loads(v.to_json())


def test_bad_parameters_raise_parameter_error():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ParameterError, match="axis"):
        numstd.check(np.zeros(2, np.int64), op="argmax", inputs=[x], axis=(0, 1))
    with pytest.raises(ParameterError, match="ties"):
        numstd.check(np.zeros(2, np.int64), op="argmax", inputs=[x], axis=1, ties="last")
    with pytest.raises(ParameterError, match="axis"):
        numstd.check((x[:, 0], np.zeros(2, np.int64)), op="max", inputs=[x])


# ------------------------------------------------------------------ tuple outputs: max/min with an axis
@pytest.mark.parametrize("op", ("max", "min"))
def test_torch_max_pair_passes_and_each_broken_output_is_named(op):
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(5)
    x = g.integers(-4, 5, (32, 40)).astype(np.float32).astype(ml_dtypes.bfloat16)  # ties everywhere
    x[3, 7] = np.nan
    t = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    pair = getattr(torch, op)(t, dim=1)
    v = numstd.check(pair, op=op, inputs=[x], axis=1)
    a = "AMAX" if op == "max" else "AMIN"
    assert v.passed and v.standard_id == f"NS-{a}-BF16@1+NS-ARG{a[1:]}-BF16@1", v.message
    assert [n for n, _ in v.outputs] == ["values", "indices"] and v.criterion("consistency").passed
    values = pair.values.float().numpy().astype(ml_dtypes.bfloat16)
    idx = pair.indices.numpy()
    # wrong values (all zeros): the values output fails, indices pass, consistency fails
    v = numstd.check((np.zeros_like(values), idx), op=op, inputs=[x], axis=1)
    assert not v.passed and dict(v.outputs)["indices"].passed and not dict(v.outputs)["values"].passed
    assert v.failed_criteria[0].name.startswith("values.") and "failing output: values" in v.message
    # the last tied index: indices fail the tie rule only; with ties="any" the pair passes
    last = x.shape[1] - 1 - np.argmax(np.flip(x, 1), 1) if op == "max" else x.shape[1] - 1 - np.argmin(np.flip(x, 1), 1)
    v = numstd.check((values, last), op=op, inputs=[x], axis=1)
    assert [c.name for c in v.failed_criteria] == ["indices.ties"]
    assert numstd.check((values, last), op=op, inputs=[x], axis=1, ties="any").passed
    # consistent with each other but not what was asked is caught; inconsistent indices are named
    bad = idx.copy()
    bad[0] = (bad[0] + 1) % x.shape[1] if x[0, (bad[0] + 1) % x.shape[1]] != x[0, bad[0]] else (bad[0] + 2) % x.shape[1]
    v = numstd.check((values, bad), op=op, inputs=[x], axis=1)
    assert not v.criterion("consistency").passed and "consistency" in v.message


def test_tuple_structure_errors_fail_naming_the_problem():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for bad, what in ((np.max(x, 1), "not a tuple"), ((np.max(x, 1),), "tuple of 1"),
                      ((np.max(x, 1), np.argmax(x, 1), np.argmax(x, 1)), "tuple of 3"), (None, "not a tuple")):
        v = numstd.check(bad, op="max", inputs=[x], axis=1)
        assert not v.passed and [c.name for c in v.criteria] == ["outputs"] and what in v.message
    v = numstd.check((np.max(x, 1), np.argmax(x, 1).astype(np.float32)), op="max", inputs=[x], axis=1)
    assert [c.name for c in v.failed_criteria] == ["indices.dtype"]


def test_tuple_verdict_json_and_arrow_round_trip_single_output_unchanged():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1].copy()
    v = numstd.check((np.max(x, 1), np.argmax(x, 1)), op="max", inputs=[x], axis=1)
    d = json.loads(v.to_json())
    assert [o["name"] for o in d["outputs"]] == ["values", "indices"]
    assert d["outputs"][1]["verdict"]["standard_id"] == "NS-ARGMAX-FP32@1"
    assert numstd.Verdict.from_json(v.to_json()).to_json() == v.to_json()
    pytest.importorskip("pyarrow")
    assert numstd.Verdict.from_arrow(v.to_arrow()).to_json() == v.to_json()
    single = numstd.check(np.max(x, 1), op="amax", inputs=[x], axis=1)
    assert "outputs" not in json.loads(single.to_json()) and "outputs_json" not in single.to_arrow().column_names


def test_grade_judges_argmax_and_the_max_pair_by_their_standards():
    torch = pytest.importorskip("torch")

    class Pair(torch.nn.Module):
        def forward(self, x):
            return torch.max(x, dim=1)

    class OffByOne(torch.nn.Module):
        def forward(self, x):
            v, i = torch.max(x, dim=1)
            return v, torch.clamp(i + 1, max=x.shape[1] - 1)

    class Arg(torch.nn.Module):
        def forward(self, x):
            return torch.argmin(x, dim=0)

    def make_inputs():
        return [torch.randn(8, 64)]

    rep = numstd.grade(Pair, Pair, make_inputs, trials=1)
    assert rep.passed and rep.op[0] == "max" and "NS-AMAX-FP32@1+NS-ARGMAX-FP32@1" in rep.op_note
    rep = numstd.grade(Pair, OffByOne, make_inputs, trials=1)
    ops = [c.verdict for c in rep.cases if c.kind == "op"]
    assert ops and not any(v.passed for v in ops)
    rep = numstd.grade(Arg, Arg, make_inputs, trials=1)
    assert rep.passed and rep.op == ("argmin", {"axis": 0, "keepdims": False}) and "NS-ARGMIN-FP32@1" in rep.op_note
