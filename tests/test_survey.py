"""numstd.survey: exhaustive and sampled accuracy surveys, checked against independent truth.

Truth used here: mpmath at high precision (local context), hand-derived counts and thresholds
(how many finite negative bfloat16 values exist, where exp's bfloat16 result becomes subnormal),
and implementations whose error is known by construction (round to nearest vs truncation).
"""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest

import numstd
from numstd.cli import main
from numstd.distribution import UlpDistribution
from numstd.errors import FormatError, ParameterError, ShapeError, StandardNotFound, UnknownOpError
from numstd.formats import get_format, round_to
from numstd.survey import Survey, survey_inputs
from numstd.tables import load_hardcases, load_table
from numstd.ulp import ulp_error

BF16 = get_format("bfloat16")


def _exp_f64_rounded(mode: str):
    """exp in float64 rounded once into the input's format: correctly rounded for bfloat16 (the
    table's hardest exp row is 4.9e-4 ulp from a midpoint, far beyond float64's 2^-45 ulp error)."""
    def fn(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return round_to(np.exp(x.astype(np.float64)), x.dtype, mode)
    return fn


# ------------------------------------------------------------------------------------------------
# torch CPU (the motivating findings)
# ------------------------------------------------------------------------------------------------

def test_finds_torch_bf16_erf_flush_of_tiny_inputs() -> None:
    pytest.importorskip("torch")
    s = numstd.survey("erf", "bfloat16", backend="torch")
    assert s.n == 65280  # 2^16 patterns minus 2 x (127 NaNs + 1 inf)
    assert s.max_ulp > 200
    w = s.worst[0]
    assert abs(w.ulp_error) == s.max_ulp
    assert w.output == 0 and 0 < abs(w.input) < 1e-6
    ctx = mpmath.MPContext()
    with ctx.workprec(200):
        exact = ctx.erf(ctx.mpf(w.input))
    assert float(exact) == pytest.approx(w.exact, rel=1e-15)
    # flushing to 0 a normal bfloat16 value v costs v / ulp(v) = its significand (128..255) ulps
    assert 128 <= abs(w.ulp_error) < 256
    z = s.ftz
    assert z is not None and z.lo < 0 < z.hi
    assert 1e-8 < z.max_abs_input < 1e-6  # "tiny inputs ~1e-7 -> 0"
    assert z.largest_result > BF16.smallest_normal  # normal results are lost, not just subnormals


@pytest.mark.parametrize("op", ["exp", "tanh", "log"])
def test_torch_bf16_exp_tanh_log_are_correctly_rounded(op: str) -> None:
    pytest.importorskip("torch")
    s = numstd.survey(op, "bfloat16", backend="torch")
    assert s.max_ulp <= 0.5
    assert s.nonfinite_mismatches == 0 and s.ftz is None and s.correctly_rounded


def test_fn_taking_torch_tensors_matches_the_torch_backend() -> None:
    torch = pytest.importorskip("torch")
    a = numstd.survey("tanh", "float16", fn=torch.tanh, framework="torch", judge=False)
    b = numstd.survey("tanh", "float16", backend="torch", judge=False)
    np.testing.assert_array_equal(a.outputs, b.outputs)
    assert a.backend.startswith("fn:") and a.ulp == b.ulp


# ------------------------------------------------------------------------------------------------
# the ULP numbers
# ------------------------------------------------------------------------------------------------

def test_survey_errors_equal_ulp_error_on_the_same_data() -> None:
    s = numstd.survey("sigmoid", "float16", judge=False)
    ok = np.isfinite(s.outputs) & np.isfinite(s.expected)
    e = ulp_error(s.outputs[ok], s.exact[ok], "float16")
    np.testing.assert_array_equal(s.errors[ok], e)
    assert np.isnan(s.errors[~ok]).all()
    assert isinstance(s.ulp, UlpDistribution) and s.ulp.count == ok.sum()
    assert s.ulp.max == np.abs(e).max() == s.max_ulp
    assert s.ulp.mean == pytest.approx(np.abs(e).mean(), rel=1e-12)
    nz = s.exact[ok] != 0
    assert s.ulp.mean_signed == pytest.approx(np.mean(np.sign(s.exact[ok][nz]) * e[nz]), rel=1e-9, abs=1e-15)
    assert [w.ulp_error for w in s.worst] == sorted([w.ulp_error for w in s.worst], key=abs, reverse=True)


def test_correctly_rounded_fn_has_max_half_ulp_and_truncation_is_caught() -> None:
    assert load_table("exp", "bfloat16").entry["hardest_rows"][0]["midpoint_distance_ulp"] > 2.0**-40
    good = numstd.survey("exp", "bfloat16", fn=_exp_f64_rounded("rne"), judge=False)
    assert 0.49 < good.max_ulp <= 0.5 and abs(good.ulp.mean_signed) < 0.01
    assert good.correctly_rounded
    bad = numstd.survey("exp", "bfloat16", fn=_exp_f64_rounded("rtz"), judge=False)
    assert 0.5 < bad.max_ulp <= 1.0
    assert bad.ulp.mean_signed < -0.2  # truncation: biased toward zero by ~1/4 ulp on average
    assert bad.nonfinite["finite_where_inf"] > 0  # rtz saturates where exp overflows


def test_float32_sampled_survey_of_a_correctly_rounded_fn() -> None:
    def fn(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return round_to(np.exp(x.astype(np.float64)), "float32")
    s = numstd.survey("exp", "float32", fn=fn, inputs=4000, seed=3, judge=False)
    assert s.inputs_kind == "sampled" and 3500 < s.n <= 4000
    assert s.max_ulp <= 0.5 + 1e-6 and s.nonfinite_mismatches == 0
    def trunc_fn(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return round_to(np.exp(x.astype(np.float64)), "float32", "rtz")
    trunc = numstd.survey("exp", "float32", fn=trunc_fn, inputs=4000, seed=3, judge=False)
    assert trunc.ulp.mean_signed < -0.2


# ------------------------------------------------------------------------------------------------
# specials, flush to zero, domain
# ------------------------------------------------------------------------------------------------

def test_log_of_negative_inputs_must_be_nan() -> None:
    s = numstd.survey("log", "bfloat16", judge=False)
    assert s.nonfinite_mismatches == 0
    assert (np.isnan(s.expected) == (s.inputs < 0)).all()  # -0 gives -inf, not NaN

    def zero_for_negatives(x: np.ndarray) -> np.ndarray:
        x32 = x.astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x32 < 0, np.float32(0), np.log(x32)).astype(x.dtype)

    bad = numstd.survey("log", "bfloat16", fn=zero_for_negatives, judge=False)
    # negative finite non-zero bfloat16 patterns: 0x8001 .. 0xff7f
    assert bad.nonfinite["finite_where_nan"] == 0xFF7F - 0x8001 + 1
    assert bad.max_ulp <= 0.5 + 1e-3


def test_flush_region_of_an_exp_that_flushes_subnormals() -> None:
    """exp(x) is subnormal in bfloat16 for ln(2^-134) < x < ln(2^-126), i.e. -92.88 < x < -87.34."""
    def ftz_exp(x: np.ndarray) -> np.ndarray:
        y = _exp_f64_rounded("rne")(x).astype(np.float64)
        y[np.abs(y) < BF16.smallest_normal] = 0.0
        return y.astype(x.dtype)

    s = numstd.survey("exp", "bfloat16", fn=ftz_exp, judge=False)
    z = s.ftz
    assert z is not None
    assert math.log(2.0**-134) - 0.5 < z.lo < math.log(2.0**-134) + 0.5
    assert math.log(2.0**-126) - 0.5 < z.hi < math.log(2.0**-126)
    assert z.largest_result < BF16.smallest_normal
    assert not s.correctly_rounded


def test_exhaustive_inputs_are_every_finite_value() -> None:
    x = survey_inputs("exp", "float8_e4m3fn")
    assert x.size == 254  # 256 patterns minus the two NaNs (S.1111.111)
    assert np.isfinite(x.astype(np.float64)).all()
    assert survey_inputs("exp", "float8_e4m3fnuz").size == 255  # one NaN, 0x80
    assert survey_inputs("exp", "float16").size == 65536 - 2 * 1024
    sub = survey_inputs("exp", "bfloat16", inputs=1000, seed=5)
    assert sub.size == 1000 and np.array_equal(sub.view(np.uint16), np.sort(sub.view(np.uint16)))
    np.testing.assert_array_equal(sub.view(np.uint16), survey_inputs("exp", "bfloat16", 1000, 5).view(np.uint16))


def test_float32_samples_are_stratified_seeded_and_hit_the_transitions() -> None:
    x = survey_inputs("exp", "float32", inputs=20_000, seed=1)
    bits = x.view(np.uint32)
    for sign in (0, 1):
        fields = (bits[(bits >> 31) == sign] >> 23) & 0xFF
        assert set(fields.tolist()) == set(range(255))  # every binade incl. subnormals, no inf/NaN
    v = x.astype(np.float64)
    assert np.isin(load_hardcases("exp").view(np.uint32), bits).all()
    ln_max = math.log(get_format("float32").max_finite)  # 88.72: overflow
    assert ((v > ln_max - 0.05) & (v < ln_max + 0.05)).sum() > 100
    assert ((v > -103.98) & (v < -103.0)).sum() > 100  # result underflows to 0 below ln(2^-150)
    np.testing.assert_array_equal(bits, survey_inputs("exp", "float32", 20_000, 1).view(np.uint32))
    assert not np.array_equal(bits[:500], survey_inputs("exp", "float32", 20_000, 2).view(np.uint32)[:500])
    with pytest.raises(ParameterError, match="at least"):
        survey_inputs("exp", "float32", inputs=100)


# ------------------------------------------------------------------------------------------------
# verdict, errors, CLI
# ------------------------------------------------------------------------------------------------

def test_verdict_or_reason() -> None:
    s = numstd.survey("sqrt", "bfloat16")
    try:
        numstd.find_standard("sqrt", inputs="bfloat16", output="bfloat16")
    except StandardNotFound:
        assert s.verdict is None and "no standard" in s.verdict_note
    else:
        assert s.verdict is not None and s.verdict.op == "sqrt"
    d = json.loads(s.to_json())
    assert d["n"] == s.n and d["ulp"]["count"] == s.ulp.count and d["schema"] == "numstd.survey/1"


def test_bad_calls() -> None:
    with pytest.raises(ParameterError, match="elementwise"):
        numstd.survey("matmul", "bfloat16")
    with pytest.raises(UnknownOpError):
        numstd.survey("expp", "bfloat16")
    with pytest.raises(FormatError):
        numstd.survey("exp", "float64", inputs=100)
    with pytest.raises(ParameterError, match="2\\*\\*32"):
        numstd.survey("exp", "float32")
    with pytest.raises(ParameterError, match="approximate"):
        numstd.survey("gelu", "bfloat16", approximate="fast")
    with pytest.raises(ShapeError):
        numstd.survey("exp", "float8_e5m2", fn=lambda x: x[:3])


def test_gelu_tanh_and_relu() -> None:
    s = numstd.survey("gelu", "float8_e5m2", approximate="tanh", judge=False)
    assert s.params == {"approximate": "tanh"} and "gelu-tanh" in s.reference
    r = numstd.survey("relu", "bfloat16", judge=False)
    assert r.max_ulp == 0 and r.nonfinite_mismatches == 0


def test_cli_survey(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("NUMSTD_PROGRESS", "1")  # (stderr is no terminal here: force the bar)
    assert main(["survey", "--op", "exp", "--format", "float8_e4m3fn", "--json", "--quiet"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["n"] == 254 and d["op"] == "exp" and d["format"] == "float8_e4m3fn"
    assert main(["survey", "--op", "tanh", "--format", "float8_e5m2"]) == 0
    out = capsys.readouterr()
    assert "max |ULP error|" in out.out and "worst inputs" in out.out and "survey tanh" in out.err
    assert main(["survey", "--op", "exp", "--format", "bfloat16", "--inputs", "many"]) == 2
    pytest.importorskip("matplotlib")
    png = tmp_path / "exp.png"
    assert main(["survey", "--op", "exp", "--format", "float8_e5m2", "--quiet", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_survey_is_a_frozen_record() -> None:
    s = numstd.survey("sqrt", "float8_e4m3fn", judge=False)
    assert isinstance(s, Survey)
    with pytest.raises(ValueError):
        s.errors[0] = 1.0
    assert "sqrt" in s.summary() and "verdict" in s.summary()
