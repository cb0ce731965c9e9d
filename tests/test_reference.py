"""Tests of numstd.reference: every op against mpmath at high precision.

Independent truth: the op's formula evaluated in mpmath with exact float inputs (``mpf(float(x))``)
inside a local ``mpmath.workprec`` context (sums of float32 values are exact at 320 bits).  For
every element ``|values - exact| <= error_bound`` must hold, and the bound must be small enough to
matter: below ``2**-20`` of the float32 ulp of the exact value wherever the op is well conditioned
and for the cancelling sums and products the compensated algorithms exist for.  Inputs: random,
cancelling (``±1e8`` with small terms, large mean and tiny variance), huge dynamic range, near
overflow and underflow (softmax logits ``±1e4``, ``exp`` near 709 and -745, ``log`` of subnormals).
"""

from __future__ import annotations

import math

import ml_dtypes
import mpmath
import numpy as np
import pytest

from numstd.reference import Reference, reference
from numstd.reference import contraction, elementwise
from numstd.reference.summation import pairwise_sum, prefix_sum, two_prod, two_sum
from numstd.ops.activation import C_EXPM1
from numstd.ops import get_op

PREC = 320  # bits: exact for any sum of float32 values of the sizes used here
TIGHT = 2.0**-20  # "tight enough to matter": fraction of the float32 ulp
MM_TIGHT = 2.0**-10  # what matmul promises (FLAG_FRACTION): products are refined down to it


def ulp32(r: float) -> float:
    """float32 spacing at the real value r (constant below the smallest normal)."""
    if r == 0 or not math.isfinite(r):
        return 2.0**-149
    return 2.0 ** (max(math.frexp(abs(r))[1] - 1, -126) - 23)


def mpf_array(x: np.ndarray) -> np.ndarray:
    """Exact mpmath copies of the (float64-representable) values of x."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    return np.array([mpmath.mpf(float(v)) for v in flat], dtype=object).reshape(np.shape(x))


def assert_bounded(ref: Reference, exact: np.ndarray, tight: float | None = TIGHT,
                   floor: np.ndarray | float = 0.0) -> float:
    """|values - exact| <= bound everywhere; bound <= tight * ulp32(exact) + floor; returns max err/bound."""
    vals = np.asarray(ref.values, dtype=np.float64)
    bnd = np.broadcast_to(ref.error_bound, vals.shape).ravel()
    fl = np.broadcast_to(np.asarray(floor, dtype=np.float64), vals.shape).ravel()
    worst = 0.0
    assert vals.shape == np.shape(exact)
    for v, b, e, f in zip(vals.ravel(), bnd, np.asarray(exact, dtype=object).ravel(), fl):
        if not mpmath.isfinite(e):
            assert (math.isnan(v) and mpmath.isnan(e)) or v == float(e), (v, e)
            continue
        err = abs(mpmath.mpf(float(v)) - e)
        assert err <= mpmath.mpf(float(b)), \
            f"value {v!r}: error {mpmath.nstr(err, 5)} > bound {b!r} (exact {mpmath.nstr(e, 20)})"
        if b > 0:
            worst = max(worst, float(err / mpmath.mpf(float(b))))
        if tight is not None:
            assert b <= tight * ulp32(float(e)) + f, f"bound {b!r} too loose for exact {mpmath.nstr(e, 10)}"
    return worst


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------------------------
# building blocks
# ------------------------------------------------------------------------------------------


def test_two_sum_and_two_prod_are_error_free():
    g = rng(0)
    a = g.standard_normal(500) * 10.0 ** g.integers(-20, 20, 500)
    b = g.standard_normal(500) * 10.0 ** g.integers(-20, 20, 500)
    s, e = two_sum(a, b)
    p, f = two_prod(a, b)
    with mpmath.workprec(PREC):
        for i in range(500):
            A, B = mpmath.mpf(a[i]), mpmath.mpf(b[i])
            assert mpmath.mpf(s[i]) + mpmath.mpf(e[i]) == A + B
            assert mpmath.mpf(p[i]) + mpmath.mpf(f[i]) == A * B
            assert abs(e[i]) <= 2.0**-53 * abs(s[i]) and abs(f[i]) <= 2.0**-53 * abs(p[i])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 1000, 1025])
def test_pairwise_and_prefix_sums_cancel_exactly_enough(n):
    g = rng(n)
    x = (g.choice([-1e8, 1e8, 1.0, -1e-8], n) * g.uniform(0.5, 1.5, n)).astype(np.float32).astype(np.float64)
    hi, lo, depth = pairwise_sum(x[None], -1)
    ph, pl, chain = prefix_sum(x[None], -1)
    assert depth == (math.ceil(math.log2(n)) if n > 1 else 0)
    assert chain >= 2 * math.isqrt(n)
    with mpmath.workprec(PREC):
        exact = mpmath.fsum(mpmath.mpf(v) for v in x)
        S = sum(abs(x))
        assert abs(mpmath.mpf(hi[0]) + mpmath.mpf(lo[0]) - exact) <= 4 * depth * 2.0**-106 * S
        run = mpmath.mpf(0)
        run_abs = 0.0
        for i in range(n):
            run += mpmath.mpf(x[i])
            run_abs += abs(x[i])
            assert abs(mpmath.mpf(ph[0, i]) + mpmath.mpf(pl[0, i]) - run) <= 4 * chain * 2.0**-106 * run_abs * 1.01


# ------------------------------------------------------------------------------------------
# sum, mean, cumsum
# ------------------------------------------------------------------------------------------


def _cancelling(g: np.random.Generator, shape: tuple) -> np.ndarray:
    """float32 values: ±1e8 that cancel in pairs, plus small terms of both signs."""
    big = g.choice([-1.0, 1.0], shape) * 1e8 * g.uniform(1, 2, shape)
    x = np.where(g.uniform(size=shape) < 0.5, big, g.standard_normal(shape) * 1e-3)
    flat = x.reshape(-1, shape[-1])
    flat[:, 1::2] = np.where(np.abs(flat[:, 0::2][:, : flat[:, 1::2].shape[1]]) > 1e7,
                             -flat[:, 0::2][:, : flat[:, 1::2].shape[1]], flat[:, 1::2])
    return flat.reshape(shape).astype(np.float32)


def _wide(g: np.random.Generator, shape: tuple) -> np.ndarray:
    """float32 values of both signs spanning 1e-30 .. 1e30."""
    return (g.choice([-1.0, 1.0], shape) * 10.0 ** g.uniform(-30, 30, shape)).astype(np.float32)


SUM_INPUTS = {
    "normal": lambda g: g.standard_normal((3, 257)).astype(np.float32),
    "cancel": lambda g: _cancelling(g, (4, 300)),
    "wide": lambda g: _wide(g, (3, 200)),
    "bf16": lambda g: (g.standard_normal((2, 100)) * 100).astype(ml_dtypes.bfloat16),
    "fp8": lambda g: g.standard_normal((2, 64)).astype(ml_dtypes.float8_e4m3fn),
    "float64": lambda g: np.concatenate([g.standard_normal((2, 50)) * 1e16, g.standard_normal((2, 50))], 1),
}


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 4096, 5001])
def test_halving_sum_bound_holds(n):
    from numstd.reference.summation import halving_sum

    g = rng(n)
    x = np.abs(g.standard_normal((6, n))) * np.exp2(g.integers(-30, 30, (6, n)))
    x[0] = 0.0
    s, d, gam = halving_sum(x)
    assert d == (0 if n == 1 else math.ceil(math.log2(n))) and s.shape == (6,)
    ctx = mpmath.MPContext()
    ctx.prec = 300
    for row, got in zip(x, s):
        exact = ctx.fsum(ctx.mpf(float(v)) for v in row)
        assert abs(ctx.mpf(float(got)) - exact) <= ctx.mpf(gam) * exact


def _mp_sum(rows: np.ndarray) -> np.ndarray:
    return np.array([mpmath.fsum(mpf_array(r)) for r in rows], dtype=object)


@pytest.mark.parametrize("kind", sorted(SUM_INPUTS))
def test_sum_and_mean_along_last_axis(kind):
    x = SUM_INPUTS[kind](rng(1))
    with mpmath.workprec(PREC):
        exact = _mp_sum(x)
        r = reference("sum", [x], axis=-1)
        floor = 2.0**-95 * r.aux["abssum"]  # exact zeros: the bound is u^2-relative to sum|x|
        assert_bounded(r, exact, floor=floor)
        m = reference("mean", [x], axis=1, keepdims=True)
        assert m.values.shape == (x.shape[0], 1)
        assert_bounded(m, (exact / x.shape[1]).reshape(-1, 1), floor=floor.reshape(-1, 1) / x.shape[1])


def test_sum_classic_cancellation_is_exact_to_u_squared():
    x = np.array([1e8, 1.0, -1e8, 1e-8, -1e-8, 3.0], dtype=np.float32)
    r = reference("sum", [x])
    assert float(r.values) == 4.0 and r.error_bound <= 2.0**-60
    assert float(r.aux["K"]) == 6.0 and float(r.aux["abssum"]) == float(np.sum(np.abs(x.astype(np.float64))))


def test_sum_over_several_axes_and_all_axes():
    x = rng(2).standard_normal((3, 4, 5)).astype(np.float16)
    with mpmath.workprec(PREC):
        r = reference("sum", [x], axis=(0, 2))
        exact = np.array([mpmath.fsum(mpf_array(x[:, j, :]).ravel()) for j in range(4)], dtype=object)
        assert_bounded(r, exact)
        r_all = reference("mean", [x], keepdims=True)
        assert r_all.values.shape == (1, 1, 1)
        assert_bounded(r_all, np.array(mpmath.fsum(mpf_array(x).ravel()) / x.size).reshape(1, 1, 1))


@pytest.mark.parametrize("kind", ["normal", "cancel", "wide"])
def test_cumsum(kind):
    x = SUM_INPUTS[kind](rng(3))[:, :150]
    with mpmath.workprec(PREC):
        exact = np.empty(x.shape, dtype=object)
        for i, row in enumerate(mpf_array(x)):
            run = mpmath.mpf(0)
            for j, v in enumerate(row):
                run += v
                exact[i, j] = run
        r = reference("cumsum", [x], axis=1)
        assert_bounded(r, exact, floor=2.0**-90 * r.aux["abssum"])
        assert r.aux["K"].shape == (1, x.shape[1]) and r.aux["K"][0, -1] == x.shape[1]
    r0 = reference("cumsum", [x.T], axis=0)
    np.testing.assert_array_equal(r0.values, r.values.T)


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("kind", sorted(SUM_INPUTS))
def test_cumsum_cut_in_pieces_is_within_its_bound_and_has_the_bits_of_the_whole_scan(kind, cached, monkeypatch):
    # check judges long rows of cumsum in pieces (RowPiece): each piece continues the blocked scan
    # from the state the piece before it left (cached) or, without it, rebuilds that state from the
    # row's start (in steps of 5 elements here).  Pieces start and end inside the scan's blocks of
    # ceil(sqrt(K)) = 8 to 13 elements; each must be within its bound of the exact prefix sums (fractions) and
    # equal the whole row's reference bit for bit
    from fractions import Fraction

    from numstd.reference import RowPiece, reduction, validated_reference

    monkeypatch.setattr(reduction, "_CARRY_STEP", 5)
    x = SUM_INPUTS[kind](rng(3))[:, :150]
    whole = reference("cumsum", [x], axis=1)
    for i, row in enumerate(x):
        exact = np.cumsum([Fraction(float(v)) for v in row])  # exact prefix sums
        cache: dict | None = {} if cached else None
        for a, b in ((0, 1), (1, 14), (14, 40), (40, 41), (41, len(row))):
            r = validated_reference("cumsum", [row[a:b]], {"axis": 0}, cache=cache, piece=RowPiece([row], a, b, (i,)))
            for v, bd, e in zip(r.values, r.error_bound, exact[a:b]):
                assert abs(Fraction(float(v)) - e) <= Fraction(float(bd)), (kind, i, a, float(v), float(e))
            np.testing.assert_array_equal(r.values, whole.values[i, a:b])
            np.testing.assert_array_equal(r.error_bound, whole.error_bound[i, a:b])
            np.testing.assert_array_equal(r.aux["abssum"], whole.aux["abssum"][i, a:b])
            np.testing.assert_array_equal(r.aux["K"], np.arange(a + 1, b + 1))


@pytest.mark.parametrize("kind", ["smallvar", "normal", "underflow"])
def test_cumprod(kind):
    """Prefix products against mpmath; the exponent is tracked apart, so no prefix under/overflows
    in the reference even where float64's own cumprod would (``underflow``: factors ~1e-30)."""
    g = rng(4)
    x = {"smallvar": lambda: 1 + 0.01 * g.standard_normal((3, 400)),
         "normal": lambda: g.standard_normal((3, 400)),
         "underflow": lambda: np.where(np.arange(400) % 2 == 0, 1e-30, 1e30) * g.uniform(0.5, 2, (3, 400))}[kind]()
    x = x.astype(np.float32)
    with mpmath.workprec(PREC):
        exact = np.empty(x.shape, dtype=object)
        for i, row in enumerate(mpf_array(x)):
            run = mpmath.mpf(1)
            for j, v in enumerate(row):
                run *= v
                exact[i, j] = run
        r = reference("cumprod", [x], axis=1)
        assert_bounded(r, exact, tight=None)
    assert r.aux["K"].shape == (1, 400) and r.aux["K"][0, -1] == 400
    np.testing.assert_array_equal(reference("cumprod", [x.T], axis=0).values, r.values.T)
    if kind == "underflow":  # float64 cumprod loses these rows; the reference does not
        assert np.isfinite(r.values).all() and (np.abs(r.values) > 0).all()


