"""Precision policies (docs/methodology.md §2.1): schema, selection, and what each policy accepts.

The acceptance tests run real library kernels (PyTorch CPU) and numstd's corpus models of other
arithmetic, never numstd against itself: the default must accept PyTorch's own kernels, and a
kernel that accumulates a long reduction in 16 bits while declaring fp32 must still fail it.
"""

import numpy as np
import pytest

from numstd import check, registry
from numstd.errors import ParameterError, SchemaError, StandardNotFound
from tests.test_registry import GOOD, _root


def _variant(text, std_id, policy=None, default=True, acc="float32"):
    t = text.replace('id = "NS-MATMUL-TEST"', f'id = "{std_id}"')
    t = t.replace('accumulate = "float32"', f'accumulate = "{acc}"')
    if not default:
        t = t.replace("default = true", "default = false")
    if policy is not None:
        t = t.replace('title = "test"', f'title = "test"\npolicy = "{policy}"')
    return t


def test_policy_field_defaults_and_validation(tmp_path):
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": GOOD,
                            "matmul/NS-MATMUL-TESTA@1.toml": _variant(GOOD, "NS-MATMUL-TESTA", acc="bfloat16")})
    assert registry.get_standard("NS-MATMUL-TEST@1", root=root).policy == "fp32"
    assert registry.get_standard("NS-MATMUL-TESTA@1", root=root).policy == "arith16"  # implied by accumulate
    for bad, frag in (("nope", "must be one of"), ("arith16", "does not fit accumulate")):
        r = _root(tmp_path / bad, {"matmul/NS-MATMUL-TEST@1.toml": _variant(GOOD, "NS-MATMUL-TEST", policy=bad)})
        with pytest.raises(SchemaError, match=frag):
            registry.get_standard("NS-MATMUL-TEST@1", root=r)


def test_default_policy_mapping_never_ambiguous(tmp_path):
    # two standards for the same call, both `default = true`, of two policies: the registry's
    # documented mapping (DEFAULT_POLICY) picks stored16 for a bf16 output, policy= picks either
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": GOOD,
                            "matmul/NS-MATMUL-TESTS@1.toml": _variant(GOOD, "NS-MATMUL-TESTS", policy="stored16")})
    find = registry.find_standard
    assert find("matmul", "bfloat16", "bfloat16", root=root).key == "NS-MATMUL-TESTS@1"
    assert find("matmul", "bfloat16", "bfloat16", policy="fp32", root=root).key == "NS-MATMUL-TEST@1"
    assert find("matmul", "bfloat16", "bfloat16", policy="stored16", root=root).key == "NS-MATMUL-TESTS@1"
    with pytest.raises(StandardNotFound, match="policy"):
        find("matmul", "bfloat16", "bfloat16", policy="arith16", root=root)
    with pytest.raises(ParameterError, match="one of fp32, stored16, arith16"):
        find("matmul", "bfloat16", "bfloat16", policy="bf16", root=root)


def test_shipped_defaults_resolve_for_every_op_and_16bit_format():
    from numstd.ops import OPS

    for op in OPS:
        for fmt in ("float32", "bfloat16", "float16"):
            try:
                s = registry.find_standard(op, inputs=fmt, output=fmt)  # must never be ambiguous
            except StandardNotFound:
                continue
            assert s.policy in registry.DEFAULT_POLICY.get(fmt, ("fp32",))


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["amax", "amin", "argmax", "argmin", "max_pool1d"])
def test_exact_ops_are_judged_bit_exact_under_a_declared_16bit_accumulation(op, fmt):
    # a comparison loop rounds nothing, so the op's bit-exact standard holds under every policy: a
    # kernel declaring 16-bit accumulation (jax under accumulate16) gets it, not StandardNotFound, and a
    # result that is not the extremum still fails.  Truth: a sequential comparison loop over the rows.
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if fmt == "bfloat16" else np.float16
    x = np.random.default_rng(7).standard_normal((6, 40)).astype(dt)
    params = {"kernel_size": 4} if op == "max_pool1d" else {"axis": -1}
    if op == "max_pool1d":
        out = x.reshape(6, 10, 4).max(-1)
    else:
        pick = max if op in ("amax", "argmax") else min
        best = [pick(range(40), key=lambda j, r=r: (float(x[r, j]), -j if pick is max else j)) for r in range(6)]
        out = np.array(best, np.int64) if op.startswith("arg") else x[np.arange(6), best]
    v = check(out, op=op, inputs=[x], accumulate=fmt, **params)
    assert v.passed and v.standard_id.endswith(("-BF16@1", "-FP16@1")), v.snippet()
    bad = out.copy()
    row = bad.reshape(6, -1)
    row[2, 0] = (row[2, 0] + 1) % 40 if op.startswith("arg") else x[2, 3] if x[2, 3] != row[2, 0] else x[2, 2]
    assert not check(bad, op=op, inputs=[x], accumulate=fmt, **params).passed
    for rounding in ("batch_norm", "avg_pool1d", "sum"):  # an op that rounds needs a standard of that accumulation
        try:
            s = registry.find_standard(rounding, inputs=fmt, output=fmt, accumulate=fmt)
        except StandardNotFound:
            continue
        assert s.accumulate.name == fmt and s.policy == "arith16"


