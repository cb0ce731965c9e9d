"""stored16 standards of the 16-bit losses (mse_loss, huber_loss, smooth_l1_loss, hinge_embedding_loss)
and of 16-bit conv_transpose (the col2im scatter-add in the storage format): docs/methodology.md §11, §12.

Independent truth: the stored intermediates' error bounds against float64 (16-bit differences and
squares are exact there) and math.fsum, the col2im aux against direct Python loops over the taps,
torch CPU's own 16-bit kernels (which must pass the default), planted bugs (which must fail it).
"""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.core.formats import get_format, round_to
from numstd.reference import reference
from test_loss16 import _Threads  # (torch's intra-op threads for a block; skips without torch)

DT = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
U16 = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
TAG = {"bfloat16": "BF16", "float16": "FP16"}
LOSS_TAG = {"mse_loss": "MSELOSS", "huber_loss": "HUBERLOSS", "smooth_l1_loss": "SMOOTHL1LOSS",
            "hinge_embedding_loss": "HINGEEMBEDDINGLOSS"}


def _r16(x, fmt):
    return np.asarray(round_to(np.asarray(x, np.float64), fmt), np.float64)


def _pair(fmt, shape=(16, 200), seed=0, heavy=False):
    g = np.random.default_rng(seed)
    a = g.standard_t(2, shape) if heavy else g.standard_normal(shape) * 2
    b = g.standard_normal(shape) * 0.5 + 0.1
    return a.astype(np.float32).astype(DT[fmt]), b.astype(np.float32).astype(DT[fmt])


# ------------------------------------------------------------------------------ the model's terms

@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_stored_terms_are_within_u16_c_i(fmt):
    """Every stored term of the 16-bit kernels is within u16·c_i of the exact term (c_i the
    reference's a16 + h16 for reduction='none'), on 20 000 random 16-bit pairs over 12 binades, where the
    stored values are normal numbers (a subnormal fp16 d² errs by up to 2^-25 absolute, which the
    relative model does not cover: docs/methodology.md §11)."""
    g = np.random.default_rng(1)
    a = _r16(g.standard_normal(20000) * 2.0 ** g.integers(-6, 6, 20000), fmt)
    b = _r16(g.standard_normal(20000), fmt)
    u = U16[fmt]
    d = _r16(a - b, fmt)  # (a - b of two 16-bit values is exact in float64)
    cases = {
        "mse_loss": ({}, (a - b) ** 2, _r16(d * d, fmt)),
        "huber_loss": ({"delta": 0.3}, None, None),
        "smooth_l1_loss": ({"beta": 0.3}, None, None),
    }
    for op, (kw, exact, stored) in cases.items():
        if exact is None:  # every operation of the term rounded to 16 bits: the corpus model, torch's arithmetic
            from numstd.corpus import variants_for

            t = kw.get("delta", kw.get("beta"))
            z = np.abs(a - b)
            exact = np.where(z < t, 0.5 * z * z, t * (z - 0.5 * t)) if op == "huber_loss" else \
                np.where(z < t, 0.5 * z * z / t, z - 0.5 * t)
            model = {v.name: v for v in variants_for(op)}["stored16-arith"]
            stored = np.asarray(model([a.astype(DT[fmt]), b.astype(DT[fmt])], dict(reduction="none", **kw), out=fmt),
                                np.float64)
        aux = reference(op, [a, b], reduction="none", **kw).aux
        c = np.asarray(aux["a16"], np.float64) + np.asarray(aux.get("h16", 0.0), np.float64)
        normal = np.abs(stored) >= get_format(fmt).smallest_normal
        err = np.abs(stored - exact)[normal]
        assert np.all(err <= u * c[normal] + 1e-300), op
        assert np.max(err / np.maximum(u * c[normal], 1e-300)) > 0.4, op  # (the term is not slack)
    x = _r16(g.standard_normal(20000) * 2, fmt)
    y = np.where(g.random(20000) < 0.5, 1.0, -1.0)
    h = np.maximum(1.0 - x, 0.0)
    c = np.asarray(reference("hinge_embedding_loss", [x, y], reduction="none").aux["a16"], np.float64)
    assert np.all(np.abs(np.where(y == 1, x, _r16(h, fmt)) - np.where(y == 1, x, h)) <= u * c + 1e-300)


