"""numstd.grade's anti-gaming protocol, judged on candidates built to game it.

Each candidate below is a known exploit (KernelBench #165 and its adversarial unit tests, GPU MODE
reference-kernels): a cached result, an output that ignores its inputs, a constant, a crash, a
hang, a nondeterministic reference.  The protocol must fail each for its own reason; faithful
candidates must still pass; reruns with the recorded seeds must reproduce every verdict.
"""

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import numstd  # noqa: E402
from numstd.grade import Protocol, grade  # noqa: E402
from numstd.grade_cli import grade_files, load_module, second_shapes  # noqa: E402

PROBLEMS = Path(__file__).parent / "problems"


@pytest.fixture(scope="module", autouse=True)
def standards():
    fallback = load_module(PROBLEMS / "standards_fallback.py")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        yield fallback.install(mp)
    torch.set_num_threads(threads)


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class Cached(torch.nn.Module):
    """Computes the first call correctly and returns that result ever after."""

    def __init__(self):
        super().__init__()
        self.memo = None

    def forward(self, x):
        if self.memo is None:
            self.memo = torch.softmax(x.float(), dim=-1).to(x.dtype)
        return self.memo.clone()


class Uniform(torch.nn.Module):
    """1/K everywhere: softmax of a constant row (reads the wrong buffer)."""

    def forward(self, x):
        return torch.full_like(x, 1.0 / x.shape[-1])


class Noisy(torch.nn.Module):
    """Correct up to a last-bit flip that depends on a counter: not bit-reproducible."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.softmax(x.double(), dim=-1)
        return (y * (1 + 2.0 ** -30 * (self.calls % 2))).to(x.dtype)


class Dropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.softmax(x, dim=-1))


def _inputs():
    return [torch.randn(8, 256)]


def _kw(**kw):
    return dict(dict(trials=1, distributions=["normal", "offset"], secret_seed=3), **kw)


def test_cached_result_fails_with_its_own_reason():
    r = grade(Softmax, Cached, _inputs, **_kw())
    assert not r.passed
    failing = {x.name for c in r.failures for x in c.verdict.failed_criteria}
    assert "input_dependence" in failing
    assert r.diagnosis[0].cause == "cached-output"
    assert r.cases[0].verdict.passed  # the first call was computed honestly


def test_a_repeat_the_reference_shares_is_not_a_cached_result():
    """torch's own bf16 nll_loss graded against itself (secret seed 33, found by CI): its 512-row mean
    cancels, the stored bf16 partial sums err by hundreds of ulps of it, and it returned the same bits on
    the normal and the heavy-tailed draw whose truths differ by more than 4 ulps.  The reference itself
    repeated, so the candidate's repeat is no cached result; the same check still fails a candidate that
    repeats where the reference does not (test_cached_result_fails_with_its_own_reason)."""
    import torch.nn.functional as F

    class NLL(torch.nn.Module):
        def forward(self, x, t):
            return F.nll_loss(x, t)

    def cls_in():
        return [torch.log_softmax(torch.randn(512, 20), 1).to(torch.bfloat16), torch.randint(0, 20, (512,))]

    r = grade(NLL, NLL, cls_in, trials=1, secret_seed=33)
    assert not [c for c in r.cases if "cached" in c.verdict.message], r.message
    assert r.passed, r.message


def test_output_ignoring_its_input_fails_as_constant_output():
    r = grade(Softmax, Uniform, _inputs, **_kw())
    names = {x.name for c in r.failures if c.kind == "module" for x in c.verdict.failed_criteria}
    assert names == {"constant_output"} and r.diagnosis[0].cause == "constant-output"
    assert "likely constant-output" in r.snippet()


def test_faithful_passes_under_the_full_protocol_and_records_it():
    r = grade(Softmax, Softmax, _inputs, **_kw())
    assert r.passed and r.reproducible is True
    assert r.protocol["isolation"] == "in-process" and r.protocol["swap_order"]
    orders = [c.verdict.params["order"] for c in r.cases if c.kind == "module"]
    assert orders == ["reference-first", "candidate-first", "reference-first"]
    env = r.environment
    assert {"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32", "torch.autocast.cpu",
            "NEURON_CC_FLAGS"} <= set(env)
    # 3 cases: truth 3, reference 3 + 1 (determinism rerun), candidate 3 + 1 (reproducibility rerun)
    assert r.forwards == {"truth": 3, "reference": 4, "candidate": 4}
    assert 0 < r.forward_seconds < r.seconds


def test_tf32_switch_is_recorded():
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        r = grade(Softmax, Softmax, _inputs, **_kw(distributions=None))
        assert r.environment["torch.backends.cuda.matmul.allow_tf32"] is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def test_bit_reproducibility_is_reported_and_can_be_required():
    r = grade(Softmax, Noisy, _inputs, **_kw(dtype="float32"))
    assert r.reproducible is False
    strict = grade(Softmax, Noisy, _inputs, **_kw(dtype="float32", protocol={"require_reproducible": True}))
    assert not strict.passed
    assert strict.failures[0].verdict.failed_criteria[0].name == "reproducible"


def test_nondeterministic_reference_raises_naming_cause_and_fix():
    with pytest.raises(numstd.NumstdError, match=r"nondeterministic.*dropout.*\.eval\(\)"):
        grade(Dropout, Dropout, _inputs, **_kw())
    ok = grade(Dropout().eval(), Dropout().eval(), _inputs, **_kw())
    assert ok.passed


def test_protocol_steps_switch_off_and_unknown_steps_are_refused():
    r = grade(Softmax, Cached, _inputs, **_kw(protocol={"input_dependence": False, "swap_order": False}))
    assert "input_dependence" not in {x.name for c in r.failures for x in c.verdict.failed_criteria}
    with pytest.raises(numstd.ParameterError, match="unknown step"):
        grade(Softmax, Softmax, _inputs, **_kw(protocol={"swap": False}))
    assert Protocol.off().to_dict()["secret"] is False


def test_second_shape_set_from_the_problem_constants():
    prob = load_module(PROBLEMS / "layernorm" / "problem.py", max_dim=64)
    changed = second_shapes(prob)
    assert changed == {"batch_size": (16, 11), "dim": (64, 47)}
    r = grade_files(PROBLEMS / "layernorm" / "problem.py", PROBLEMS / "layernorm" / "onepass.py", max_dim=64,
                    trials=1, secret_seed=1)
    dists = {c.distribution for c in r.cases}
    assert "original@shapes2" in dists and r.protocol["second_shapes_note"] == "graded"
    shapes = {tuple(c.verdict.shape) for c in r.cases if c.kind == "module"}
    assert (16, 64) in shapes and (11, 47) in shapes
    assert not r.passed and r.diagnosis[0].cause == "one-pass-variance"


def _write(tmp_path, name, body):
    p = tmp_path / f"{name}.py"
    p.write_text("import torch\nimport torch.nn as nn\n\n" + body)
    return p


def test_isolated_candidate_passes_and_never_runs_in_the_grader(tmp_path):
    marker = tmp_path / "ran_here"
    cand = _write(tmp_path, "cand", f"""
