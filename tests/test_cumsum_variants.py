"""cumsum's variants (issue 18 item 5): ``reverse``, ``exclusive`` and an optional ``mask``.

Truth is independent of numstd: exact prefix sums of Python ``Fraction``s in explicit loops (the
suffix, the strict prefix, the masked terms), torch's own kernels composed as KernelBench's problems
compose them, and the published NS-CUMSUM-*@1 standards' meaning (plain inclusive forward scan).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import numstd
from numstd.core.errors import DtypeError, ParameterError, ShapeError, StandardNotFound
from numstd.reference import RowPiece, reference, reduction, validated_reference

VARIANTS = [dict(reverse=True), dict(exclusive=True), dict(reverse=True, exclusive=True), {}]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _exact_row(row: np.ndarray, mask: np.ndarray | None, reverse: bool, exclusive: bool) -> tuple[list, list, list]:
    """(exact sums, number of terms, sum of |x| of the terms) per position, by explicit loops."""
    n = len(row)
    vals = [Fraction(float(v)) * (1 if mask is None or mask[j] else 0) for j, v in enumerate(row)]
    sums, counts, abss = [], [], []
    for i in range(n):
        if reverse:
            js = range(i + 1, n) if exclusive else range(i, n)
        else:
            js = range(0, i) if exclusive else range(0, i + 1)
        js = list(js)
        sums.append(sum((vals[j] for j in js), Fraction(0)))
        counts.append(len(js))
        abss.append(sum((abs(vals[j]) for j in js), Fraction(0)))
    return sums, counts, abss


def _torch_truth(x: np.ndarray, mask: np.ndarray | None, reverse: bool, exclusive: bool, dtype=None):
    """The variant as KernelBench's problems write it, with torch's own ops."""
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(np.ascontiguousarray(x))
    if dtype is not None:
        t = t.to(dtype)
    if mask is not None:
        t = t * torch.from_numpy(mask)
    if reverse:
        t = t.flip(-1)
    if exclusive:
        t = torch.cat([torch.zeros_like(t[..., :1]), t[..., :-1]], dim=-1)
    y = torch.cumsum(t, dim=-1)
    return y.flip(-1) if reverse else y


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("kw", VARIANTS, ids=str)
def test_reference_is_within_its_bound_of_the_exact_variant_and_its_terms_count_the_summed_elements(kw, masked):
    g = _rng(1)
    x = (g.standard_normal((3, 40)) * np.exp2(g.integers(-20, 20, (3, 40)))).astype(np.float32)
    x[1] = 1.0 + 2.0**-20 * g.standard_normal(40)  # cancellation-free but long sums of nearly equal terms
    mask = g.random((3, 40)) < 0.5 if masked else None
    r = reference("cumsum", [x] if mask is None else [x, mask], axis=1, **kw)
    for i in range(3):
        sums, counts, abss = _exact_row(x[i], None if mask is None else mask[i], kw.get("reverse", False),
                                        kw.get("exclusive", False))
        for k in range(40):
            assert abs(Fraction(float(r.values[i, k])) - sums[k]) <= Fraction(float(r.error_bound[i, k])), (i, k)
            assert float(np.broadcast_to(r.aux["K"], x.shape)[i, k]) == counts[k]
            # (a float64 running sum of ≤ 40 terms: within 40 u of the exact sum of |x|)
            assert abs(Fraction(float(r.aux["abssum"][i, k])) - abss[k]) <= abss[k] * Fraction(40, 2**53)


def test_exclusive_starts_at_zero_and_reverse_ends_with_the_last_element_hand_derived():
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    assert reference("cumsum", [x], exclusive=True).values.tolist() == [[0, 1, 3, 6]]
    assert reference("cumsum", [x], reverse=True).values.tolist() == [[10, 9, 7, 4]]
    assert reference("cumsum", [x], reverse=True, exclusive=True).values.tolist() == [[9, 7, 4, 0]]
    m = np.array([[True, False, True, False]])
    assert reference("cumsum", [x, m]).values.tolist() == [[1, 1, 4, 4]]
    assert reference("cumsum", [x, m.astype(np.int64)], reverse=True).values.tolist() == [[4, 3, 3, 0]]


def test_a_masked_out_nan_still_propagates_as_torch_x_times_mask_does():
    x = np.array([[1.0, np.nan, 3.0]], np.float32)
    m = np.array([[True, False, True]])
    got = reference("cumsum", [x, m]).values
    want = _torch_truth(x, m, False, False).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0, 1:]).all() and got[0, 0] == 1.0


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("kw", VARIANTS[:3], ids=str)
def test_pieces_of_long_rows_have_the_bits_of_the_whole_rows(kw, masked, cached, monkeypatch):
    # check cuts long rows into pieces (RowPiece, in increasing start); a reverse piece is a piece of the
    # flipped rows, whose carried state is rebuilt (here in steps of 5 elements)
    monkeypatch.setattr(reduction, "_CARRY_STEP", 5)
    g = _rng(2)
    x = g.standard_normal((2, 150)).astype(np.float32)
    mask = g.random((2, 150)) < 0.7 if masked else None
    ins = [x] if mask is None else [x, mask]
    whole = reference("cumsum", ins, axis=1, **kw)
    full = {"axis": 0, "reverse": kw.get("reverse", False), "exclusive": kw.get("exclusive", False)}
    for i in range(2):
        cache: dict | None = {} if cached else None
        rows = [a[i] for a in ins]
        for a, b in ((0, 1), (1, 14), (14, 40), (40, 41), (41, 150)):
            r = validated_reference("cumsum", [t[a:b] for t in rows], full, cache=cache, piece=RowPiece(rows, a, b, (i,)))
            np.testing.assert_array_equal(r.values, whole.values[i, a:b])
            np.testing.assert_array_equal(r.error_bound, whole.error_bound[i, a:b])
            np.testing.assert_array_equal(r.aux["abssum"], whole.aux["abssum"][i, a:b])
            np.testing.assert_array_equal(np.broadcast_to(r.aux["K"], (b - a,)),
                                          np.broadcast_to(whole.aux["K"], x.shape)[i, a:b])


@pytest.mark.parametrize("backend", ["numpy", "torch:cpu", "jax:cpu"])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("kw", VARIANTS[:3], ids=str)
def test_backends_compute_the_variant_within_the_reference_bound_scale(backend, kw, masked):
    from numstd.backends import get

    be = get(backend)
    ok, why = be.available()  # ((True, "") or (False, the reason): a tuple, always truthy itself)
    if not ok:
        pytest.skip(f"{backend} unavailable: {why}")
    g = _rng(3)
    x = g.standard_normal((4, 300)).astype(np.float32)
    mask = g.random((4, 300)) < 0.5 if masked else None
    ins = [x] if mask is None else [x, mask]
    y = be.run("cumsum", ins, **kw)
    want = _torch_truth(x.astype(np.float64), mask, kw.get("reverse", False), kw.get("exclusive", False)).numpy()
    assert y.dtype == np.float32
    assert np.abs(y - want).max() <= 300 * 2.0**-23 * np.abs(x).sum(axis=1).max()


# ------------------------------------------------------------------------------------------
# standards: the published NS-CUMSUM-*@1 keep their meaning; the variants have their own
# ------------------------------------------------------------------------------------------


def _std_exists(key: str) -> bool:
    from numstd.catalog.registry import get_standard

    try:
        get_standard(key)
    except Exception:
        return False
    return True


def test_plain_calls_still_pick_the_published_inclusive_standard():
    x = _rng(4).standard_normal((8, 100)).astype(np.float32)
    y = _torch_truth(x, None, False, False).numpy()
    v = numstd.check(y, op="cumsum", inputs=[x])
    assert v.passed and v.standard_id.startswith("NS-CUMSUM-FP32@")
    v = numstd.check(y, op="cumsum", inputs=[x], reverse=False, exclusive=False)
    assert v.passed and v.standard_id.startswith("NS-CUMSUM-FP32@")


def test_a_published_inclusive_standard_refuses_a_variant_call():
    x = _rng(5).standard_normal((8, 100)).astype(np.float32)
    for kw, mask in ((dict(reverse=True), None), (dict(exclusive=True), None), ({}, np.ones((8, 100), bool))):
        y = _torch_truth(x, mask, kw.get("reverse", False), kw.get("exclusive", False)).numpy()
        with pytest.raises(ParameterError, match="does not cover cumsum"):
            numstd.check(y, op="cumsum", inputs=[x] if mask is None else [x, mask], standard="NS-CUMSUM-FP32@1", **kw)


def test_variants_without_a_standard_raise_standard_not_found():
    x = _rng(6).standard_normal((4, 50)).astype(np.float32)
    m = _rng(7).random((4, 50)) < 0.5
    with pytest.raises(StandardNotFound):  # (two variants at once: no standard selects both)
        numstd.check(_torch_truth(x, m, True, False).numpy(), op="cumsum", inputs=[x, m], reverse=True)
    with pytest.raises(StandardNotFound):
        numstd.check(_torch_truth(x, None, True, True).numpy(), op="cumsum", inputs=[x], reverse=True, exclusive=True)


@pytest.mark.parametrize("fmt,tdtype", [("float32", None), ("bfloat16", "bfloat16"), ("float16", "float16")])
@pytest.mark.parametrize("flag", ["reverse", "exclusive", "masked"])
def test_torch_passes_the_variant_standard_and_the_wrong_variant_fails(flag, fmt, tdtype):
    torch = pytest.importorskip("torch")
    key = f"NS-CUMSUM-{flag.upper()}-{ {'float32': 'FP32', 'bfloat16': 'BF16', 'float16': 'FP16'}[fmt] }@1"
    if not _std_exists(key):
        pytest.skip(f"{key} not published")
    from numstd.core.arrays import to_numpy

    g = _rng(8)
    x32 = g.standard_normal((8, 2000)).astype(np.float32)
    t = torch.from_numpy(x32).to(getattr(torch, tdtype)) if tdtype else torch.from_numpy(x32)
    x = to_numpy(t)
    kw = {} if flag == "masked" else {flag: True}
    mask = g.random((8, 2000)) < 0.5
    ins = [x, mask] if flag == "masked" else [x]

    def run(reverse: bool, exclusive: bool, masked: bool = False):
        if masked:
            return torch.cumsum(t * torch.from_numpy(mask), -1)
        if reverse:
            return torch.cumsum(t.flip(-1), -1).flip(-1)
        if exclusive:
            return torch.cumsum(torch.cat([torch.zeros_like(t[:, :1]), t[:, :-1]], -1), -1)
        return torch.cumsum(t, -1)

    good = run(flag == "reverse", flag == "exclusive", flag == "masked")
    v = numstd.check(good, op="cumsum", inputs=ins, **kw)
    assert v.passed and v.standard_id.startswith(key[:-1]), v.message  # (@1, or the fp32 @2 of 2026-12-06)
    v_small = numstd.check(good, op="cumsum", inputs=ins, chunk_size=300, **kw)  # pieces of rows
    assert v_small.passed and v_small.normalized_max == v.normalized_max and v_small.ulp.max == v.ulp.max
    bad = run(False, False)  # the variant ignored: the plain forward inclusive scan of x
    v = numstd.check(bad, op="cumsum", inputs=ins, **kw)
    assert not v.passed and "Worst element" in v.message
    assert not numstd.check(bad, op="cumsum", inputs=ins, chunk_size=300, **kw).passed


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------


def test_bad_variant_parameters_and_masks_say_what_is_allowed():
    x = np.zeros((2, 5), np.float32)
    with pytest.raises(ParameterError, match="True or False"):
        reference("cumsum", [x], reverse=1)
    with pytest.raises(ParameterError, match="True or False"):
        reference("cumsum", [x], exclusive="yes")
    with pytest.raises(ShapeError, match="mask must have x's shape"):
        reference("cumsum", [x, np.ones((2, 4), bool)])
    with pytest.raises(DtypeError, match="mask is boolean"):
        reference("cumsum", [x, np.ones((2, 5), np.float32)])
    with pytest.raises(ParameterError, match="integers 0 and 1"):
        reference("cumsum", [x, np.full((2, 5), 2, np.int64)])
    with pytest.raises(ParameterError, match="unknown parameter"):
        reference("cumsum", [x], reversed=True)


def test_corpus_on_a_masked_case_legit_within_the_reference_bound_scale_and_bugs_far_outside():
    # every legitimate scan of the corpus runs on x·mask: within 4·K·u·Σ|x·mask| of the exact masked
    # sums (fractions), and the variant-ignoring bug (the plain scan of x) is far outside
    from numstd.catalog.suites import make_case
    from numstd.core.formats import FORMATS
    from numstd.corpus import input_formats, variants_for

    case = make_case("cumsum", (4, 300), "normal+mask", 5, ["float32"], {"axis": -1})
    x, mask = case.inputs
    exact = np.array([[float(s) for s in _exact_row(x[i], mask[i], False, False)[0]] for i in range(4)])
    absm = np.cumsum(np.abs(x.astype(np.float64) * mask), axis=-1)
    tol = 4 * 300 * 2.0**-24 * absm + 2.0**-24 * np.abs(exact)
    f32 = FORMATS["float32"]
    full = {"axis": 1, "reverse": False, "exclusive": False}
    fmts = input_formats([x, mask])
    for v in variants_for("cumsum"):
        if v.applies is not None and not v.applies(f32, fmts, full):  # (torch-cpu: where torch is installed)
            continue
        y = np.asarray(v.fn([x, mask], full, f32, f32, 11), np.float64)
        err = np.abs(y - exact)
        if v.legit:
            assert (err <= tol).all(), v.name
        elif v.name == "variant-ignored":
            assert v.applicable([x, mask], full, f32) and (err > 100 * tol).any()
