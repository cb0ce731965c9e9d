"""Bound formulas and error models: parsing is safe and strict, evaluation matches hand computation."""

import math

import numpy as np
import pytest

from numstd.errors import SchemaError
from numstd.formats import get_format
from numstd.models import ErrorModel, terms_for
from numstd.models.formula import Formula


def test_formula_evaluates_like_the_hand_formula():
    f = Formula.parse("lam * u_acc * sqrt(K) * absdot + max(absref, 2) ** 2 / 4 - -1", {"lam", "u_acc", "K", "absdot", "absref"}, "t")
    env = {"lam": 2.0, "u_acc": 2.0**-24, "K": np.array([4.0, 16.0]), "absdot": np.array([3.0, 5.0]), "absref": np.array([1.0, 3.0])}
    want = 2.0 * 2.0**-24 * np.sqrt([4.0, 16.0]) * [3.0, 5.0] + np.maximum([1.0, 3.0], 2) ** 2 / 4 + 1
    np.testing.assert_array_equal(f.evaluate(env), want)
    assert f.names == {"lam", "u_acc", "K", "absdot", "absref"}


@pytest.mark.parametrize("text, fragment", [
    ("__import__('os').system('x')", "unknown function"),
    ("lam.real", "Attribute"),
    ("lam if K else absdot", "IfExp"),
    ("lam * nope", "unknown name 'nope'"),
    ("sqrt(K, K)", "takes 1"),
    ("lam +", "not valid"),
    ("'a' * 3", "only numbers"),
    ("lam[0]", "Subscript"),
    ("lam % 2", "Mod"),
    ("", "non-empty"),
])
def test_formula_rejects_anything_outside_the_grammar(text, fragment):
    with pytest.raises(SchemaError) as ei:
        Formula.parse(text, {"lam", "K", "absdot"}, "standards/x.toml [model] error")
    assert fragment in str(ei.value)
    assert "standards/x.toml" in str(ei.value)


def test_error_model_bound_is_error_plus_rho_ulps_at_the_perturbed_magnitude():
    m = ErrorModel.from_table("matmul", {"error": "lam * u_acc * sqrt(K) * absdot", "rho": 0.5, "ftz": False,
                                         "constants": {"lam": 1.0}}, "t")
    bf16 = get_format("bfloat16")
    env = {"absref": np.array([1.0, 0.0]), "absdot": np.array([4.0, 1.0]), "K": np.array(16.0), "u_acc": 2.0**-24}
    e = 2.0**-24 * 4 * np.array([4.0, 1.0])
    b = m.bound(env, bf16)
    # ulp of bf16 at 1 + e is 2^-7; at e (tiny, subnormal range of bf16? no: 2^-22 is normal) 2^(-22-7)
    assert b[0] == e[0] + 0.5 * 2.0**-7
    assert b[1] == e[1] + 0.5 * 2.0 ** (math.floor(math.log2(e[1])) - 7)


def test_error_model_schema_errors_name_the_field():
    good = {"error": "lam * absdot", "rho": 0.5, "ftz": True, "constants": {"lam": 1.0}}
    for change, frag in [({"rho": -1}, "rho"), ({"ftz": "yes"}, "ftz"), ({"constants": {"lam": float("nan")}}, "lam"),
                         ({"constants": {"lam": 1.0, "zzz": 2.0}}, "not used"), ({"extra": 1}, "unknown key"),
                         ({"constants": {"K": 1.0}, "error": "K * absdot"}, "shadow"), ({"calibrated": "q"}, "calibrated")]:
        t = dict(good)
        t.update(change)
        with pytest.raises(SchemaError, match=frag):
            ErrorModel.from_table("matmul", t, "f.toml")


def test_every_op_has_terms():
    from numstd.ops import OPS

    for op in OPS:
        assert "absref" in terms_for(op)


def test_environment_computes_absref_and_ulp_on_first_use_from_the_reference_values():
    from numstd.models import environment
    from numstd.reference import reference, validated_reference
    from numstd.ops import validate

    x = np.array([-3.0, -0.5, 0.0, 1e-40, 2.0, 90.0], dtype=np.float32)
    ref = reference("exp", [x])
    f32, bf16 = get_format("float32"), get_format("bfloat16")
    env = environment(ref, {"output": bf16, "accumulate": f32, "input": f32})
    assert {"x", "cond", "absref", "ulp", "u_out", "u_acc", "u_in", "tiny_out", "min_normal_out"} <= set(env)
    assert env.computed("ulp") is None and env.computed("absref") is None  # nothing computed yet
    v = np.asarray(ref.values)
    # ulp in bfloat16 by hand: 2^(floor(log2 |r|) - 7), at least the smallest subnormal 2^-133
    want_ulp = np.maximum(2.0 ** (np.floor(np.log2(np.abs(v))) - 7), 2.0**-133)
    assert np.array_equal(env["ulp"], want_ulp)
    assert np.array_equal(env["absref"], np.abs(v)) and env.computed("absref") is env["absref"]
    assert env["u_out"] == 2.0**-8 and env["u_acc"] == 2.0**-24 and env["min_normal_out"] == 2.0**-126
    with pytest.raises(KeyError):
        env["absdot"]
    # the validated entry point (check's chunks) gives the reference of the public one, bit for bit
    spec, arrays, full = validate("exp", [x], {})
    again = validated_reference(spec.name, arrays, full)
    assert np.array_equal(again.values, ref.values) and np.array_equal(again.error_bound, ref.error_bound)