import os
MARK = {str(marker)!r}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        open(MARK + str(os.getpid()), "w").close()
    def forward(self, x):
        return torch.softmax(x, dim=1)
""")
    import os

    r = grade_files(PROBLEMS / "softmax" / "problem.py", cand, isolate=True, max_dim=128, trials=1,
                    distributions=["normal"], secret_seed=2, shapes2=False)
    assert r.passed and r.protocol["isolation"] == "subprocess"
    pids = {p.name.replace("ran_here", "") for p in tmp_path.glob("ran_here*")}
    assert pids and str(os.getpid()) not in pids  # built only in the child


def test_isolated_crash_and_hang_fail_with_their_reason(tmp_path):
    crash = _write(tmp_path, "crash", """
import os
class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(3)
""")
    r = grade_files(PROBLEMS / "softmax" / "problem.py", crash, isolate=True, max_dim=128, trials=1,
                    distributions=["normal"], secret_seed=2, shapes2=False)
    msg = r.failures[0].verdict.failed_criteria[0].message
    assert not r.passed and "died (exit 3)" in msg
    hang = _write(tmp_path, "hang", """
import time
class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(60)
        return x
""")
    r = grade_files(PROBLEMS / "softmax" / "problem.py", hang, isolate=True, max_dim=128, trials=1,
                    distributions=None, secret_seed=2, shapes2=False, timeout_s=3)
    assert not r.passed and "time limit of 3 s" in r.failures[0].verdict.failed_criteria[0].message


def test_isolated_candidate_cannot_send_pickles(tmp_path):
    """Outputs come back as raw bytes with a JSON header; a non-tensor output is refused, not unpickled."""
    evil = _write(tmp_path, "evil", """
class ModelNew(nn.Module):
    def forward(self, x):
        return {"not": object()}
""")
    r = grade_files(PROBLEMS / "softmax" / "problem.py", evil, isolate=True, max_dim=128, trials=1,
                    distributions=None, secret_seed=2, shapes2=False)
    assert not r.passed and "cannot cross" in r.failures[0].verdict.failed_criteria[0].message


def test_snippet_is_short_and_leads_with_the_cause_and_review_renders_the_rubric(tmp_path, capsys):
    r = grade_files(PROBLEMS / "layernorm" / "problem.py", PROBLEMS / "layernorm" / "onepass.py", max_dim=64,
                    trials=2, secret_seed=5, shapes2=False)
    s = r.snippet()
    assert len(s) <= 300 and s.startswith("FAIL NS-MODULE-FP32@") and "likely one-pass-variance" in s
    first = r.failures[0].verdict
    assert first.snippet().split(" — ", 1)[1].startswith("likely ")
    path = tmp_path / "report.json"
    path.write_text(r.to_json())
    from numstd.cli import main

    assert main(["review", str(path)]) == 0
    md = capsys.readouterr().out
    assert "**numstd grade: FAIL**" in md
    assert "[NS-MODULE-FP32@3](docs/standards/module.md#ns-module-fp32-v3)" in md
    assert "failing criterion **" in md and "measured" in md and "limit" in md
    assert "likely cause: **one-pass-variance**" in md and "suggested fix: compute the variance in two passes" in md
    assert "--secret-seed 5" in md and "--seed 0" in md and "--max-dim 64" in md
    assert main(["review", str(tmp_path / "missing.json")]) == 2


def test_recorded_seeds_reproduce_the_report():
    a = grade(Softmax, Uniform, _inputs, **_kw(secret_seed=None))
    b = grade(Softmax, Uniform, _inputs, **_kw(secret_seed=a.secret_seed))
    strip = lambda r: [c.verdict.to_dict() for c in r.cases]  # noqa: E731
    assert strip(a) == strip(b)


def test_passing_verdict_json_has_no_diagnosis_and_failing_round_trips():
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    good = numstd.check(np.exp(x), op="exp", inputs=[x])
    assert good.passed and "diagnosis" not in json.loads(good.to_json())
    r = grade(Softmax, Uniform, _inputs, **_kw())
    v = r.failures[0].verdict
    d = json.loads(v.to_json())
    assert d["diagnosis"][0]["cause"] == "constant-output"
    assert numstd.Verdict.from_json(v.to_json()).diagnosis == v.diagnosis
