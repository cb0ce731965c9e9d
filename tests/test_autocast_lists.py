"""torch.autocast's op lists beyond the first standards (docs/methodology.md §3.1): the
lower-precision list (linear, conv, conv_transpose, attention, matmul → fp16) on float32 inputs,
and the losses of the fp32 list on 16-bit inputs.

Independent truth: float64 numpy arithmetic on the inputs rounded (RNE, ml_dtypes) to the 16-bit
type, as autocast rounds them; math.fsum; torch float64 for the losses; torch.autocast on CPU
itself (marked torch).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import numstd

BF16 = ml_dtypes.bfloat16
F8 = ml_dtypes.float8_e4m3fn
FMTS = {"bfloat16": BF16, "float16": np.float16}
#: (op, standard-ID stem) of the lower-precision list with FP32-TO-{BF16,FP16} standards
LOWER = [("matmul", "MATMUL"), ("linear", "LINEAR"), ("conv", "CONV"), ("conv_transpose", "CONVTRANSPOSE"),
         ("attention", "ATTENTION")]
#: losses of the fp32 list with {BF16,FP16}-TO-FP32 standards (torch 2.13 CPU autocast runs them in fp32)
LOSSES = [("mse_loss", "MSELOSS"), ("kl_div", "KLDIV"), ("nll_loss", "NLLLOSS"), ("huber_loss", "HUBERLOSS"),
          ("smooth_l1_loss", "SMOOTHL1LOSS"), ("hinge_embedding_loss", "HINGEEMBEDDINGLOSS"),
          ("cosine_embedding_loss", "COSINEEMBEDDINGLOSS"), ("triplet_margin_loss", "TRIPLETMARGINLOSS")]
TAG = {"bfloat16": "BF16", "float16": "FP16"}


def _r(x: np.ndarray, fmt: str) -> np.ndarray:
    """x rounded to fmt (RNE), as float64."""
    return x.astype(FMTS[fmt]).astype(np.float64) if fmt in FMTS else x.astype(fmt).astype(np.float64)


def _out(y64: np.ndarray, fmt: str) -> np.ndarray:
    """The fp32 accumulator rounded once to the 16-bit output (what the kernel stores)."""
    return y64.astype(np.float32).astype(FMTS[fmt])


# ---------------------------------------------------------------- lower-precision list, numpy truth
def _linear(x, w, b, fmt):
    return _r(x, fmt) @ _r(w, fmt).T + _r(b, fmt)


def _conv1d(x, w, fmt):
    """Valid 1-d cross-correlation in float64: out[n, o, t] = Σ_{c,j} x[n, c, t + j] w[o, c, j]."""
    xr, wr = _r(x, fmt), _r(w, fmt)
    L = x.shape[-1] - w.shape[-1] + 1
    cols = np.stack([xr[:, :, t:t + w.shape[-1]] for t in range(L)], axis=-1)  # n, c, j, t
    return np.einsum("ncjt,ocj->not", cols, wr)


def _conv_transpose1d(x, w, fmt):
    """1-d transposed convolution (stride 1) in float64: out[n, o, t + j] += x[n, c, t] w[c, o, j]."""
    xr, wr = _r(x, fmt), _r(w, fmt)
    n, _, L = x.shape
    out = np.zeros((n, w.shape[1], L + w.shape[-1] - 1))
    for j in range(w.shape[-1]):
        out[:, :, j:j + L] += np.einsum("nct,co->not", xr, wr[:, :, j])
    return out


def _attention(q, k, v, fmt):
    qr, kr, vr = _r(q, fmt), _r(k, fmt), _r(v, fmt)
    s = qr @ np.swapaxes(kr, -1, -2) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ vr


def _case(op, rng, K=256):
    n = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    if op == "matmul":
        return [n(16, K), n(K, 12)], lambda fmt, ins: _r(ins[0], fmt) @ _r(ins[1], fmt)
    if op == "linear":
        return [n(16, K), n(12, K), n(12)], lambda fmt, ins: _linear(*ins, fmt)
    if op == "conv":
        return [n(2, K // 8, 40), n(6, K // 8, 8)], lambda fmt, ins: _conv1d(*ins, fmt)
    if op == "conv_transpose":
        return [n(2, K // 8, 40), n(K // 8, 6, 8)], lambda fmt, ins: _conv_transpose1d(*ins, fmt)
    # heavy-tailed (Student t, 2 dof): on N(0,1) q, k, v the worst-case score term (4·u_out·scoremag·
    # absout, ~11 ulp at E = 64) hides fp8 input rounding (measured: max |e|/B = 0.43; §3.1)
    t = lambda *s: rng.standard_t(2, s).astype(np.float32)  # noqa: E731
    return [t(1, 2, 32, 64), t(1, 2, K, 64), t(1, 2, K, 64)], lambda fmt, ins: _attention(*ins, fmt)


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op,stem", LOWER)
def test_lower_precision_list_autocast_passes_and_fp8_inputs_fail(op, stem, fmt):
    """fp32 inputs rounded to the 16-bit type, exact products, one rounding to fp32 then to 16 bits
    (autocast's arithmetic, errorless accumulation) passes the FP32-TO-16 standard selected by
    default; the same kernel on inputs rounded to fp8 e4m3, and zeros, fail (K = 64: fp8 input
    rounding errs by ~2^-5·sqrt(K) relative, over the 2·u_out worst-case allowance)."""
    if (op, fmt) == ("matmul", "bfloat16"):
        pytest.skip("NS-MATMUL-FP32-TO-BF16: tests/test_autocast.py")
    rng = np.random.default_rng(7)
    ins, truth = _case(op, rng, K=64)
    v = numstd.check(_out(truth(fmt, ins), fmt), op=op, inputs=ins)
    assert v.passed, v.message
    assert v.standard_id.split("@")[0] == f"NS-{stem}-FP32-TO-{TAG[fmt]}"  # (its latest version)
    assert v.formats["inputs"][0] == "float32" and v.formats["output"] == fmt
    fp8 = _out(truth(fmt, [x.astype(F8).astype(np.float32) for x in ins]), fmt)
    assert not numstd.check(fp8, op=op, inputs=ins).passed
    assert not numstd.check(np.zeros_like(fp8), op=op, inputs=ins).passed
    # the fp32 kernel (no input rounding) rounded once to 16 bits is more accurate: it passes too
    exact = truth("float64", ins) if op != "attention" else _attention(*[x.astype(np.float64) for x in ins], "float64")
    assert numstd.check(_out(exact, fmt), op=op, inputs=ins).passed


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["matmul", "linear"])
def test_lower_precision_list_long_16bit_accumulation_fails(op, fmt):
    """autocast's inputs, but the K = 4096 sum accumulated sequentially in the 16-bit type: its
    error grows like K·u16 and fails (the standards' accumulation term is fp32's)."""
    if (op, fmt) == ("matmul", "bfloat16"):
        pytest.skip("NS-MATMUL-FP32-TO-BF16: tests/test_autocast.py")
    rng = np.random.default_rng(8)
    K = 4096
    a = (rng.standard_normal((4, K)) + 1).astype(np.float32)
    w = (rng.standard_normal((K, 3)) + 1).astype(np.float32)
    ins = [a, w] if op == "matmul" else [a, np.ascontiguousarray(w.T), np.zeros(3, np.float32)]
    ar, wr = _r(a, fmt), _r(w, fmt)
    acc = np.zeros((4, 3), dtype=FMTS[fmt])
    for k in range(K):
        acc = (acc.astype(np.float64) + ar[:, k:k + 1] * wr[k:k + 1, :]).astype(np.float32).astype(FMTS[fmt])
    assert not numstd.check(acc, op=op, inputs=ins).passed
    good = _out(ar @ wr, fmt)
    assert numstd.check(good, op=op, inputs=ins).passed


def test_attention_value_rounding_is_covered_and_a_missing_scale_fails():
    """Rounding v alone (u_out·absout) and P to v's type pass; a missing 1/sqrt(E) fails."""
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((1, 2, 16, 32)).astype(np.float32) for _ in range(3))
    good = _out(_attention(q, k, v, "bfloat16"), "bfloat16")
    assert numstd.check(good, op="attention", inputs=[q, k, v]).passed
    qr, kr, vr = _r(q, "bfloat16"), _r(k, "bfloat16"), _r(v, "bfloat16")
    s = qr @ np.swapaxes(kr, -1, -2)  # no 1/sqrt(E)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    bad = _out((p / p.sum(axis=-1, keepdims=True)) @ vr, "bfloat16")
    assert not numstd.check(bad, op="attention", inputs=[q, k, v]).passed


