"""Regression tests of issue 20: every bad output a failing verdict, every bad call a numstd error.

Each test is named after what it guarantees; the cases are the fuzz campaign's reproducers.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.errors import DtypeError, NumstdError, ParameterError

X = np.linspace(-1, 1, 16, dtype=np.float32)
EXP = np.exp(X.astype(np.float64)).astype(np.float32)


def _dtype_fail(v: numstd.Verdict) -> str:
    assert not v.passed
    crit = v.criterion("dtype")
    assert crit is not None and not crit.passed, v.message
    return crit.message


@pytest.mark.parametrize("actual", [
    EXP.astype(np.float64), EXP.astype(np.float16), EXP.astype(ml_dtypes.bfloat16), 1.0,
    np.zeros(16, np.int32), np.zeros(16, bool), "garbage", None, object(),
], ids=["float64", "float16", "bfloat16", "python-float", "int32", "bool", "str", "None", "object"])
def test_uncovered_output_format_is_a_failing_dtype_verdict_listing_the_covered_combinations(actual):
    v = numstd.check(actual, op="exp", inputs=[X])
    msg = _dtype_fail(v)
    assert v.standard_id == "NS-EXP-FP32@1"  # the inputs' standard
    assert "inputs ['float32'] → float32 (NS-EXP-FP32@1)" in msg


def test_a_covered_output_format_is_judged_normally():
    v = numstd.check(EXP, op="exp", inputs=[X])
    assert v.passed, v.message


@pytest.mark.parametrize("actual", [[[1.0]], "x", np.zeros((4, 4), np.float64)])
def test_non_array_output_of_an_fp8_matmul_is_a_failing_verdict_not_ambiguous(actual):
    a = np.ones((4, 4), ml_dtypes.float8_e4m3fn)
    msg = _dtype_fail(numstd.check(actual, op="matmul", inputs=[a, a]))
    assert "NS-MATMUL-FP8E4M3@2" in msg and "NS-MATMUL-FP8E4M3-FP32OUT@2" in msg


def test_inputs_without_any_standard_still_raise_standard_not_found():
    x = X.astype(np.float64)  # no exp standard takes float64 inputs: the call is malformed
    with pytest.raises(numstd.errors.StandardNotFound):
        numstd.check(np.exp(x), op="exp", inputs=[x])


@pytest.mark.torch
def test_meta_and_negative_bit_torch_outputs_give_verdicts():
    torch = pytest.importorskip("torch")
    _dtype_fail(numstd.check(torch.empty(16, device="meta"), op="exp", inputs=[X]))
    zeros = torch.tensor(EXP).to(torch.complex64).conj().imag  # -0.0 with the negative bit set
    assert zeros.is_neg()
    v = numstd.check(zeros, op="exp", inputs=[X])
    assert not v.passed and not v.criterion("bound").passed
    right = (torch.tensor(EXP) * 1j).conj().imag.neg()  # the right values behind two lazy negations
    assert numstd.check(right, op="exp", inputs=[X]).passed


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["sparse", "quantized", "nested", "meta"])
def test_foreign_torch_tensor_kinds_as_inputs_raise_a_dtype_error_with_the_fix(kind):
    torch = pytest.importorskip("torch")
    t = torch.tensor(X)
    x = {"sparse": lambda: t.to_sparse(),
         "quantized": lambda: torch.quantize_per_tensor(t, 0.1, 0, torch.qint8),
         "nested": lambda: torch.nested.nested_tensor([t[:3], t[:5]]),
         "meta": lambda: t.to("meta")}[kind]()
    with pytest.raises(DtypeError, match="to_dense|dequantize|unbind|meta"):
        numstd.check(EXP, op="exp", inputs=[x])


@pytest.mark.parametrize("bad", ["7", 0, -3, 2.5, True])
def test_chunk_size_that_is_not_a_positive_int_raises_parameter_error(bad):
    with pytest.raises(ParameterError, match="chunk_size"):
        numstd.check(EXP, op="exp", inputs=[X], chunk_size=bad)


def test_huge_chunk_size_is_one_chunk_not_an_overflow():
    a = numstd.check(EXP, op="exp", inputs=[X], chunk_size=2 ** 70)
    b = numstd.check(EXP, op="exp", inputs=[X])
    assert a.passed and a.to_json() == b.to_json()


@pytest.mark.parametrize("op, name, n", [("layer_norm", "eps", 2), ("rms_norm", "eps", 2), ("attention", "scale", 3)])
def test_parameters_beyond_float64_raise_parameter_error(op, name, n):
    y = np.ones((1, 2, 4), np.float32)
    with pytest.raises(ParameterError, match=name):
        numstd.check(y, op=op, inputs=[y] * n if op == "attention" else [y], **{name: 10 ** 400})


@pytest.mark.parametrize("shape, axis, out", [((0, 8), 1, (0,)), ((0, 8), 0, (8,)), ((3, 0), 1, (3,)), ((0,), None, ())])
def test_sum_over_an_empty_batch_or_axis_is_judged(shape, axis, out):
    x = np.ones(shape, np.float32)
    v = numstd.check(np.zeros(out, np.float32), op="sum", inputs=[x], axis=axis)
    assert v.passed, v.message  # the empty sum is 0 (hand-derived)
    bad = numstd.check(np.ones(out, np.float32), op="sum", inputs=[x], axis=axis)
    assert bad.passed == (np.prod(out) == 0)


def test_op_name_in_another_case_is_the_catalog_op():
    v = numstd.check(EXP, op="Exp", inputs=[X])
    assert v.passed and v.op == "exp" and v.standard_id == "NS-EXP-FP32@1"


def test_accumulate_that_is_not_a_float_format_names_the_parameter():
    with pytest.raises(ParameterError, match="accumulate='int8'"):
        numstd.check(EXP, op="exp", inputs=[X], accumulate="int8")


@pytest.mark.parametrize("value", [1, 0, "yes", 1.0])
def test_allow_tf32_must_be_a_bool(value):
    m = np.ones((4, 4), np.float32)
    with pytest.raises(ParameterError, match="allow_tf32 must be True or False"):
        numstd.check(m @ m, op="matmul", inputs=[m, m], allow_tf32=value)


def test_explicit_standard_for_other_input_formats_raises_dtype_error():
    m = np.ones((4, 4), np.float32)
    out = (m @ m).astype(ml_dtypes.bfloat16)
    with pytest.raises(DtypeError, match=r"NS-MATMUL-BF16@1 is for inputs \['bfloat16', 'bfloat16'\].*float32"):
        numstd.check(out, op="matmul", inputs=[m, m], standard="NS-MATMUL-BF16@1")
    mb = m.astype(ml_dtypes.bfloat16)
    v = numstd.check(out, op="matmul", inputs=[mb, mb], standard="NS-MATMUL-BF16@1")
    assert v.passed and v.formats["inputs"] == ["bfloat16", "bfloat16"]


def test_every_malformed_call_error_is_a_numstd_error():
    for call in (lambda: numstd.check(EXP, op="exp", inputs=[X], chunk_size="7"),
                 lambda: numstd.check(EXP, op="exp", inputs=[X], accumulate="int8"),
                 lambda: numstd.check(EXP, op="nope", inputs=[X])):
        with pytest.raises(NumstdError):
            call()


def test_cross_entropy_verdict_does_not_depend_on_chunk_size():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((300, 10)).astype(np.float32)
    target = rng.integers(0, 10, 300)
    x = logits.astype(np.float64)
    exact = np.log(np.sum(np.exp(x - x.max(1, keepdims=True)), 1)) + x.max(1) - x[np.arange(300), target]
    out = (exact * (1 + 3e-7 * rng.standard_normal(300))).astype(np.float32)  # errors of a few ulp
    verdicts = {numstd.check(out, op="cross_entropy", inputs=[logits, target], reduction="none", chunk_size=c).to_json()
                for c in (7, 64, 1 << 16)}
    assert len(verdicts) == 1


# --- tampering -------------------------------------------------------------------------------------

import hashlib  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

from numstd import registry  # noqa: E402
from numstd.errors import DataIntegrityError, SchemaError  # noqa: E402

SHIPPED = Path(str(__import__("importlib.resources").resources.files("numstd.standards")))
EXP1 = "exp/NS-EXP-FP32@1.toml"


def _user_dir(tmp_path: Path, rels=(EXP1,)) -> Path:
    """A standards directory of one's own: copies of shipped files, their LOCK lines and evidence."""
    d = tmp_path / "mine"
    lock = registry.read_lock((SHIPPED / "LOCK").read_text())
    lines = []
    for rel in rels:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHIPPED / rel, d / rel)
        lines.append(f"{lock[rel]}  {rel}")
        std = registry.load_standard((d / rel).read_bytes(), rel)
        ev = Path(std.provenance["evidence"]).name
        (d / "evidence").mkdir(exist_ok=True)
        shutil.copyfile(SHIPPED.parent / "reference_data" / "evidence" / ev, d / "evidence" / ev)
    (d / "LOCK").write_text("\n".join(lines) + "\n")
    registry._cache.clear()
    return d


