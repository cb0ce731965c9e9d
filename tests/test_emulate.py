"""Tests of numstd.emulate: hand-computed bit-exact cases and independent references.

Notation in the comments: e = 2**-24, the spacing of fp32 just below 1 (half the spacing above 1).
fp32 rounding of 1 + k*e: the fp32 numbers above 1 are 1 + 2m*e; an odd k is a tie, which goes to
the neighbour with even m (round to nearest even).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from numstd import emulate as em
from numstd.errors import DtypeError, ParameterError, ShapeError
from numstd.formats import round_to

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E = 2.0**-24


def col(values, dtype) -> np.ndarray:
    return np.array(values, dtype=dtype)[:, None]


def row(values, dtype) -> np.ndarray:
    return np.array(values, dtype=dtype)[None, :]


def seq32(products) -> np.float32:
    """Independent scalar reference: fp32 recursive summation of exact products that are fp32
    values (then RN_32(RN_64(s + t)) = RN_32(s + t): double rounding is innocuous for p=24)."""
    s = np.float32(products[0])
    for t in products[1:]:
        s = np.float32(float(s) + float(t))
    return s


# ---------------------------------------------------------------- summation orders (fp32 acc)

# [1, e, e, e, e]: hand-computed values of 1 + x*e per order.
#  sequential: 1+e is a tie -> 1, every step stays 1                          -> 0
#  pairwise (left half = ceil): [1,e,e] -> (1+e -> 1) + e -> 1; [e,e] -> 2e; 1 + 2e exact -> 2
#  tree: level 1: 1, 2e, e; level 2: 1+2e, e; level 3: 1+3e is a tie -> 1+4e  -> 4
#  exact: 1 + 4e is an fp32 number                                           -> 4
#  kahan: s=1; e lost, c=-e; y=2e, s=1+2e, c=0; y=e, 1+3e tie -> 1+4e ...    -> 4
FIVE = {"sequential": 0, "pairwise": 2, "tree": 4, "exact": 4, "kahan": 4}

# [1, e x 7] (exact sum 1 + 7e, a tie between 1+6e and 1+8e -> 1+8e when correctly rounded):
#  sequential -> 1; pairwise = tree (K = 8): (1 + 2e) + 4e = 1+6e; blocked(4): 1 + 4e;
#  blocked(2) = splitk(4): 1, then +2e -> 1+2e, +2e -> 1+4e, +2e -> 1+6e; splitk(2) = blocked(4);
#  kahan (traced by hand in the module docstring's notation) -> 1+8e; exact -> 1+8e.
EIGHT = [
    ({"order": "sequential"}, 0),
    ({"order": "pairwise"}, 6),
    ({"order": "tree"}, 6),
    ({"order": "blocked", "block": 4}, 4),
    ({"order": "blocked", "block": 2}, 6),
    ({"order": "splitk", "splits": 4}, 6),
    ({"order": "splitk", "splits": 2}, 4),
    ({"order": "kahan"}, 8),
    ({"order": "exact"}, 8),
]


@pytest.mark.parametrize("order", sorted(FIVE))
def test_orders_give_hand_computed_fp32_results_k5(order):
    got = em.accumulate(np.array([1.0] + [E] * 4), order=order)
    assert got == 1 + FIVE[order] * E


@pytest.mark.parametrize("params, k", EIGHT, ids=[str(p) for p, _ in EIGHT])
def test_orders_give_hand_computed_fp32_results_k8(params, k):
    got = em.accumulate(np.array([1.0] + [E] * 7), **params)
    assert got == 1 + k * E


def test_orders_in_bfloat16_accumulator():
    # bf16 spacing above 1 is 2**-7; f = 2**-8 is half of it.  [1, f, f, f]:
    # sequential: 1+f ties to 1 each time -> 1; pairwise: (1+f -> 1) + 2f = 1 + 2**-7;
    # exact: 1 + 3f = 1 + 1.5 * 2**-7, a tie -> 1 + 2 * 2**-7 (even).
    f = 2.0**-8
    x = np.array([1.0, f, f, f])
    assert em.accumulate(x, order="sequential", acc="bfloat16") == 1.0
    assert em.accumulate(x, order="pairwise", acc="bfloat16") == 1 + 2 * f
    assert em.accumulate(x, order="exact", acc="bfloat16") == 1 + 4 * f


def test_accumulate_axis_and_vectorisation():
    x = np.stack([np.array([1.0] + [E] * 4), np.array([E] * 4 + [1.0])])  # (2, 5)
    got = em.accumulate(x.T.copy(), axis=0, order="sequential")
    # second row: 4e first (exact), then 1 + 4e exact
    np.testing.assert_array_equal(got, [1.0, 1 + 4 * E])


def test_random_order_is_a_seeded_permutation():
    x = np.array([1.0] + [E] * 7)
    results = {}
    for seed in range(8):
        perm = np.random.default_rng(seed).permutation(8)
        expected = float(seq32(x[perm]))
        got = float(em.accumulate(x, order="random", rng=np.random.default_rng(seed)))
        assert got == expected
        results[seed] = got
    assert len(set(results.values())) > 1  # the order matters for these terms


def test_sequential_rounds_each_fma_once_for_fp32_products():
    # t = a*b = 2**-24 - 2**-70 with a, b fp32.  s = 1 + 2**-23; s + t lies just below the
    # midpoint 1 + 3e, so RN_32(s + t) = 1 + 2e.  A float64 sum first would round to the
    # midpoint and then to 1 + 4e (double rounding).
    a = np.float32(E * (1 - 2.0**-23))
    b = np.float32(1 + 2.0**-23)
    assert float(a) * float(b) == E - 2.0**-70
    A = np.array([[1.0, a]], dtype=np.float32)
    B = np.array([[1 + 2.0**-23], [b]], dtype=np.float32)
    assert float(em.matmul(A, B)[0, 0]) == 1 + 2 * E
    # Kahan rounds y = RN_32(t - c) = RN_32(e - 2**-70) = e first: 1 + 2e + e ties to 1 + 4e.
    assert float(em.matmul(A, B, order="kahan")[0, 0]) == 1 + 4 * E


def test_sequential_in_float64_is_exact_when_sums_are_representable():
    # bf16 values k/64 with |k| < 128: products are multiples of 2**-12 below 4,
    # every partial sum of 64 of them is a multiple of 2**-12 below 2**8: exact in float64.
    rng = np.random.default_rng(1)
    A = (rng.integers(-127, 128, (5, 64)) / 64).astype(BF16)
    B = (rng.integers(-127, 128, (64, 7)) / 64).astype(BF16)
    got = em.matmul(A, B, acc="float64", out="float64")
    a, b = A.astype(np.float64), B.astype(np.float64)
    want = np.array([[math.fsum(a[i] * b[:, j]) for j in range(7)] for i in range(5)])
    np.testing.assert_array_equal(got, want)


def test_matmul_matches_independent_fp32_sequential_reference():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((3, 40)).astype(BF16)
    B = rng.standard_normal((40, 4)).astype(BF16)
    a, b = A.astype(np.float64), B.astype(np.float64)
    got = em.matmul(A, B, order="sequential")
    want = np.array([[seq32(a[i] * b[:, j]) for j in range(4)] for i in range(3)])
    np.testing.assert_array_equal(got, want)


def test_matmul_numpy_shape_semantics():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((2, 1, 3, 5)).astype(np.float16)
    B = rng.standard_normal((4, 5, 6)).astype(np.float16)
    got = em.matmul(A, B, acc="float64", out="float64", order="pairwise")
    want = A.astype(np.float64) @ B.astype(np.float64)
    assert got.shape == want.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    v = rng.standard_normal(5).astype(np.float16)
    assert em.matmul(v, B[0]).shape == (6,)
    assert em.matmul(A[0, 0], v).shape == (3,)
    assert em.matmul(v, v).shape == ()


# ---------------------------------------------------------------- tensor cores (Fasi et al.)

def tc(a, b, c=None, arch="v100", dtype=np.float16, **kw) -> float:
    return float(em.tensor_core_matmul(row(a, dtype), col(b, dtype), arch=arch, c=c, **kw)[0, 0])


def test_tc_extra_alignment_bits():
    # Fasi et al. D.1: 1*1 + c with c = -(1 - 2**-24).  E = 0; the grid is 2**(-23 - n_eab).
    # V100 (n_eab = 0): c truncates to -(1 - 2**-23) -> 2**-23.  A100 (n_eab = 1): exact -> 2**-24.
    assert tc([1], [1], -(1 - E), "v100") == 2 * E
    assert tc([1], [1], -(1 - E), "a100") == E


def test_tc_normalisation_only_at_the_end_and_non_monotonicity():
    # Fasi et al. D.2: four products 1 * 2**-24 (fp16 subnormal) + c = 1 - 2**-24.
    # E = e(c) = -1, grid 2**-24: all exact, sum 1 + 3e truncated to fp32 -> 1 + 2e.
    assert tc([1] * 4, [E] * 4, 1 - E) == 1 + 2 * E
    # With the larger c = 1: E = 0, grid 2**-23, the products vanish -> 1 < 1 + 2e.
    assert tc([1] * 4, [E] * 4, 1.0) == 1.0


def test_tc_carry_bits_and_truncated_normalisation():
    # Fasi et al. D.4: 1 + 1 + 1 + 2**-23 + (1 + 2**-22 + 2**-23) = 4 + 2**-21, exact.
    assert tc([1] * 4, [1, 1, 1, 2 * E], 1 + 4 * E + 2 * E) == 4 + 8 * E
    # 1.875 + (1 + 1.5 + 1.75 + 1.875) = 8 exactly (needs three carry bits).
    assert tc([1] * 4, [1, 1.5, 1.75, 1.875], 1.875) == 8.0
    # 4 + (1 + 2**-22 + 2**-23) = 5 + 0.75 ulp(5): truncated to 5 (RNE would give 5 + 2**-21),
    # and symmetrically -5 for the negated inputs: round toward zero, not down.
    assert tc([1] * 4, [1] * 4, 1 + 6 * E) == 5.0
    assert tc([1] * 4, [-1] * 4, -1 - 6 * E) == -5.0


def test_tc_truncates_aligned_terms_not_the_exact_sum():
    # c = 1 and the product 2**-13 * -2**-12 = -2**-25: aligned to the grid 2**-23 the product
    # truncates (toward zero) to 0 -> 1.  Rounding the exact 1 - 2**-25 toward zero would
    # give 1 - 2**-24: the sign of the small term decides whether it counts.
    assert tc([2.0**-13], [-(2.0**-12)], 1.0) == 1.0
    assert tc([2.0**-13], [2.0**-12], -1.0) == -1.0
    assert tc([2.0**-13], [-(2.0**-12)], 0.0) == -(2.0**-25)  # alone it is exact
    # -3 * 2**-25 is 0.75 of a grid step: truncated -> 1.  Rounding the aligned term to nearest
    # would give 1 - 2**-23; rounding the exact 1 - 1.5 * 2**-24 toward zero gives 1 - 2**-24.
    assert tc([3 * 2.0**-13], [-(2.0**-12)], 1.0) == 1.0


def test_tc_block_size_decides_which_terms_are_aligned_together():
    # K = 8 fp16 ones times [1,0,0,0, e,e,e,e] or [e,e,e,e, 1,0,0,0].
    # V100 (blocks of 4): (a) block 1 -> 1, block 2 aligned to c = 1, grid 2e: e's vanish -> 1;
    # (b) block 1 -> 4e exactly, block 2: 1 + 4e exact -> 1 + 4e.  A100 (block of 8, grid e):
    # 1 + 4e either way.  Split-K 2 on V100: slices 1 and 4e added in fp32 -> 1 + 4e.
    ones = [1.0] * 8
    first, last = [1, 0, 0, 0] + [E] * 4, [E] * 4 + [1, 0, 0, 0]
    assert tc(ones, first, arch="v100") == 1.0
    assert tc(ones, last, arch="v100") == 1 + 4 * E
    assert tc(ones, first, arch="a100") == 1 + 4 * E
    assert tc(ones, last, arch="a100") == 1 + 4 * E
    assert tc(ones, first, arch="v100", split_k=2) == 1 + 4 * E
    assert tc(ones, first, arch="v100", promote_every=4) == 1 + 4 * E


def test_tc_h100_fp8_accumulator_keeps_13_fraction_bits():
    # e4m3 inputs: 1*1 plus products 2**-7 * 2**-7 = 2**-14 (2**-7 is an e4m3 subnormal).
    # H100 fp8 (n_eab = -10): grid 2**(0 - 13): 2**-14 vanishes -> 1.  B200 fp8 (n_eab = 2): kept.
    # 2**-6 * 2**-6 = 2**-12 is on the H100 grid -> kept.
    assert tc([1, 2.0**-7], [1, 2.0**-7], arch="h100", dtype=E4M3) == 1.0
    assert tc([1, 2.0**-7], [1, 2.0**-7], arch="b200", dtype=E4M3) == 1 + 2.0**-14
    assert tc([1, 2.0**-6], [1, 2.0**-6], arch="h100-fp8", dtype=E4M3) == 1 + 2.0**-12
    # Across blocks (K = 64): block 1 gives 1; block 2 adds three 2**-14 that vanish.
    a = [1.0] + [0.0] * 31 + [2.0**-7] * 3 + [0.0] * 29
    assert tc(a, a, arch="h100", dtype=E4M3) == 1.0
    assert tc(a, a, arch="b200", dtype=E4M3) == 1 + 3 * 2.0**-14


def test_tc_fp8_fp16_output_ada_rounds_13_fraction_bits_to_fp16():
    # Ada fp8 -> fp16 (AdaTC.m, frmode 'rne'): terms aligned to 13 fraction bits (n_eab = -10)
    # below E, the block sum rounded to fp16 (11 bits), not to 11 - 10 = 1 bit.
    # 1 * 1 + 2**-5 * 2**-5 = 1 + 2**-10, one fp16 ulp: kept.
    assert tc([1, 2.0**-5], [1, 2.0**-5], arch="ada", dtype=E4M3, out="float16") == 1 + 2.0**-10
    # 1 + 15 products 2**-7 * 2**-7 = 2**-14 (subnormal e4m3 operands): each is below the grid
    # 2**-13 and truncates to 0 -> 1 (the exact 1 + 15 * 2**-14 would round to 1 + 2**-10).
    a = [1.0] + [2.0**-7] * 15
    assert tc(a, a, arch="ada", dtype=E4M3, out="float16") == 1.0


def test_tc_fp8_mma_sync_adds_the_register_halves_then_c():
    # H100/B200 fp8 mma.sync: a block of 32 is applied as the positions k mod 4 in {0, 1}, then
    # k mod 4 in {2, 3}, each a block FMA from zero, and c is added last (RNE).
    # Products 1 (k = 0), 2**-11 (k = 1), 2**-11 (k = 2), c = 2**-11, fp16 output (ulp(1) = 2**-10):
    # half 1: 1 + 2**-11, a tie -> 1; half 2: 1 + 2**-11 -> 1; then 1 + c, a tie -> 1.
    # (One block with c: 1 + 3 * 2**-11 -> 1 + 2**-9; Ada's blocks of 16 with c give the same.)
    a, b, c = [1.0, 2.0**-6, 2.0**-6], [1.0, 2.0**-5, 2.0**-5], 2.0**-11
    for arch in ("h100", "b200"):
        assert tc(a, b, c, arch, dtype=E4M3, out="float16") == 1.0
    assert tc(a, b, c, "ada", dtype=E4M3, out="float16") == 1 + 2.0**-9
    # B200 fp8 -> fp32: halves truncated (n_eab = 2, RZ), c added with RNE.  c = 64 (ulp 2**-17)
    # and three products 2**-9 * 2**-9 = 2**-18 (k = 0, 1, 2): the halves give 2**-17 and then
    # 3 * 2**-18 exactly; 64 + 1.5 ulp is a tie -> 64 + 2**-16 (even).  c aligned in the block
    # with RZ would give 64 + 2**-17.
    t = [2.0**-9] * 3
    assert tc(t, t, 64.0, "b200", dtype=E4M3) == 64 + 2.0**-16
    assert tc(t, t, 64.0, "b200", dtype=E4M3, block=32) == 64 + 2.0**-16
    with pytest.raises(ParameterError, match="sub-blocks"):
        tc(t, t, 64.0, "b200", dtype=E4M3, block=16)


def test_tc_overrides_and_errors():
    assert tc([1], [1], -(1 - E), "v100", extra_bits=1) == E
    with pytest.raises(ParameterError):
        em.tensor_core_matmul(row([1], np.float16), col([1], np.float16), arch="t4")
    with pytest.raises(ParameterError):
        em.tensor_core_matmul(row([1], np.float16), col([1], np.float16), split_k=2,
                              promote_every=4)


def test_tc_fp16_output_accumulates_in_fp16():
    # V100, K = 12 fp16 ones times [1, 2**-12, 0, 0, 2**-12, 0, 0, 0, 2**-12, 0, 0, 0]: three
    # blocks of 4.  fp16 accumulator (out="float16"): each block gives 1 + 2**-12, a quarter ulp
    # of fp16 above 1, rounded (RNE) back to 1 -> 1.  fp32 accumulator converted at the end:
    # 1 + 3 * 2**-12 exactly, 0.75 ulp -> RNE to 1 + 2**-10.
    b = [1.0, 2.0**-12, 0, 0, 2.0**-12, 0, 0, 0, 2.0**-12, 0, 0, 0]
    assert tc([1.0] * 12, b, arch="v100", out="float16") == 1.0
    assert tc([1.0] * 12, b, arch="v100", out="float16", acc="float32") == 1 + 2.0**-10
    # c is rounded to fp16 (RNE) first: 1 + 2**-11 + 2**-13 -> 1 + 2**-10; +0 products.
    assert tc([0.0], [0.0], 1 + 2.0**-11 + 2.0**-13, "v100", out="float16") == 1 + 2.0**-10
    # bf16 inputs have no fp16 accumulator: an explicit request is refused with the fix.
    with pytest.raises(ParameterError, match="acc='float32'"):
        tc([1.0], [1.0], arch="a100", dtype=BF16, out="float16", acc="float16")


def test_hardware_provenance_names_architectures_and_gpus():
    lines = em.variants.hardware_provenance(["sequential", "tc-h100-fp8-promote128",
                                             "matmul/tc-ada", "tc-ada"])
    assert len(lines) == 2
    assert lines[0].startswith("ada (Ada, L40S)") and lines[1].startswith("h100 (H100, H200)")
    assert "float8_e4m3fn" in lines[1]
    assert em.variants.hardware_provenance(["kahan"]) == []


def test_tc_truncation_biases_results_toward_zero():
    # A property of the model (RTZ normalisation) that RNE orders do not have: the mean error,
    # signed toward the exact value and in units of u|A||B| (u = 2**-24), is clearly negative
    # for A100 (measured about -0.4, sampling noise about 0.03); sequential RNE stays near 0.
    rng = np.random.default_rng(4)
    A = rng.standard_normal((16, 512)).astype(BF16)
    B = rng.standard_normal((512, 16)).astype(BF16)
    a, b = A.astype(np.float64), B.astype(np.float64)
    exact, scale = a @ b, 2.0**-24 * (np.abs(a) @ np.abs(b))

    def bias(result):
        return np.mean((result.astype(np.float64) - exact) / scale * np.sign(exact))

    assert bias(em.tensor_core_matmul(A, B, arch="a100")) < -0.2
    assert abs(bias(em.matmul(A, B))) < 0.1


# ---------------------------------------------------------------- Trainium


def test_trainium_auto_cast_rounds_float32_operands_to_bf16():
    # neuronx-cc's default --auto-cast=matmult --auto-cast-type=bf16: 1 + 2**-9 (fp32) becomes
    # bf16 1 (half an ulp of bf16 is 2**-8), 1 + 3 * 2**-8 becomes 1 + 2**-6 (tie to even), so
    # (1 + 2**-9) * 1 + (1 + 3 * 2**-8) * 1 = 2 + 2**-6 instead of 2 + 2**-9 + 3 * 2**-8.
    A = np.array([[1 + 2.0**-9, 1 + 3 * 2.0**-8]], dtype=np.float32)
    B = np.ones((2, 1), dtype=np.float32)
    cast = em.trainium_matmul(A, B, out="float32", auto_cast="matmult")
    assert float(cast[0, 0]) == 2 + 2.0**-6
    assert float(em.trainium_matmul(A, B, out="float32")[0, 0]) == 2 + 2.0**-9 + 3 * 2.0**-8
    assert float(em.VARIANTS["matmul/trainium-autocast"](A, B, out="float32")[0, 0]) == 2 + 2.0**-6
    # operands already in bf16 are not cast again; fp16 cast type keeps 1 + 2**-9
    a16 = A.astype(BF16)
    assert np.array_equal(em.trainium_matmul(a16, B.astype(BF16), out="float32", auto_cast="all"),
                          em.trainium_matmul(a16, B.astype(BF16), out="float32"))
    assert float(em.trainium_matmul(A, B, out="float32", auto_cast="matmult",
                                    auto_cast_type="fp16")[0, 0]) == 2 + 2.0**-9 + 3 * 2.0**-8
    with pytest.raises(ParameterError, match="--auto-cast"):
        em.trainium_matmul(A, B, auto_cast="fp32")
    with pytest.raises(ParameterError, match="--auto-cast-type"):
        em.trainium_matmul(A, B, auto_cast="matmult", auto_cast_type="int8")

def tiles_reference(a: np.ndarray, b: np.ndarray, sizes) -> np.float32:
    """RN_32 of each tile's exact sum (math.fsum), tiles added in fp32 in order."""
    p = a * b
    psum, k = None, 0
    for n in sizes:
        t = np.float32(math.fsum(p[k:k + n]))
        psum = t if psum is None else np.float32(float(psum) + float(t))
        k += n
    return psum


