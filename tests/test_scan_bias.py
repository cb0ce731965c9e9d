"""The row-clustered standard error of the element-level bias criterion (``bias_rows``, issue 17):
in a scan the elements of a row share their prefix's rounding errors, so the rows, not the
elements, are the independent draws of the bias sample.

Independent truth: the outputs are built by hand from the float64 prefix products — a legitimate
output whose rows each carry one shared relative error of ±1 u (both signs: what reordering the
products of a prefix gives, no systematic direction), and a truncating sequential scan (every
product rounded toward zero: a systematic error) — and the row statistic is recomputed here from
its definition with numpy.
"""

import math
from pathlib import Path

import numpy as np
import pytest

import numstd
from numstd.catalog.registry import Criteria, load_standard
from numstd.judge.criteria import BiasRows, Judge, scan_rows
from numstd.core.formats import get_format
from numstd.registry import get_standard

U32 = 2.0**-24


def _crit(verdict, name):
    return next(c for c in verdict.criteria if c.name == name)


def _inputs(rows=8, n=1000, seed=3):
    """Factors near 1 (as the smallvar suite: long prefixes stay in range and many elements enter
    the bias sample) in float32, and their float64 prefix products (exact to ~1e-16 relative)."""
    x = (1.0 + 1e-3 * np.random.default_rng(seed).standard_normal((rows, n))).astype(np.float32)
    return x, np.cumprod(x.astype(np.float64), axis=-1)


def _shared_prefix_error(p, signs):
    """Row ``r`` of the prefix products ``p`` times ``1 + signs[r]·u``, rounded once to float32: one
    relative error of one fp32 unit shared by every element of the row, as when the first products of
    the row round the other way (a different order); within the bound, no systematic sign."""
    return (p * (1.0 + np.asarray(signs, dtype=np.float64)[:, None] * U32)).astype(np.float32)


def _truncating_cumprod(x):
    """A sequential fp32 scan whose every product is rounded toward zero (fp32·fp32 is exact in
    float64; the float32 conversion rounds to nearest, so step back toward 0 where it rounded up)."""
    out = np.empty(x.shape, dtype=np.float32)
    acc = x[:, 0].copy()
    out[:, 0] = acc
    for k in range(1, x.shape[1]):
        exact = acc.astype(np.float64) * x[:, k].astype(np.float64)
        y = exact.astype(np.float32)
        up = np.abs(y.astype(np.float64)) > np.abs(exact)
        y[up] = np.nextafter(y[up], np.float32(0))
        acc = y
        out[:, k] = y
    return out


@pytest.fixture(scope="module")
def shared():
    x, p = _inputs()
    return x, _shared_prefix_error(p, [1, 1, 1, 1, 1, 1, 1, -1])


def test_shared_prefix_errors_of_both_signs_fail_at_1_and_pass_at_2(shared):
    x, out = shared
    v1 = numstd.check(out, op="cumprod", inputs=[x], standard="NS-CUMPROD-FP32@1", axis=-1)
    assert _crit(v1, "bound").passed and not _crit(v1, "bias").passed  # the false reject of @1
    v2 = numstd.check(out, op="cumprod", inputs=[x], standard="NS-CUMPROD-FP32@2", axis=-1)
    assert v2.passed, v2.message
    b1, b2 = _crit(v1, "bias"), _crit(v2, "bias")
    assert b1.value == b2.value  # the same mean, a wider (row-clustered) standard error
    assert b2.limit > b1.limit and "row-clustered" in b2.message


def _rtz(p, dtype):
    """``p`` rounded toward zero to ``dtype`` (float32 or bfloat16): the conversion rounds to nearest,
    so step the magnitude one unit back toward 0 where it rounded away (IEEE bit patterns are ordered
    by magnitude: one less in the integer view is the next value toward 0)."""
    y = np.array(p.astype(dtype))
    up = np.abs(y.astype(np.float64)) > np.abs(p)
    bits = y.view(np.uint32 if y.dtype.itemsize == 4 else np.uint16)
    bits[up] -= 1
    return y


def test_truncated_output_fails_bias_at_1_and_2(shared):
    """Every element rounded toward zero (the exact prefix product truncated to fp32): a systematic
    −0.5 ulp on every element of every row, so the row means do not spread and the row-clustered
    standard error stays small; the bias criterion rejects it under both versions."""
    x, _ = shared
    out = _rtz(np.cumprod(x.astype(np.float64), axis=-1), np.float32)
    for key in ("NS-CUMPROD-FP32@1", "NS-CUMPROD-FP32@2"):
        v = numstd.check(out, op="cumprod", inputs=[x], standard=key, axis=-1)
        b = _crit(v, "bias")
        assert _crit(v, "bound").passed and not b.passed and b.value < -0.3, (key, b.message)