def test_a_locked_file_edited_to_draft_with_a_changed_constant_is_an_integrity_error(tmp_path):
    d = _user_dir(tmp_path)
    f = d / EXP1
    f.write_text(f.read_text().replace('status = "active"', 'status = "draft"').replace("c = 2.5", "c = 25"))
    registry._cache.clear()
    with pytest.raises(DataIntegrityError, match="NS-EXP-FP32@1.toml changed after publication"):
        registry.get_standard("NS-EXP-FP32@1", root=d)


def test_a_byte_flip_that_breaks_utf8_is_an_integrity_error_not_a_toml_error(tmp_path):
    d = _user_dir(tmp_path)
    raw = bytearray((d / EXP1).read_bytes())
    raw[40] = 0xFF
    (d / EXP1).write_bytes(bytes(raw))
    registry._cache.clear()
    with pytest.raises(DataIntegrityError, match="NS-EXP-FP32@1.toml"):
        registry.get_standard("NS-EXP-FP32@1", root=d)


def test_one_corrupted_user_standard_leaves_the_shipped_ones_usable(tmp_path, monkeypatch):
    d = _user_dir(tmp_path, rels=("log/NS-LOG-FP32@1.toml",))
    (d / "log/NS-LOG-FP32@1.toml").write_text("garbage")
    monkeypatch.setenv(registry.STANDARDS_PATH_ENV, str(d))
    registry._cache.clear()
    try:
        assert numstd.check(EXP, op="exp", inputs=[X]).passed  # another op: unaffected
        y = np.log(np.abs(X) + 1).astype(np.float32)
        with pytest.raises(DataIntegrityError, match="NS-LOG-FP32@1.toml"):
            numstd.check(y, op="log", inputs=[np.abs(X) + 1])
    finally:
        registry._cache.clear()