def test_trainium_k300_is_fp32_sum_of_exact_tile_sums():
    rng = np.random.default_rng(5)
    A = (rng.standard_normal((3, 300)) * np.exp(rng.uniform(-8, 8, (3, 300)))).astype(BF16)
    B = (rng.standard_normal((300, 4)) * np.exp(rng.uniform(-8, 8, (300, 4)))).astype(BF16)
    got = em.trainium_matmul(A, B, out="float32")
    a, b = A.astype(np.float64), B.astype(np.float64)
    want = np.array([[tiles_reference(a[i], b[:, j], (128, 128, 44)) for j in range(4)]
                     for i in range(3)])
    np.testing.assert_array_equal(got, want)
    # and the tiling is visible: other tile sizes give other results for these inputs
    other = em.trainium_matmul(A, B, out="float32", tile_k=100)
    assert not np.array_equal(other, got)


def test_trainium_tile_boundaries_hand_computed():
    # products: 2**24, 1 in tile 1; 1 in tile 2 (K = 129): tile 1 = 2**24 + 1 -> tie -> 2**24;
    # PSUM 2**24 + 1 -> tie -> 2**24, though the exact sum 2**24 + 2 is an fp32 number.
    # Within one tile (K = 3) the sum is exact: 2**24 + 2.  Rounding in every PE instead
    # (sequential tile accumulation) loses both ones.
    a = [2.0**12, 1.0] + [0.0] * 126 + [1.0]
    b = [2.0**12, 1.0] + [0.0] * 126 + [1.0]
    assert float(em.trainium_matmul(row(a, BF16), col(b, BF16), out="float32")[0, 0]) == 2**24
    short = [2.0**12, 1.0, 1.0]
    A, B = row(short, BF16), col(short, BF16)
    assert float(em.trainium_matmul(A, B, out="float32")[0, 0]) == 2**24 + 2
    assert float(em.trainium_matmul(A, B, out="float32",
                                    tile_accumulation="sequential")[0, 0]) == 2**24


