"""numstd.check: the verdict engine's must-show behaviours, bad numbers, bad calls, threads, chunks."""

from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest

import numstd
from numstd.errors import (DtypeError, NonConformance, NumstdError, ParameterError, ShapeError,
                           StandardNotFound, UnknownOpError)
from numstd.formats import round_to
from numstd.reference import reference


def _softmax_case(n=64, rows=32, seed=0, fmt=ml_dtypes.bfloat16):
    rng = np.random.default_rng(seed)
    x = round_to(rng.standard_normal((rows, n)) * 3, np.dtype(fmt).name)
    r = reference("softmax", [x], axis=-1).values
    return x, r


def test_correctly_rounded_output_passes_with_half_ulp():
    x, r = _softmax_case()
    v = numstd.check(round_to(r, "bfloat16"), op="softmax", inputs=[x], axis=-1)
    assert v.passed, v.message
    assert v.standard_id == "NS-SOFTMAX-BF16@1"
    assert v.ulp.max <= 0.5
    assert abs(v.ulp.mean_signed) < 0.1


def test_truncation_fails_on_bias():
    x, r = _softmax_case(n=256, rows=64)
    v = numstd.check(round_to(r, "bfloat16", "rtz"), op="softmax", inputs=[x], axis=-1)
    assert not v.passed
    assert "bias" in [c.name for c in v.failed_criteria]
    assert v.ulp.mean_signed < -0.3
    assert v.ulp.max <= 1.0


def test_truncation_within_one_ulp_fails_on_bias_alone():
    # NS-MATMUL-BF16 accepts stochastic rounding (1 ulp), so truncation stays inside the bound:
    # only the bias criterion can tell it from rounding
    rng = np.random.default_rng(3)
    a = round_to(rng.standard_normal((64, 128)), "bfloat16")
    b = round_to(rng.standard_normal((128, 64)), "bfloat16")
    r = reference("matmul", [a, b]).values
    v = numstd.check(round_to(r, "bfloat16", "rtz"), op="matmul", inputs=[a, b])
    assert [c.name for c in v.failed_criteria] == ["bias"], v.message
    sr = numstd.check(round_to(r, "bfloat16", "stochastic", seed=1), op="matmul", inputs=[a, b])
    assert sr.passed, sr.message


def test_one_corrupted_element_is_named():
    x, r = _softmax_case()
    out = round_to(r, "bfloat16")
    out[5, 17] = out[5, 17] * ml_dtypes.bfloat16(1.25)
    v = numstd.check(out, op="softmax", inputs=[x], axis=-1)
    assert not v.passed
    assert v.criterion("bound").value == 1
    assert v.worst[0].index == (5, 17)
    assert "[5, 17]" in v.message


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_output_fails_specials(bad):
    x, r = _softmax_case()
    out = round_to(r, "bfloat16")
    out[0, 0] = bad
    v = numstd.check(out, op="softmax", inputs=[x], axis=-1)
    assert not v.passed and not v.criterion("specials").passed
    assert v.n_nonfinite == 1


def test_matching_infinities_pass():
    x = np.array([1.0, 100.0, -np.inf, np.inf, np.nan, -0.0], dtype=np.float32)
    with np.errstate(over="ignore"):
        out = np.exp(x.astype(np.float64)).astype(np.float32)
    v = numstd.check(out, op="exp", inputs=[x])
    assert v.passed, v.message
    assert v.n_nonfinite == 3  # exp(100) overflows float32, inf, nan


@pytest.mark.parametrize("actual, crit", [
    (np.zeros((31, 64), ml_dtypes.bfloat16), "shape"),
    ("garbage", "dtype"),  # not an array: no format at all
    (np.zeros((32, 64), np.int32), "dtype"),
    (np.zeros((32, 64), np.float32), "dtype"),
])
def test_wrong_output_is_a_failing_verdict_not_an_exception(actual, crit):
    x, _ = _softmax_case()
    v = numstd.check(actual, op="softmax", inputs=[x], axis=-1, standard="NS-SOFTMAX-BF16@1")
    assert not v.passed
    assert crit in [c.name for c in v.failed_criteria]


