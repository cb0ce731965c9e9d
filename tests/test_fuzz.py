"""Property-based fuzz of ``check`` (hypothesis, bounded: well under a minute).

* any output — values, dtypes, shapes, layouts, non-arrays, foreign tensor kinds — gives a Verdict;
* malformed calls raise a NumstdError;
* verdicts are identical across chunk sizes and across threads.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numstd
from numstd.errors import NumstdError
from numstd.ops import OPS
from numstd.verdict import Verdict

SMALL = {"matmul": (3, 8, 4), "linear": (3, 8, 4), "attention": (1, 3, 5, 4), "cross_entropy": (4, 6), "nll_loss": (4, 6),
         "softmax": (3, 7), "log_softmax": (3, 7), "layer_norm": (3, 7), "rms_norm": (3, 7),
         "sum": (3, 7), "mean": (3, 7), "cumsum": (3, 7), "conv": (2, 2, 4, 2, 2, 1, 1, 3, 9),
         "conv_transpose": (2, 2, 4, 2, 2, 1, 1, 1, 3, 5),
         "group_norm": (2, 8, 3), "instance_norm": (2, 3, 5), "batch_norm": (6, 3, 2),
         "scaled_matmul": (3, 40, 4), "normalize": (3, 7), "cosine_similarity": (3, 7), "cosine_embedding_loss": (4, 6), "triplet_margin_loss": (4, 6),
         **{f"{k}_pool{d}d": {1: (2, 3, 9), 2: (1, 2, 7, 6), 3: (1, 1, 5, 5, 4)}[d] for k in ("max", "avg")
            for d in (1, 2, 3)}}
OP_NAMES = sorted(n for n, s in OPS.items() if s.kind != "module")
FUZZ = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@functools.lru_cache(maxsize=None)
def case(op: str, fmt_index: int = 0):
    """(inputs, params, reference values) of a small valid call of ``op`` under one of its standards."""
    from numstd.reference import reference
    from numstd.registry import list_standards
    from numstd.suites import make_case

    stds = [s for s in list_standards(op, status="active") if not s.selector]
    stds = stds or list_standards(op, status="active")  # (cast: every standard selects a format; its suite passes it)
    std = stds[fmt_index % len(stds)]
    c = make_case(op, SMALL.get(op, (16,)), "normal", 1, [f.name for f in std.inputs], dict(std.suite.get("params", {})))
    ref = reference(op, list(c.inputs), **c.params).values
    return list(c.inputs), dict(c.params), np.asarray(ref), std.output.dtype


FORMATS = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int32, np.int8,
           np.uint8, np.bool_, np.complex64]


@st.composite
def outputs(draw, ref: np.ndarray, out_dtype):
    kind = draw(st.sampled_from(["values", "dtype", "shape", "layout", "nonarray", "specials"]))
    if kind == "nonarray":
        return draw(st.sampled_from([None, "x", b"\x00", [["a"]], {"a": 1}, object(), [[1.0], [1.0, 2.0]], 1j, ...]))
    a = np.array(ref, dtype=np.float64)
    if kind == "values":
        scale = draw(st.sampled_from([0.0, 1e-7, 1e-3, 1.0, 1e30]))
        noise = np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal(a.shape)
        return (a * (1 + scale * noise)).astype(out_dtype)
    if kind == "specials":
        b = a.astype(out_dtype)
        flat = b.reshape(-1)
        if flat.size:
            flat[draw(st.integers(0, flat.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
        return b
    if kind == "dtype":
        with np.errstate(all="ignore"):
            return a.astype(draw(st.sampled_from(FORMATS)))
    if kind == "shape":
        shape = draw(st.lists(st.integers(0, 5), max_size=4).map(tuple))
        return np.zeros(shape, out_dtype)
    # layouts: a transposed copy viewed back, a strided view, a 0-stride broadcast, read-only
    b = a.astype(out_dtype)
    view = draw(st.sampled_from(["T", "strided", "broadcast", "readonly"]))
    if view == "T" and b.ndim >= 2:
        return np.ascontiguousarray(b.T).T
    if view == "strided":
        big = np.repeat(b[..., None], 2, axis=-1)
        return big[..., 0]
    if view == "broadcast":
        return np.broadcast_to(b.reshape(-1)[:1].reshape((1,) * b.ndim), b.shape) if b.ndim else b
    b.flags.writeable = False
    return b


@pytest.mark.parametrize("op", OP_NAMES)
@FUZZ
@given(data=st.data())
def test_any_output_gives_a_verdict_never_an_exception(op, data):
    inputs, params, ref, out_dtype = case(op)
    actual = data.draw(outputs(ref, out_dtype))
    v = numstd.check(actual, op=op, inputs=inputs, **params)
    assert isinstance(v, Verdict)


@pytest.mark.torch
def test_foreign_torch_outputs_give_verdicts():
    torch = pytest.importorskip("torch")
    inputs, params, ref, _ = case("exp")
    t = torch.tensor(ref.astype(np.float32))
    for actual in (t.to("meta"), t.to_sparse(), (t * 1j).conj().imag, t.to(torch.complex64), t[::1].t() if t.ndim == 2 else t,
                   torch.nested.nested_tensor([t[:2], t[:3]]), t.to(torch.float8_e4m3fn), t.to(torch.uint8)):
        assert isinstance(numstd.check(actual, op="exp", inputs=inputs, **params), Verdict)


BAD_CALLS = [
    {"op": "exp_"}, {"op": 3}, {"chunk_size": "7"}, {"chunk_size": 0}, {"chunk_size": -1}, {"chunk_size": 1.5},
    {"accumulate": "int8"}, {"accumulate": 3}, {"allow_tf32": 1}, {"nonsense": 1}, {"axis": "last"}, {"axis": 99},
    {"inputs": []}, {"inputs": ["x"]}, {"inputs": [np.zeros(3, np.int32)]}, {"inputs": [object()]}, {"standard": "NS-NOPE@1"},
    {"eps": float("nan")}, {"eps": 10**400}, {"scale": "big"}, {"reduction": "avg"}, {"approximate": "fast"},
]


@pytest.mark.parametrize("op", OP_NAMES)
@FUZZ
@given(bad=st.sampled_from(BAD_CALLS))
def test_malformed_calls_raise_a_numstd_error(op, bad):
    inputs, params, ref, out_dtype = case(op)
    call = dict(params, op=op, inputs=inputs)
    call.update(bad)
    with pytest.raises(NumstdError):
        numstd.check(ref.astype(out_dtype), **call)


@pytest.mark.parametrize("op", OP_NAMES)
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**16), scale=st.sampled_from([0.0, 3e-8, 1e-6, 1e-3]), chunk=st.sampled_from([1, 2, 7, 64]))
def test_verdicts_are_identical_across_chunk_sizes_and_threads(op, seed, scale, chunk):
    inputs, params, ref, out_dtype = case(op)
    noise = np.random.default_rng(seed).standard_normal(ref.shape)
    actual = (ref * (1 + scale * noise)).astype(out_dtype)
    base = numstd.check(actual, op=op, inputs=inputs, **params).to_json()
    assert numstd.check(actual, op=op, inputs=inputs, chunk_size=chunk, **params).to_json() == base
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda c: numstd.check(actual, op=op, inputs=inputs, chunk_size=c, **params).to_json(), [chunk, None]))
    assert got == [base, base]