def test_trainium_exact_tile_sum_resolves_ties():
    # exact tile sums 2**24 + 1 (a tie -> 2**24) and 2**24 + 1 + 2**-59 (above the tie ->
    # 2**24 + 2), with tiny products that make the float64 running sum inexact.
    a = [2.0**12, 1.0, 2.0**-30, 2.0**-30]
    assert float(em.trainium_matmul(row(a, BF16), col([2.0**12, 1, 2.0**-30, -(2.0**-30)], BF16),
                                    out="float32")[0, 0]) == 2**24
    assert float(em.trainium_matmul(row(a, BF16), col([2.0**12, 1, 2.0**-30, 2.0**-30], BF16),
                                    out="float32")[0, 0]) == 2**24 + 2


def test_trainium_fp8_double_row_tiles_of_256():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((2, 300)).astype(E4M3)
    B = (rng.standard_normal((300, 3)) * 64).astype(E4M3)
    got = em.trainium_matmul(A, B, out="float32", fp8_double_row=True)
    a, b = A.astype(np.float64), B.astype(np.float64)
    want = np.array([[tiles_reference(a[i], b[:, j], (256, 44)) for j in range(3)]
                     for i in range(2)])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(DtypeError):
        em.trainium_matmul(A.astype(BF16), B.astype(BF16), fp8_double_row=True)
    with pytest.raises(ParameterError):
        em.trainium_matmul(A, B, tile_k=256)