# ------------------------------------------------------------------------ fp32 list: losses
def _loss_inputs(op, rng, dt):
    n = lambda *s: rng.standard_normal(s).astype(dt)  # noqa: E731
    if op == "kl_div":
        t = rng.dirichlet(np.ones(50), size=32)
        x = np.log(rng.dirichlet(np.ones(50), size=32))
        return [x.astype(dt), t.astype(dt)]
    if op == "nll_loss":
        x = rng.standard_normal((64, 40))
        logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
        return [logp.astype(dt), rng.integers(0, 40, 64)]
    if op == "hinge_embedding_loss":
        return [np.abs(n(64, 50)), np.where(rng.random((64, 50)) < 0.5, 1.0, -1.0).astype(dt)]
    if op == "cosine_embedding_loss":
        return [n(64, 32), n(64, 32), np.where(rng.random(64) < 0.5, 1, -1).astype(dt)]
    if op == "triplet_margin_loss":
        return [n(64, 32), n(64, 32), n(64, 32)]
    return [n(64, 50), n(64, 50)]


def _torch64(op, ins):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    t = [torch.from_numpy(np.asarray(x).astype(np.float64)) if np.asarray(x).dtype.kind == "f" or
         np.asarray(x).dtype in (BF16,) else torch.from_numpy(np.asarray(x)) for x in ins]
    fn = {"mse_loss": F.mse_loss, "kl_div": F.kl_div, "huber_loss": F.huber_loss, "smooth_l1_loss": F.smooth_l1_loss,
          "hinge_embedding_loss": F.hinge_embedding_loss, "cosine_embedding_loss": F.cosine_embedding_loss,
          "triplet_margin_loss": F.triplet_margin_loss, "nll_loss": F.nll_loss}[op]
    return fn(*t)