def test_zeros_fail_softmax():
    x, r = _softmax_case()
    v = numstd.check(np.zeros_like(x), op="softmax", inputs=[x], axis=-1)
    assert not v.passed and not v.criterion("bound").passed


def test_empty_zero_d_and_non_contiguous():
    e = np.zeros((0,), np.float32)
    assert numstd.check(np.exp(e), op="exp", inputs=[e]).passed
    z = np.float32(0.5)
    assert numstd.check(np.exp(np.asarray(z)), op="exp", inputs=[np.asarray(z)]).passed
    big = np.linspace(-3, 3, 400, dtype=np.float32).reshape(20, 20)
    xs = big[::2, ::3]
    out = np.tanh(xs.astype(np.float64)).astype(np.float32)[:, ::1]
    out_nc = np.asfortranarray(out)
    assert numstd.check(out_nc, op="tanh", inputs=[xs]).passed


@pytest.mark.parametrize("call, exc, fragment", [
    (dict(op="softmx", inputs=[np.ones(3, np.float32)]), UnknownOpError, "softmax"),
    (dict(op="matmul", inputs=[np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)]), ShapeError, ""),
    (dict(op="softmax", inputs=[np.ones(3, np.int32)]), DtypeError, ""),
    (dict(op="softmax", inputs=[np.ones(3, np.float32)], axis=-1, bogus=1), ParameterError, "bogus"),
    (dict(op="softmax", inputs=[np.ones(3, np.float32)], standard="NS-MATMUL-BF16@1"), ParameterError, "matmul"),
    (dict(op="exp", inputs=[np.ones(3, np.float64)]), StandardNotFound, "exp"),
])
def test_malformed_calls_raise_numstd_errors_with_fixes(call, exc, fragment):
    with pytest.raises(exc) as ei:
        numstd.check(np.ones(3, np.float32), **call)
    assert isinstance(ei.value, NumstdError)
    assert fragment in str(ei.value)


def test_verdict_identical_for_any_chunk_size():
    rng = np.random.default_rng(5)
    a = round_to(rng.standard_normal((96, 128)), "bfloat16")
    b = round_to(rng.standard_normal((128, 80)), "bfloat16")
    r = reference("matmul", [a, b]).values
    out = round_to(r * (1 + 2.0**-10 * rng.standard_normal(r.shape)), "bfloat16")
    base = numstd.check(out, op="matmul", inputs=[a, b], chunk_size=10**9).to_json()
    for cs in (1, 7, 80, 1000, 5000):
        assert numstd.check(out, op="matmul", inputs=[a, b], chunk_size=cs).to_json() == base


@pytest.mark.parametrize("op,shapes,params", [
    ("matmul", [(300, 64), (64, 300)], {}),
    ("matmul", [(3, 130, 40), (40, 200)], {}),
    ("softmax", [(300, 301)], {"axis": -1}),
    ("layer_norm", [(280, 300)], {}),
    ("attention", [(2, 260, 16), (2, 150, 16), (2, 150, 130)], {}),
    ("linear", [(4, 100, 64), (200, 64), (200,)], {}),
])
def test_large_chunks_judged_in_pieces_give_the_same_verdict(op, shapes, params, monkeypatch):
    # chunks above CONTRACTION_CHUNK elements are judged in pieces of rows (criteria.chunk_pieces);
    # per-row model terms (softmax, layer_norm) and broadcast ones must be cut consistently.  The
    # piece size is lowered to 2^14 so that these outputs (> 2^16 elements) are cut into pieces.
    import numstd.chunks

    monkeypatch.setattr(numstd.chunks, "CONTRACTION_CHUNK", 1 << 14)
    g = np.random.default_rng(3)
    inputs = [round_to(g.standard_normal(s), "bfloat16") for s in shapes]
    r = reference(op, inputs, **params).values
    out = round_to(r * (1 + 2.0**-9 * g.standard_normal(r.shape)), "bfloat16")
    base = numstd.check(out, op=op, inputs=inputs, chunk_size=10**9, **params)
    assert base.n_elements > 1 << 16
    for cs in (1, 4096, 50_000, None):
        assert numstd.check(out, op=op, inputs=inputs, chunk_size=cs, **params).to_json() == base.to_json()


