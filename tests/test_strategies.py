"""numstd.strategies: Hypothesis strategies that regenerate suite inputs.

Properties checked against independent truth: drawn values are representable in the format (a
second RNE rounding changes nothing) and lie in each distribution's support; shapes follow the
suite's case conventions; an example is reproducible from its (distribution, seed) alone; the
module is the only place hypothesis gets imported.
"""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from numstd.errors import ParameterError  # noqa: E402
from numstd.formats import round_to  # noqa: E402
from numstd.strategies import arrays_in, cases_for_op, inputs_for  # noqa: E402
from numstd.suites import make_case  # noqa: E402

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(inputs_for("softmax", "bfloat16", shape=(4, 64)))
def test_softmax_inputs_are_bf16_values_of_the_case_shape(inputs):
    (x,) = inputs
    assert x.dtype == ml_dtypes.bfloat16 and x.shape == (4, 64)
    assert np.array_equal(np.asarray(round_to(x, "bfloat16")).view(np.uint16), x.view(np.uint16))


@FAST
@given(inputs_for("matmul", "float32", shape=(3, 8, 5)))
def test_matmul_case_shape_is_m_k_n(inputs):
    a, b = inputs
    assert a.shape == (3, 8) and b.shape == (8, 5)
    assert a.dtype == b.dtype == np.float32


@FAST
@given(inputs_for("cross_entropy", "float16", shape=(6, 10)))
def test_cross_entropy_targets_are_class_indices(inputs):
    logits, target = inputs
    assert logits.dtype == np.float16 and logits.shape == (6, 10)
    assert target.dtype.kind == "i" and target.shape == (6,)
    assert target.min() >= 0 and target.max() < 10


@FAST
@given(arrays_in("float32", (8, 16), distribution="uniform"))
def test_uniform_stays_in_its_support(x):
    assert x.dtype == np.float32 and x.shape == (8, 16)
    assert np.all(np.abs(x) <= 1.0)


@FAST
@given(arrays_in("float32", (8, 64), distribution="offset"))
def test_offset_rows_carry_a_large_mean(x):
    m = np.abs(x.astype(np.float64).mean(axis=1))
    assert np.all((m > 95) & (m < 105))


@FAST
@given(arrays_in("float8_e4m3fn", (64,), distribution=["wide", "normal", "heavy"]))
def test_every_value_is_finite_and_representable_in_fp8(x):
    assert x.dtype == ml_dtypes.float8_e4m3fn
    v = x.astype(np.float64)
    assert np.all(np.isfinite(v)) and np.all(np.abs(v) <= 448.0)


@FAST
@given(cases_for_op("layer_norm", "float32", shape=(4, 32), distribution="smallvar"))
def test_a_case_regenerates_from_its_id_alone(case):
    op, shape, dist, seed = case.id.split("/")
    again = make_case(op, tuple(int(s) for s in shape.split("x")), dist, int(seed[1:]), ["float32"])
    assert all(np.array_equal(a, b) for a, b in zip(case.inputs, again.inputs))
    x = case.inputs[0].astype(np.float64)
    assert np.all(x.var(axis=1) < 1e-3)  # variance near eps: what smallvar is for


def test_hypothesis_explores_several_distributions_and_seeds():
    seen = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(cases_for_op("exp", "float32", shape=(16,)))
    def collect(case):
        seen.add((case.distribution, case.seed))

    collect()
    assert len({d for d, _ in seen}) >= 3 and len({s for _, s in seen}) >= 10


def test_unknown_distribution_and_missing_shape_are_parameter_errors():
    with pytest.raises(ParameterError, match="unknown distribution"):
        arrays_in("float32", (4,), distribution="gaussian")
    with pytest.raises(ParameterError, match="pass shape="):
        inputs_for("cumsum", "float64")  # no float64 cumsum standard: no suite shapes to fall back on


def test_strategies_compose_with_other_strategies():
    @FAST
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 8))
        (x,) = data.draw(inputs_for("relu", "float16", shape=(n,)))
        assert x.shape == (n,) and x.dtype == np.float16

    run()


def test_import_numstd_does_not_import_hypothesis():
    code = "import sys, numstd, numstd.check; assert 'hypothesis' not in sys.modules; import numstd.strategies; " \
           "assert 'hypothesis' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[1]))


def test_correctly_rounded_outputs_pass_their_standard_on_every_drawn_suite_input():
    from numstd import check, find_standard
    from numstd.errors import StandardNotFound
    from numstd.reference import reference

    try:
        find_standard("softmax", inputs=["bfloat16"], output="bfloat16")
    except StandardNotFound as exc:
        pytest.skip(f"no softmax standard published yet: {exc}")
    strategy = inputs_for("softmax", "bfloat16", shape=(4, 64))

    @settings(max_examples=15, deadline=None)
    @given(strategy)
    def run(inputs):
        exact = reference("softmax", inputs, axis=-1).values
        assert check(round_to(exact, "bfloat16"), op="softmax", inputs=inputs, axis=-1).passed

    run()