def test_stored16_aux_of_the_reductions_by_fsum():
    a, b = _pair("bfloat16", shape=(7, 9), seed=3)
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    c = 3.02 * d * d
    for red, div in (("mean", d.size), ("sum", 1)):
        aux = reference("mse_loss", [a, b], reduction=red).aux
        assert float(aux["a16"]) == pytest.approx(math.fsum(c.reshape(-1)) / div, rel=1e-14)
        assert float(aux["s16"]) == pytest.approx(math.sqrt(math.fsum((c * c).reshape(-1))) / div, rel=1e-14)


def _taps_by_loops(x, w, stride, padding, output_padding, dilation):
    """Direct loops over a 1-D conv_transpose (groups 1): per output position, the tap partials in
    kernel order and the running sums after the first (exact float64 sums of the exact products)."""
    n, ci, L = x.shape
    _, co, k = w.shape
    wide = (L - 1) * stride + dilation * (k - 1) + 1 + output_padding
    parts = {}
    for nn, o, j, i in itertools.product(range(n), range(co), range(k), range(L)):
        p = math.fsum(float(x[nn, c, i]) * float(w[c, o, j]) for c in range(ci))
        parts.setdefault((nn, o, i * stride + j * dilation), []).append((j, p))
    out = wide - 2 * padding
    s16, a16 = np.zeros((n, co, out)), np.zeros((n, co, out))
    for (nn, o, pos), ps in parts.items():
        if not padding <= pos < padding + out:
            continue
        ps = [p for _, p in sorted(ps)]
        run = list(itertools.accumulate(ps))[1:]
        s16[nn, o, pos - padding] = math.sqrt(math.fsum([p * p for p in ps] + [r * r for r in run]))
        a16[nn, o, pos - padding] = math.fsum([abs(p) for p in ps] + [abs(r) for r in run])
    return s16, a16


def test_conv_transpose_col2im_aux_against_direct_loops():
    g = np.random.default_rng(5)
    x = g.standard_normal((2, 3, 6)).astype(np.float32)
    w = g.standard_normal((3, 2, 4)).astype(np.float32)
    p = dict(stride=2, padding=1, output_padding=1, dilation=1, groups=1)
    aux = reference("conv_transpose", [x, w], **p).aux
    s16, a16 = _taps_by_loops(x, w, 2, 1, 1, 1)
    f = 1.0 + 2.0 ** -7
    np.testing.assert_allclose(aux["s16"], f * s16, rtol=1e-12, atol=0)
    np.testing.assert_allclose(aux["a16"], f * a16, rtol=1e-12, atol=0)


# ------------------------------------------------------------------------- losses: torch and bugs

def _torch_loss(op, a, b, fmt, reduction, **kw):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, fmt)
    f = getattr(torch.nn.functional, op)
    y = f(torch.from_numpy(np.asarray(a, np.float32)).to(dt), torch.from_numpy(np.asarray(b, np.float32)).to(dt),
          reduction=reduction, **kw)
    return y.float().numpy().astype(DT[fmt])


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op, kw", [("mse_loss", {}), ("huber_loss", {"delta": 0.3}),
                                    ("smooth_l1_loss", {"beta": 0.3}), ("hinge_embedding_loss", {"margin": 1.0})])
def test_torch_cpu_16_bit_losses_pass_the_default(op, kw, fmt):
    """The default for a 16-bit loss is its stored16 standard (where torch's kernel is once rounded,
    fp16 huber and bf16 smooth_l1, the stored term is the mean's and sum's intermediate; never
    AmbiguousStandard), and torch CPU's own kernel passes it for every reduction, on normal and
    heavy-tailed inputs, threshold 0.3."""
    for heavy in (False, True):
        a, b = _pair(fmt, seed=2, heavy=heavy)
        if op == "hinge_embedding_loss":
            b = np.where(np.asarray(b, np.float64) > 0.1, 1.0, -1.0).astype(DT[fmt])
        if op == "mse_loss" and fmt == "float16":  # (keep every stored d² finite: the overflow is a defect)
            a = np.clip(np.asarray(a, np.float32), -200, 200).astype(DT[fmt])
        for red in ("none", "mean", "sum"):
            # (reduction="none" with a threshold exact in 16 bits: with delta = 0.3 the rounded threshold
            # shifts every linear bf16 huber term one way, +0.34 ulp on average, which the element-level
            # bias criterion does not model: docs/methodology.md §11, limitations)
            k = {n: (1.0 if n == "delta" else 0.5) for n in kw if n in ("delta", "beta")} if red == "none" else {}
            k = {**kw, **k}
            y = _torch_loss(op, a, b, fmt, red, **k)
            v = numstd.check(y, op=op, inputs=[a, b], reduction=red, **k)
            assert v.passed, (red, heavy, v.message)
            assert v.standard_id.startswith(f"NS-{LOSS_TAG[op]}-{TAG[fmt]}-STORED16@"), v.standard_id
            assert v.formats["policy"] == "stored16"