def test_worst_offenders_with_ties_identical_for_any_chunk_size():
    # bf16 cumsum accumulated in bf16: many elements share the same |error|/bound, and the reported
    # offenders must be the earliest of the tied ones whatever the chunking (an argpartition picked
    # among ties arbitrarily before: chunk_size=777 reported element [12, 63] instead of [20, 63])
    from numstd.corpus import variants_for
    from numstd.registry import get_standard
    from numstd.suites import make_case

    std = get_standard("NS-CUMSUM-BF16@1")
    case = make_case("cumsum", (32, 64), "offset", 7, ["bfloat16"], dict(std.suite.get("params", {})))
    bug = next(v for v in variants_for("cumsum") if v.name == "acc-output-format")
    out = bug(case.inputs, case.params, out=std.output, acc=std.accumulate, seed=1)
    verdicts = [numstd.check(out, op="cumsum", inputs=case.inputs, standard=std.key, chunk_size=cs, **case.params)
                for cs in (10**9, 777, 64, 1)]
    assert not verdicts[0].passed and len(verdicts[0].worst) == 10
    assert all(v.to_json() == verdicts[0].to_json() for v in verdicts)
    norms = [w.normalized for w in verdicts[0].worst]
    flat = [int(np.ravel_multi_index(w.index, (32, 64))) for w in verdicts[0].worst]
    # sorted by normalized error, ties by position
    assert all((n1, -f1) > (n2, -f2) for n1, f1, n2, f2 in zip(norms, flat, norms[1:], flat[1:]))


def test_thread_safe_and_deterministic():
    x, r = _softmax_case(n=128, rows=16)
    outs = [round_to(r, "bfloat16", "stochastic", seed=s) for s in range(8)]
    serial = [numstd.check(o, op="softmax", inputs=[x], axis=-1).to_json() for o in outs]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(lambda o: numstd.check(o, op="softmax", inputs=[x], axis=-1).to_json(), outs * 3))
    assert parallel == serial * 3


def test_assert_conforms_raises_assertion_with_verdict():
    x, r = _softmax_case()
    with pytest.raises(AssertionError) as ei:
        numstd.assert_conforms(np.zeros_like(x), op="softmax", inputs=[x], axis=-1)
    assert isinstance(ei.value, NonConformance) and ei.value.verdict is not None


def test_torch_and_jax_arrays_are_accepted():
    torch = pytest.importorskip("torch")
    x, r = _softmax_case()
    tx = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    v = numstd.check(torch.softmax(tx.float(), -1).to(torch.bfloat16), op="softmax", inputs=[tx], axis=-1)
    assert v.passed, v.message
    jnp = pytest.importorskip("jax.numpy")
    import jax

    jx = jnp.asarray(x)
    v = numstd.check(jax.nn.softmax(jx.astype(jnp.float32), axis=-1).astype(jnp.bfloat16), op="softmax", inputs=[jx], axis=-1)
    assert v.passed, v.message


def test_tf32_selector_picks_the_tf32_standard():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 256)).astype(np.float32)
    b = rng.standard_normal((256, 16)).astype(np.float32)
    tf = round_to(a, "tf32").astype(np.float64) @ round_to(b, "tf32").astype(np.float64)
    out = tf.astype(np.float32)
    assert not numstd.check(out, op="matmul", inputs=[a, b]).passed
    v = numstd.check(out, op="matmul", inputs=[a, b], allow_tf32=True)
    assert v.standard_id.startswith("NS-MATMUL-FP32-TF32@") and v.passed, v.message


@pytest.mark.parametrize("op, shape, kw", [("exp", (3000,), {}), ("softmax", (300, 70), {"axis": -1})])
def test_output_in_non_native_byte_order_gets_the_same_verdict(op, shape, kw):
    # a big-endian output holds the same values: the verdict must not depend on the byte order
    # (the compiled judge reads float32 outputs as stored; it once read these bytes as little-endian)
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    out = reference(op, [x], **kw).values.astype(np.float32)
    want = numstd.check(out, op=op, inputs=[x], **kw)
    assert want.passed
    swapped = out.astype(">f4")
    assert numstd.check(swapped, op=op, inputs=[x], **kw).to_json() == want.to_json()