def test_trainium_output_rounding_rne_and_stochastic():
    # every output is 1 + 2**-10 in PSUM (products 1*1 and 1*2**-10).  bf16 neighbours 1 and
    # 1 + 2**-7: RNE gives 1; SR rounds up with probability 2**-10 / 2**-7 = 1/8.  For
    # 1 - 2**-10 (neighbours 1 - 2**-8 and 1) SR rounds down with probability 1/4.
    n = 200
    A = np.ones((n, 2), dtype=BF16)
    for small, low, high, p_high in ((2.0**-10, 1.0, 1 + 2.0**-7, 1 / 8),
                                     (-(2.0**-10), 1 - 2.0**-8, 1.0, 3 / 4)):
        B = np.array([[1.0] * n, [small] * n], dtype=BF16)
        rne = em.trainium_matmul(A, B).astype(np.float64)
        assert rne.dtype == np.float64 and np.all(rne == (1.0 if small > 0 else 1.0))
        sr = em.trainium_matmul(A, B, out_rounding="stochastic", seed=7).astype(np.float64)
        assert set(np.unique(sr)) <= {low, high}
        frac = np.mean(sr == high)
        sigma = math.sqrt(p_high * (1 - p_high) / sr.size)
        assert abs(frac - p_high) < 5 * sigma
        assert abs(sr.mean() - (1 + small)) < 5 * sigma * (high - low)
        again = em.trainium_matmul(A, B, out_rounding="stochastic", seed=7)
        other = em.trainium_matmul(A, B, out_rounding="stochastic", seed=8)
        np.testing.assert_array_equal(again.astype(np.float64), sr)
        assert not np.array_equal(other.astype(np.float64), sr)


