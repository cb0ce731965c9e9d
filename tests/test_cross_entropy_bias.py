"""NS-CROSSENTROPY-FP32@2: the bias test sees reduction="none" on large batches (issue 20 item 4).

@1's averaging term ``sqrt(N)·|loss|`` used the batch size ``N`` for every reduction, so with
``reduction="none"`` (one row's loss per output) ``E_i`` exceeded ``bias_kappa`` ulp on large batches and
the element-level bias test was off: a kernel that truncates every loss passed.  @2 uses ``M``, the losses
an output averages (``N`` for mean/sum, 1 for none), and tests bias only on samples of at least
``bias_min_n = 32`` independent elements (@1 tested the one element of a scalar loss, which drove its
``bias_tau`` to 2.8 ulp).
"""

from __future__ import annotations

import numpy as np
import pytest

import numstd
from numstd.corpus import variants_for
from numstd.ops import validate
from numstd.reference import reference
from numstd.registry import get_standard

N, C = 20_000, 10


def _case(seed: int = 3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C)).astype(np.float32)
    t = rng.integers(0, C, N)
    xd = x.astype(np.float64)
    m = xd.max(1)
    exact = np.log(np.exp(xd - m[:, None]).sum(1)) + m - xd[np.arange(N), t]  # float64: ~1e-16 relative
    return x, t, exact


def test_m_is_one_for_none_and_the_batch_for_mean_and_sum():
    x, t, _ = _case()
    assert float(reference("cross_entropy", [x, t], reduction="none").aux["M"]) == 1.0
    for red in ("mean", "sum"):
        assert float(reference("cross_entropy", [x, t], reduction=red).aux["M"]) == float(N)


def test_truncated_losses_fail_at_2_and_passed_at_1():
    x, t, exact = _case()
    rtz = np.asarray(numstd.round_to(exact, "float32", "rtz"), np.float32)  # every loss toward zero
    old = numstd.check(rtz, op="cross_entropy", inputs=[x, t], reduction="none", standard="NS-CROSSENTROPY-FP32@1")
    assert old.passed and old.criterion("bias").limit == float("inf")  # the gap: bias not tested
    new = numstd.check(rtz, op="cross_entropy", inputs=[x, t], reduction="none")
    assert new.standard_id == "NS-CROSSENTROPY-FP32@2" and not new.passed
    b = new.criterion("bias")
    assert not b.passed and b.value == pytest.approx(-0.5, abs=0.02)  # RTZ: mean −0.5 ulp


def test_correctly_rounded_and_legitimate_orders_pass_at_2():
    x, t, exact = _case()
    assert numstd.check(exact.astype(np.float32), op="cross_entropy", inputs=[x, t], reduction="none").passed
    std = get_standard("NS-CROSSENTROPY-FP32@2")
    _, arrays, full = validate("cross_entropy", [x, t], {"reduction": "none"})
    tried = []
    for v in variants_for("cross_entropy"):
        if not v.legit or not v.applicable(arrays, full, std.output, std.accumulate):
            continue
        y = v.fn([np.array(a) for a in arrays], full, std.output, std.accumulate, 5)
        verdict = numstd.check(y, op="cross_entropy", inputs=[x, t], reduction="none")
        assert verdict.passed, f"legitimate {v.name}: {verdict.message}"
        tried.append(v.name)
    assert len(tried) >= 3, tried


def test_torch_cross_entropy_none_passes_and_the_verdict_does_not_depend_on_the_chunk():
    torch = pytest.importorskip("torch")
    x, t, _ = _case()
    out = torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), reduction="none").numpy()
    vs = [numstd.check(out, op="cross_entropy", inputs=[x, t], reduction="none", chunk_size=c) for c in (777, 1 << 16)]
    assert vs[0].passed and vs[0].to_json() == vs[1].to_json()
    assert vs[0].criterion("bias").limit < 0.1  # tested, with a tight limit


def test_a_scalar_loss_is_not_a_bias_sample():
    x, t, exact = _case()
    x, t = x[:4], t[:4]  # 4 rows: E_i of the mean stays within bias_kappa ulp, so the sample is its 1 element
    v = numstd.check(np.float32(exact[:4].mean()), op="cross_entropy", inputs=[x, t], reduction="mean")
    assert v.passed and "fewer than bias_min_n = 32" in v.criterion("bias").message