def _hinge_pair(fmt, seed, heavy):
    a, b = _pair(fmt, shape=(64, 1024), seed=seed, heavy=heavy)
    return a, np.where(np.asarray(b, np.float64) > 0.1, 1.0, -1.0).astype(DT[fmt])


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op, kw, model", [("mse_loss", {}, "stored16"), ("huber_loss", {"delta": 0.3}, None),
                                           ("smooth_l1_loss", {"beta": 0.3}, None),
                                           ("hinge_embedding_loss", {"margin": 1.0}, "stored16")])
def test_torch_cpu_16_bit_sums_above_the_grain_are_modelled(op, kw, model, fmt):
    """reduction='sum' of 64 x 1024 = 2 x GRAIN_SIZE terms: torch sums the stored 16-bit losses with
    at::sum in their dtype, whose two chunk sums are stored in 16 bits.  With 2 intra-op threads torch's
    output equals the corpus's stored16 model bit for bit on every case; it passes the default (the g16
    term), and a 16-bit running sum of the very same stored terms still fails the default
    (test_stored16_sums_at_1_rejected_torch: the earlier versions, without g16)."""
    from numstd.corpus import variants_for

    once = (op, fmt) in (("huber_loss", "float16"), ("smooth_l1_loss", "bfloat16"))
    name = model or ("stored16-once" if once else "stored16-arith")
    v16 = next(v for v in variants_for(op) if v.name == name)
    with _Threads(2):
        for seed in range(8):
            a, b = _sum_case(op, fmt, seed)
            y = _torch_loss(op, a, b, fmt, "sum", **kw)
            m = np.asarray(v16([a, b], dict(reduction="sum", **kw), out=fmt))
            assert np.float64(y) == np.float64(m), (seed, float(y), float(m))
            v = numstd.check(y, op=op, inputs=[a, b], reduction="sum", **kw)
            assert v.passed and "-STORED16@" in v.standard_id, v.message
            pinned = v.standard_id.rsplit("@", 1)[0] + ("@1" if once else "@2")  # (the version that added g16)
            assert numstd.check(y, op=op, inputs=[a, b], reduction="sum", standard=pinned, **kw).passed
            if seed == 0:  # the planted bug: one 16-bit running sum of torch's own stored terms
                run = DT[fmt](0.0)
                for t in np.asarray(_torch_loss(op, a, b, fmt, "none", **kw)).reshape(-1):
                    run = DT[fmt](run + t)
                assert np.isfinite(np.float64(y)) and np.isfinite(np.float64(run))
                assert not numstd.check(np.asarray(run), op=op, inputs=[a, b], reduction="sum", **kw).passed


@pytest.mark.torch
@pytest.mark.parametrize("op, fmt, kw, seed", [("mse_loss", "bfloat16", {}, 12),
                                               ("hinge_embedding_loss", "float16", {"margin": 1.0}, 5),
                                               ("hinge_embedding_loss", "bfloat16", {"margin": 1.0}, 3)])
def test_stored16_sums_at_1_rejected_torch(op, fmt, kw, seed):
    """Cases found by a search over 16 seeds (3 of 16 rejected for hinge, 2 of 16 for bf16 mse): torch's
    own sum of 64 x 1024 stored terms (2 threads: two 16-bit chunk sums) is more than @1's bound off
    (it modelled one fp32 sum) and within @2's (g16)."""
    with _Threads(2):
        a, b = _sum_case(op, fmt, seed)
        y = _torch_loss(op, a, b, fmt, "sum", **kw)
    sid = f"NS-{LOSS_TAG[op]}-{TAG[fmt]}-STORED16"
    assert not numstd.check(y, op=op, inputs=[a, b], reduction="sum", standard=f"{sid}@1", **kw).passed
    assert numstd.check(y, op=op, inputs=[a, b], reduction="sum", standard=f"{sid}@2", **kw).passed
    v = numstd.check(y, op=op, inputs=[a, b], reduction="sum", **kw)  # (the default: @2 or a later version)
    assert v.passed and v.standard_id.startswith(f"{sid}@"), v.message