def _exact_f32(x: np.ndarray) -> list[int]:
    """float32 values as exact integers in units of 2**-149 (the smallest float32 subnormal)."""
    return [int(np.ldexp(float(v), 149)) for v in np.asarray(x, dtype=np.float64).ravel()]


def test_long_axis_sum_and_cumsum_exactly_with_integers():
    """n = 5000 per row, every output checked against exact integer arithmetic."""
    from fractions import Fraction
    from itertools import accumulate

    x = _cancelling(rng(30), (3, 5000))
    s = reference("sum", [x], axis=1)
    c = reference("cumsum", [x], axis=1)
    unit = Fraction(1, 2**149)
    for i in range(3):
        prefix = list(accumulate(_exact_f32(x[i])))
        assert abs(Fraction(float(s.values[i])) - prefix[-1] * unit) <= Fraction(float(s.error_bound[i]))
        vals, bnds = c.values[i], c.error_bound[i]
        for j in range(0, 5000, 7):
            exact = prefix[j] * unit
            assert abs(Fraction(float(vals[j])) - exact) <= Fraction(float(bnds[j]))
            assert bnds[j] <= TIGHT * ulp32(float(exact)) + 2.0**-90 * c.aux["abssum"][i, j]


def test_sum_propagates_specials():
    x = np.array([[1.0, np.inf, 2.0], [np.inf, -np.inf, 0.0], [np.nan, 1.0, 1.0], [1.0, 2.0, 3.0]])
    r = reference("sum", [x], axis=1)
    np.testing.assert_array_equal(r.values[:2], [np.inf, np.nan])
    assert np.isnan(r.values[2]) and r.values[3] == 6.0
    np.testing.assert_array_equal(r.error_bound[:3], 0.0)
    c = reference("cumsum", [x], axis=1)
    np.testing.assert_array_equal(c.values[0], [1.0, np.inf, np.inf])


# ------------------------------------------------------------------------------------------
# matmul, linear
# ------------------------------------------------------------------------------------------