def test_verify_reports_each_mismatch_by_path_and_exits_nonzero(tmp_path, capsys, monkeypatch):
    from numstd.cli import main
    from numstd.integrity import verify

    monkeypatch.setenv(registry.STANDARDS_PATH_ENV, "")  # (restored after the test: --standards-dir sets it)
    d = _user_dir(tmp_path, rels=(EXP1, "log/NS-LOG-FP32@1.toml"))
    assert verify([d]) == []
    assert main(["--standards-dir", str(d), "verify"]) == 0
    ev = d / "evidence" / "NS-EXP-FP32@1.evidence.parquet"
    raw = bytearray(ev.read_bytes())
    raw[len(raw) // 2] ^= 1
    ev.write_bytes(bytes(raw))
    (d / "log/NS-LOG-FP32@1.toml").write_text((d / "log/NS-LOG-FP32@1.toml").read_text() + "\n")
    bad = verify([d])
    assert sorted(Path(m.path).name for m in bad) == ["NS-EXP-FP32@1.evidence.parquet", "NS-LOG-FP32@1.toml"]
    capsys.readouterr()
    assert main(["--standards-dir", str(d), "verify"]) == 1
    out = capsys.readouterr().out
    assert out.count("MISMATCH") == 2 and "NS-LOG-FP32@1.toml" in out


def test_evidence_is_verified_when_it_is_read(tmp_path):
    from numstd.integrity import evidence_path

    d = _user_dir(tmp_path)
    std = registry.get_standard("NS-EXP-FP32@1", root=d)
    ev = d / "evidence" / "NS-EXP-FP32@1.evidence.parquet"
    raw = bytearray(ev.read_bytes())
    raw[100] ^= 0x10
    ev.write_bytes(bytes(raw))
    with pytest.raises(DataIntegrityError, match="NS-EXP-FP32@1.evidence.parquet"):
        evidence_path(std)
    raw[100] ^= 0x10
    ev.write_bytes(bytes(raw))
    assert evidence_path(std) == ev
    shipped = evidence_path(numstd.get_standard("NS-EXP-FP32@1"))
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == numstd.get_standard("NS-EXP-FP32@1").provenance["evidence_sha256"]


# --- publish ---------------------------------------------------------------------------------------


def _draft(tmp_path: Path, *, op: str = "exp", evidence: str = "NS-EXP-FP32@2.evidence.parquet") -> Path:
    """A draft NS-EXP-FP32@2 (the @1 file with a new version) and its evidence, as calibrate writes them."""
    cal = tmp_path / "cal"
    cal.mkdir()
    ev = b"PAR1 not really parquet, but bytes with a sha256"
    (cal / evidence).write_bytes(ev)
    text = (SHIPPED / EXP1).read_text()
    text = (text.replace("version = 1", 'version = 2\nsupersedes = "NS-EXP-FP32@1"', 1)
            .replace('status = "active"', 'status = "draft"').replace('op = "exp"', f'op = "{op}"')
            .replace("NS-EXP-FP32@1.evidence.parquet", evidence)
            .replace("37d00cce1a714f1c5a464d03d3ddfba2cc0aef9decfc328fc22f0245c1147f3a", hashlib.sha256(ev).hexdigest()))
    p = cal / "NS-EXP-FP32@2.toml"
    p.write_text(text)
    return p


def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_publish_into_a_user_directory_lands_there_and_is_usable(tmp_path, monkeypatch):
    from numstd.publish import publish

    d = _user_dir(tmp_path)
    dest = publish(_draft(tmp_path), standards_dir=d)
    assert dest == d / "exp" / "NS-EXP-FP32@2.toml" and (d / "evidence" / "NS-EXP-FP32@2.evidence.parquet").is_file()
    assert "exp/NS-EXP-FP32@2.toml" in registry.read_lock((d / "LOCK").read_text())
    std = registry.get_standard("NS-EXP-FP32@2", root=d)
    assert std.status == "active" and std.supersedes == "NS-EXP-FP32@1"


def test_publish_refuses_an_id_that_does_not_name_its_op_and_writes_nothing(tmp_path):
    from numstd.publish import publish

    d = _user_dir(tmp_path)
    before = _snapshot(d)
    with pytest.raises(SchemaError, match="does not name its op 'log'"):
        publish(_draft(tmp_path, op="log"), standards_dir=d)
    assert _snapshot(d) == before


def test_publish_refuses_an_existing_evidence_name_and_writes_nothing(tmp_path):
    from numstd.publish import publish

    d = _user_dir(tmp_path)
    draft = _draft(tmp_path, evidence="NS-EXP-FP32@1.evidence.parquet")  # @1's evidence name
    before = _snapshot(d)
    with pytest.raises(DataIntegrityError, match="evidence files are never replaced"):
        publish(draft, standards_dir=d)
    assert _snapshot(d) == before


def test_publish_reuses_a_published_evidence_file_with_the_same_bytes(tmp_path):
    """A version that changes a criterion, not the constants, cites @1's evidence: same name, same
    sha256; nothing is copied, and the file stays byte-identical."""
    from numstd.publish import publish

    d = _user_dir(tmp_path)
    ev1 = d / "evidence" / "NS-EXP-FP32@1.evidence.parquet"
    before = ev1.read_bytes()
    draft = _draft(tmp_path, evidence="NS-EXP-FP32@1.evidence.parquet")
    draft.write_text(draft.read_text().replace(hashlib.sha256(b"PAR1 not really parquet, but bytes with a sha256")
                                               .hexdigest(), hashlib.sha256(before).hexdigest()))
    (draft.parent / "NS-EXP-FP32@1.evidence.parquet").unlink()  # not needed: the published file is reused
    publish(draft, standards_dir=d)
    assert ev1.read_bytes() == before and sorted(p.name for p in (d / "evidence").iterdir()) == [ev1.name]
    std = registry.get_standard("NS-EXP-FP32@2", root=d)
    assert std.provenance["evidence_sha256"] == hashlib.sha256(before).hexdigest()


def test_publish_failing_midway_leaves_nothing_half_published(tmp_path, monkeypatch):
    import os

    from numstd import publish as pub

    d = _user_dir(tmp_path)
    before = _snapshot(d)
    real, calls = os.replace, []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the evidence landed, the standard's rename fails
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(pub.os, "replace", flaky)
    with pytest.raises(OSError, match="disk full"):
        pub.publish(_draft(tmp_path), standards_dir=d)
    assert _snapshot(d) == before  # the evidence was removed again, LOCK untouched, no temporary left


def test_publish_never_writes_into_an_installed_package(tmp_path, monkeypatch):
    from numstd import publish as pub

    monkeypatch.delenv(registry.STANDARDS_PATH_ENV, raising=False)
    monkeypatch.setattr(pub, "_source_checkout", lambda: None)
    with pytest.raises(NumstdError, match="--standards-dir"):
        pub.publish(_draft(tmp_path))


# --- attention @2 ----------------------------------------------------------------------------------


def _attention_exact(q, k, v, scale):
    s = np.einsum("...le,...se->...ls", q.astype(np.float64), k.astype(np.float64)) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("...ls,...se->...le", p / p.sum(-1, keepdims=True), v.astype(np.float64))


def test_attention_at_2_fails_garbage_for_huge_scores_that_at_1_passed():
    q = np.array([[[1e30, 1]]], ml_dtypes.bfloat16)
    k = np.array([[[0, 1]]], ml_dtypes.bfloat16)
    v = np.array([[[.5, .25]]], ml_dtypes.bfloat16)
    garbage = np.array([[[3e38, -3e38]]], ml_dtypes.bfloat16)
    assert numstd.check(garbage, op="attention", inputs=[q, k, v]).standard_id == "NS-ATTENTION-BF16@3"
    for sid in ("NS-ATTENTION-BF16@2", "NS-ATTENTION-BF16@3"):  # @3 only adds intermediate_overflow
        v2 = numstd.check(garbage, op="attention", inputs=[q, k, v], standard=sid)
        assert not v2.passed
        assert not v2.criterion("hull").passed and not v2.criterion("bound").passed
    assert numstd.check(v, op="attention", inputs=[q, k, v]).passed  # one key: out = v exactly
    assert numstd.get_standard("NS-ATTENTION-BF16@1").status == "active"  # @1 stays resolvable


def test_attention_at_2_bound_is_finite_and_fails_a_constant_output_on_wide_rows():
    rng = np.random.default_rng(3)
    shape = (1, 2, 16, 8)
    q = (rng.standard_normal(shape) * 2.0 ** rng.integers(-40, 41, shape)).astype(np.float32)  # the "wide" rows
    k = (rng.standard_normal(shape) * 2.0 ** rng.integers(-40, 41, shape)).astype(np.float32)
    v = rng.uniform(-2, 2, shape).astype(np.float32)
    scale = 1 / np.sqrt(8)
    good = _attention_exact(q, k, v, scale).astype(np.float32)
    assert numstd.check(good, op="attention", inputs=[q, k, v]).passed
    bad = np.full(shape, 1e6, np.float32)
    old = numstd.check(bad, op="attention", inputs=[q, k, v], standard="NS-ATTENTION-FP32@1")
    assert numstd.check(bad, op="attention", inputs=[q, k, v]).standard_id == "NS-ATTENTION-FP32@3"
    for sid in ("NS-ATTENTION-FP32@2", "NS-ATTENTION-FP32@3"):
        new = numstd.check(bad, op="attention", inputs=[q, k, v], standard=sid)
        assert not new.passed
        assert not new.criterion("hull").passed and not new.criterion("bound").passed
    assert "hull" not in [c.name for c in old.criteria]  # @1 has no hull criterion (its meaning is unchanged)
    from numstd.reference import reference

    r = reference("attention", [q, k, v])
    assert np.all(np.isfinite(r.error_bound)) and np.all(r.error_bound <= 2 * (1 + 2**-40) * 2 + 1e-6)


def test_attention_hull_criterion_passes_legitimate_rounding_at_the_hull_edge():
    # every row of v equal: the output is that row exactly, and fp32 rounding of P still sums near 1
    q = np.random.default_rng(0).standard_normal((1, 4, 64, 16)).astype(np.float32)
    v = np.broadcast_to(np.linspace(-3, 3, 16, dtype=np.float32), (1, 4, 64, 16)).copy()
    s = np.einsum("...le,...se->...ls", q, q) / np.float32(4)
    p = np.exp(s - s.max(-1, keepdims=True))
    out = (p / p.sum(-1, keepdims=True)) @ v  # a float32 kernel: weights that sum to 1 within rounding
    assert numstd.check(out.astype(np.float32), op="attention", inputs=[q, q, v]).passed


# --- reductions in bounded memory ------------------------------------------------------------------


@pytest.mark.parametrize("block", [16, 64, 1 << 18])
@pytest.mark.parametrize("shape, axis", [((3, 1000), 1), ((1000,), None), ((40, 7, 30), (0, 2)), ((500, 3), 0)])
def test_blocked_sum_reference_is_within_its_bound_of_the_exact_sum(monkeypatch, block, shape, axis):
    import math
    from fractions import Fraction

    from numstd.reference import reduction, reference

    monkeypatch.setattr(reduction, "SUM_BLOCK", block)
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    x.reshape(-1)[::7] *= -1e6  # cancellation
    r = reference("sum", [x], axis=axis)
    moved = np.moveaxis(x.astype(np.float64), [axis] if isinstance(axis, int) else list(axis or range(x.ndim)),
                        list(range(-1, -1 - (1 if isinstance(axis, int) else len(axis or range(x.ndim))), -1)))
    kept = moved.reshape(int(np.prod(r.values.shape)), -1)
    for i, row in enumerate(kept):
        exact = sum(Fraction(float(v)) for v in row)  # exact (hand-checkable) truth
        err = abs(Fraction(float(r.values.reshape(-1)[i])) - exact)
        assert err <= Fraction(float(r.error_bound.reshape(-1)[i])), (i, float(err))
        assert math.isclose(float(exact), math.fsum(row), rel_tol=0, abs_tol=0)


def test_sum_verdict_is_the_same_for_every_chunk_size_and_block():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3000)).astype(np.float32)
    out = np.sum(x, axis=1, dtype=np.float32)
    verdicts = {numstd.check(out, op="sum", inputs=[x], axis=1, chunk_size=c).to_json() for c in (1, 3, 1 << 16)}
    assert len(verdicts) == 1 and numstd.check(out, op="sum", inputs=[x], axis=1).passed