def _torch16(op, ins, dt):
    torch = pytest.importorskip("torch")
    tdt = {BF16: torch.bfloat16, np.float16: torch.float16}[dt]
    F = torch.nn.functional
    t = [torch.from_numpy(np.asarray(x).astype(np.float32)).to(tdt) if np.asarray(x).dtype.kind in "fV"
         or np.asarray(x).dtype == BF16 else torch.from_numpy(np.asarray(x)) for x in ins]
    if op == "cosine_embedding_loss":  # the target is an integer-valued label tensor
        t[2] = t[2].to(torch.float32)
    fn = {"mse_loss": F.mse_loss, "kl_div": F.kl_div, "huber_loss": F.huber_loss, "smooth_l1_loss": F.smooth_l1_loss,
          "hinge_embedding_loss": F.hinge_embedding_loss, "cosine_embedding_loss": F.cosine_embedding_loss,
          "triplet_margin_loss": F.triplet_margin_loss, "nll_loss": F.nll_loss}[op]
    with torch.autocast("cpu", dtype=tdt):
        return fn(*t)


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op,stem", LOSSES)
def test_fp32_list_losses_of_16bit_inputs(op, stem, fmt):
    """float64 truth rounded to fp32 and torch CPU autocast's own fp32 loss pass the
    -TO-FP32 standard chosen by default; the loss off by half a 16-bit ulp (the least a loss
    computed in 16 bits and widened errs, not the fp32 policy) fails."""
    dt = FMTS[fmt]
    ins = _loss_inputs(op, np.random.default_rng(10), dt)
    y = np.asarray(_torch64(op, ins).numpy(), dtype=np.float32)
    v = numstd.check(y, op=op, inputs=ins)
    assert v.passed, v.message
    assert v.standard_id == f"NS-{stem}-{TAG[fmt]}-TO-FP32@1"
    assert v.formats["inputs"][0] == fmt and v.formats["output"] == "float32"
    ac = _torch16(op, ins, dt)
    assert str(ac.dtype) == "torch.float32"  # torch 2.13 CPU autocast runs it in fp32
    assert numstd.check(ac.numpy(), op=op, inputs=ins).passed
    # an error of half a 16-bit ulp (what computing in 16 bits and widening costs at the least)
    half = 2.0 ** -9 if fmt == "bfloat16" else 2.0 ** -12
    assert not numstd.check(np.float32(y * (1 + half)), op=op, inputs=ins).passed


def test_mse_loss_summed_in_bf16_fails():
    """A sequential bf16 accumulator over 4096 squared differences (16-bit arithmetic while the
    fp32 policy is declared) fails; math.fsum of the exact squares, rounded to fp32, passes."""
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal(4096).astype(BF16) for _ in range(2))
    d2 = (a.astype(np.float64) - b.astype(np.float64)) ** 2
    assert numstd.check(np.float32(math.fsum(d2) / d2.size), op="mse_loss", inputs=[a, b]).passed
    s = BF16(0)
    for x in d2.astype(np.float32):
        s = BF16(np.float32(s) + x)
    assert not numstd.check(np.float32(np.float32(s) / d2.size), op="mse_loss", inputs=[a, b]).passed


