"""numstd.integrations.kernelbench: KernelBench's eval_kernel_against_ref contract, judged by numstd.

CPU only (KernelBench's own function asserts CUDA).  Sources come from tests/problems (KernelBench
layout) and from KernelBench's adversarial unit tests (src/kernelbench/unit_tests/
test_eval_adversarial.py), rewritten for the CPU: a cached result, zeroed inputs, an uninitialised
output that may hold the reference's freed result.
"""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from numstd.grade_cli import load_module  # noqa: E402
from numstd.integrations.kernelbench import KernelExecResult, eval_kernel_against_ref  # noqa: E402

PROBLEMS = Path(__file__).parent / "problems"
FIELDS = {"compiled", "correctness", "metadata", "runtime", "runtime_stats", "ref_runtime", "ref_runtime_stats"}


@pytest.fixture(scope="module", autouse=True)
def standards():
    fallback = load_module(PROBLEMS / "standards_fallback.py")
    with pytest.MonkeyPatch.context() as mp:
        yield fallback.install(mp)


def _src(problem, name):
    return (PROBLEMS / problem / f"{name}.py").read_text()


def _eval(problem, cand_src, **kw):
    kw = dict(dict(num_correct_trials=1, max_dim=128, isolate=False, secret_seed=4, device="cpu",
                   distributions=["normal", "offset"], shapes2=False), **kw)
    return eval_kernel_against_ref(_src(problem, "problem"), cand_src, seed_num=42, **kw)


def test_faithful_passes_with_kernelbench_fields_and_the_report():
    r = _eval("layernorm", _src("layernorm", "faithful"), measure_performance=True, num_perf_trials=3)
    assert isinstance(r, KernelExecResult) and FIELDS <= set(r.model_dump())
    assert r.compiled and r.correctness and r.runtime > 0 and r.ref_runtime > 0
    assert r.numstd.passed and r.numstd.seed == 42 and r.numstd.secret_seed == 4
    assert r.metadata["numstd_standards"][0] == "NS-MODULE-FP32@3"


def test_near_miss_fails_with_the_diagnosis_in_the_metadata():
    r = _eval("layernorm", _src("layernorm", "onepass"))
    assert r.compiled and not r.correctness and r.runtime == -1.0
    assert "likely one-pass-variance" in r.metadata["correctness_issue"]


def test_syntax_error_is_a_compilation_failure():
    r = _eval("relu", "class ModelNew(:\n", isolate=True)
    assert not r.compiled and not r.correctness and r.metadata["compilation_error_name"] == "SyntaxError"
    r = _eval("relu", "import torch\n")
    assert not r.compiled and "ModelNew" in r.metadata["compilation_error"]


CACHED = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    memo = None
    def forward(self, A, B):
        if ModelNew.memo is None:
            ModelNew.memo = torch.matmul(A, B)
        return ModelNew.memo
"""

ZERO_INPUTS = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, A, B):
        A.zero_(); B.zero_()
        return torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
"""

RESULT_REUSE = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.empty(A.shape[0], B.shape[1], dtype=A.dtype)
"""


@pytest.mark.parametrize("name, source, reason", [
    ("cached result", CACHED, "input_dependence"),
    ("input zeroing", ZERO_INPUTS, "inputs_unchanged"),
    ("result reuse", RESULT_REUSE, None),
])
def test_kernelbench_adversarial_kernels_fail(name, source, reason):
    r = _eval("matmul", source)
    assert r.compiled and not r.correctness, name
    if reason:
        assert reason in {x.name for c in r.numstd.failures for x in c.verdict.failed_criteria}


def test_isolated_by_default_and_cpu_when_no_cuda():
    r = eval_kernel_against_ref(_src("relu", "problem"), _src("relu", "identity"), num_correct_trials=1,
                                max_dim=64, secret_seed=1, shapes2=False, distributions=["normal"])
    assert r.compiled and not r.correctness
    assert r.numstd.protocol["isolation"] == "subprocess"
    assert r.metadata["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