def test_truncated_bf16_output_fails_bias_at_2():
    import ml_dtypes

    x = (1.0 + 1e-2 * np.random.default_rng(7).standard_normal((8, 1000))).astype(ml_dtypes.bfloat16)
    out = _rtz(np.cumprod(x.astype(np.float64), axis=-1), ml_dtypes.bfloat16)
    v = numstd.check(out, op="cumprod", inputs=[x], standard="NS-CUMPROD-BF16@2", axis=-1)
    assert not _crit(v, "bias").passed, _crit(v, "bias").message


def test_truncating_products_fail_at_2():
    """A sequential scan whose every product is truncated drifts by about −u/2 per factor.  Under @2
    the drift no longer fails the bias criterion by itself — rows whose bias sample reaches further
    into the prefix have larger means, so the drift spreads the row means — but it grows with the
    prefix and the bound rejects it (≈ 10× on this case)."""
    x, _ = _inputs()
    out = _truncating_cumprod(x)
    v1 = numstd.check(out, op="cumprod", inputs=[x], standard="NS-CUMPROD-FP32@1", axis=-1)
    assert not v1.passed and not _crit(v1, "bias").passed
    v2 = numstd.check(out, op="cumprod", inputs=[x], standard="NS-CUMPROD-FP32@2", axis=-1)
    assert not v2.passed and not _crit(v2, "bound").passed and _crit(v2, "bias").value < -1


def test_correctly_rounded_scan_passes_2():
    x, p = _inputs(seed=5)
    v = numstd.check(p.astype(np.float32), op="cumprod", inputs=[x], standard="NS-CUMPROD-FP32@2", axis=-1)
    assert v.passed, v.message


def test_verdict_does_not_depend_on_chunk_size_or_path(shared, monkeypatch):
    x, out = shared
    seen = set()
    for native in ("1", "0"):
        monkeypatch.setenv("NUMSTD_NATIVE", native)
        for chunk in (None, 7, 1000, 2500, 8000):
            v = numstd.check(out, op="cumprod", inputs=[x], standard="NS-CUMPROD-FP32@2", chunk_size=chunk, axis=-1)
            b = _crit(v, "bias")
            seen.add((v.passed, b.value, b.limit, b.message))
    assert len(seen) == 1, seen


def test_row_statistic_matches_its_definition_across_chunks_that_split_rows():
    """The judge's :class:`BiasRows` against numpy: rows along axis 0 of a 3-D output (``inner`` > 1),
    fed in chunks of axis-0 slabs, so every row is split across chunks; every normal element is in
    the bias sample (no pre-rounding term)."""
    rng = np.random.default_rng(11)
    shape = (12, 5, 6)
    r = rng.uniform(1.0, 2.0, shape) * np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    fmt = get_format("float32")
    u = 2.0 ** (np.floor(np.log2(np.abs(r))) - 23)  # ulp of r in float32 (normal range)
    e = np.round(rng.standard_normal(shape) * 3) + rng.standard_normal((1,) + shape[1:])  # a shared part per row
    a = r + e * u  # exact in float64 and in float32's grid only up to rounding: keep float64 outputs
    want_e = np.sign(r) * (a - r) / u
    want = np.std(want_e.mean(axis=0).reshape(-1), ddof=1)
    assert scan_rows("cumsum", {"axis": 0}, shape) == (12, 30)
    results = []
    for step in (12, 5, 1):
        for native in (False, None):
            j = Judge(fmt, shape, native=native)
            for i0 in range(0, shape[0], step):
                sl = slice(i0, min(i0 + step, shape[0]))
                j.add(a[sl], r[sl], np.full(a[sl].shape, 1e9), (sl, slice(None), slice(None)),
                      bias_rows=("cumsum", {"axis": 0}))
            results.append(j.result().bias_rows)
    assert all(x == results[0] for x in results)
    assert results[0].rows == 30 and results[0].length == 12
    assert math.isclose(results[0].sd, want, rel_tol=1e-6)


def test_default_off_and_registered():
    assert Criteria().bias_rows is False
    assert get_standard("NS-CUMPROD-FP32@1").criteria.bias_rows is False
    for fmt in ("FP32", "BF16", "FP16"):
        assert get_standard(f"NS-CUMPROD-{fmt}@2").criteria.bias_rows is True
    text = (Path(__file__).resolve().parents[1] / "standards/cumprod/NS-CUMPROD-FP32@1.toml").read_bytes()
    bad = text.replace(b'output_rounding = ["rne"]', b'output_rounding = ["rne"]\nbias_rows = "yes"')
    assert bad != text
    with pytest.raises(numstd.SchemaError):
        load_standard(bad, "NS-CUMPROD-FP32@1.toml")


def test_no_rows_term_without_the_key(shared):
    """A standard without ``bias_rows`` gets no row term: the judge does not even gather it."""
    x, out = shared
    j = Judge(get_format("float32"), out.shape)
    j.add(out, np.cumprod(x.astype(np.float64), axis=-1), np.full(out.shape, 1.0), (slice(None), slice(None)))
    assert j.result().bias_rows is None
    assert isinstance(BiasRows(2, 0.0, 3), BiasRows)