@pytest.mark.torch
def test_once_rounded_smooth_l1_mean_near_a_rounding_boundary():
    """The CI failure of 2026-12-03 (grade of KernelBench's HuberLoss against itself, heavy inputs): torch's
    bf16 smooth_l1_loss mean is RN16 of the fp32 mean of the *stored* terms RN16(l_i), so where the exact
    mean lies within about u16·|loss|/sqrt(K) of a rounding boundary it rounds the other way.  A search
    over 1 000 heavy-tailed 64 x 1024 draws found 3 (seeds 239, 619, 928); on each the fp32-policy
    standard rejects torch and the stored16 default, which models the stored terms, accepts it; torch's
    output is the corpus model stored16-once bit for bit."""
    from numstd.catalog.suites import draw
    from numstd.corpus import variants_for

    fmt = get_format("bfloat16")
    model = next(v for v in variants_for("smooth_l1_loss") if v.name == "stored16-once")
    for seed in (239, 619, 928):
        rng = np.random.default_rng(seed)
        a, b = (_r16(np.clip(draw(rng, (64, 1024), "heavy", fmt), -fmt.max_finite, fmt.max_finite), "bfloat16")
                .astype(np.float32).astype(DT["bfloat16"]) for _ in range(2))
        y = _torch_loss("smooth_l1_loss", a, b, "bfloat16", "mean")
        assert np.float64(y) == np.float64(model([a, b], {"reduction": "mean", "beta": 1.0}, out="bfloat16"))
        assert not numstd.check(y, op="smooth_l1_loss", inputs=[a, b], policy="fp32").passed, seed
        v = numstd.check(y, op="smooth_l1_loss", inputs=[a, b])
        assert v.passed and v.standard_id.startswith("NS-SMOOTHL1LOSS-BF16-STORED16@"), v.message


def _sum_case(op, fmt, seed):
    """A 64 x 1024 pair, heavy-tailed on odd seeds (hinge: targets +-1); fp16 inputs scaled (and mse's
    clipped) so that the sum of 65 536 terms stays below 65504 (an overflowing sum is inf for torch,
    the exact result and every bug alike: nothing to judge)."""
    heavy = seed % 2 == 1
    if op == "hinge_embedding_loss":
        return _hinge_pair(fmt, seed, heavy)
    a, b = _pair(fmt, (64, 1024), seed, heavy)
    if fmt == "float16":
        scale = 1.0 / 16 if op == "mse_loss" else 0.25
        a = (np.clip(np.asarray(a, np.float32), -20, 20) * scale).astype(DT[fmt])
        b = (np.asarray(b, np.float32) * scale).astype(DT[fmt])
    return a, b


@pytest.mark.torch
@pytest.mark.parametrize("op, fmt, kw", [("huber_loss", "bfloat16", {"delta": 0.3}),
                                         ("smooth_l1_loss", "float16", {"beta": 0.3})])
def test_torch_cpu_16_bit_term_arithmetic_is_the_corpus_model(op, fmt, kw):
    """torch's bf16 huber_loss and fp16 smooth_l1_loss round every operation of the term to 16 bits:
    their 'none' outputs equal the corpus model stored16-arith bit for bit, and differ from the
    once-rounded term (and from rounding only d) on many elements (threshold 0.3, not a power of 2)."""
    from numstd.corpus import variants_for

    a, b = _pair(fmt, shape=(8, 500), seed=7)
    y = np.asarray(_torch_loss(op, a, b, fmt, "none", **kw), np.float64)
    by = {v.name: v for v in variants_for(op)}
    model = np.asarray(by["stored16-arith"]([a, b], dict(reduction="none", **kw), out=fmt), np.float64)
    z = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    normal = 0.5 * z * z >= get_format(fmt).smallest_normal  # (an fp16-subnormal z²/2 rounds in another order)
    assert normal.mean() > 0.95
    np.testing.assert_array_equal(y[normal], model[normal])
    once = np.asarray(reference(op, [a, b], reduction="none", **kw).values, np.float64)
    assert np.mean(y != _r16(once, fmt)) > 0.05