def _mp_matmul(A: np.ndarray, B: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    Am, Bm = mpf_array(A), mpf_array(B)
    out = np.empty((A.shape[0], B.shape[1]), dtype=object)
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            extra = 0 if bias is None else mpmath.mpf(float(bias[j]))
            out[i, j] = mpmath.fsum(a * b for a, b in zip(Am[i], Bm[:, j])) + extra
    return out


def _cancelling_product(g: np.random.Generator, m: int, k: int, n: int, dtype=np.float32):
    """A = [X, X], B = [Y; -Y'] with Y' = Y rounded after a small change: A @ B cancels."""
    X = (g.standard_normal((m, k // 2)) * 1e3).astype(dtype)
    Y = g.standard_normal((k // 2, n)).astype(dtype)
    Y2 = (Y.astype(np.float64) * (1 + 1e-6 * g.standard_normal(Y.shape))).astype(dtype)
    return np.concatenate([X, X], 1), np.concatenate([Y, -Y2], 0)


def test_matmul_random_float32():
    g = rng(4)
    A = g.standard_normal((6, 37)).astype(np.float32)
    B = g.standard_normal((37, 5)).astype(np.float32)
    with mpmath.workprec(PREC):
        r = reference("matmul", [A, B])
        assert_bounded(r, _mp_matmul(A, B), tight=MM_TIGHT)
    # absdot (float32 GEMM, inflated) is an upper bound on the exact sum of |a||b|, within 2 K 2**-24
    exact = _exact_abs_product(A, B)
    assert np.all(r.aux["absdot"] >= exact)
    assert np.all(r.aux["absdot"] <= exact * (1 + 2.01 * 37 * 2.0**-24))
    assert float(r.aux["K"]) == 37


def _exact_abs_product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """sum_k |a_ik b_kj| in a 200-bit mpmath context of its own, rounded up to float64."""
    ctx = mpmath.MPContext()
    ctx.prec = 200
    a64, b64 = np.abs(A.astype(np.float64)), np.abs(B.astype(np.float64))
    out = np.empty((a64.shape[0], b64.shape[1]))
    for i, row in enumerate(a64):
        for j, col in enumerate(b64.T):
            s = ctx.fsum(ctx.mpf(float(x)) * ctx.mpf(float(y)) for x, y in zip(row, col))
            out[i, j] = float(ctx.mpf(s))
            if ctx.mpf(out[i, j]) < s:
                out[i, j] = np.nextafter(out[i, j], np.inf)
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16, np.float64])
def test_abs_product_is_an_upper_bound(dtype):
    from numstd.reference.contraction import abs_product, operand

    g = rng(11)
    K = 3000
    A = (g.standard_normal((7, K)) * np.exp2(g.integers(-10, 10, (7, K)))).astype(dtype)
    B = g.standard_normal((K, 3)).astype(dtype)
    (_, absA), (_, absB) = operand(A), operand(B)
    assert (absA.dtype == np.float32) == (dtype != np.float64)
    got = abs_product(absA, absB)
    exact = _exact_abs_product(A, B)
    assert np.all(got >= exact)
    assert np.all(got <= exact * (1 + 2.01 * K * 2.0**-24) + 2.01 * K * 2.0**-126)
    # a product that would overflow float32 is taken in float64
    big = np.full((2, 4), 2.0**100, dtype=np.float32)
    got = abs_product(big, big.T.copy())
    assert np.all((got >= 4 * 2.0**200) & (got <= 4 * 2.0**200 * (1 + 1e-14)))
    # float32 subnormals (dropped by a denormals-are-zero mode) also go to float64
    tiny = np.full((2, 4), 2.0**-140, dtype=np.float32)
    got = abs_product(tiny, np.full((4, 2), 2.0**60, np.float32))
    assert np.all((got >= 4 * 2.0**-80) & (got <= 4 * 2.0**-80 * (1 + 1e-14)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_matmul_cancellation_is_refined(dtype):
    A, B = _cancelling_product(rng(5), 5, 64, 4, dtype)
    r = reference("matmul", [A, B])
    # stage 1 alone would be gamma_K |A||B|: far above 2**-10 ulp for these elements
    assert np.all(contraction.gamma(64) * r.aux["absdot"] > 2.0**-10 * np.array(
        [[ulp32(v) for v in row] for row in r.values]))
    with mpmath.workprec(PREC):
        # exact zeros (bf16 rounding can make Y2 == Y) cannot be within an ulp fraction: u^2 |A||B|
        assert_bounded(r, _mp_matmul(A, B), tight=MM_TIGHT, floor=2.0**-90 * r.aux["absdot"])


def test_matmul_ozaki_stage_is_exact_where_it_claims():
    # call stage 2 directly: T1 must be exact and the bound must hold on a dynamic-range mix
    g = rng(6)
    A, B = _cancelling_product(g, 7, 40, 6)
    A = A.astype(np.float64) * 10.0 ** g.integers(-3, 3, (7, 1))
    bias = g.standard_normal(6)
    v, lo, err = contraction._ozaki(A, B.astype(np.float64), bias, np.arange(7))
    b = np.abs(lo) + err
    with mpmath.workprec(PREC):
        exact = _mp_matmul(A, B, bias)
        for i in range(7):
            for j in range(6):
                assert abs(mpmath.mpf(v[i, j]) - exact[i, j]) <= b[i, j]
    stage1 = contraction.gamma(41) * (np.abs(A) @ np.abs(B.astype(np.float64)) + np.abs(bias))
    assert np.all(b < stage1 * 2.0**-15 + 2.0**-52 * np.abs(v))  # + the final rounding of values


def test_matmul_large_cancelling_block_goes_through_stage_2():
    # 64 x 64 outputs, K = 2048, every element cancels: more per row than stage 3 would take
    A, B = _cancelling_product(rng(7), 64, 2048, 96)
    assert 96 > contraction.EXACT_PER_ROW
    r = reference("matmul", [A, B])
    ulps = np.vectorize(ulp32)(r.values)
    assert np.all(r.error_bound <= 2.0**-10 * ulps)
    idx = [(0, 0), (5, 17), (63, 63), (31, 2)]
    with mpmath.workprec(PREC):
        exact = np.array([mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(A[i], B[:, j]))
                          for i, j in idx], dtype=object)
    sub = Reference("matmul", r.values[tuple(np.array(idx).T)], r.error_bound[tuple(np.array(idx).T)], {}, {})
    assert_bounded(sub, exact, tight=2.0**-10)


def test_matmul_random_keeps_its_promise_at_size():
    """K = 1024 normal inputs: ~4 % of the outputs cancel enough to need refinement."""
    g = rng(31)
    A = g.standard_normal((128, 1024)).astype(np.float32)
    B = g.standard_normal((1024, 96)).astype(np.float32)
    r = reference("matmul", [A, B])
    stage1 = contraction.gamma(1024) * r.aux["absdot"]
    ulps = np.vectorize(ulp32)(r.values)
    assert np.mean(stage1 > 2.0**-10 * ulps) > 0.01  # the refinement was needed
    assert np.all(r.error_bound <= 2.0**-10 * ulps)
    worst = np.argsort(np.abs(r.values).ravel())[:6]
    with mpmath.workprec(PREC):
        exact = np.array([mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in
                                      zip(A[k // 96], B[:, k % 96])) for k in worst], dtype=object)
    assert_bounded(Reference("matmul", r.values.ravel()[worst], r.error_bound.ravel()[worst], {}, {}),
                   exact, tight=2.0**-10)


def test_matmul_wide_dynamic_range_and_float64_extremes():
    g = rng(32)
    A, B = _wide(g, (6, 50)), _wide(g, (50, 5))
    r = reference("matmul", [A, B])
    with mpmath.workprec(PREC):
        assert_bounded(r, _mp_matmul(A, B), tight=MM_TIGHT, floor=2.0**-90 * r.aux["absdot"])
    # float64 near underflow: no Ozaki split (it would underflow); products are not exact
    A64 = g.standard_normal((4, 30)) * 1e-160
    B64 = g.standard_normal((30, 3)) * 1e-160
    A64[:, 1::2] = -A64[:, 0::2]
    r64 = reference("matmul", [A64, B64])
    with mpmath.workprec(PREC):
        assert_bounded(r64, _mp_matmul(A64, B64), tight=None)


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((5, 3, 4), (4, 2))])
def test_matmul_shapes_and_broadcasting(sa, sb):
    g = rng(8)
    A = g.standard_normal(sa).astype(np.float32)
    B = g.standard_normal(sb).astype(np.float32)
    r = reference("matmul", [A, B])
    expect = np.matmul(A.astype(np.float64), B.astype(np.float64))
    assert r.values.shape == expect.shape == r.aux["absdot"].shape
    A2 = A if A.ndim > 1 else A[None]
    B2 = B if B.ndim > 1 else B[:, None]
    full = np.matmul(A2.astype(np.float64), B2.astype(np.float64))
    flat_vals = r.values.reshape(full.shape)
    with mpmath.workprec(PREC):
        for idx in np.ndindex(*full.shape[:-2]):
            a = np.broadcast_to(A2, full.shape[:-2] + A2.shape[-2:])[idx]
            b = np.broadcast_to(B2, full.shape[:-2] + B2.shape[-2:])[idx]
            bound = np.broadcast_to(r.error_bound, r.values.shape).reshape(full.shape)[idx]
            sub = Reference("matmul", flat_vals[idx], bound, {}, {})
            assert_bounded(sub, _mp_matmul(a, b), tight=MM_TIGHT)


def test_linear_with_cancelling_bias():
    g = rng(9)
    x = g.standard_normal((3, 4, 16)).astype(np.float32)
    W = g.standard_normal((5, 16)).astype(np.float32)
    b = -(x[0, 0].astype(np.float64) @ W.T.astype(np.float64)).astype(np.float32)  # row (0, 0) cancels
    r = reference("linear", [x, W, b])
    assert r.values.shape == (3, 4, 5) and float(r.aux["K"]) == 16
    with mpmath.workprec(PREC):
        exact = np.stack([_mp_matmul(x[i], W.T, b) for i in range(3)])
        assert_bounded(r, exact, tight=MM_TIGHT)
    absdot = _exact_abs_product(x.reshape(-1, 16), W.T).reshape(3, 4, 5) + np.abs(b)
    assert np.all(r.aux["absdot"] >= absdot) and np.all(r.aux["absdot"] <= absdot * (1 + 2.01 * 16 * 2.0**-24))
    r0 = reference("linear", [x, W])
    with mpmath.workprec(PREC):
        assert_bounded(r0, np.stack([_mp_matmul(x[i], W.T) for i in range(3)]), tight=MM_TIGHT)


# ------------------------------------------------------------------------------------------
# softmax, log_softmax, cross_entropy
# ------------------------------------------------------------------------------------------


def _mp_softmax_rows(x: np.ndarray, log: bool) -> np.ndarray:
    """softmax / log_softmax rows in mpmath; log Z = log1p(sum without one maximum), which keeps
    log_softmax of a dominant logit exact even where Z - 1 is below the working precision."""
    out = np.empty(x.shape, dtype=object)
    for i, row in enumerate(mpf_array(x)):
        live = [j for j, v in enumerate(row) if mpmath.isfinite(v)]
        top = max(live, key=lambda j: row[j])
        m = row[top]
        rest = mpmath.fsum(mpmath.exp(row[j] - m) for j in live if j != top)
        lse = mpmath.log1p(rest)
        for j, v in enumerate(row):
            if not mpmath.isfinite(v):
                out[i, j] = mpmath.mpf("-inf") if log else mpmath.mpf(0)
            else:
                out[i, j] = (v - m) - lse if log else mpmath.exp(v - m) / (1 + rest)
    return out


SOFTMAX_INPUTS = {
    "normal": lambda g: g.standard_normal((4, 33)).astype(np.float32),
    "logits_1e4": lambda g: (g.choice([-1e4, 1e4], (3, 20)) + g.standard_normal((3, 20))).astype(np.float32),
    "dominant": lambda g: np.concatenate([np.zeros((3, 1)), -30 - 5 * g.uniform(size=(3, 40))], 1).astype(np.float32),
    "underflow": lambda g: np.concatenate([np.zeros((2, 1)), -g.uniform(700, 760, (2, 30))], 1),
    "wide": lambda g: (g.standard_normal((3, 25)) * 10.0 ** g.uniform(-20, 3, (3, 25))).astype(np.float32),
    "masked": lambda g: np.where(g.uniform(size=(3, 12)) < 0.3, -np.inf, g.standard_normal((3, 12))).astype(np.float16),
    "ties": lambda g: np.array([[2.0, 2.0, 2.0, -1.0], [5.0, 5.0, 5.0, 5.0]], dtype=np.float32),
}


@pytest.mark.parametrize("kind", sorted(SOFTMAX_INPUTS))
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_family(op, kind):
    x = SOFTMAX_INPUTS[kind](rng(10))
    with mpmath.workprec(PREC):
        r = reference(op, [x])
        assert_bounded(r, _mp_softmax_rows(x, op == "log_softmax"))
    assert r.aux["devmean"].shape == (x.shape[0], 1) and float(r.aux["K"]) == x.shape[1]
    if op == "log_softmax":
        assert r.aux["lse"].shape == (x.shape[0], 1)


def test_log_softmax_keeps_relative_accuracy_of_tiny_outputs():
    x = np.array([[0.0, -40.0, -41.0, -45.0]])
    r = reference("log_softmax", [x])
    with mpmath.workprec(PREC):
        exact = _mp_softmax_rows(x, True)
    assert abs(float(exact[0, 0])) < 1e-17
    assert abs(r.values[0, 0] - float(exact[0, 0])) <= 8 * 2.0**-53 * abs(float(exact[0, 0]))


def _cuts(K: int) -> list[tuple[int, int]]:
    """Pieces of a row of K elements that start and end inside blocks of any small size."""
    edges = sorted({0, 1, K // 3, K // 2 + 1, K})
    return [(a, b) for a, b in zip(edges, edges[1:]) if a < b]


@pytest.mark.parametrize("kind", sorted(SOFTMAX_INPUTS))
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rows_summed_in_blocks_and_cut_in_pieces_are_within_their_bound(op, kind, monkeypatch):
    # rows longer than SOFTMAX_BLOCK are summed in fixed blocks and check judges long rows in pieces
    # (RowPiece: each piece's reference from its whole row's statistics).  With the block lowered to
    # 3 elements every row here has several blocks; each piece must be within its bound of mpmath's
    # exact softmax of the whole row, and its K the whole row's
    from numstd.reference import RowPiece, validated_reference
    from numstd.reference import softmax as sm

    monkeypatch.setattr(sm, "SOFTMAX_BLOCK", 3)
    x = SOFTMAX_INPUTS[kind](rng(10))
    K = x.shape[1]
    with mpmath.workprec(PREC):
        exact = _mp_softmax_rows(x, op == "log_softmax")
        blocked = reference(op, [x])  # whole rows, blocked sums
        assert_bounded(blocked, exact)
        for i in range(x.shape[0]):
            for a, b in _cuts(K):
                r = validated_reference(op, [x[i, a:b]], {"axis": 0}, piece=RowPiece([x[i]], a, b, (i,)))
                assert_bounded(r, exact[i, a:b])
                assert float(r.aux["K"]) == K


@pytest.mark.parametrize("block", [None, 16])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_piece_of_a_row_has_the_bits_of_the_whole_row(op, block, monkeypatch):
    # what makes check's verdict independent of its chunk size: a piece's values, bounds and model
    # terms are those of the same elements of the whole row, bit for bit (block None: rows judged
    # whole in one pass; 16: rows of several blocks)
    from numstd.reference import RowPiece, validated_reference
    from numstd.reference import softmax as sm

    if block is not None:
        monkeypatch.setattr(sm, "SOFTMAX_BLOCK", block)
    x = (rng(12).standard_normal((3, 100)) * 5).astype(np.float32)
    x[1, 7:30] = -np.inf
    whole = reference(op, [x])
    for i in range(3):
        for a, b in _cuts(100) + [(0, 100)]:
            r = validated_reference(op, [x[i, a:b]], {"axis": 0}, piece=RowPiece([x[i]], a, b, (i,)))
            np.testing.assert_array_equal(r.values, whole.values[i, a:b])
            np.testing.assert_array_equal(r.error_bound, whole.error_bound[i, a:b])
            for k, v in whole.aux.items():
                np.testing.assert_array_equal(r.aux[k], v[i, a:b] if k == "dev" else (v[i] if v.ndim else v))


def test_softmax_other_axis_matches_transpose():
    x = rng(11).standard_normal((5, 3)).astype(np.float32)
    a = reference("softmax", [x], axis=0)
    b = reference("softmax", [x.T], axis=1)
    np.testing.assert_array_equal(a.values, b.values.T)
    np.testing.assert_array_equal(a.error_bound, b.error_bound.T)
    assert a.aux["devmean"].shape == (1, 3)


def test_softmax_rows_of_specials_give_nan_like_torch():
    x = np.array([[-np.inf, -np.inf], [np.inf, 0.0], [np.nan, 0.0]])
    r = reference("softmax", [x])
    assert np.isnan(r.values).all() and np.all(r.error_bound == 0)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_cross_entropy(reduction, scale):
    g = rng(12)
    x = (g.standard_normal((6, 9)) * scale).astype(np.float32)
    t = g.integers(0, 9, 6)
    r = reference("cross_entropy", [x, t], reduction=reduction)
    with mpmath.workprec(PREC):
        logp = _mp_softmax_rows(x, True)
        losses = np.array([-logp[i, t[i]] for i in range(6)], dtype=object)
        exact = {"none": losses, "sum": np.array(mpmath.fsum(losses)), "mean": np.array(mpmath.fsum(losses) / 6)}
        assert_bounded(r, exact[reduction])
    assert np.shape(r.aux["lse"]) == r.values.shape and float(r.aux["K"]) == 9


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_cross_entropy_of_rows_longer_than_a_block_is_within_its_bound(reduction, monkeypatch):
    # long rows of logits (a vocabulary) get their statistics from fixed blocks of SOFTMAX_BLOCK,
    # lowered here to 4 classes so that each row of 9 has three, one of them short; a masked logit
    # and a dominant one
    from numstd.reference import softmax as sm

    monkeypatch.setattr(sm, "SOFTMAX_BLOCK", 4)
    g = rng(12)
    x = (g.standard_normal((6, 9)) * 3).astype(np.float32)
    x[1, 2] = -np.inf
    x[2, 8] = 40.0
    t = g.integers(0, 9, 6)
    t[1] = 3
    r = reference("cross_entropy", [x, t], reduction=reduction)
    with mpmath.workprec(PREC):
        logp = _mp_softmax_rows(x, True)
        losses = np.array([-logp[i, t[i]] for i in range(6)], dtype=object)
        exact = {"none": losses, "sum": np.array(mpmath.fsum(losses)), "mean": np.array(mpmath.fsum(losses) / 6)}
        assert_bounded(r, exact[reduction])
    assert float(r.aux["K"]) == 9


# ------------------------------------------------------------------------------------------
# layer_norm, rms_norm
# ------------------------------------------------------------------------------------------


def _mp_layer_norm(x, w, b, eps):
    out = np.empty(x.shape, dtype=object)
    for i, row in enumerate(mpf_array(x)):
        n = len(row)
        mu = mpmath.fsum(row) / n
        var = mpmath.fsum((v - mu) ** 2 for v in row) / n
        s = mpmath.sqrt(var + mpmath.mpf(eps))
        for j, v in enumerate(row):
            y = (v - mu) / s
            wj = 1 if w is None else mpmath.mpf(float(w[j]))
            out[i, j] = y * wj + (0 if b is None else mpmath.mpf(float(b[j])))
    return out


def _mp_rms_norm(x, w, eps):
    out = np.empty(x.shape, dtype=object)
    for i, row in enumerate(mpf_array(x)):
        rms = mpmath.sqrt(mpmath.fsum(v * v for v in row) / len(row) + mpmath.mpf(eps))
        for j, v in enumerate(row):
            out[i, j] = v / rms * (1 if w is None else mpmath.mpf(float(w[j])))
    return out


NORM_INPUTS = {
    "normal": lambda g: g.standard_normal((3, 64)).astype(np.float32),
    "large_mean_tiny_var": lambda g: (1e4 + 1e-2 * g.standard_normal((3, 64))).astype(np.float32),
    "wide": lambda g: _wide(g, (3, 40)),
    "tiny": lambda g: (1e-4 * g.standard_normal((3, 16))).astype(np.float16),
    "bf16_offset": lambda g: (300 + g.standard_normal((2, 96))).astype(ml_dtypes.bfloat16),
}


@pytest.mark.parametrize("kind", sorted(NORM_INPUTS))
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm(kind, affine):
    g = rng(13)
    x = NORM_INPUTS[kind](g)
    K = x.shape[-1]
    w = g.standard_normal(K).astype(np.float32) if affine else None
    b = g.standard_normal(K).astype(np.float32) if affine else None
    with mpmath.workprec(PREC):
        r = reference("layer_norm", [x, w, b])
        exact = _mp_layer_norm(x, w, b, 1e-5)
        # with a bias, y = xhat w + b may cancel: tight relative to the terms' scale, not to y
        scale = np.abs(r.aux["xhat"] * r.aux["absw"]) + r.aux["absb"]
        floor = 2.0**-44 * scale if affine else 0.0
        assert_bounded(r, exact, floor=floor)
    assert set(r.aux) >= {"mean", "sigma", "xhat", "absw", "absb", "absx", "K"}


@pytest.mark.parametrize("kind", sorted(NORM_INPUTS))
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_rows_summed_in_blocks_and_cut_in_pieces_are_within_their_bound(op, kind, monkeypatch):
    # rows longer than NORM_BLOCK get their statistics from fixed blocks, and check judges long rows in
    # pieces (RowPiece, with the piece's part of the weight and bias).  With the block lowered to 5
    # elements every row here has several; the blocked rows and each piece must be within their
    # bound of mpmath's exact norm of the whole row, and a piece must have the whole row's bits
    from numstd.ops.catalog import validate
    from numstd.reference import RowPiece, normalization, validated_reference

    monkeypatch.setattr(normalization, "NORM_BLOCK", 5)
    g = rng(13)
    x = NORM_INPUTS[kind](g)
    K = x.shape[-1]
    w = g.standard_normal(K).astype(np.float32)
    b = g.standard_normal(K).astype(np.float32)
    inputs = [x, w, b] if op == "layer_norm" else [x, w]
    _, arrays, full = validate(op, inputs, {})
    with mpmath.workprec(PREC):
        whole = reference(op, inputs)
        exact = _mp_layer_norm(x, w, b, full["eps"]) if op == "layer_norm" else _mp_rms_norm(x, w, full["eps"])
        scale = np.abs(whole.aux["xhat"] * whole.aux["absw"]) + (whole.aux["absb"] if op == "layer_norm" else 0.0)
        floor = 2.0**-44 * scale if op == "layer_norm" else 0.0  # (y = xhat w + b may cancel)
        assert_bounded(whole, exact, floor=floor)
        for i in range(x.shape[0]):
            for a, c in _cuts(K):
                r = validated_reference(op, [arrays[0][i, a:c]] + [v[a:c] for v in arrays[1:]], full,
                                        piece=RowPiece([arrays[0][i]], a, c, (i,)))
                np.testing.assert_array_equal(r.values, whole.values[i, a:c])
                np.testing.assert_array_equal(r.error_bound, whole.error_bound[i, a:c])
                assert float(r.aux["K"]) == K


def test_layer_norm_zero_eps_and_constant_rows():
    x = np.array([[3.0, 3.0, 3.0], [1.0, 2.0, 4.0]], dtype=np.float32)
    r = reference("layer_norm", [x], eps=0.0)
    assert np.isnan(r.values[0]).all() and np.all(r.error_bound[0] == 0)
    with mpmath.workprec(PREC):
        assert_bounded(Reference("layer_norm", r.values[1:], r.error_bound[1:], {}, {}),
                       _mp_layer_norm(x[1:], None, None, 0.0))


@pytest.mark.parametrize("kind", sorted(NORM_INPUTS))
def test_rms_norm(kind):
    g = rng(14)
    x = NORM_INPUTS[kind](g)
    w = g.standard_normal(x.shape[-1]).astype(np.float32)
    with mpmath.workprec(PREC):
        r = reference("rms_norm", [x, w])
        eps = r.params["eps"]
        assert eps == 2.0**-23  # float32 opmath epsilon for every format below float64 (torch)
        assert_bounded(r, _mp_rms_norm(x, w, eps))
        r2 = reference("rms_norm", [x], eps=1e-6)
        assert_bounded(r2, _mp_rms_norm(x, None, 1e-6))


# ------------------------------------------------------------------------------------------
# elementwise
# ------------------------------------------------------------------------------------------


# torch's SELU constants as exact decimals (Klambauer et al. 2017; torch/nn/functional.py)
_SELU_ALPHA = mpmath.mpf("1.6732632423543772848170429916717")
_SELU_SCALE = mpmath.mpf("1.0507009873554804934193349852946")


def _mp_gelu_tanh(x):
    # x/2 (1 + tanh(t)) = x / (1 + exp(-2t)): the same real number without the cancellation of
    # 1 + tanh(t) for t << 0, which no fixed working precision survives
    t = mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf("0.044715") * x**3)
    return x / (1 + mpmath.exp(-2 * t))


MP_FUNCS = {
    "exp": mpmath.exp,
    "log": mpmath.log,
    "tanh": mpmath.tanh,
    "sigmoid": lambda x: 1 / (1 + mpmath.exp(-x)),
    "erf": mpmath.erf,
    "gelu": lambda x: x / 2 * mpmath.erfc(-x / mpmath.sqrt(2)),
    "gelu_tanh": _mp_gelu_tanh,
    "silu": lambda x: x / (1 + mpmath.exp(-x)),
    "relu": lambda x: max(x, mpmath.mpf(0)),
    "rsqrt": lambda x: 1 / mpmath.sqrt(x),
    "sqrt": mpmath.sqrt,
    # torch.nn.functional.softplus: x where beta x > threshold, else log(1 + exp(beta x)) / beta
    "softplus": lambda x: x if x > 20 else mpmath.log1p(mpmath.exp(x)),
    "softplus_beta": lambda x: x if 2 * x > 5 else mpmath.log1p(mpmath.exp(2 * x)) / 2,
    # activations (numstd.ops.activation), torch.nn.functional semantics
    "leaky_relu": lambda x: x if x > 0 else x * mpmath.mpf(0.01),
    "leaky_relu_neg": lambda x: x if x > 0 else x * mpmath.mpf(-0.5),
    "elu": lambda x: x if x > 0 else mpmath.expm1(x),
    "elu_alpha": lambda x: x if x > 0 else mpmath.mpf(2.5) * mpmath.expm1(x),
    "selu": lambda x: _SELU_SCALE * (x if x > 0 else _SELU_ALPHA * mpmath.expm1(x)),
    "celu": lambda x: x if x > 0 else mpmath.expm1(x),
    "celu_alpha": lambda x: x if x > 0 else mpmath.mpf(0.3) * mpmath.expm1(x / mpmath.mpf(0.3)),
    "celu_negative": lambda x: x if x > 0 else mpmath.mpf(-2.0) * mpmath.expm1(x / mpmath.mpf(-2.0)),
    "hardsigmoid": lambda x: min(max(x + 3, mpmath.mpf(0)), mpmath.mpf(6)) / 6,
    "hardswish": lambda x: x * min(max(x + 3, mpmath.mpf(0)), mpmath.mpf(6)) / 6,
    "softsign": lambda x: x / (1 + abs(x)),
    "mish": lambda x: x * mpmath.tanh(mpmath.log1p(mpmath.exp(x))),
    "new_gelu": _mp_gelu_tanh,
    "swish": lambda x: x / (1 + mpmath.exp(-x)),
    "hardtanh": lambda x: min(max(x, mpmath.mpf(-1)), mpmath.mpf(1)),
    "hardtanh_limits": lambda x: min(max(x, mpmath.mpf(-0.25)), mpmath.mpf(0.5)),
    "clamp_min": lambda x: max(x, mpmath.mpf(0.1)),
    "clamp_max": lambda x: min(x, mpmath.mpf(-2.0)),
}

#: (op, params) of the MP_FUNCS entries that are not the op with its defaults
MP_CALLS = {"gelu_tanh": ("gelu", {"approximate": "tanh"}), "softplus_beta": ("softplus", {"beta": 2.0, "threshold": 5.0}),
            "leaky_relu_neg": ("leaky_relu", {"negative_slope": -0.5}), "elu_alpha": ("elu", {"alpha": 2.5}),
            "celu_alpha": ("celu", {"alpha": 0.3}), "celu_negative": ("celu", {"alpha": -2.0}),
            "hardtanh_limits": ("hardtanh", {"min_val": -0.25, "max_val": 0.5}),
            "clamp_min": ("clamp", {"min": 0.1}), "clamp_max": ("clamp", {"max": -2.0})}

_F32_TINY = float(np.float32(1e-45))


def _points(name: str, g: np.random.Generator) -> np.ndarray:
    base = np.concatenate([g.standard_normal(150) * 3, g.uniform(-40, 40, 100), [0.0, -0.0, 1.0, -1.0]])
    special = {
        "exp": [709.7, 709.78, 88.7, -87.3, -103.9, -708.4, -744.4, -745.1, -746.0, 1e-300, -1e-30],
        "log": [5e-324, 2.2e-308, _F32_TINY, 1.17e-38, 1 - 2.0**-24, 1 + 2.0**-23, 1 + 1e-12, 1e300, 3.4e38],
        "tanh": [1e-30, -1e-300, 19.06, 25.0, -0.55, 1e-8],
        "sigmoid": [-40.0, 40.0, -745.0, -800.0, 800.0, 1e-20],
        "erf": [1e-300, -1e-20, 5.9, 6.0, -27.0, 0.4165],
        "gelu": [-10.0, -20.0, -30.0, -37.5, -38.6, -39.0, -45.0, 1e-30, -1e-30, 10.0, 1e4, -0.5],
        "gelu_tanh": [-10.0, -15.0, -20.0, 1e-30, 5.0, -3.0, 1e4],
        "silu": [-700.0, -710.0, -745.0, -800.0, 800.0, -40.0, 1e-30],
        "relu": [-0.0, 1e-45, -1e-45],
        "rsqrt": [5e-324, _F32_TINY, 1e-38, 3.4e38, 1e308, 2.0, 4.0],
        "sqrt": [5e-324, _F32_TINY, 1e-38, 3.4e38, 1e308, 2.0],
        "softplus": [-700.0, -745.0, -746.0, -800.0, 19.99, 20.0, 20.01, 30.0, 1e-30, -1e-30, -40.0, 88.7, 1e4],
        "softplus_beta": [-350.0, -372.5, -400.0, 2.49, 2.5, 2.51, 1e-30, -20.0, 1e4],
        "leaky_relu": [-1e-300, -5e-324, 1e-300, -1e300], "leaky_relu_neg": [-1e-300, -5e-324, -1e300],
        "elu": [-1e-300, -1e-20, -40.0, -800.0, 1e-300], "elu_alpha": [-1e-300, -1e-20, -40.0, -800.0],
        "selu": [-1e-300, -1e-20, -40.0, -800.0, 1e300], "celu": [-1e-300, -1e-20, -800.0],
        "celu_alpha": [-1e-300, -1e-20, -40.0, -200.0], "celu_negative": [-1e-300, -1e-20, -40.0, -700.0],
        "hardsigmoid": [-3.0, 3.0, -2.9999999, 2.9999999, 1e-300, -3.0000001, 1e300],
        "hardswish": [-3.0, 3.0, -2.9999999, 2.9999999, 1e-300, -1.5, 1e300],
        "softsign": [1e-300, -1e-300, 1e20, -1e300, 2.0**53],
        "mish": [-700.0, -745.0, -746.0, -800.0, 1e-30, -1e-30, 30.0, 800.0, -1e-300],
        "new_gelu": [-10.0, -15.0, -20.0, 1e-30, 5.0, -3.0, 1e4], "swish": [-700.0, -745.0, 800.0, 1e-30],
        "hardtanh": [-1.0, 1.0, -0.0, 1e-300], "hardtanh_limits": [-0.25, 0.5, 0.4999999],
        "clamp_min": [0.1, 0.09999999, -1e300], "clamp_max": [-2.0, -1.9999999, 1e300],
    }[name]
    pts = np.concatenate([base, special])
    if name in ("log", "rsqrt", "sqrt"):
        pts = np.abs(pts)
        pts = pts[pts > 0]
    return pts


@pytest.mark.parametrize("name", sorted(MP_FUNCS))
def test_elementwise_against_mpmath(name):
    x = _points(name, rng(15))
    op, params = MP_CALLS.get(name, (name, {}))
    with mpmath.workprec(PREC):
        exact = np.array([MP_FUNCS[name](mpmath.mpf(v)) for v in x], dtype=object)
        r = reference(op, [x], **params)
        # results below float64's range come out as 0 or subnormal: bounded absolutely, then tight
        assert_bounded(r, exact)
    spill = {"spillmag"} if get_op(op).spill is not None else set()  # (ops that declare their largest intermediate)
    assert set(r.aux) == {"x", "cond"} | spill and r.aux["cond"].shape == x.shape


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2])
def test_elementwise_narrow_formats(dtype):
    x = (rng(16).standard_normal(64) * 4).astype(dtype)
    with mpmath.workprec(PREC):
        for name in ("exp", "tanh", "gelu", "silu"):
            r = reference(name, [x])
            assert_bounded(r, np.array([MP_FUNCS[name](v) for v in mpf_array(x)], dtype=object))


LIB = {
    "exp": (np.exp, mpmath.exp, lambda g: g.uniform(-745, 709, 3000), elementwise.C_EXP),
    "log": (np.log, mpmath.log, lambda g: 10.0 ** g.uniform(-300, 300, 3000), elementwise.C_LOG),
    "log1p": (np.log1p, mpmath.log1p, lambda g: 10.0 ** g.uniform(-20, 10, 3000), elementwise.C_LOG),
    "tanh": (np.tanh, mpmath.tanh, lambda g: g.standard_normal(3000) * 4, elementwise.C_TANH),
    "expm1": (np.expm1, mpmath.expm1, lambda g: np.concatenate([g.uniform(-40, 1, 2000),
                                                               -(10.0 ** g.uniform(-300, 0, 1000))]), C_EXPM1),
}


@pytest.mark.parametrize("name", sorted(LIB))
def test_library_accuracy_has_a_2x_margin(name):
    """The accuracy constants are at least twice numpy's measured worst error (in units of u)."""
    f, g_mp, make, const = LIB[name]
    x = make(rng(17))
    y = f(x)
    worst = 0.0
    with mpmath.workprec(120):
        for xi, yi in zip(x, y):
            e = g_mp(mpmath.mpf(xi))
            if e != 0 and abs(e) > 2.3e-308:
                worst = max(worst, float(abs(mpmath.mpf(yi) - e) / abs(e)) / 2.0**-53)
    assert worst <= const / 2, f"{name}: measured {worst:.2f} u, constant {const}"


def test_scipy_erf_and_erfcx_accuracy_has_a_2x_margin():
    from scipy.special import erf, erfcx

    g = rng(18)
    cases = [(erf, mpmath.erf, np.concatenate([g.uniform(-6, 6, 1500), 10.0 ** g.uniform(-300, 0, 500)]),
              elementwise.C_ERF),
             (erfcx, lambda z: mpmath.exp(z * z) * mpmath.erfc(z),
              np.concatenate([g.uniform(0, 30, 1500), 10.0 ** g.uniform(-10, 6, 500)]), elementwise.C_ERFCX)]
    with mpmath.workprec(150):
        for f, g_mp, x, const in cases:
            worst = max(float(abs(mpmath.mpf(y) - e) / abs(e)) / 2.0**-53
                        for y, e in zip(f(x), (g_mp(mpmath.mpf(v)) for v in x)))
            assert worst <= const / 2


# ------------------------------------------------------------------------------------------
# attention
# ------------------------------------------------------------------------------------------


def _mp_attention(q, k, v, scale, causal):
    qm, km, vm = mpf_array(q), mpf_array(k), mpf_array(v)
    L, S, Ev = q.shape[0], k.shape[0], v.shape[1]
    out = np.empty((L, Ev), dtype=object)
    sc = mpmath.mpf(scale) if scale is not None else 1 / mpmath.sqrt(q.shape[1])
    for i in range(L):
        keys = [j for j in range(S) if not (causal and j > i)]
        s = [mpmath.fsum(a * b for a, b in zip(qm[i], km[j])) * sc for j in keys]
        m = max(s)
        e = [mpmath.exp(t - m) for t in s]
        z = mpmath.fsum(e)
        for c in range(Ev):
            out[i, c] = mpmath.fsum(ej * vm[j, c] for ej, j in zip(e, keys)) / z
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L,S,scale,mag", [(5, 7, None, 1.0), (7, 4, 0.3, 1.0), (4, 6, None, 30.0)])
def test_attention(causal, L, S, scale, mag):
    g = rng(19)
    q = (g.standard_normal((2, L, 8)) * mag).astype(np.float32)
    k = (g.standard_normal((1, S, 8)) * mag).astype(np.float32)  # batch axis broadcasts
    v = g.uniform(0.5, 2.0, (2, S, 3)).astype(np.float32)  # positive values: no cancellation in P v
    r = reference("attention", [q, k, v], scale=scale, causal=causal)
    assert r.values.shape == (2, L, 3)
    with mpmath.workprec(PREC):
        exact = np.stack([_mp_attention(q[b], k[0], v[b], scale, causal) for b in range(2)])
        assert_bounded(r, exact)
    assert r.aux["scoremag"].shape == (2, L, 1) and float(r.aux["K"]) == S and float(r.aux["E"]) == 8


def test_attention_signed_values_bound_holds():
    g = rng(20)
    q, k, v = (g.standard_normal((4, 6)).astype(np.float32) for _ in range(3))
    r = reference("attention", [q, k, v], causal=True)
    with mpmath.workprec(PREC):
        assert_bounded(r, _mp_attention(q, k, v, None, True), tight=None)
    assert np.all(r.error_bound <= 64 * 2.0**-53 * r.aux["absout"] + 1e-300)


# ------------------------------------------------------------------------------------------
# chunk invariance: references of row slices are bit-identical to the whole
# ------------------------------------------------------------------------------------------


def _row_chunks_equal(op: str, inputs: list, sliced: tuple[int, ...], params: dict) -> None:
    whole = reference(op, inputs, **params)
    n = inputs[0].shape[-2] if op in ("matmul", "attention") else inputs[0].shape[0]
    for size in (1, 7, 33):
        for start in range(0, n, size):
            sl = slice(start, start + size)
            part_inputs = [a[..., sl, :] if i in sliced and op in ("matmul", "attention") else
                           (a[sl] if i in sliced else a) for i, a in enumerate(inputs)]
            row0 = start if op in ("matmul", "attention", "linear") else 0
            part = reference(op, part_inputs, row_offset=row0, **params)
            idx = (Ellipsis, sl, slice(None)) if op in ("matmul", "attention") else (sl,)
            np.testing.assert_array_equal(part.values, whole.values[idx], err_msg=f"{op} rows {sl}")
            np.testing.assert_array_equal(part.error_bound, whole.error_bound[idx])
            for name, v in part.aux.items():
                if np.shape(v) == np.shape(part.values) and np.shape(whole.aux[name]) == np.shape(whole.values):
                    np.testing.assert_array_equal(v, whole.aux[name][idx], err_msg=f"{op} {name} rows {sl}")



def _count_k_blocks(monkeypatch: pytest.MonkeyPatch, block: int) -> list:
    """Set contraction.K_BLOCK to ``block`` and record every K block the reference widens."""
    monkeypatch.setattr(contraction, "K_BLOCK", block)
    seen: list = []
    real = contraction._k_pairs

    def spy(a, b, bias=None, sel=None):  # noqa: ANN001, ANN202
        for pair in real(a, b, bias, sel):
            seen.append(pair[0].shape[-1])
            yield pair
    monkeypatch.setattr(contraction, "_k_pairs", spy)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_matmul_in_k_blocks_is_within_its_bound_of_the_exact_product(monkeypatch, dtype):
    # K = 250 in blocks of 16 (the last one 10 long): cancelling rows (stage 2 on every row, stage 3
    # where it stays loose) and a wide dynamic range, against the exact mpmath dot product
    seen = _count_k_blocks(monkeypatch, 16)
    g = rng(50)
    A, B = _cancelling_product(g, 5, 250, 4, dtype)
    A[3] = _wide(g, (250,)).astype(dtype)
    A[4, 100:] = 0  # exact zeros in a row
    r = reference("matmul", [A, B])
    assert seen and max(seen) == 16 and 10 in seen  # widened one K block at a time
    with mpmath.workprec(PREC):
        assert_bounded(r, _mp_matmul(A, B), tight=MM_TIGHT, floor=2.0**-90 * r.aux["absdot"])
    exact = _exact_abs_product(A, B)
    assert np.all(r.aux["absdot"] >= exact) and np.all(r.aux["absdot"] <= exact * (1 + 2.01 * 250 * 2.0**-53))
    assert float(r.aux["K"]) == 250


def test_contraction_k_block_stages_2_and_3_hold_their_bounds(monkeypatch):
    # the blocked stage 2 and stage 3 called directly on every element (bias included) against mpmath
    monkeypatch.setattr(contraction, "K_BLOCK", 16)
    g = rng(51)
    A, B = _cancelling_product(g, 7, 90, 6)
    A = A.astype(np.float64) * 10.0 ** g.integers(-3, 3, (7, 1))
    B = B.astype(np.float64)
    bias = g.standard_normal(6)
    rows = np.array([0, 2, 3, 6])
    v, lo, err = contraction._ozaki_blocked(A, B, bias, rows, rows)
    i, j = np.nonzero(np.ones((7, 6), bool))
    v3, b3 = contraction._exact_dots_blocked(A, B, bias, i, j)
    with mpmath.workprec(PREC):
        exact = _mp_matmul(A, B, bias)
        for q, r_ in enumerate(rows):
            for c in range(6):
                assert abs(mpmath.mpf(v[q, c]) - exact[r_, c]) <= np.abs(lo[q, c]) + err[q, c]
        for e, (r_, c) in enumerate(zip(i, j)):
            assert abs(mpmath.mpf(v3[e]) - exact[r_, c]) <= b3[e]
    # the same order of bound as one block: stage 2 about 2**-15 of stage 1, stage 3 near u^2
    stage1 = contraction.gamma(91) * (np.abs(A) @ np.abs(B) + np.abs(bias))
    assert np.all(np.abs(lo) + err < stage1[rows] * 2.0**-15 + 2.0**-52 * np.abs(v))
    assert np.all(b3 <= 2.0**-100 * stage1.ravel() / contraction.gamma(91) + 2.0**-53 * np.abs(v3))


def test_linear_in_k_blocks_with_cancelling_bias(monkeypatch):
    seen = _count_k_blocks(monkeypatch, 32)
    g = rng(52)
    x = g.standard_normal((3, 2, 100)).astype(np.float32)
    W = g.standard_normal((5, 100)).astype(np.float32)
    b = -(x[0, 0].astype(np.float64) @ W.T.astype(np.float64)).astype(np.float32)  # row (0, 0) cancels
    r = reference("linear", [x, W, b])
    assert seen and max(seen) == 32
    assert r.values.shape == (3, 2, 5) and float(r.aux["K"]) == 100
    with mpmath.workprec(PREC):
        exact = np.stack([_mp_matmul(x[i], W.T, b) for i in range(3)])
        assert_bounded(r, exact, tight=MM_TIGHT, floor=2.0**-90 * r.aux["absdot"])


def test_contraction_references_in_k_blocks_do_not_depend_on_the_row_chunking(monkeypatch):
    monkeypatch.setattr(contraction, "K_BLOCK", 64)
    g = rng(53)
    A = g.standard_normal((2, 40, 300)).astype(np.float32)
    A[:, 5] = A[:, 6]  # cancelling rows against a B with opposite columns
    B = g.standard_normal((300, 20)).astype(np.float32)
    B[:, 1] = -B[:, 0] * (1 + 2.0**-20)
    _row_chunks_equal("matmul", [A, B], (0,), {})
    W = g.standard_normal((12, 300)).astype(np.float32)
    _row_chunks_equal("linear", [A[0], W, g.standard_normal(12).astype(np.float32)], (0,), {})
    bf = A[0].astype(ml_dtypes.bfloat16)
    _row_chunks_equal("matmul", [bf, B.astype(ml_dtypes.bfloat16)], (0,), {})

_PADDED_MATMUL_CHUNKS = """
import numpy as np
from numstd.reference import contraction
g = np.random.default_rng(41)
for dtype in (np.float64, np.float32):
    for trial in range(12):  # small and large K, rows over several blocks
        m = int(g.integers(1, 600)) if trial % 2 else int(g.integers(1, 60))
        n, k = int(g.integers(1, 200)), int(g.integers(1, 700))
        a, b = g.standard_normal((m, k)).astype(dtype), g.standard_normal((k, n)).astype(dtype)
        whole = contraction.padded_matmul(a, b)
        np.testing.assert_allclose(whole, a.astype(np.float64) @ b, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-5 * k)
        for size in (1, 7, 33, 257):
            for s in range(0, m, size):
                np.testing.assert_array_equal(contraction.padded_matmul(a[s:s + size], b, s), whole[s:s + size])
        rows = np.sort(g.choice(m, size=max(1, m // 3), replace=False))
        np.testing.assert_array_equal(contraction.padded_matmul(a[rows], b, rows=rows), whole[rows])
print("ok")
"""


@pytest.mark.parametrize("coretype", ["as set", "unset"])
def test_padded_matmul_is_bit_identical_for_any_row_slice(coretype):
    # OpenBLAS picks kernels by CPU (OPENBLAS_CORETYPE overrides it): on this machine's image the
    # variable forces Haswell, unset it picks SkylakeX — and both gave chunk-dependent bits with
    # the former row-quantum padding (float64 on SkylakeX, float32 on Haswell)
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if coretype == "unset":
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    done = subprocess.run([sys.executable, "-c", _PADDED_MATMUL_CHUNKS], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_references_do_not_depend_on_the_row_chunking():
    g = rng(40)
    A = g.standard_normal((2, 70, 300)).astype(np.float32)
    A[:, 5] = A[:, 6]  # cancelling rows against a B with opposite columns
    B = g.standard_normal((300, 40)).astype(np.float32)
    B[:, 1] = -B[:, 0] * (1 + 2.0**-20)
    _row_chunks_equal("matmul", [A, B], (0,), {})
    W = g.standard_normal((24, 300)).astype(np.float32)
    _row_chunks_equal("linear", [A[0], W, g.standard_normal(24).astype(np.float32)], (0,), {})
    q = g.standard_normal((2, 50, 16)).astype(np.float32)
    k = g.standard_normal((2, 30, 16)).astype(np.float32)
    _row_chunks_equal("attention", [q, k, k[..., :8]], (0,), {})
    x = g.standard_normal((50, 129)).astype(np.float32)
    for op in ("softmax", "log_softmax", "layer_norm", "rms_norm", "cumsum", "gelu"):
        _row_chunks_equal(op, [x], (0,), {})
    _row_chunks_equal("cross_entropy", [x, g.integers(0, 129, 50)], (0, 1), {"reduction": "none"})


# ------------------------------------------------------------------------------------------
# the Reference object
# ------------------------------------------------------------------------------------------


def test_reference_is_read_only_and_leaves_inputs_writable():
    x = rng(21).standard_normal(10)
    r = reference("exp", [x])
    assert not r.values.flags.writeable and not r.error_bound.flags.writeable
    assert not r.aux["x"].flags.writeable
    x[0] = 1.0  # the caller's array stays writable
    with pytest.raises(TypeError):
        r.aux["new"] = np.zeros(1)  # type: ignore[index]
    assert r.params == {} and r.op == "exp"


def test_reference_params_are_the_full_set():
    r = reference("softmax", [np.zeros((2, 3), np.float32)])
    assert dict(r.params) == {"axis": 1}
    a = reference("attention", [np.ones((2, 4), np.float32)] * 3)
    assert a.params["scale"] == 0.5 and a.params["causal"] is False


_POOL_SHAPES = {1: (3, 2, 4), 2: (3, 2, 2, 2), 3: (3, 1, 2, 2, 2)}


def test_aux_terms_cover_the_error_models_and_broadcast():
    models = pytest.importorskip("numstd.models")
    g = rng(22)
    x = g.standard_normal((3, 8)).astype(np.float32)
    calls = {
        "matmul": ([x, x.T], {}), "linear": ([x, x, x[0, :3]], {}), "sum": ([x], {"axis": 1}),
        "conv": ([x[None], x[:2, :6].reshape(2, 3, 2), x[0, :2]], {"padding": 1, "stride": 2}),
        "conv_transpose": ([x[None], x[:3, :4].reshape(3, 2, 2), x[0, :2]], {"padding": 1, "stride": 2}),
        "mean": ([x], {"axis": 0}), "cumsum": ([x], {}), "cumprod": ([x], {}), "softmax": ([x], {}), "log_softmax": ([x], {}),
        "layer_norm": ([x], {}), "rms_norm": ([x], {}), "attention": ([x, x, x], {}),
        "cross_entropy": ([x, np.array([0, 7, 3])], {}),
        **{n: ([np.abs(x) if n in ("log", "rsqrt", "sqrt") else x], {}) for n in
           ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt", "softplus",
            "leaky_relu", "elu", "selu", "celu", "hardsigmoid", "hardswish", "softsign", "mish", "new_gelu",
            "swish", "hardtanh")},
        "clamp": ([x], {"min": -0.5, "max": 0.5}),
        "amax": ([x], {"axis": 1}), "amin": ([x], {}), "mse_loss": ([x, 0.5 * x + 0.25], {}),
        "group_norm": ([x.reshape(3, 4, 2), x[0, :4], x[1, :4]], {"num_groups": 2}),
        "instance_norm": ([x.reshape(3, 4, 2)], {}),
        "batch_norm": ([x.reshape(3, 4, 2), None, None, x[0, :4]], {"training": True}),
        **{f"max_pool{d}d": ([x.reshape(_POOL_SHAPES[d])], {"kernel_size": 2}) for d in (1, 2, 3)},
        **{f"avg_pool{d}d": ([x.reshape(_POOL_SHAPES[d])], {"kernel_size": 2, "padding": 1, "count_include_pad": False})
           for d in (1, 2, 3)},
        "huber_loss": ([x, 0.5 * x + 0.25], {"delta": 0.5}), "smooth_l1_loss": ([x, 0.5 * x + 0.25], {"beta": 0.5}),
        "kl_div": ([x, np.abs(x) / np.abs(x).sum()], {"reduction": "batchmean"}),
        "nll_loss": ([x, np.array([0, -100, 3])], {}),
        "hinge_embedding_loss": ([x, np.sign(x - 0.1)], {"margin": 0.5}),
        "cast": ([x], {"to": "mxfp4"}),
        "scaled_matmul": ([x.astype(ml_dtypes.float8_e4m3fn), np.array(np.float32(0.5)),
                           x.T.astype(ml_dtypes.float8_e5m2), np.array(np.float32(2.0))], {"scaling": "tensor"}),
        "argmax": ([x], {"axis": 1}), "argmin": ([x], {}),
        "normalize": ([x], {"p": 2.0, "dim": 1}), "cosine_similarity": ([x, 0.5 * x + 0.25], {"dim": 1}),
        "cosine_embedding_loss": ([x, 0.5 * x + 0.25, np.array([1.0, -1.0, 1.0])], {"margin": 0.1}),
        "triplet_margin_loss": ([x, 0.5 * x + 0.25, x[::-1].copy()], {"margin": 1.0}),
    }
    from numstd.ops import OPS

    assert set(calls) == {op for op, spec in OPS.items() if spec.kind != "module"}  # module: graded, no reference
    for op, (inputs, params) in calls.items():
        r = reference(op, inputs, **params)
        # the operand-rounding terms come only with input_rounding (TF32 / autocast standards)
        optional = {"indev", "insum", "inrms"}
        assert set(models.OP_TERMS.get(op, ())) - optional <= set(r.aux), op
        if optional & set(models.OP_TERMS.get(op, ())):
            assert not optional & set(r.aux), op
            r = reference(op, inputs, input_rounding="bfloat16", **params)
            assert set(models.OP_TERMS[op]) <= set(r.aux), op
        for name, a in r.aux.items():
            assert a.dtype == np.float64
            assert np.broadcast_shapes(a.shape, r.values.shape) == r.values.shape, (op, name, a.shape)
        assert np.broadcast_shapes(r.error_bound.shape, r.values.shape) == r.values.shape
        assert np.all(r.error_bound >= 0)
