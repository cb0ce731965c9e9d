"""arith16 standards of layer_norm and rms_norm (docs/methodology.md §2.1): XLA CPU's 16-bit kernels.

Independent truth: jax 0.10.2's own CPU kernels for the formula a JAX user writes on 16-bit arrays without an
upcast (``jnp.mean`` of x and of the squared deviations, ``lax.rsqrt``, the affine step): the corpus'
``xla-arith16`` models must equal them bit for bit,
their outputs on fresh suite seeds must pass ``check(..., accumulate=<16-bit>)``; a one-pass variance written
the same way, zeros and the fp16 squares' overflow must fail.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd import registry
from numstd.corpus import variants_for
from numstd.suites import cases_for

DT = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
TAG = {"bfloat16": "BF16", "float16": "FP16"}
FMTS = ("bfloat16", "float16")
OPS = ("layer_norm", "rms_norm")
STD_TAG = {"layer_norm": "LAYERNORM", "rms_norm": "RMSNORM"}
#: seed offset of the fresh cases (the calibration used the suites' seeds 0 and 1)
FRESH = 7_000


def _jax_fn(op, one_pass=False):
    jax = pytest.importorskip("jax")
    jnp, lax = jax.numpy, jax.lax

    def ln(x, w, b, eps):
        m = jnp.mean(x, -1, keepdims=True)
        if one_pass:  # E[x²] − E[x]², the same 16-bit arithmetic
            v = jnp.mean(x * x, -1, keepdims=True) - m * m
        else:
            v = jnp.mean((x - m) * (x - m), -1, keepdims=True)
        y = (x - m) * lax.rsqrt(v + jnp.asarray(eps, x.dtype))
        y = y if w is None else y * w
        return y if b is None else y + b

    def rms(x, w, eps):
        y = x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + jnp.asarray(eps, x.dtype))
        return y if w is None else y * w

    if op == "layer_norm":
        f = jax.jit(ln, static_argnums=3)
        return lambda ins, eps: np.asarray(f(ins[0], ins[1] if len(ins) > 1 else None,
                                             ins[2] if len(ins) > 2 else None, eps))
    f = jax.jit(rms, static_argnums=2)
    return lambda ins, eps: np.asarray(f(ins[0], ins[1] if len(ins) > 1 else None, eps))


def _xla_variant(op):
    return next(v for v in variants_for(op) if v.name == "xla-arith16")


def _standard(op, fmt):
    return registry.get_standard(f"NS-{STD_TAG[op]}-{TAG[fmt]}-ARITH16")


def _inputs(op, fmt, shape, seed, dist, affine):
    g = np.random.default_rng(seed)
    x = g.standard_normal(shape)
    if dist == "offset":
        x = x + 100 * np.where(g.random(shape[:-1] + (1,)) < 0.5, -1, 1)
    elif dist == "small":
        x = 1 + 0.01 * x
    elif dist == "wide":
        x = x * np.exp(g.uniform(-4, 4, shape))
    K = shape[-1]
    ins = [x.astype(np.float32).astype(DT[fmt])]
    if affine in ("w", "wb"):
        ins.append((1 + 0.1 * g.standard_normal(K)).astype(DT[fmt]))
    elif affine == "b":
        ins.append(None)
    if affine in ("b", "wb") and op == "layer_norm":
        ins.append((0.1 * g.standard_normal(K)).astype(DT[fmt]))
    return ins


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", OPS)
def test_xla_model_equals_jax_bit_for_bit(op, fmt):
    f = _jax_fn(op)
    v = _xla_variant(op)
    n = 0
    for i, (shape, dist, affine) in enumerate((((3, 5), "normal", "wb"), ((4, 17), "offset", "wb"), ((8, 64), "small", "w"),
                                               ((4, 1000), "wide", "b"), ((2, 4096), "offset", "none"),
                                               ((8, 300), "normal", "wb"), ((8, 300), "small", "b"))):
        if op == "rms_norm" and affine == "b":
            affine = "none"
        ins = _inputs(op, fmt, shape, 100 + i, dist, affine)
        want = f(ins, 1e-5).astype(np.float64)
        got = np.asarray(v([a for a in ins], {"eps": 1e-5}, out=fmt, acc=fmt)).astype(np.float64)
        assert np.array_equal(got, want, equal_nan=True), (op, fmt, shape, dist, affine, int((got != want).sum()))
        n += want.size
    assert n > 15_000


def _overflow(op, fmt, x):
    """fp16 squares past 65504: ``RN16(d·d)`` with ``d`` = x (rms_norm) or ``RN16(x − m16)`` (layer_norm) at
    |d| ≥ 256; XLA's mean of squares is then inf and the row's output 0 (b).  True / False / None (within
    half a unit of 256: decided by the 16-bit rounding of d)."""
    if fmt != "float16":
        return False
    x = np.asarray(x, np.float64)
    d = np.abs(x - x.mean(-1, keepdims=True)) if op == "layer_norm" else np.abs(x)
    top = float(d.max()) if d.size else 0.0
    return True if top >= 256.5 else (False if top < 255.5 else None)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", OPS)
def test_jax_passes_arith16_on_fresh_seeds(op, fmt):
    f = _jax_fn(op)
    std = _standard(op, fmt)
    judged = 0
    for case in cases_for(std, seeds=[FRESH]):
        eps = case.params["eps"]
        out = f(list(case.inputs), eps)
        v = numstd.check(out, op=op, inputs=case.inputs, accumulate=fmt, **case.params)
        assert v.standard_id.startswith(std.id)
        over = _overflow(op, fmt, case.inputs[0])
        if over is None:
            continue
        if over:
            assert not v.passed  # a wrong output (the row's zeros / bias), rejected
            continue
        assert v.passed, (case.distribution, np.shape(case.inputs[0]), v.message)
        judged += 1
    assert judged >= 12


@pytest.mark.parametrize("fmt", FMTS)
def test_one_pass_variance_fails_on_offset_rows(fmt):
    # jnp's one-pass E[x²] − E[x]² on 16-bit arrays: RN16 of a mean square ≈ 10^4 cancels the variance ≈ 1
    f = _jax_fn("layer_norm", one_pass=True)
    good = _jax_fn("layer_norm")
    ins = _inputs("layer_norm", fmt, (8, 256), 41, "offset", "wb")
    assert not numstd.check(f(ins, 1e-5), op="layer_norm", inputs=ins, accumulate=fmt, eps=1e-5).passed
    assert numstd.check(good(ins, 1e-5), op="layer_norm", inputs=ins, accumulate=fmt, eps=1e-5).passed


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", OPS)
def test_named_bugs_fail_arith16(op, fmt):
    ins = _inputs(op, fmt, (8, 512), 51, "offset" if op == "layer_norm" else "normal", "wb")
    for name in ("zeros", "truncation", "one-pass-variance" if op == "layer_norm" else "mean-abs"):
        bug = next(v for v in variants_for(op) if v.name == name)
        out = bug(ins, {"eps": 1e-5}, out=fmt, acc=fmt)
        assert not numstd.check(out, op=op, inputs=ins, accumulate=fmt, eps=1e-5).passed, name


def test_fp16_rms_square_overflow_is_rejected():
    # XLA keeps fp16 squares in fp16: 300² overflows, the mean is inf, rsqrt 0 and the whole row 0
    f = _jax_fn("rms_norm")
    x = np.random.default_rng(61).standard_normal((2, 64)).astype(np.float16)
    x[0, 3] = 300
    out = f([x], 1e-5)
    assert (out[0] == 0).all() and (out[1] != 0).any()
    assert not numstd.check(out, op="rms_norm", inputs=[x], accumulate="float16", eps=1e-5).passed


@pytest.mark.parametrize("fmt", FMTS)
def test_16bit_kernels_declared_fp32_fail_the_default(fmt):
    # XLA's stored 16-bit mean moves offset rows by up to |mu|·u16/sigma: the fp32-policy default rejects it,
    # and so it does a 16-bit accumulation of the statistics (the corpus' two-pass in the 16-bit type)
    ins = _inputs("layer_norm", fmt, (4, 4096), 71, "offset", "wb")
    out = _jax_fn("layer_norm")(ins, 1e-5)
    assert not numstd.check(out, op="layer_norm", inputs=ins, eps=1e-5).passed
    assert numstd.check(out, op="layer_norm", inputs=ins, eps=1e-5, accumulate=fmt).passed
    two = next(v for v in variants_for("layer_norm") if v.name == "two-pass")
    acc16 = two(ins, {"eps": 1e-5}, out=fmt, acc=fmt)
    assert not numstd.check(acc16, op="layer_norm", inputs=ins, eps=1e-5).passed


@pytest.mark.parametrize("fmt", FMTS)
def test_stored_mean_shift_is_the_kernels(fmt):
    # the reference's shift16 is the exact move of a row by XLA's stored mean: on offset rows the kernel's
    # error is that shift up to a few u16 (not the bound |mu|·u16/sigma, which is larger on most rows)
    from numstd.reference import reference

    ins = _inputs("layer_norm", fmt, (16, 256), 81, "offset", "none")
    ref = reference("layer_norm", ins, resolution=fmt, eps=1e-5)
    out = _jax_fn("layer_norm")(ins, 1e-5).astype(np.float64)
    u = 2.0 ** -8 if fmt == "bfloat16" else 2.0 ** -11
    e = np.abs(out - ref.values)
    assert (e <= ref.aux["shift16"] + 8 * u * (np.abs(ref.values) + ref.aux["shift16"] + 1)).all()
    x = np.asarray(ins[0], np.float64)
    bound = np.abs(x.mean(-1, keepdims=True)) * u / x.std(-1, keepdims=True)
    assert float((ref.aux["shift16"] < 0.5 * bound).mean()) > 0.2


# ---------------------------------------------------------------------------------------------
# average pooling: lax.reduce_window on 16-bit arrays accumulates in the 16-bit type
# ---------------------------------------------------------------------------------------------

POOL = {"avg_pool1d": (4, 8, 33), "avg_pool2d": (2, 6, 17, 15), "avg_pool3d": (2, 3, 7, 8, 9)}
POOL_P = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}


def _jax_pool(op):
    jax = pytest.importorskip("jax")
    jnp, lax = jax.numpy, jax.lax
    from numstd.ops.pooling import divisor, output_size, spatial_params

    def run(x, p):
        d = int(op[-2])
        lead = x.ndim - d
        k, s, pad, dil = spatial_params(op, p)
        pads = [(0, 0)] * lead
        for i in range(d):
            out = output_size(x.shape[lead + i], k[i], s[i], pad[i], dil[i], p["ceil_mode"])
            need = (out - 1) * s[i] + dil[i] * (k[i] - 1) + 1
            pads.append((pad[i], max(0, need - pad[i] - x.shape[lead + i])))
        f = jax.jit(lambda x: lax.reduce_window(x, jnp.asarray(0, x.dtype), lax.add, (1,) * lead + tuple(k),
                                                (1,) * lead + tuple(s), pads)
                    / jnp.asarray(np.asarray(divisor(op, x.shape[lead:], p)), x.dtype))
        return np.asarray(f(x))

    return run


def _pool_params(op, **kw):
    from numstd.ops.catalog import validate

    return validate(op, [np.zeros(POOL[op], np.float32)], dict(POOL_P, **kw))[2]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", tuple(POOL))
def test_xla_pool_model_equals_jax_bit_for_bit(op, fmt):
    f = _jax_pool(op)
    v = _xla_variant(op)
    for i, kw in enumerate(({}, {"count_include_pad": True}, {"ceil_mode": False, "padding": 0, "stride": 1})):
        p = _pool_params(op, **kw)
        x = (np.random.default_rng(200 + i).standard_normal(POOL[op]) * 3 + 2).astype(DT[fmt])
        want = f(x, p).astype(np.float64)
        got = np.asarray(v([x], p, out=fmt, acc=fmt)).astype(np.float64)
        assert np.array_equal(got, want), (op, fmt, kw, int((got != want).sum()))


@pytest.mark.parametrize("fmt", FMTS)
def test_jax_pool_passes_arith16_on_fresh_seeds_and_fails_fp32_policy(fmt):
    op = "avg_pool2d"
    f = _jax_pool(op)
    std = registry.get_standard(f"NS-AVGPOOL2D-{TAG[fmt]}-ARITH16")
    rejected_fp32 = 0
    from numstd.ops.catalog import validate

    for case in cases_for(std, seeds=[FRESH]):
        out = f(case.inputs[0], validate(op, list(case.inputs), dict(case.params))[2])
        v = numstd.check(out, op=op, inputs=case.inputs, accumulate=fmt, **case.params)
        assert v.standard_id.startswith(std.id) and v.passed, (case.distribution, v.message)
        rejected_fp32 += not numstd.check(out, op=op, inputs=case.inputs, **case.params).passed
        zeros = np.zeros_like(out)
        assert not numstd.check(zeros, op=op, inputs=case.inputs, accumulate=fmt, **case.params).passed
    assert rejected_fp32 >= 1  # the 16-bit window sum is not the fp32 policy's one rounding