def _torch():
    return pytest.importorskip("torch", reason="the real-kernel policy tests run PyTorch's CPU kernels")


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
@pytest.mark.parametrize("dist", ["heavy", "large", "rowscale", "normal"])
def test_torch_log_softmax_passes_the_default_and_fails_the_one_rounding_policy(fmt, dist):
    torch = _torch()
    from numstd.backends.torch_backend import to_torch
    from numstd.suites import make_case

    case = make_case("log_softmax", (32, 64), dist, 0, [fmt], {"axis": -1})
    x = case.inputs[0]
    y = torch.nn.functional.log_softmax(to_torch(x, torch.device("cpu")), dim=-1)
    v = check(y, op="log_softmax", inputs=[x], axis=-1)
    assert v.passed, v.message
    assert v.formats["policy"] == "stored16" and "STORED16" in v.standard_id
    strict = check(y, op="log_softmax", inputs=[x], axis=-1, policy="fp32")
    if dist != "normal":  # rows of spread logits: the stored log-sum-exp is hundreds of ulps off near 0
        assert not strict.passed and strict.formats["policy"] == "fp32"


def test_bf16_accumulated_row_sum_fails_the_stored16_default():
    # numstd's corpus model of a kernel that accumulates the row sum in bf16 (a 16-bit reduction
    # declared as fp32): its relative error grows like K·u16, which the stored16 terms (u16 per
    # stored intermediate) do not cover
    from numstd.corpus import variants_for
    from numstd.formats import get_format
    from numstd.suites import make_case

    bug = next(v for v in variants_for("log_softmax") if v.name == "sum-bf16")
    fails = 0
    for dist in ("normal", "uniform"):
        case = make_case("log_softmax", (4, 4096), dist, 0, ["bfloat16"], {"axis": -1})
        out = bug.fn(case.inputs, {"axis": -1}, get_format("bfloat16"), get_format("float32"), 0)
        v = check(out, op="log_softmax", inputs=case.inputs, axis=-1)
        assert v.formats["policy"] == "stored16"
        fails += not v.passed
    assert fails == 2


def test_stored16_term_is_the_hand_derived_u16_times_one_plus_lse():
    # row [0, −2^−4]: exact output at the max is −log(1 + e^−1/16) = −0.6612..., lse = 0.6612...; the
    # stored16 bound exceeds the fp32 bound by u_bf16·(1 + lse) exactly (same rho, same ulp)
    import ml_dtypes

    x = np.array([[0.0, -0.0625]], dtype=ml_dtypes.bfloat16)
    y = x.astype(np.float64) - np.log(np.exp(x.astype(np.float64)).sum(axis=-1, keepdims=True))
    s16 = registry.find_standard("log_softmax", "bfloat16", "bfloat16")
    s32 = registry.find_standard("log_softmax", "bfloat16", "bfloat16", policy="fp32")
    from numstd.models import environment
    from numstd.reference import validated_reference

    ref = validated_reference("log_softmax", [x], {"axis": -1}, resolution=s16.output)
    fmts = {"output": s16.output, "accumulate": s16.accumulate, "input": s16.inputs[0]}
    e16 = s16.model.pre_rounding(environment(ref, fmts))
    e32 = s32.model.with_constants(**s16.model.constants).pre_rounding(environment(ref, fmts))
    lse = float(np.log(1.0 + np.exp(-0.0625)))
    assert np.allclose(e16 - e32, 2.0 ** -8 * (1.0 + lse), rtol=1e-12)
    assert np.allclose(-y[0, 0], lse)


def test_policy_conflicting_with_standard_is_a_clear_error():
    x = np.zeros((2, 8), dtype=np.float32)
    with pytest.raises(ParameterError, match="drop one of"):
        check(x, op="softmax", inputs=[x], standard="NS-SOFTMAX-FP32@1", policy="arith16")