@pytest.mark.torch
def test_torch_cpu_fp16_mse_overflow_still_fails():
    """The documented defect (known_library_defects.toml, torch-cpu-mse-loss-fp16-overflow): a stored
    d² above 65504 is inf, the exact loss finite; no policy absorbs it."""
    a = np.array([300.0, 0.0, 1.0, 2.0], np.float16)
    b = np.zeros(4, np.float16)
    y = _torch_loss("mse_loss", a, b, "float16", "mean")
    assert np.isinf(np.float64(y))
    assert not numstd.check(y, op="mse_loss", inputs=[a, b]).passed


def _bugs16(fmt):
    def acc16(q):  # the mean's running sum kept in the 16-bit format
        s = 0.0
        for t in q.reshape(-1):
            s = float(_r16(s + float(t), fmt))
        return s / q.size

    return {
        "16-bit accumulation of the mean": acc16,
        "K - 1 denominator": lambda q: q.sum() / (q.size - 1),
        "sum for the mean": lambda q: q.sum(),
        "half": lambda q: 0.5 * q.mean(),
    }


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_planted_mse_bugs_fail_the_stored16_default(fmt):
    """The bugs computed on torch's own stored terms RN16(RN16(d)²) (so only the bug differs); the
    K - 1 denominator where 1/(K - 1) is visible (K = 40 elements), the 16-bit running sum on the long
    reduction (K = 3 200: on 40 terms it stays within the stored terms' own allowance), the rest on both."""
    for shape in ((4, 10), (16, 200)):
        a, b = _pair(fmt, shape=shape, seed=4)
        d = _r16(np.asarray(a, np.float64) - np.asarray(b, np.float64), fmt)
        q = _r16(d * d, fmt)
        good = np.asarray(q.mean()).astype(DT[fmt])
        assert numstd.check(good, op="mse_loss", inputs=[a, b]).passed
        for name, bug in _bugs16(fmt).items():
            if (name == "K - 1 denominator") != (q.size < 100):  # (K - 1 where visible; 16-bit sums on long rows)
                if name in ("K - 1 denominator", "16-bit accumulation of the mean"):
                    continue
            y = np.asarray(bug(q)).astype(DT[fmt])
            assert not numstd.check(y, op="mse_loss", inputs=[a, b]).passed, (name, shape)
        y = np.asarray(np.abs(d).mean()).astype(DT[fmt])  # the missing square
        assert not numstd.check(y, op="mse_loss", inputs=[a, b]).passed


def test_fp32_policy_16_bit_losses_where_torch_rounds_once():
    """NS-SMOOTHL1LOSS-BF16 and NS-HUBERLOSS-FP16 (fp32 policy): torch's bf16 smooth_l1 and fp16 huber
    are the once-rounded terms; selected with policy='fp32', the stored16 one by default."""
    for op, fmt, kw in (("smooth_l1_loss", "bfloat16", {"beta": 0.5}), ("huber_loss", "float16", {"delta": 1.0})):
        a, b = _pair(fmt, shape=(8, 100), seed=6)
        z = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
        t = kw.get("beta", kw.get("delta"))
        exact = np.where(z < t, 0.5 * z * z / t, z - 0.5 * t) if op == "smooth_l1_loss" else \
            np.where(z < t, 0.5 * z * z, t * (z - 0.5 * t))
        pytest.importorskip("torch")
        y = _torch_loss(op, a, b, fmt, "none", **kw)
        assert np.array_equal(np.asarray(y, np.float64), _r16(exact, fmt))  # once rounded, every element
        v = numstd.check(y, op=op, inputs=[a, b], reduction="none", policy="fp32", **kw)
        assert v.passed and v.formats["policy"] == "fp32", v.message


# ------------------------------------------------------------------------------- conv_transpose

