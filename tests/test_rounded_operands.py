"""The rounded-operand terms of the TF32 and autocast contraction standards
(numstd/reference/rounded_operands.py, docs/methodology.md §3.1 "Rounded operands").

Truth: exact rational arithmetic (fractions.Fraction) of the rounded and unrounded dot products,
hand-derived cases, torch's own autocast kernels, and the worst case ``2 u_in |A||B|`` the terms
refine."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import numstd
from numstd.core.errors import SchemaError
import ml_dtypes  # noqa: F401  (registers the bfloat16 dtype name)
from numstd.core.formats import get_format, round_to
from numstd.reference import validated_reference

BF = "bfloat16"


def _terms(A, B, fmt, bias=None):
    op, arrays = ("matmul", [A, B]) if bias is None else ("linear", [A, B.T.copy(), bias])
    ref = validated_reference(op, arrays, {"_input_rounding": fmt}, resolution=BF)
    return ref.values, {k: np.asarray(ref.aux[k]) for k in ("indev", "insum", "inrms", "absdot")}


def test_one_product_by_hand():
    # a = 1 + 2^-9 rounds (RNE) to 1 in bf16 (spacing 2^-7); b = 3 is exact: the product moves by 3·2^-9
    A = np.array([[1 + 2.0**-9]], np.float32)
    B = np.array([[3.0]], np.float32)
    _, t = _terms(A, B, BF)
    assert float(t["indev"][0, 0]) == 3 * 2.0**-9
    assert float(t["insum"][0, 0]) == 3 * 2.0**-9  # |a|·0 + 2^-9·(3 + 0)
    assert float(t["inrms"][0, 0]) == 3 * 2.0**-9


@pytest.mark.parametrize("fmt", ["bfloat16", "float16", "tf32"])
def test_indev_is_the_exact_move_of_the_rounded_product(fmt):
    g = np.random.default_rng(5)
    A = g.standard_normal((3, 40)).astype(np.float32)
    B = g.standard_normal((40, 2)).astype(np.float32)
    bias = g.standard_normal(2).astype(np.float32)
    _, t = _terms(A, B, fmt, bias)
    ar, br, biasr = (np.asarray(round_to(x, fmt), np.float64) for x in (A, B, bias))
    for i in range(3):
        for j in range(2):
            exact = sum(Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(40)) + Fraction(float(bias[j]))
            moved = sum(Fraction(ar[i, k]) * Fraction(br[k, j]) for k in range(40)) + Fraction(biasr[j])
            d = abs(float(moved - exact))
            assert t["indev"][i, j] == pytest.approx(d, rel=1e-9, abs=1e-30)
            # the worst case of any rounding no coarser than this one holds the actual move
            w = sum(abs(Fraction(ar[i, k]) * Fraction(br[k, j]) - Fraction(float(A[i, k])) * Fraction(float(B[k, j])))
                    for k in range(40)) + abs(Fraction(biasr[j]) - Fraction(float(bias[j])))
            assert float(w) <= t["insum"][i, j] * (1 + 1e-12)


@pytest.mark.parametrize("dist", ["normal", "uniform", "heavy"])
def test_the_terms_refine_the_old_worst_case(dist):
    from numstd.catalog.suites import draw

    g = np.random.default_rng(11)
    A = draw(g, (16, 512), dist).astype(np.float32)
    B = draw(g, (512, 8), dist).astype(np.float32)
    _, t = _terms(A, B, BF)
    u = 2.0**-8
    assert np.all(t["indev"] <= t["insum"] * (1 + 1e-12))
    assert np.all(t["inrms"] <= t["insum"] * (1 + 1e-12))
    assert np.all(t["insum"] <= (2 * u + u * u) * t["absdot"] * (1 + 1e-9))


def test_a_finer_rounding_stays_within_the_hoeffding_term():
    # TF32 operands under a bf16 allowance: every TF32 rounding error is at most the bf16 one (the
    # bf16 grid is part of TF32's), so |move| <= lam_in·inrms with lam_in = 8 (Hoeffding) — measured
    g = np.random.default_rng(3)
    A = g.standard_normal((64, 1024)).astype(np.float32)
    B = g.standard_normal((1024, 64)).astype(np.float32)
    values, t = _terms(A, B, BF)
    at, bt = (np.asarray(round_to(x, "tf32"), np.float64) for x in (A, B))
    move = np.abs(at @ bt - values)
    assert np.all(move <= t["insum"])
    assert float(np.max(move / t["inrms"])) < 2.0  # far inside 8 (scale: the TF32 errors are ~u_bf16/8)


def _product(A, B, bias, fin, out):
    a, b = (np.asarray(round_to(x, fin), np.float64) for x in (A, B))
    y = a @ b if bias is None else a @ b + np.asarray(round_to(bias, fin), np.float64)
    return np.asarray(round_to(y, out)).astype(np.dtype(get_format(out).numpy_dtype))


#: (standard, output, the rounding it allows, a coarser one that @1 accepted on N(0,1) data at K = 4096)
COARSER = [("NS-MATMUL-FP32-TF32", "float32", "tf32", "bfloat16"),
           ("NS-MATMUL-FP32-TO-BF16", BF, BF, "float8_e4m3fn"),
           ("NS-MATMUL-FP32-TO-FP16", "float16", "float16", BF),
           ("NS-LINEAR-FP32-TO-BF16", BF, BF, "float8_e4m3fn"),
           ("NS-LINEAR-FP32-TO-FP16", "float16", "float16", BF)]


@pytest.mark.parametrize("sid,out,fin,coarse", COARSER, ids=[c[0] for c in COARSER])
def test_a_coarser_rounding_fails_version_2_where_version_1_took_it(sid, out, fin, coarse):
    # @1's worst case 2·u·|A||B| grows like K while a coarser rounding's error grows like sqrt(K)
    g = np.random.default_rng(0)
    A = g.standard_normal((64, 4096)).astype(np.float32)
    B = g.standard_normal((4096, 64)).astype(np.float32)
    linear = sid.startswith("NS-LINEAR")
    bias = g.standard_normal(64).astype(np.float32) if linear else None
    op, inputs = ("linear", [A, B.T.copy(), bias]) if linear else ("matmul", [A, B])
    bad = _product(A, B, bias, coarse, out)
    assert numstd.check(bad, op=op, inputs=inputs, standard=f"{sid}@1").passed
    v = numstd.check(bad, op=op, inputs=inputs, standard=f"{sid}@2")
    assert not v.passed and v.normalized_max > 2
    # legitimate: the allowed rounding, a finer one (TF32 where it is finer), none at all
    for f in {fin, "tf32", "float64"}:
        y = _product(A, B, bias, f, out)
        assert numstd.check(y, op=op, inputs=inputs, standard=f"{sid}@2").passed, f


def test_the_verdict_does_not_depend_on_the_chunk_size():
    g = np.random.default_rng(2)
    A = g.standard_normal((300, 96)).astype(np.float32)
    B = g.standard_normal((96, 40)).astype(np.float32)
    y = _product(A, B, None, BF, BF)
    vs = [numstd.check(y, op="matmul", inputs=[A, B], standard="NS-MATMUL-FP32-TO-BF16@2", chunk_size=c)
          for c in (None, 7 * 40, 1000)]
    assert len({(v.passed, v.normalized_max, v.ulp.mean_signed, v.ulp.max) for v in vs}) == 1


def test_schema_needs_the_rounding_with_its_terms(tmp_path):
    from numstd.models import ErrorModel

    base = {"rho": 0.5, "ftz": True, "constants": {"lam_in": 8.0}}
    with pytest.raises(SchemaError, match="input_rounding"):
        ErrorModel.from_table("matmul", dict(base, error="indev + lam_in * inrms"), "x.toml")
    with pytest.raises(SchemaError, match="input_rounding"):
        ErrorModel.from_table("matmul", dict(base, error="lam_in * absdot", input_rounding="bfloat16"), "x.toml")
    with pytest.raises(SchemaError, match="input_rounding"):
        ErrorModel.from_table("matmul", dict(base, error="indev + lam_in * inrms", input_rounding="bfloat17"), "x.toml")
    m = ErrorModel.from_table("matmul", dict(base, error="indev + lam_in * inrms", input_rounding="tf32"), "x.toml")
    assert m.reference_params() == {"_input_rounding": "tf32"}


@pytest.mark.torch
def test_torch_autocast_matmul_and_linear_pass():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    g = np.random.default_rng(4)
    for fmt, tdt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        code = "BF16" if fmt == "bfloat16" else "FP16"
        A = g.standard_normal((32, 2048)).astype(np.float32)
        B = g.standard_normal((2048, 48)).astype(np.float32)
        bias = g.standard_normal(48).astype(np.float32)
        with torch.autocast("cpu", dtype=tdt):
            y = torch.from_numpy(A) @ torch.from_numpy(B)
            z = F.linear(torch.from_numpy(A), torch.from_numpy(B.T.copy()), torch.from_numpy(bias))
        assert y.dtype == tdt and z.dtype == tdt
        out = np.dtype(get_format(fmt).numpy_dtype)
        yv = y.float().numpy().astype(out)
        zv = z.float().numpy().astype(out)
        assert numstd.check(yv, op="matmul", inputs=[A, B], standard=f"NS-MATMUL-FP32-TO-{code}@2").passed
        assert numstd.check(zv, op="linear", inputs=[A, B.T.copy(), bias], standard=f"NS-LINEAR-FP32-TO-{code}@2").passed


@pytest.mark.torch
@pytest.mark.parametrize("out,coarse", [(BF, "float8_e4m3fn"), ("float16", BF)])
def test_conv_a_coarser_rounding_fails_version_2(out, coarse):
    # the conv standards' operands are the im2col rows and the weight; the kernels here are torch's
    # float64 conv2d of the rounded operands (independent of numstd's reference), then one rounding
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    tag = "BF16" if out == BF else "FP16"
    g = np.random.default_rng(6)
    x = g.standard_normal((2, 128, 8, 8)).astype(np.float32)
    w = g.standard_normal((16, 128, 3, 3)).astype(np.float32)
    b = g.standard_normal(16).astype(np.float32)

    def conv(fin):
        xs, ws, bs = (torch.from_numpy(np.asarray(round_to(a, fin), np.float64)) for a in (x, w, b))
        y = F.conv2d(xs, ws, bs, padding=1).numpy()
        return np.asarray(round_to(y, out)).astype(np.dtype(get_format(out).numpy_dtype))

    sid = f"NS-CONV-FP32-TO-{tag}"
    bad = conv(coarse)
    assert numstd.check(bad, op="conv", inputs=[x, w, b], standard=f"{sid}@1", padding=1).passed  # K = 1,152
    assert not numstd.check(bad, op="conv", inputs=[x, w, b], standard=f"{sid}@2", padding=1).passed
    for f in (out, "tf32", "float64"):
        assert numstd.check(conv(f), op="conv", inputs=[x, w, b], standard=f"{sid}@2", padding=1).passed, f
    with torch.autocast("cpu", dtype=torch.bfloat16 if out == BF else torch.float16):
        y = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1)
    yv = y.float().numpy().astype(np.dtype(get_format(out).numpy_dtype))
    assert numstd.check(yv, op="conv", inputs=[x, w, b], standard=f"{sid}@2", padding=1).passed