def _softmax_outputs(op: str, x: np.ndarray, axis: int) -> dict:
    """A real library kernel's output (torch, float32) and two wrong ones: a 0.2 % scale error on the
    first row, and a NaN in the middle of the last row."""
    torch = pytest.importorskip("torch")
    fn = torch.nn.functional.softmax if op == "softmax" else torch.nn.functional.log_softmax
    good = fn(torch.from_numpy(x), dim=axis).numpy()
    first, last = (0,) * (x.ndim - 1), (-1,) * (x.ndim - 1)
    scaled = good.copy()
    np.moveaxis(scaled, axis, -1)[first] *= np.float32(1.002)
    nan = good.copy()
    np.moveaxis(nan, axis, -1)[last][x.shape[axis] // 2] = np.nan
    return {"torch": good, "scaled": scaled, "nan": nan}


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_verdict_is_the_same_for_every_chunk_size_on_rows_longer_than_the_chunk(op):
    # a row of 70,000 > SOFTMAX_BLOCK = 2^16: its statistics come from fixed blocks, and every chunk
    # size below 2^22 cuts it into pieces (7: 10,000 pieces, ~2 s: the library kernel's output only;
    # the next test cuts wrong outputs into pieces of 7 too); 2^22 judges it whole
    from numstd.reference.softmax import SOFTMAX_BLOCK

    x = (np.random.default_rng(8).standard_normal((1, 70_000)) * 3).astype(np.float32)
    assert x.shape[1] > SOFTMAX_BLOCK
    for name, out in _softmax_outputs(op, x, 1).items():
        sizes = (7, 4096, 1 << 16, 1 << 22) if name == "torch" else (4096, 1 << 16, 1 << 22)
        verdicts = {c: numstd.check(out, op=op, inputs=[x], axis=-1, chunk_size=c) for c in sizes}
        assert len({v.to_json() for v in verdicts.values()}) == 1, name
        assert verdicts[4096].passed == (name == "torch"), (name, verdicts[4096].message)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, axis", [((3, 2000), 1), ((2, 900, 3), 1), ((1200, 2), 0)])
def test_softmax_verdict_is_the_same_for_every_chunk_size_with_many_blocks_per_row(monkeypatch, op, shape, axis):
    # SOFTMAX_BLOCK lowered to 256: every row has several blocks, pieces start and end anywhere in
    # them, and the reduced axis may be followed by others (axis 1 of a 3-D input, axis 0)
    from numstd.reference import softmax as sm

    monkeypatch.setattr(sm, "SOFTMAX_BLOCK", 256)
    x = (np.random.default_rng(9).standard_normal(shape) * 4).astype(np.float32)
    np.moveaxis(x, axis, -1)[(0,) * (len(shape) - 1)][:5] = -np.inf  # masked logits
    for name, out in _softmax_outputs(op, x, axis).items():
        verdicts = {c: numstd.check(out, op=op, inputs=[x], axis=axis, chunk_size=c) for c in (7, 500, 4096, 1 << 22)}
        assert len({v.to_json() for v in verdicts.values()}) == 1, name
        assert verdicts[7].passed == (name == "torch"), (name, verdicts[7].message)


def test_chunks_of_a_3d_softmax_that_fix_leading_axes_are_reduced_along_the_right_axis():
    # chunk_size below a (100, 1000) plane fixes axis 0 in each chunk: the chunk's inputs are 2-D and
    # the reduced axis is their axis 1 (it raised numpy's AxisError before)
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(10).standard_normal((2, 100, 1000)).astype(np.float32)
    out = torch.softmax(torch.from_numpy(x), -1).numpy()
    a = numstd.check(out, op="softmax", inputs=[x], axis=2, chunk_size=1000)
    assert a.passed, a.message
    assert a.to_json() == numstd.check(out, op="softmax", inputs=[x], axis=2).to_json()


def _cumsum_outputs(x: np.ndarray, axis: int) -> dict:
    """torch's float32 cumsum (a real library kernel) and two wrong outputs: the second half of the
    first row 1 % high, and a NaN in the middle of the last row."""
    torch = pytest.importorskip("torch")
    good = torch.cumsum(torch.from_numpy(x), dim=axis).numpy()
    first, last = (0,) * (x.ndim - 1), (-1,) * (x.ndim - 1)
    scaled = good.copy()
    np.moveaxis(scaled, axis, -1)[first][x.shape[axis] // 2:] *= np.float32(1.01)
    nan = good.copy()
    np.moveaxis(nan, axis, -1)[last][x.shape[axis] // 2] = np.nan
    return {"torch": good, "scaled": scaled, "nan": nan}


@pytest.mark.parametrize("shape, axis, sizes", [
    ((2, 3000), 1, (7, 1000, 4096, 1 << 22)),
    ((900, 3), 0, (7, 100, 4096, 1 << 22)),
    ((2, 70_000), 1, (4096, 1 << 16, 1 << 22)),
])
def test_cumsum_verdict_is_the_same_for_every_chunk_size_on_rows_longer_than_the_chunk(shape, axis, sizes):
    # every size but the last cuts the rows into pieces; the scan carries its state from piece to piece
    # (the prefix sums, sum |x|, and an infinity in the middle of a row, must not depend on the cut)
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    np.moveaxis(x, axis, -1)[(-1,) * (len(shape) - 1)][shape[axis] // 3] = np.inf
    for name, out in _cumsum_outputs(x, axis).items():
        verdicts = {c: numstd.check(out, op="cumsum", inputs=[x], axis=axis, chunk_size=c) for c in sizes}
        assert len({v.to_json() for v in verdicts.values()}) == 1, name
        assert verdicts[sizes[1]].passed == (name == "torch"), (name, verdicts[sizes[1]].message)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape, sizes, block", [
    ((2, 10, 1000), (7, 700, 4096, 1 << 22), None),
    ((2, 70_000), (4096, 1 << 16, 1 << 22), None),
    ((3, 2000), (7, 500, 1 << 22), 256),
])
def test_norm_verdict_is_the_same_for_every_chunk_size_on_rows_longer_than_the_chunk(monkeypatch, op, shape, sizes,
                                                                                     block):
    # rows cut into pieces with their part of the weight and bias; rows of 70,000 > NORM_BLOCK = 2^16
    # (and rows of 2000 with the block lowered to 256) get their statistics from fixed blocks
    torch = pytest.importorskip("torch")
    from numstd.reference import normalization

    if block is not None:
        monkeypatch.setattr(normalization, "NORM_BLOCK", block)
    g = np.random.default_rng(12)
    x = (g.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    w = g.standard_normal(shape[-1]).astype(np.float32)
    b = g.standard_normal(shape[-1]).astype(np.float32)
    inputs = [x, w, b] if op == "layer_norm" else [x, w]
    fn = torch.nn.functional.layer_norm if op == "layer_norm" else torch.nn.functional.rms_norm
    t = [torch.from_numpy(a) for a in inputs]
    good = fn(t[0], (shape[-1],), *t[1:], eps=1e-5).numpy()
    scaled = good.copy()
    scaled[(0,) * (len(shape) - 1)][shape[-1] // 2:] *= np.float32(1.002)
    nan = good.copy()
    nan[(-1,) * (len(shape) - 1)][shape[-1] // 2] = np.nan
    for name, out in {"torch": good, "scaled": scaled, "nan": nan}.items():
        verdicts = {c: numstd.check(out, op=op, inputs=inputs, eps=1e-5, chunk_size=c) for c in sizes}
        assert len({v.to_json() for v in verdicts.values()}) == 1, name
        assert verdicts[sizes[1]].passed == (name == "torch"), (name, verdicts[sizes[1]].message)


def test_cross_entropy_of_long_rows_is_judged_in_bounded_memory():
    # 16 rows of 2^17 logits (8 MiB): the reference widened every logit of a chunk at once and kept
    # ~10 float64 temporaries of them (16x the input, benchmarks/perf/bench_memory.py); it now takes a
    # group of rows of ~2^16 logits, or one block of a longer row, at a time
    import tracemalloc

    g = np.random.default_rng(13)
    x = g.standard_normal((16, 1 << 17)).astype(np.float32)
    t = g.integers(0, x.shape[1], 16)
    x64 = x.astype(np.float64)
    out = (np.log(np.exp(x64).sum(-1)) - x64[np.arange(16), t]).astype(np.float32)
    del x64
    numstd.check(out, op="cross_entropy", inputs=[x, t], reduction="none")  # (imports, registry)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        v = numstd.check(out, op="cross_entropy", inputs=[x, t], reduction="none")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert v.passed, v.message
    assert peak < 1.0 * x.nbytes, peak


@pytest.mark.parametrize("op", ["matmul", "linear"])
def test_contraction_verdict_is_the_same_for_every_chunk_size_with_k_longer_than_the_block(monkeypatch, op):
    # K_BLOCK lowered to 64: K = 300 is five blocks (the last one 44 long); rows 5 and 6 cancel against
    # columns 0 and 1, so stages 2 and 3 run in blocks too; good, truncated and corrupted outputs
    from numstd.formats import round_to
    from numstd.reference import contraction, reference

    monkeypatch.setattr(contraction, "K_BLOCK", 64)
    g = np.random.default_rng(21)
    a = g.standard_normal((40, 300)).astype(np.float32)
    a[5] = a[6]
    b = g.standard_normal((300, 20)).astype(np.float32)
    b[:, 1] = -b[:, 0] * (1 + 2.0**-20)
    inputs = [a, b] if op == "matmul" else [a, b.T.copy(), g.standard_normal(20).astype(np.float32)]
    r = reference(op, inputs).values
    outs = {"round": round_to(r, "float32"), "rtz": round_to(r, "float32", "rtz")}
    outs["corrupt"] = outs["round"].copy()
    outs["corrupt"][6, 1] *= np.float32(1.001)
    for name, out in outs.items():
        verdicts = {c: numstd.check(out, op=op, inputs=inputs, chunk_size=c).to_json() for c in (1, 7, 300, 1 << 22)}
        assert len(set(verdicts.values())) == 1, name
    assert numstd.check(outs["round"], op=op, inputs=inputs).passed
    assert not numstd.check(outs["corrupt"], op=op, inputs=inputs).passed


def test_matmul_with_a_long_k_is_judged_in_bounded_memory():
    # A (16, K) @ B (K, 16): the reference widened all of A and B to float64 and padded A's 16 rows
    # to a 256-row BLAS block (~23x the inputs at K = 2^21, benchmarks/perf/bench_memory.py --op
    # matmul); it now widens one K block (contraction.K_BLOCK) at a time, so the extra memory is
    # the same for K = 2^16 and K = 2^18 (8 MiB and 32 MiB of inputs)
    import tracemalloc

    g = np.random.default_rng(14)
    peaks = {}
    for k in (1 << 16, 1 << 18):
        a = g.standard_normal((16, k)).astype(np.float32)
        b = g.standard_normal((k, 16)).astype(np.float32)
        out = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        numstd.check(out, op="matmul", inputs=[a, b])  # (imports, registry)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            v = numstd.check(out, op="matmul", inputs=[a, b])
            peaks[k] = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert v.passed, v.message
    assert peaks[1 << 18] < peaks[1 << 16] + (1 << 21), peaks
    assert peaks[1 << 18] < 0.75 * (a.nbytes + b.nbytes), peaks