CT = [2, 16, 16, 1, 2, 1, 1, 1, 3, 3, 8, 8]  # conv_transpose2d, 3x3 stride 2: up to 4 taps, C_in 16


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_conv_transpose_col2im16_passes_the_default_and_16_bit_accumulation_fails(fmt):
    """torch's 16-bit col2im arithmetic (the corpus model, bit for bit torch where it takes that path)
    passes the default (stored16) and fails the fp32 policy; accumulating all C_in·taps products in
    16 bits fails the default; torch CPU itself passes the default whatever its path on this machine."""
    from numstd.catalog.suites import make_case
    from numstd.corpus import variants_for

    by = {v.name: v for v in variants_for("conv_transpose")}
    c = make_case("conv_transpose", CT, "normal", 3, [fmt])
    y = by["col2im16"](c.inputs, c.params, out=fmt)
    v = numstd.check(y, op="conv_transpose", inputs=c.inputs, **c.params)
    assert v.passed and v.standard_id.startswith(f"NS-CONVTRANSPOSE-{TAG[fmt]}-STORED16@"), v.message
    assert not numstd.check(y, op="conv_transpose", inputs=c.inputs, policy="fp32", **c.params).passed
    yb = by["acc-output-format"](c.inputs, c.params, out=fmt)
    assert not numstd.check(yb, op="conv_transpose", inputs=c.inputs, **c.params).passed
    pytest.importorskip("torch")
    name = "torch-cpu-col2im16" if by["torch-cpu-col2im16"].applies(get_format(fmt),
                                                                      [get_format(fmt)] * 2,
                                                                      c.params) else "torch-cpu"
    yt = by[name](c.inputs, c.params, out=fmt)
    assert numstd.check(yt, op="conv_transpose", inputs=c.inputs, **c.params).passed, name


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_col2im16_model_is_the_probed_torch_arithmetic(fmt):
    """The corpus model equals, bit for bit, the 2-D model that torch_conv_transpose_col2im16 compares
    torch against (on the probe's case); where this machine's torch takes the col2im path, torch too."""
    from numstd.corpus import variants_for
    from numstd.corpus.conv import torch_conv_transpose_col2im16

    dt = DT[fmt]
    g = np.random.default_rng(13)
    x = g.standard_normal((2, 8, 5, 5)).astype(dt)
    w = (g.standard_normal((8, 4, 3, 3)) / 5).astype(dt)
    b = g.standard_normal(4).astype(dt)
    acc = np.zeros((2, 4, 12, 12), dt)
    for i, j in itertools.product(range(3), range(3)):
        part = np.einsum("nchw,co->nohw", x.astype(np.float32), w[:, :, i, j].astype(np.float32)).astype(dt)
        acc[:, :, i:i + 9:2, j:j + 9:2] = (acc[:, :, i:i + 9:2, j:j + 9:2].astype(np.float32)
                                           + part.astype(np.float32)).astype(dt)
    model = (acc[:, :, 1:11, 1:11].astype(np.float32) + b[None, :, None, None].astype(np.float32)).astype(dt)
    p = dict(stride=2, padding=1, output_padding=1, dilation=1, groups=1)
    by = {v.name: v for v in variants_for("conv_transpose")}
    y = by["col2im16"]([x, w, b], p, out=fmt)
    np.testing.assert_array_equal(np.asarray(y, np.float32), model.astype(np.float32))
    pytest.importorskip("torch")
    if torch_conv_transpose_col2im16(fmt):
        yt = by["torch-cpu-col2im16"]([x, w, b], p, out=fmt)
        np.testing.assert_array_equal(np.asarray(yt, np.float32), model.astype(np.float32))


# ------------------------------------------------------------------ sum: at::sum's stored chunk sums

def _sum_input(fmt, seed, k=65536):
    """N(1, 1) draws (fp16: N(0.25, 0.25), so that a sum of 300 000 stays below 65504)."""
    scale = 0.25 if fmt == "float16" else 1.0
    return ((np.random.default_rng(seed).standard_normal(k) + 1.0) * scale).astype(np.float32).astype(DT[fmt])


