"""Benchmarks: the fixed-tolerance rules are the documented ones, and the discrimination scorer
applies its rules (smoke runs on tiny cases; no timings here)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.discrimination.methods import expected, load_methods  # noqa: E402
from benchmarks.discrimination.score import NUMSTD, score  # noqa: E402

METHODS = {m.name: m for m in load_methods()}


# ----------------------------------------------------------------------- documented tolerances
@pytest.mark.parametrize("name, fmt, rtol, atol", [
    ("torch", "float32", 1.3e-6, 1e-5), ("torch", "float16", 1e-3, 1e-5), ("torch", "bfloat16", 1.6e-2, 1e-5),
    ("numpy", "float32", 1e-5, 1e-8), ("numpy", "bfloat16", 1e-5, 1e-8),
    ("kernelbench", "float32", 1e-4, 1e-4), ("kernelbench", "float16", 1e-2, 1e-2),
    ("kernelbench", "bfloat16", 1e-2, 1e-2),
    ("jax", "float32", 1e-6, 1e-6), ("jax", "float16", 1e-3, 1e-3), ("jax", "bfloat16", 1e-2, 1e-2),
    ("nki-samples", "float32", 1e-5, 1e-2), ("nki-samples", "bfloat16", 1e-5, 1e-2),
])
def test_documented_tolerances(name, fmt, rtol, atol):
    assert METHODS[name].rule == "allclose"
    assert METHODS[name].tolerances(fmt) == (rtol, atol)


def test_nkibench_is_relative_l2():
    m = METHODS["nkibench"]
    assert (m.rule, m.max_rel_l2) == ("rel_l2", 2e-5)


def test_allclose_boundary_is_inclusive():
    """|a − e| ≤ atol + rtol·|e| passes, the next float64 above fails (binary tolerances: exact)."""
    from benchmarks.discrimination.methods import FixedTolerance

    m = FixedTolerance("t", "t", "allclose", "test", {"default": {"rtol": 2.0**-10, "atol": 2.0**-20}})
    e = np.array([2.0, -4.0, 0.0])
    allowed = 2.0**-20 + 2.0**-10 * np.abs(e)          # exact in float64, and so is e + allowed
    assert m.judge(e + allowed, e, "float32").passed
    assert m.judge(e - allowed, e, "float32").passed
    for i in range(3):
        a = e + allowed
        a[i] = np.nextafter(a[i], np.inf)
        r = m.judge(a, e, "float32")
        assert not r.passed and r.mismatched == 1 and r.metric > 1.0


def test_allclose_specials():
    m = METHODS["torch"]
    inf, nan = math.inf, math.nan
    assert m.judge([inf, -inf, 1.0], [inf, -inf, 1.0], "float32").passed          # same infinities
    assert not m.judge([nan], [nan], "float32").passed                            # equal_nan=False
    assert not m.judge([inf], [-inf], "float32").passed
    assert not m.judge([inf], [1.0], "float32").passed
    assert m.judge([inf], [1.0], "float32").metric == math.inf
    assert not m.judge(np.zeros(3), np.zeros(4), "float32").passed                 # wrong shape


def test_allclose_agrees_with_numpy_isclose():
    """Independent truth: np.isclose(equal_nan=False) on values with NaN, infinities and near misses."""
    rng = np.random.default_rng(5)
    e = rng.standard_normal(4000) * 10.0 ** rng.integers(-8, 3, 4000)
    a = e * (1 + rng.standard_normal(4000) * 10.0 ** rng.integers(-8, -2, 4000))
    a[::97], e[::89], a[::101] = np.nan, np.inf, np.inf
    for name in ("numpy", "kernelbench", "jax", "nki-samples", "torch"):
        m = METHODS[name]
        rtol, atol = m.tolerances("float32")
        for lo in range(0, 4000, 40):
            sl = slice(lo, lo + 40)
            want = bool(np.isclose(a[sl], e[sl], rtol=rtol, atol=atol, equal_nan=False).all())
            assert m.judge(a[sl], e[sl], "float32").passed == want, (name, lo)


def test_torch_defaults_match_torch():
    """Our 'torch' rule decides like torch.testing.assert_close with its default tolerances."""
    torch = pytest.importorskip("torch")
    m = METHODS["torch"]
    for dtype, fmt in ((torch.float32, "float32"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        rtol, atol = m.tolerances(fmt)
        for e in (1.0, 3.0, -0.5, 0.0):
            for k in (0.5, 0.99, 1.01, 2.0):
                a = e + k * (atol + rtol * abs(e))
                at, et = torch.tensor([a], dtype=dtype), torch.tensor([e], dtype=dtype)
                try:
                    torch.testing.assert_close(at, et)
                    want = True
                except AssertionError:
                    want = False
                got = m.judge(at.to(torch.float64).numpy(), et.to(torch.float64).numpy(), fmt).passed
                assert got == want, (fmt, e, k)


def test_rel_l2_hand_cases():
    m = METHODS["nkibench"]
    e = np.array([3.0, 4.0])                     # ‖e‖ = 5: passes iff ‖d‖ < 1e-4
    assert m.judge(e + [0.0, 0.99e-4], e, "float32").passed
    assert not m.judge(e + [0.0, 1.01e-4], e, "float32").passed
    assert abs(m.judge(e + [0.0, 1e-4], e, "float32").metric - 2e-5) < 1e-12
    assert not m.judge([math.nan, 4.0], e, "float32").passed
    assert m.judge([0.0, 0.0], [0.0, 0.0], "float32").passed
    assert not m.judge([0.0, 1e-30], [0.0, 0.0], "float32").passed


def test_expected_rounds_to_output_format():
    # bf16 (p = 8): ulp(1) = 2^-7; 1 + 2^-8 is a tie -> even (1.0); just above it rounds up
    r = expected(np.array([1 + 2.0**-8, 1 + 2.0**-8 + 2.0**-30, 0.1]), "bfloat16")
    assert r[0] == 1.0 and r[1] == 1 + 2.0**-7 and r[2] == 0.10009765625
    assert expected(np.array([0.1]), "float32")[0] == float(np.float32(0.1))


# ----------------------------------------------------------------------------- scoring rules
def _run(variant, legit, case, numstd_ok, torch_ok=True, observable=True, family="f", standard="NS-X@1"):
    r = {"standard": standard, "op": "x", "output": "float32", "variant": variant, "legit": legit,
         "family": family, "case": case, "observable": observable}
    if observable:
        r.update({"numstd_passed": numstd_ok, "numstd_standard": standard,
                  "numstd_failed": [] if numstd_ok else ["bias 1/0.5"], "normalized_max": 0.5 if numstd_ok else 2.0,
                  "ulp_max": 1.0, "ulp_mean_signed": 0.0, "methods": {"torch": [torch_ok, 0.1]}})
    return r


def test_score_rules():
    runs = [
        # legit: rejected by torch on one case of two -> falsely rejected; numstd passes both
        _run("good", True, "c1", True, True), _run("good", True, "c2", True, False),
        # bug: numstd fails where observable; torch passes everywhere -> missed by torch
        _run("bug", False, "c1", False, True), _run("bug", False, "c2", True, True, observable=False),
        # bug never observable: listed, not counted
        _run("ghost", False, "c1", True, observable=False), _run("ghost", False, "c2", True, observable=False),
        # excluded by the standard: not counted
        _run("odd", True, "c1", False, False, family="excluded"),
    ]
    sc = score(runs, ["torch"])
    rates = sc.rates()
    assert rates[NUMSTD] == {"detected": (1, 1), "rejected": (0, 1)}
    assert rates["torch"] == {"detected": (0, 1), "rejected": (1, 1)}
    assert [s.variant for s in sc.never_observable] == ["ghost"]
    assert [s.variant for s in sc.excluded] == ["odd"]
    assert [s.variant for s in sc.numstd_misses()] == [] and [s.variant for s in sc.numstd_false_rejects()] == []
    bug = next(s for s in sc.subjects if s.variant == "bug")
    assert bug.cases == ["c1"] and bug.unobservable == 1 and bug.numstd_fails[0]["failed"] == ["bias 1/0.5"]


def test_score_lists_numstd_misses_and_false_rejects():
    runs = [_run("legit", True, "c1", False), _run("sneaky", False, "c1", True), _run("sneaky", False, "c2", True)]
    sc = score(runs, ["torch"])
    assert [s.variant for s in sc.numstd_false_rejects()] == ["legit"]
    miss = sc.numstd_misses()
    assert [s.variant for s in miss] == ["sneaky"] and miss[0].closest["case"] in ("c1", "c2")
    from benchmarks.discrimination.report import headline_table, labels, numstd_findings

    text = numstd_findings(sc)
    assert "false rejects: 1" in text and "misses: 1" in text and "`legit`" in text
    assert "0/1 (0 %)" in headline_table(sc, labels(load_methods()))


# ------------------------------------------------------------------------- real tiny cases
def test_run_unit_smoke_exp_and_softmax():
    """The sweep on two tiny real cases: every legitimate variant passes numstd, zeros fails every method."""
    from numstd.registry import get_standard

    from benchmarks.discrimination.sweep import Unit, run_unit

    for key, op, shape in (("NS-EXP-FP32", "exp", (64,)), ("NS-SOFTMAX-BF16", "softmax", (4, 32))):
        try:
            std = get_standard(key)
        except Exception as exc:  # pragma: no cover - the standards are shipped
            pytest.skip(f"{key} not available: {exc}")
        runs = run_unit(Unit(std.key, op, shape, "normal", 101), load_methods())
        by = {r.variant: r for r in runs}
        assert all(r.numstd_standard == std.key for r in runs if r.observable and not r.error)
        legit = [r for r in runs if r.legit and r.family != "excluded" and not r.error]
        assert legit and all(r.numstd_passed for r in legit), [(r.variant, r.numstd_failed) for r in legit]
        z = by["zeros"]
        assert z.observable and z.numstd_passed is False
        assert all(not ok for ok, _ in z.methods.values())


def test_benchmark_standards_are_the_defaults():
    from numstd.registry import find_standard

    from benchmarks.discrimination.sweep import benchmark_standards

    stds = benchmark_standards(["exp", "matmul"])
    assert stds and all(not s.selector for s in stds)
    for s in stds:
        assert find_standard(s.op, inputs=list(s.inputs), output=s.output, accumulate=s.accumulate).key == s.key


def test_run_py_blocks_and_rows():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    text = "a\n<!-- BEGIN GENERATED: x -->\nold\n<!-- END GENERATED: x -->\nb\n"
    assert run.replace_block(text, "x", "new") == "a\n<!-- BEGIN GENERATED: x -->\nnew\n<!-- END GENERATED: x -->\nb\n"
    with pytest.raises(KeyError):
        run.replace_block(text, "y", "new")
    rows = run.perf_rows({"survey": {"format": "bfloat16", "op": "exp", "n": 65280, "median_s": 0.3, "ok": False,
                                     "two_core_probe": {"one_thread_s": 0.01, "two_threads_s": 0.012,
                                                        "efficiency": 0.83},
                                     "cross_core_probe": {"before": {"ratio": 1.14}, "after": {"ratio": 2.31}}},
                          "memory": {"error": "boom"}})
    assert [r["met"] for r in rows] == [None, False]
    table = run.perf_table(rows).splitlines()
    assert table[0].endswith("| other load | 2 cores | cross-core |")
    assert table[2].endswith("| – | – |") and table[3].endswith("| 0.83 | 1.1 / 2.3 |")  # memory crashed; survey probed


# ----------------------------------------------------------------------- real part (issue 17, Measure)
def test_fast_rsqrt_matches_the_known_error_of_the_bit_trick():
    """Independent truth: 0x5f3759df with one Newton step has max relative error ≈ 1.752e-3 (Lomont,
    "Fast inverse square root", 2003); with two steps ≈ 4.7e-6. Measured over a dense grid of one
    binade pair (the error is periodic in the exponent pair)."""
    torch = pytest.importorskip("torch")
    from benchmarks.real_bugs import fast_rsqrt

    x = torch.linspace(1.0, 4.0, 200001, dtype=torch.float32)
    exact = 1.0 / np.sqrt(x.double().numpy())
    rel1 = np.abs(fast_rsqrt(x, 1).double().numpy() / exact - 1).max()
    rel2 = np.abs(fast_rsqrt(x, 2).double().numpy() / exact - 1).max()
    assert 1.70e-3 < rel1 < 1.76e-3
    assert 4.0e-6 < rel2 < 5.5e-6


def test_side_by_side_tolerances_are_kernelbench_and_torch_defaults():
    """KernelBench eval.py: torch.allclose(ref, new, atol=tol, rtol=tol), tol 1e-4 fp32 / 1e-2 16-bit;
    the relative part scales with the candidate (torch.allclose's second argument)."""
    pytest.importorskip("torch")
    from benchmarks.side_by_side import KERNELBENCH_TOL, judge_all

    assert KERNELBENCH_TOL == {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
    # reference 0, candidate c = 1.00005e-4: c <= 1e-4 + 1e-4·c holds (rtol on the candidate), while
    # c <= 1e-4 + 1e-4·0 (rtol on the reference, as np.isclose) would not
    z = np.zeros(2, dtype=np.float32)
    assert judge_all(np.array([0.0, 1.00005e-4], dtype=np.float32), z, "float32")["kernelbench"] is True
    assert judge_all(np.array([0.0, 1.0002e-4], dtype=np.float32), z, "float32")["kernelbench"] is False
    e = np.array([1.0, 100.0], dtype=np.float32)
    worse = np.array([1.0, 100.03], dtype=np.float32)
    got = judge_all(worse, e, "float32")
    assert got["kernelbench"] is False and got["kernelbench_v01"] is True and got["np_allclose"] is False
    assert judge_all(np.zeros(3, np.float32), e, "float32") == {k: False for k in got}  # wrong shape


@pytest.mark.torch
def test_real_part_smoke_one_op_one_case():
    """One op (softmax), one case per format: the tables have their structure, the rounded float64
    reference passes, and a planted bug (softmax over the wrong axis) is observable and detected."""
    pytest.importorskip("torch")
    from benchmarks import real_bugs, real_part

    planted = tuple(b for b in real_bugs.BUGS if b.name == "softmax_wrong_axis")
    res = real_part.run(ops=["softmax"], max_cases=1, inductor=False, kernels=("torch1", "rounded64"), bugs=planted)
    # the control (max-subtracted softmax written out, fp32 inside) passes on the same cases
    assert [r["passed"] for r in res["controls"]] == [True] * 3
    fmts = {r["format"] for r in res["impls"]}
    assert fmts == {"float32", "bfloat16", "float16"}
    assert len(res["impls"]) == 2 * 3 and len(res["bugs"]) == 3
    assert all(r["passed"] for r in res["impls"] if r["backend"] == "rounded64")
    assert all(r["observable"] and r["passed"] is False for r in res["bugs"])
    assert all(set(r["methods"]) == {"assert_close", "kernelbench", "kernelbench_v01", "np_allclose"}
               for r in res["impls"] + res["bugs"])
    md = real_part.markdown(res, date="d", commit="c", command="cmd")
    assert set(md) == {"real-meta", "real-impls", "real-false-rejects", "real-sweep", "real-bugs",
                       "real-bugs-detail", "real-side-by-side", "real-controls"}
    assert md["real-controls"].splitlines()[2].startswith("| softmax_composed | bf16, fp16, fp32 | 3 | 0 |")
    sbs = md["real-side-by-side"].splitlines()
    assert len(sbs) == 2 + 5 and sbs[2].startswith("| numstd.check")
    assert "| 3 / 3 (100.0 %) |" in sbs[2]                         # the planted bug: 3 of 3 observable cases
    sweep = md["real-sweep"].splitlines()
    assert sweep[2].startswith("| float64 reference rounded") and sweep[2].endswith("| 3 | 3 | 0 | none |")
    assert md["real-bugs"].splitlines()[-1].startswith("| **all** | 1 | 3 | 3 | 3 / 3 |")