def test_scalar_engine_computes_in_fp32_then_rounds_once():
    x = np.array([1.0, 1.5, -3.0], dtype=BF16)
    # square of bf16 values is exact in fp32: the result is RN_bf16 of the exact square
    want = round_to(x.astype(np.float64) ** 2, "bfloat16")
    np.testing.assert_array_equal(em.scalar_engine("square", x), want)
    # a float64 result 1 + 2**-8 + 2**-30 is first rounded to fp32 (1 + 2**-8, a bf16 tie) and
    # then to bf16 (-> 1); rounding the float64 directly would give 1 + 2**-7.
    y = em.scalar_engine(lambda v: v.astype(np.float64) + 2.0**-8 + 2.0**-30, x[:1])
    assert y.dtype == BF16 and float(y[0]) == 1.0
    assert em.scalar_engine("exp", x, out="float32").dtype == np.float32


# ---------------------------------------------------------------- properties of all variants

def gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def model_bound(name: str, K: int) -> float:
    """Deterministic error bound coefficient c with |C - AB| <= c |A||B| (Higham, Thm 3.5).

    RNE orders: gamma_K(u) with u = 2**-24.  Tensor-core models: every block truncates its b + 1
    aligned terms (each error < 2u max|term|) and its normalised sum (< 2u |sum|), which sums to
    at most 2uK(1 + 3/b) <= gamma_{4K}(u) over K/b blocks, with u = 2**-(24 + min(n_eab, 0)).
    """
    if name.startswith("matmul/tc-"):
        return gamma(4 * K, 2.0**-14 if "fp8" in name else 2.0**-24)
    if name == "matmul/trainium-autocast":
        # float32 operands cast to bf16 first: |a'b' - ab| <= (2v + v^2)|a||b|, v = 2**-8,
        # then the fp32 PSUM model on the cast values: gamma_K(u) |a'||b'| <= gamma_K(u)(1+v)^2.
        v = 2.0**-8
        return (2 * v + v * v) + gamma(K, 2.0**-24) * (1 + v) ** 2
    return gamma(K, 2.0**-24)