def _torch_sum(x, fmt, **kw):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.asarray(x, np.float32)).to(getattr(torch, fmt)).sum(**kw).float().numpy().astype(DT[fmt])


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("threads", [2, 8])
def test_torch_cpu_16_bit_one_output_sum_is_the_stored16_model(fmt, threads):
    """torch.sum of a 16-bit tensor to one output, 65 536 to 300 000 elements: bit for bit the corpus
    model stored16-chunks<threads> (one chunk sum per thread stored in 16 bits, the stored sums added
    in fp32 and rounded once) on every case, differing from the once-rounded sum on some, and within
    the default NS-SUM-<fmt>-STORED16 on all; the reference's g16 is 0 for several outputs."""
    from numstd.corpus import variants_for

    model = next(v for v in variants_for("sum") if v.name == f"stored16-chunks{threads}")
    differs = 0
    with _Threads(threads):
        for seed in range(12):
            x = _sum_input(fmt, seed, (65536, 100000, 300000)[seed % 3])
            y = _torch_sum(x, fmt)
            m = model([x], {"axis": None, "keepdims": False}, out=fmt)
            assert np.float64(y) == np.float64(m), seed
            differs += np.float64(y) != _r16(math.fsum(np.asarray(x, np.float64)), fmt)
            v = numstd.check(y, op="sum", inputs=[x])
            assert v.passed and v.standard_id == f"NS-SUM-{TAG[fmt]}-STORED16@1", v.message
    assert differs >= 1
    assert float(reference("sum", [x.reshape(4, -1)], axis=-1).aux["g16"]) == 0.0


@pytest.mark.torch
@pytest.mark.parametrize("fmt, seeds", [("bfloat16", (2, 12, 15)), ("float16", (3, 6, 16))])
def test_fp32_policy_sum_rejected_torch_and_bugs_still_fail(fmt, seeds):
    """Cases found by a search over 40 seeds (8 of 40 rejected in bf16, 9 in fp16): torch.sum of 65 536
    elements (2 threads: two stored chunk sums) fails the fp32-policy NS-SUM-<fmt>@1 and passes the
    default; a 16-bit running sum and a sum that drops the last 1 024 elements (about 1.5 %) still fail the default."""
    for seed in seeds:
        x = _sum_input(fmt, seed)
        with _Threads(2):
            y = _torch_sum(x, fmt)
        assert not numstd.check(y, op="sum", inputs=[x], policy="fp32").passed, seed
        assert numstd.check(y, op="sum", inputs=[x]).passed, seed
        run = DT[fmt](0.0)
        for t in x:
            run = DT[fmt](run + t)
        assert not numstd.check(np.asarray(run), op="sum", inputs=[x]).passed
        dropped = np.asarray(_r16(math.fsum(np.asarray(x[:-1024], np.float64)), fmt)).astype(DT[fmt])
        assert not numstd.check(dropped, op="sum", inputs=[x]).passed


# ------------------------------------------------------- normalize: the stored norm's shared shift

def _offset_rows(fmt, seed):
    from numstd.catalog.suites import draw

    f = get_format(fmt)
    return _r16(draw(np.random.default_rng(seed), (16, 2048), "offset", f), fmt).astype(np.float32).astype(DT[fmt])


@pytest.mark.torch
def test_torch_cpu_bf16_normalize_on_alike_rows_passes_the_default_and_biased_kernels_fail():
    """torch's bf16 F.normalize stores the row norm in bf16, one rounding shared by the row; on rows
    alike (grade's "offset" draws: every row's norm nearly the same) all rows share its sign, so the
    mean error is a systematic +-0.5 ulp that NS-NORMALIZE-BF16-STORED16@2 rejected on 18 of 20 draws.
    @3 (stored_shift) allows exactly the stored norm's shift, computed from the exact norm: torch
    passes on all 20, a kernel that does not store the norm (fp32, one rounding) passes, and a kernel
    whose norm is off by 2 ulp16 instead of rounded (y·(1 + 2^-7)) or truncates its output fails."""
    torch = pytest.importorskip("torch")
    rejected_before = 0
    for seed in range(20):
        x = _offset_rows("bfloat16", seed)
        tx = torch.from_numpy(np.asarray(x, np.float32)).bfloat16()
        y = torch.nn.functional.normalize(tx, p=2.0, dim=1).float().numpy().astype(DT["bfloat16"])
        v = numstd.check(y, op="normalize", inputs=[x], p=2.0, dim=1)
        assert v.passed and v.standard_id == "NS-NORMALIZE-BF16-STORED16@3", (seed, v.message)
        rejected_before += not numstd.check(y, op="normalize", inputs=[x], p=2.0, dim=1,
                                            standard="NS-NORMALIZE-BF16-STORED16@2").passed
        x64 = np.asarray(x, np.float64)
        exact = x64 / np.sqrt(np.sum(x64 * x64, axis=1, keepdims=True))
        assert numstd.check(_r16(exact, "bfloat16").astype(DT["bfloat16"]), op="normalize", inputs=[x], p=2.0,
                            dim=1).passed
        if seed < 5:
            off = _r16(exact * (1 + 2.0 ** -7), "bfloat16").astype(DT["bfloat16"])
            assert not numstd.check(off, op="normalize", inputs=[x], p=2.0, dim=1).passed, seed
            trunc = np.asarray(round_to(exact, "bfloat16", mode="rtz"), np.float64).astype(DT["bfloat16"])
            assert not numstd.check(trunc, op="normalize", inputs=[x], p=2.0, dim=1).passed, seed
    assert rejected_before >= 15