# ------------------------------------------------------------------ torch CPU autocast itself
@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_torch_cpu_autocast_lower_precision_ops_pass(fmt):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[fmt]
    rng = np.random.default_rng(12)
    n = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    calls = {
        "matmul": ([n(16, 200), n(200, 12)], lambda a, b: torch.matmul(a, b)),
        "linear": ([n(16, 200), n(12, 200), n(12)], F.linear),
        "conv": ([n(2, 8, 20, 20), n(6, 8, 3, 3), n(6)], F.conv2d),
        "conv_transpose": ([n(2, 8, 12, 12), n(8, 6, 3, 3), n(6)], F.conv_transpose2d),
        "attention": ([n(1, 2, 32, 64), n(1, 2, 48, 64), n(1, 2, 48, 64)], F.scaled_dot_product_attention),
    }
    for op, (ins, fn) in calls.items():
        if (op, fmt) == ("matmul", "bfloat16"):
            continue
        with torch.autocast("cpu", dtype=tdt):
            y = fn(*[torch.from_numpy(x) for x in ins])
        assert y.dtype == tdt, op
        v = numstd.check(y.float().numpy().astype(FMTS[fmt]), op=op, inputs=ins)
        assert v.passed and "-FP32-TO-" in v.standard_id, (op, v.message)


#: ops on CUDA autocast's fp32 list only (torch 2.13's CPU autocast leaves them 16-bit), with params
CUDA_FP32 = [("rms_norm", "RMSNORM", {"eps": 1e-6}), ("group_norm", "GROUPNORM", {"num_groups": 4}),
             ("cosine_similarity", "COSINESIMILARITY", {}), ("normalize", "NORMALIZE", {})]


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op,stem,params", CUDA_FP32)
def test_cuda_fp32_list_ops_of_16bit_inputs(op, stem, params, fmt):
    """torch float64 on the widened 16-bit inputs, rounded to fp32, passes the -TO-FP32 standard
    chosen by default; the same result rounded to the 16-bit type and widened fails."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    dt = FMTS[fmt]
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((16, 8, 64)) * 2 + 0.5).astype(dt)
    t = torch.from_numpy(x.astype(np.float64))
    if op == "rms_norm":
        w = rng.standard_normal(64).astype(dt)
        ins, y = [x, w], F.rms_norm(t, (64,), torch.from_numpy(w.astype(np.float64)), eps=1e-6)
    elif op == "group_norm":
        w, b = rng.standard_normal(8).astype(dt), rng.standard_normal(8).astype(dt)
        ins = [x, w, b]
        y = F.group_norm(t, 4, torch.from_numpy(w.astype(np.float64)), torch.from_numpy(b.astype(np.float64)), eps=1e-5)
    elif op == "cosine_similarity":
        x2 = rng.standard_normal(x.shape).astype(dt)
        ins, y = [x, x2], F.cosine_similarity(t, torch.from_numpy(x2.astype(np.float64)), dim=1, eps=1e-8)
    else:
        ins, y = [x], F.normalize(t, p=2.0, dim=1, eps=1e-12)
    y32 = y.numpy().astype(np.float32)
    v = numstd.check(y32, op=op, inputs=ins, **params)
    assert v.passed, v.message
    assert v.standard_id == f"NS-{stem}-{TAG[fmt]}-TO-FP32@1"
    assert v.formats["inputs"][0] == fmt and v.formats["output"] == "float32"
    assert not numstd.check(y32.astype(dt).astype(np.float32), op=op, inputs=ins, **params).passed


def test_every_autocast_combination_selects_one_standard_without_ambiguity():
    """For each op of both lists and each 16-bit type, the call's formats (every floating input in
    the input type, the output in the other) select exactly the mixed standard by default:
    find_standard neither raises StandardNotFound nor AmbiguousStandard. Float32 inputs of the
    fp32-list ops still select the same-format fp32 standard."""
    from numstd.catalog.registry import find_standard
    from numstd.ops import OPS

    def floats(op, fmt):
        n = sum(1 for name in OPS[op].inputs if name not in ("target",))
        return [fmt] * max(n, 1)

    for fmt in ("bfloat16", "float16"):
        for op, stem in LOWER:
            s = find_standard(op, inputs=floats(op, "float32"), output=fmt)
            assert s.id == f"NS-{stem}-FP32-TO-{TAG[fmt]}" and s.policy == "fp32", (op, fmt, s.key)
        for op, stem in LOSSES + [(o, s) for o, s, _ in CUDA_FP32]:
            s = find_standard(op, inputs=[fmt], output="float32")
            assert s.id == f"NS-{stem}-{TAG[fmt]}-TO-FP32", (op, fmt, s.key)
            assert find_standard(op, inputs=["float32"], output="float32").id.endswith("-FP32")