def test_bias_message_says_why_the_element_test_did_not_run():
    # fp32 matmul at K = 4096: every element's accumulation allowance exceeds kappa ulp, so no
    # element enters the bias sample; the verdict must not claim there were no nonzero references
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 8)).astype(np.float32)
    v = check(a @ b, op="matmul", inputs=[a, b])
    bias = next(c for c in v.criteria if c.name == "bias")
    assert "no nonzero finite" not in bias.message
    assert "not tested at the element level" in bias.message


@pytest.mark.torch
def test_torch_bf16_erf_defect_is_not_absorbed_but_fp16_budget_is():
    # torch.erf on bf16 returns 0 for |x| <= 1.8e-7 (erf(x) ~ 1.128 x): a 100 % relative error, a
    # documented library defect (reference_data/evidence/known_library_defects.toml); the same
    # kernel's few-ulp error elsewhere (fp16: up to 3.35 ulp on the suite) is the library budget
    torch = _torch()
    import ml_dtypes

    tiny = np.array([1e-7, -1.5e-7, 3e-8], dtype=ml_dtypes.bfloat16)
    y = torch.erf(torch.from_numpy(tiny.astype(np.float32)).to(torch.bfloat16))
    assert float(y.abs().max()) == 0.0  # the defect, measured on the real kernel
    assert not check(y, op="erf", inputs=[tiny]).passed
    from numstd.suites import make_case

    for dist in ("uniform", "heavy", "normal"):
        x = make_case("erf", (8192,), dist, 1, ["float16"]).inputs[0]
        v = check(torch.erf(torch.from_numpy(x)), op="erf", inputs=[x])
        assert v.passed and v.standard_id == "NS-ERF-FP16@2", v.message
        xb = make_case("erf", (8192,), dist, 0, ["bfloat16"]).inputs[0]
        yb = torch.erf(torch.from_numpy(xb.astype(np.float32)).to(torch.bfloat16))
        vb = check(yb, op="erf", inputs=[xb])
        assert vb.passed and vb.standard_id == "NS-ERF-BF16@2", vb.message
        assert not check(torch.erf(torch.from_numpy(x)), op="erf", inputs=[x], standard="NS-ERF-FP16@1").passed


@pytest.mark.torch
@pytest.mark.parametrize("dist", ["uniform", "heavy", "offset", "normal"])
def test_torch_bf16_cross_entropy_passes_the_default(dist):
    torch = _torch()
    from numstd.backends.torch_backend import to_torch
    from numstd.suites import make_case

    case = make_case("cross_entropy", (32, 1000), dist, 0, ["bfloat16"], {"reduction": "mean"})
    x, t = case.inputs
    loss = torch.nn.functional.cross_entropy(to_torch(x, torch.device("cpu")), torch.from_numpy(t).long())
    v = check(loss, op="cross_entropy", inputs=[x, t], reduction="mean")
    assert v.passed and v.formats["policy"] == "stored16", v.message


_SUM16 = GOOD.replace('id = "NS-MATMUL-TEST"', 'id = "NS-SUM-TESTA"').replace('op = "matmul"', 'op = "sum"') \
    .replace('inputs = ["bfloat16", "bfloat16"]', 'inputs = ["bfloat16"]').replace('accumulate = "float32"', 'accumulate = "bfloat16"') \
    .replace('error = "lam * u_acc * sqrt(K) * absdot"', 'error = "u_acc * (lam * sqrt(K) * abssum + absref)"') \
    .replace("lam = 1.0", "lam = 11.0")


@pytest.mark.parametrize("k, discriminating", [(16, True), (4096, False)])
def test_arith16_verdict_says_when_it_cannot_discriminate(tmp_path, k, discriminating):
    # hand-derived: a sum of k ones in bf16 arithmetic; the bound 2^-8·(11·sqrt(k)·k + k) is 2.75 < 16
    # at k = 16 (zeros fail) but 11·64·4096/256 ≈ 11,264 ≥ 4096 at k = 4096 (zeros would pass)
    import ml_dtypes

    root = _root(tmp_path, {"sum/NS-SUM-TESTA@1.toml": _SUM16})
    std = registry.get_standard("NS-SUM-TESTA@1", root=root)
    assert std.policy == "arith16"
    x = np.ones(k, dtype=ml_dtypes.bfloat16)
    zeros = np.zeros((), dtype=ml_dtypes.bfloat16)
    v = check(zeros, op="sum", inputs=[x], standard=std, axis=None)
    note = next(c for c in v.criteria if c.name == "discriminating")
    assert v.passed is (not discriminating)
    assert ("not discriminating at this size" in v.message) is (not discriminating)
    assert ("not discriminating" in note.message) is (not discriminating)