# (seed, case id, @N that rejected torch there): fresh suite cases on which the random-walk term alone
# rejected torch's own bf16 kernel (python /tmp hunt of seeds 3-22: mse 4/300, smooth_l1 7/300)
_ALIKE = [("mse_loss", "NS-MSELOSS-BF16-STORED16", 2, 8, "mse_loss/64x10/offset/s8"),
          ("mse_loss", "NS-MSELOSS-BF16-STORED16", 2, 5, "mse_loss/32x1000/offset/s5"),
          ("smooth_l1_loss", "NS-SMOOTHL1LOSS-BF16-STORED16", 1, 9, "smooth_l1_loss/64x10/offset/s9"),
          ("smooth_l1_loss", "NS-SMOOTHL1LOSS-BF16-STORED16", 1, 3, "smooth_l1_loss/32x1000/offset/s3")]


@pytest.mark.torch
@pytest.mark.parametrize("op,sid,old,seed,cid", _ALIKE, ids=[c[4] for c in _ALIKE])
def test_alike_stored_terms_shift_the_mean_exactly(op, sid, old, seed, cid):
    """On offset rows the squares (terms) of torch's bf16 loss lie near one value, so their roundings
    share a sign: the mean of the stored terms is shifted by far more than the random walk of
    independent roundings.  The reference's exact shift (aux e16 / e16t) is checked against torch's own
    stored terms (its ``reduction="none"`` output, independent of numstd's arithmetic): it is at least
    their shift; torch's mean passes the current default and fails the version that bounded the shift by
    the random walk only; an output 2 ulp off (a mean of terms rounded the wrong way) still fails."""
    pytest.importorskip("torch")
    from numstd.registry import get_standard
    from numstd.suites import cases_for

    std = get_standard(sid)
    case = next(c for c in cases_for(std, seeds=[seed]) if c.id == cid)
    a, b = (np.asarray(x) for x in case.inputs)
    kw = {k: v for k, v in case.params.items() if k != "reduction"}
    assert case.params["reduction"] == "mean"
    stored = np.asarray(_torch_loss(op, a, b, "bfloat16", "none", **kw), dtype=np.float64)
    ref = reference(op, [a, b], resolution="bfloat16", **case.params)
    exact_terms = np.asarray(reference(op, [a, b], reduction="none", **kw).values)
    torch_shift = abs(math.fsum((stored - exact_terms).ravel())) / stored.size
    key = "e16" if op == "mse_loss" else "e16t"
    assert float(ref.aux[key]) >= torch_shift > 0
    random_walk = math.sqrt(math.fsum(((stored - exact_terms) ** 2).ravel())) / stored.size
    assert torch_shift > 2 * random_walk  # alike terms: not a random walk
    y = _torch_loss(op, a, b, "bfloat16", "mean", **kw)
    assert not numstd.check(y, op=op, inputs=[a, b], standard=f"{sid}@{old}", **case.params).passed
    v = numstd.check(y, op=op, inputs=[a, b], **case.params)
    assert v.passed and v.standard_id == f"{sid}@{std.version}" and std.version > old, v.message
    off = np.asarray(y).astype(np.float64) + 2 * float(np.spacing(np.asarray(y).astype(np.float32)) * 2 ** 16)
    bad = np.asarray(off).astype(DT["bfloat16"])
    assert not numstd.check(bad, op=op, inputs=[a, b], **case.params).passed