@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("name", sorted(em.VARIANTS))
def test_variants_stay_within_deterministic_bound(name, dtype):
    rng = np.random.default_rng(8)
    K = 300
    A = rng.standard_normal((8, K)).astype(dtype)
    B = (rng.standard_normal((K, 8)) + 2).astype(dtype)  # a mean offset: errors do not cancel
    a, b = A.astype(np.float64), B.astype(np.float64)
    got = em.VARIANTS[name](A, B, out="float32", seed=3)
    assert got.dtype == np.float32 and got.shape == (8, 8)
    err = np.abs(got.astype(np.float64) - a @ b)
    bound = model_bound(name, K) * (np.abs(a) @ np.abs(b))
    assert np.all(err <= bound)
    bf = em.VARIANTS[name](A, B, out="bfloat16", seed=3)
    assert bf.dtype == BF16


@pytest.mark.parametrize("name", [n for n in sorted(em.VARIANTS) if "/tc-" in n or "trainium" in n])
def test_hardware_variants_refuse_other_accumulators(name):
    A = np.ones((2, 2), dtype=BF16)
    with pytest.raises(ParameterError):
        em.VARIANTS[name](A, A, out="float32", acc="bfloat16")


def test_errors_say_what_is_wrong():
    A = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(ShapeError):
        em.matmul(A, A)
    with pytest.raises(DtypeError):
        em.matmul(np.full((2, 2), 1 + 2.0**-40), np.ones((2, 2)))  # 41-bit float64 values
    with pytest.raises(ParameterError):
        em.accumulate(np.ones(4), order="zigzag")
    with pytest.raises(ParameterError):
        em.accumulate(np.ones(4), order="random")  # no rng
    with pytest.raises(ParameterError):
        em.accumulate(np.ones(4), order="blocked", block=0)
    with pytest.raises(ParameterError):
        em.scalar_engine("erfinv", np.ones(2))


def test_empty_reduction_gives_zeros():
    A = np.ones((2, 0), dtype=np.float16)
    B = np.ones((0, 3), dtype=np.float16)
    for fn in (em.matmul, em.trainium_matmul, em.tensor_core_matmul):
        got = fn(A, B, out="float32")
        assert got.shape == (2, 3) and not got.any()
