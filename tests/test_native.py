"""The compiled loops (``numstd._native``) against the numpy path, and the exact pieces both share.

The numpy path of :class:`numstd.criteria.Judge` is the specification; the compiled loop must give
the same totals bit for bit (every field of the result, the histogram, the worst offenders) on
chunks built to hit every branch: non-finite outputs and references, references beyond the
format's range, zero and NaN bounds, subnormal and zero references, ties, spills in float64, block
boundaries inside chunks.  The histogram bin and the overflow threshold are checked against
independent truth (mpmath at 200 bits, the format's own rounding).
"""

import math
import os

import mpmath
import numpy as np
import pytest

import numstd
from numstd.criteria import Judge, _overflow_threshold
from numstd.native import compiled
from numstd.distribution import _bin_index
from numstd.formats import FORMATS, get_format, round_to
from numstd.ulp import ulp

NATIVE = compiled() is not None
needs_native = pytest.mark.skipif(not NATIVE, reason="numstd._native is not built (no C compiler at install time) or NUMSTD_NATIVE=0")


def test_native_judge_is_built_where_ci_requires_it():
    # .ci/run sets NUMSTD_REQUIRE_NATIVE=1: an install that silently skipped the optional
    # extension must not pass CI by testing only the numpy path
    if os.environ.get("NUMSTD_REQUIRE_NATIVE") == "1":
        assert NATIVE


def _chunks(fmt_name: str, seed: int, n: int = 5000, rate: float = 1.0):
    """(actual, ref, bound, pre, ulp) chunks with every special case, in C order.

    ``rate`` scales how often outputs and references are non-finite or out of range (elements the
    judge skips) and references are zero or subnormal (outside the bias sample): at 1 nearly every
    group of 256 elements of the compiled judge has one (its element-by-element path), at 0 none
    does (its stream-by-stream path); zero and NaN bounds (compared elements) stay at 1%."""
    f = get_format(fmt_name)
    rng = np.random.default_rng(seed)
    r = rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))
    r[rng.random(n) < 0.02 * rate] = 0.0
    sub = rng.random(n) < 0.02 * rate
    r[sub] = f.smallest_normal * rng.random(sub.sum())  # subnormal references: outside the bias sample
    rounded = np.asarray(round_to(r, f), dtype=np.float64)
    u = np.asarray(ulp(r, f), dtype=np.float64)
    a = rounded + u * rng.integers(-3, 4, n)  # errors of a few ULPs (ties in |error|/bound)
    a[rng.random(n) < 0.01 * rate] = np.nan
    a[rng.random(n) < 0.01 * rate] = np.inf
    a[rng.random(n) < 0.01 * rate] = -np.inf
    big = rng.random(n) < 0.01 * rate
    r[big] = f.max_finite * rng.choice([1.0, 1.02, 1.5, 8.0], big.sum()) * rng.choice([-1, 1], big.sum())
    r[rng.random(n) < 0.005 * rate] = np.nan
    r[rng.random(n) < 0.005 * rate] = np.inf
    a[rng.random(n) < 0.01] = -0.0
    u = np.asarray(ulp(np.where(np.isfinite(r), r, 1.0), f), dtype=np.float64)
    b = np.abs(r) * 2.0 ** -(f.p - 1) + u * 0.25
    b[rng.random(n) < 0.01] = 0.0
    b[rng.random(n) < 0.01] = np.nan
    with np.errstate(invalid="ignore"):
        pre = np.abs(r) * rng.choice([0.0, 2.0 ** -(f.p - 3), 1.0], n)
    cuts = np.sort(rng.choice(np.arange(1, n), 6, replace=False))
    edges = [0, *cuts.tolist(), n]
    for i0, i1 in zip(edges[:-1], edges[1:]):
        yield a[i0:i1], r[i0:i1], b[i0:i1], pre[i0:i1], u[i0:i1], slice(i0, i1)


def _run(native: bool, chunks, fmt_name: str, n: int, signed_zero: bool, scalar: bool, stored: bool = False) -> str:
    f = get_format(fmt_name)
    j = Judge(f, (n,), signed_zero, native=native)
    for a, r, b, pre, u, sl in chunks:
        if stored:  # the output in its own dtype (float32/bfloat16: read as stored by the compiled judge)
            with np.errstate(over="ignore", invalid="ignore"):
                a = a.astype(f.dtype)
        bb = b[:1].copy() if scalar else b
        pp = pre[:1].copy() if scalar else pre
        j.add(a, r, bb, (sl,), ulp=u, pre_rounding=pp, bias_kappa=8.0)
    res = j.result()
    d = res.__dict__.copy()
    d["ulp"] = res.ulp.to_dict()
    d["hist"] = j.dist._hist.tolist()
    d["worst"] = [w.__dict__ for w in res.worst]
    return repr(d)  # (repr: NaN bounds compare equal)


@needs_native
@pytest.mark.parametrize("fmt_name", ["float32", "bfloat16", "float16", "float64", "float8_e4m3fn", "float8_e5m2fnuz"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scalar", [False, True])
def test_native_and_numpy_judges_agree_bit_for_bit(fmt_name, seed, scalar):
    chunks = list(_chunks(fmt_name, seed))
    want = _run(False, chunks, fmt_name, 5000, seed == 1, scalar)
    got = _run(True, chunks, fmt_name, 5000, seed == 1, scalar)
    assert got == want
    # the output in its own dtype: float32 and bfloat16 are widened inside the compiled loop
    want = _run(False, chunks, fmt_name, 5000, seed == 1, scalar, stored=True)
    got = _run(True, chunks, fmt_name, 5000, seed == 1, scalar, stored=True)
    assert got == want


@needs_native
@pytest.mark.parametrize("fmt_name", ["float32", "bfloat16", "float16", "float8_e4m3fn"])
@pytest.mark.parametrize("rate", [0.0, 0.002])
@pytest.mark.parametrize("seed", [3, 4])
def test_native_and_numpy_agree_on_mostly_finite_chunks(fmt_name, rate, seed):
    # the compiled judge's stream-by-stream path (groups of 256 without a skipped element), with
    # element-by-element groups here and there (rate 0.002), chunk boundaries inside groups, ties
    # in |error|/bound, zero and NaN bounds, and bias samples that take all or part of a group
    chunks = list(_chunks(fmt_name, seed, n=20000, rate=rate))
    for scalar in (False, True):
        for stored in (False, True):
            want = _run(False, chunks, fmt_name, 20000, False, scalar, stored)
            assert _run(True, chunks, fmt_name, 20000, False, scalar, stored) == want


@needs_native
@pytest.mark.parametrize("seed", [5, 6])
def test_native_and_numpy_agree_on_negative_and_negative_zero_bounds(seed):
    # no model gives a negative bound, but Judge.add accepts any: a norm |a - r| / b below zero
    # (or -0.0) must not change the totals where the compiled judge takes integer maxima of bits
    rng = np.random.default_rng(seed)
    chunks = []
    for a, r, b, pre, u, sl in _chunks("float32", seed, n=20000, rate=0.0):
        b = b.copy()
        b[rng.random(b.size) < 0.003] *= -1.0
        b[rng.random(b.size) < 0.003] = -0.0
        exact = rng.random(b.size) < 0.01
        b[exact] = np.abs(a[exact] - r[exact])  # norms of exactly 1 (not violations) and 0/0
        if sl.start == 0:  # a first group of negative norms only: its maximum is negative
            b[:300] = -np.abs(b[:300]) - 1e-30
        chunks.append((a, r, b, pre, u, sl))
    for stored in (False, True):
        assert _run(True, chunks, "float32", 20000, False, False, stored) == _run(False, chunks, "float32", 20000, False, False, stored)
    # every bound negative: the largest norm of the whole check is negative (or -0.0)
    a, r, b, pre, u, _ = next(_chunks("float32", seed, n=1024, rate=0.0))
    only = [(a, r, -np.abs(np.nan_to_num(b)) - 1e-30, pre, u, slice(0, a.size))]
    assert _run(True, only, "float32", a.size, False, False) == _run(False, only, "float32", a.size, False, False)


@needs_native
@pytest.mark.parametrize("fmt_name", ["float32", "bfloat16", "float8_e5m2"])
def test_native_and_numpy_agree_over_the_whole_histogram_range(fmt_name):
    # finite chunks (every group of 256 on the stream-by-stream path, where the compiled judge
    # bins four values at a time with AVX2 when it can) whose ULP errors run from 0 and 2^-45
    # to 2^130: below the first bin, every octave, and beyond the last one
    f = get_format(fmt_name)
    rng = np.random.default_rng(11)
    n = 4096
    r = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n)) * (f.max_finite / 2**30 if f.p < 10 else 1.0)
    r = np.asarray(round_to(r, f), dtype=np.float64) * (1 + 2.0**-30)  # off the grid: no zero errors here
    u = np.asarray(ulp(r, f), dtype=np.float64)
    e = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-45, 130, n))
    e[rng.random(n) < 0.05] = 0.0
    a = r + e * u
    a[e == 0.0] = r[e == 0.0]
    assert np.all(np.isfinite(a))
    b = np.abs(r) * 2.0 ** -(f.p - 1) + u * 0.25
    pre = np.zeros(n)
    chunks = [(a[i:i + 1000], r[i:i + 1000], b[i:i + 1000], pre[i:i + 1000], u[i:i + 1000], slice(i, i + 1000))
              for i in range(0, n, 1000)]
    want = _run(False, chunks, fmt_name, n, False, False)
    assert _run(True, chunks, fmt_name, n, False, False) == want


@needs_native
def test_outputs_in_non_native_byte_order_are_judged_by_value():
    # the compiled judge reads float64/float32/bfloat16 outputs as stored: a big-endian array must
    # not be reinterpreted as little-endian bytes (it takes the widening path instead)
    chunks = list(_chunks("float32", 0, n=3000, rate=0.0))
    want = _run(True, chunks, "float32", 3000, False, False, stored=True)
    swapped = [(a.astype(np.float32).astype(">f4"), *rest) for a, *rest in chunks]
    assert _run(True, swapped, "float32", 3000, False, False) == want
    assert _run(False, swapped, "float32", 3000, False, False) == want


@needs_native
def test_native_and_numpy_agree_on_float64_spills():
    # |a - r| / ulp(r) beyond float64 for the float64 format: the (a/u - r/u) fallback, finite for
    # the pair of opposite huge values, infinite where even a/u overflows (a subnormal reference)
    f = get_format("float64")
    r = np.array([5e-324, 1e-300, -1e308, 1.0, 0.0])
    a = np.array([1e300, -1e300, 1e308, 1.0 + 2**-52, 1.7e308])
    u = np.asarray(ulp(r, f), dtype=np.float64)
    res = []
    for native in (False, True):
        j = Judge(f, (5,), native=native)
        with np.errstate(over="ignore"):
            j.add(a, r, np.full(5, 1.0), (slice(0, 5),), ulp=u)
        d = j.result()
        res.append(repr((d.ulp.to_dict(), d.violations, d.normalized_max, [w.__dict__ for w in d.worst])))
        worst = {w.index[0]: w.ulp_error for w in d.worst}
        assert worst[2] == 1e308 / 2.0**971 * 2 and worst[3] == 1.0 and math.isinf(worst[0])
    assert res[0] == res[1]


def _row_totals(native: bool, fmt_name: str, chunks, rows: int, length: int, groups: tuple, stored: bool):
    """The ``row_bias`` totals of ``chunks`` (flat runs of a (rows, length) output), each cut at row
    boundaries and fed as (row, slice) pieces, as check feeds rows cut into pieces."""
    f = get_format(fmt_name)
    j = Judge(f, (rows, length), native=native)
    for a, r, b, _pre, _u, sl in chunks:
        if stored:
            with np.errstate(over="ignore", invalid="ignore"):
                a = a.astype(f.dtype)
        lo, hi = sl.start, sl.stop
        for row in range(lo // length, (hi - 1) // length + 1):
            c0, c1 = max(lo, row * length), min(hi, (row + 1) * length)
            bb = b[:1].copy() if b.size == 1 else b[c0 - lo:c1 - lo]
            j.add(a[c0 - lo:c1 - lo], r[c0 - lo:c1 - lo], bb, (row, slice(c0 - row * length, c1 - row * length)),
                  row_groups=groups)
    return repr(j.result().row_bias)


@needs_native
@pytest.mark.parametrize("fmt_name", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("rate", [1.0, 0.0])
@pytest.mark.parametrize("groups", [("softmax", {"axis": -1}), ("layer_norm", {}), ("sum", {}),
                                    ("softmax", {"axis": -1}, 2.0**-24), ("matmul", {}, 2.0**-24)])
def test_native_and_numpy_row_bias_agree_bit_for_bit(fmt_name, rate, groups):
    # the compiled row_sums against the numpy path of Judge._add_rows: non-finite outputs and
    # references, zero references, zero and NaN bounds, rows split across chunks, with and
    # without the u_acc·|r|/B term (row_bias_rel), the output as float64 and as stored
    chunks = list(_chunks(fmt_name, 7, n=5000, rate=rate))
    for stored in (False, True):
        want = _row_totals(False, fmt_name, chunks, 20, 250, groups, stored)
        assert _row_totals(True, fmt_name, chunks, 20, 250, groups, stored) == want
    # clean chunks (every element within its bound, none skipped: the numpy path's fast branches),
    # references of both signs and of one sign, and a single broadcast bound
    rng = np.random.default_rng(8)
    f = get_format(fmt_name)
    for sign in (1.0, -1.0, None):
        r = rng.uniform(0.5, 2.0, 5000) * (rng.choice([-1.0, 1.0], 5000) if sign is None else sign)
        b = np.full(5000, 2.0 ** -(f.p - 2))
        a = np.asarray(round_to(r + b * rng.uniform(-0.9, 0.9, 5000), f), dtype=np.float64)
        for bound in (b, b[:1].copy()):
            clean = [(a[i0:i0 + 1250], r[i0:i0 + 1250], bound if bound.size == 1 else bound[i0:i0 + 1250], None, None,
                      slice(i0, i0 + 1250)) for i0 in range(0, 5000, 1250)]
            want = _row_totals(False, fmt_name, clean, 20, 250, groups, True)
            assert _row_totals(True, fmt_name, clean, 20, 250, groups, True) == want


@needs_native
@pytest.mark.parametrize("op, shape, kw", [("exp", (3000,), {}), ("softmax", (37, 300), {"axis": -1}),
                                         ("matmul", (70, 300), {})])
def test_check_verdicts_identical_with_and_without_the_compiled_judge(op, shape, kw, monkeypatch):
    rng = np.random.default_rng(5)
    if op == "matmul":
        x = [rng.standard_normal((70, 64)).astype(np.float32), rng.standard_normal((64, 300)).astype(np.float32)]
        out = (x[0].astype(np.float64) @ x[1]).astype(np.float32)
    else:
        x = [rng.standard_normal(shape).astype(np.float32)]
        if op == "exp":
            out = np.exp(x[0])
        else:
            e = np.exp(x[0] - x[0].max(-1, keepdims=True))
            out = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    out = out.copy()
    out.reshape(-1)[::97] = np.nextafter(out.reshape(-1)[::97], np.float32(np.inf))  # some 1-ulp errors
    verdicts = []
    for native in ("1", "0"):
        monkeypatch.setenv("NUMSTD_NATIVE", native)
        compiled.cache_clear()
        for chunk in (None, 1000):
            v = numstd.check(out, op=op, inputs=x, chunk_size=chunk, **kw)
            verdicts.append(v.to_json())
    compiled.cache_clear()
    assert len(set(verdicts)) == 1


def _edge_values():
    """Values next to every bin edge 2^(k/16) (below, nearest, above), with their true bins."""
    ctx = mpmath.MPContext()
    ctx.prec = 200
    xs, want = [], []
    for k in range(-490, 1290):
        x0 = float(ctx.power(2, ctx.mpf(k) / 16))
        for x in (np.nextafter(x0, 0.0), x0, np.nextafter(x0, np.inf)):
            xs.append(x)
            want.append(min(max(int(ctx.ceil(16 * ctx.log(ctx.mpf(x), 2))), -480), 1280) + 481)
    return np.array(xs), np.array(want)


def test_histogram_bins_are_exact_at_every_edge():
    xs, want = _edge_values()
    got = _bin_index(xs)
    assert np.array_equal(got, want)
    assert _bin_index(np.array([0.0, 5e-324, np.inf])).tolist() == [0, 1, 1761]


@needs_native
def test_compiled_histogram_bins_are_exact_at_every_edge():
    # reference 0 has ulp 2^-149 in float32, so a = x * 2^-149 gives the ULP error x exactly
    xs, want = _edge_values()
    xs = xs[(xs >= 2.0 ** -30) & (xs < 2.0 ** 200)]
    want_counts = np.bincount(_bin_index(xs), minlength=1762)
    f = get_format("float32")
    j = Judge(f, (xs.size,), native=True)
    j.add(xs * 2.0 ** -149, np.zeros(xs.size), np.inf, (slice(0, xs.size),))
    assert np.array_equal(j.dist._hist, want_counts)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_overflow_threshold_splits_finite_from_nonfinite_rounding(name):
    f = FORMATS[name]
    t = _overflow_threshold(f)

    def finite(x):
        return bool(np.isfinite(np.asarray(round_to(np.array([x]), f), dtype=np.float64))[0])

    assert t >= f.max_finite
    below = [f.max_finite, np.nextafter(t, 0.0)] if math.isfinite(t) else [f.max_finite, 1e308]
    assert all(finite(x) and (finite(-x) or not f.signed) for x in below)  # E8M0: no negative values
    if math.isfinite(t):
        assert not finite(t) and not finite(-t) and not finite(np.nextafter(t, np.inf)) and not finite(4 * t)


@needs_native
@pytest.mark.parametrize("name", ["float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "tf32"])
def test_compiled_spacing_is_the_ulp_definition(name):
    # ulp(r) = 2^(max(floor(log2|r|), emin) - p + 1), from math.frexp (exact), NaN for non-finite r
    from numstd.ulp import _spacing

    f = get_format(name)
    rng = np.random.default_rng(3)
    r = rng.standard_normal(3000) * np.exp2(rng.integers(-1100, 1000, 3000).astype(float))
    r = np.concatenate([r, [0.0, -0.0, 5e-324, 2.0**-1022, np.inf, -np.inf, np.nan, 1.7976931348623157e308, 1.0, -2.0]])
    want = []
    for x in r.tolist():
        if not math.isfinite(x):
            want.append(math.nan)
            continue
        e = math.frexp(x)[1] - 1 if x != 0 else -10**9  # floor(log2|x|)
        want.append(math.ldexp(1.0, max(e, f.emin) - f.p + 1))
    got = _spacing(r, f)
    assert np.array_equal(got, np.array(want), equal_nan=True)
    assert np.array_equal(_spacing(r[::-1].copy()[::-1], f), got, equal_nan=True)  # strided view: numpy path


def test_prefetch_keeps_order_and_raises_at_the_failing_item():
    import threading

    from numstd.chunks import prefetch

    seen_threads = set()

    def prep(i):
        seen_threads.add(threading.get_ident())
        if i == 7:
            raise ValueError("bad item 7")
        return i * i

    assert list(prefetch(range(7), prep)) == [i * i for i in range(7)]
    assert len(seen_threads - {threading.get_ident()}) == 1  # one worker thread did the work
    assert list(prefetch(range(7), prep, workers=3)) == [i * i for i in range(7)]
    seen_threads.clear()
    assert list(prefetch([3], prep)) == [9] and seen_threads == {threading.get_ident()}  # one item: inline
    assert list(prefetch([], prep)) == []
    got = []
    with pytest.raises(ValueError, match="bad item 7"):
        for v in prefetch(range(10), prep):
            got.append(v)
    assert got == [i * i for i in range(7)]
    assert list(prefetch(range(5), prep, background=False)) == [i * i for i in range(5)]


def _spin(seconds: float) -> None:
    """Burn ``seconds`` of this thread's CPU time (what prefetch measures)."""
    import time

    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.mark.parametrize("slow", ["prepare", "consumer"])
def test_prefetch_finish_runs_where_it_balances_the_threads(slow, monkeypatch):
    # finish moves beside the consumer when prepare is the slower stage and stays on the worker
    # when the consumer is; results are finish(prepare(i)) in order either way
    import threading

    from numstd import chunks
    from numstd.chunks import prefetch

    # the pipeline-or-serial choice compares wall times (_Pace), which other processes' load
    # decides (14 serial items instead of the probe's 4 on a busy machine): a margin of 0 keeps
    # the pipeline after the probe whatever the load, so only the stage-cost choice (thread CPU
    # time, which _spin burns exactly) is tested here
    monkeypatch.setattr(chunks._Pace, "MARGIN", 0.0)

    main = threading.get_ident()
    where, prepared_here = {}, {}

    def prep(i):
        prepared_here[i] = threading.get_ident() == main
        _spin(0.004 if slow == "prepare" else 0.0005)
        return i

    def fin(i):
        where[i] = threading.get_ident() == main
        _spin(0.001)
        return -i

    got = []
    for v in prefetch(range(24), prep, finish=fin):
        got.append(v)
        _spin(0.0005 if slow == "prepare" else 0.004)  # the consumer
    assert got == [-i for i in range(24)]
    # the pipeline is faster than serial work here: only the probe's items are done serially
    serial = [i for i in range(24) if prepared_here[i]]
    assert len(serial) == 4 and serial == list(range(serial[0], serial[0] + 4)) and all(where[i] for i in serial)
    piped = [i for i in range(24) if not prepared_here[i]]
    # nothing decided before 2 warm-up and 3 measured items: on the worker
    assert not any(where[i] for i in piped[:5])
    assert all(where[i] for i in piped[8:]) if slow == "prepare" else not any(where[i] for i in piped)


def test_prefetch_works_serially_when_handing_items_over_is_slow():
    # a worker that is three times slower than the main thread at the same work (as when the two
    # cores share no cache and the worker's results must cross to the other one): after the probe,
    # everything is done serially; results in order
    import threading

    from numstd.chunks import _Pace, prefetch

    main = threading.get_ident()
    prepared_here = []

    def prep(i):
        here = threading.get_ident() == main
        prepared_here.append(here)
        _spin(0.002 if here else 0.008)
        return i

    got = []
    for v in prefetch(range(30), prep):
        got.append(v)
        _spin(0.001)
    assert got == list(range(30))
    first = prepared_here.index(True)
    assert first >= _Pace.WARMUP + _Pace.PROBE and all(prepared_here[first:])


def test_prefetch_finish_errors_surface_at_their_item_on_either_side():
    from numstd.chunks import prefetch

    def fin(i):
        if i == 5:
            raise ValueError("bad finish 5")
        return i

    for slow_prepare in (False, True):
        got = []
        with pytest.raises(ValueError, match="bad finish 5"):
            for v in prefetch(range(9), lambda i: (_spin(0.003 * slow_prepare), i)[1], finish=fin):
                got.append(v)
                _spin(0.003 * (not slow_prepare))
        assert got == [0, 1, 2, 3, 4]
    assert list(prefetch(range(4), lambda i: i, background=False, finish=lambda i: i + 1)) == [1, 2, 3, 4]


@needs_native
def test_pool_reuses_blocks_inside_and_frees_them_after():
    from numpy._core.multiarray import get_handler_name

    from numstd.native import pool

    nat = compiled()
    if not hasattr(nat, "pool_enter"):
        pytest.skip("numstd._native was built without numpy's headers (no pool)")
    before = get_handler_name()
    with pool():
        assert get_handler_name() == "numstd_pool"
        a = np.arange(1 << 15, dtype=np.float64)  # 256 KiB: pooled when freed
        addr = a.__array_interface__["data"][0]
        keep = np.ones(1 << 18)  # 2 MiB, outlives the block
        del a
        kept, nbytes, _, held, _ = nat.pool_stats()
        assert kept >= 1 and nbytes >= 1 << 18 and held >= nbytes + (1 << 21)  # kept + the live `keep`
        b = np.empty(1 << 15)  # the same size: the same block back
        assert b.__array_interface__["data"][0] == addr
        assert b.__array_interface__["data"][0] % 64 == 0
        b[:] = 3.0
        c = np.zeros(1 << 16)
        assert not c.any()  # calloc'd memory is zero
    assert get_handler_name() == before
    assert nat.pool_stats()[:2] == (0, 0)  # the last user freed what was kept
    with pool(max_bytes=1 << 17):  # a budget: blocks beyond it are given back at once
        blocks = [np.empty(1 << 14) for _ in range(4)]  # 4 x 128 KiB
        del blocks
        assert nat.pool_stats()[:2] == (1, 1 << 17)
    assert keep.sum() == 1 << 18 and b.sum() == 3.0 * (1 << 15)
    del keep, b, c  # freed by the pool's free, outside the pool: directly


@needs_native
def test_pool_is_per_context_and_thread_safe():
    import threading

    from numpy._core.multiarray import get_handler_name

    from numstd.native import pool

    names, errors = [], []

    def work(k):
        try:
            with pool():
                names.append(get_handler_name())
                for i in range(200):
                    x = np.full((1 << 14) + (i % 3), float(k))
                    y = x * 2.0
                    assert y[0] == 2.0 * k and y[-1] == 2.0 * k
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    [t.start() for t in threads]
    outside = get_handler_name()
    [t.join() for t in threads]
    assert not errors and names == ["numstd_pool"] * 4
    assert outside != "numstd_pool"  # another thread's pool does not leak into this context
    assert compiled().pool_stats()[:2] == (0, 0)


@needs_native
@pytest.mark.parametrize("name", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("ftz", [True, False])
def test_compiled_model_bound_matches_the_numpy_formula(name, ftz, monkeypatch):
    import numstd.native as native_mod
    from numstd.models import ErrorModel
    from numstd.models.formula import Formula

    f = get_format(name)
    rng = np.random.default_rng(11)
    n = 4000
    absref = np.abs(rng.standard_normal(n) * np.exp2(rng.integers(-160, 140, n).astype(float)))
    absref[:5] = [0.0, 5e-324, np.inf, np.nan, f.max_finite]
    e = np.abs(rng.standard_normal(n)) * absref * 2.0**-20
    e[5:8] = [np.inf, np.nan, 0.0]
    ref_error = np.abs(rng.standard_normal(n)) * 1e-30
    model = ErrorModel("exp", Formula.parse("c * absref", {"c", "absref"}, "test"), rho=0.5, ftz=ftz, constants={"c": 1.0},
                       calibrated="c", margin=1.5)
    cases = [(e, ref_error), (e[:1].copy(), ref_error), (e, np.float64(0.0)), (e[:1].copy(), 0.0)]
    got = [model.bound({"absref": absref}, f, re, pre=pe) for pe, re in cases]
    monkeypatch.setattr(native_mod, "compiled", lambda: None)  # the numpy formula
    want = [model.bound({"absref": absref}, f, re, pre=pe) for pe, re in cases]
    for g, w in zip(got, want):
        assert np.array_equal(g, w, equal_nan=True)


@needs_native
def test_compiled_halving_sum_matches_the_numpy_tree(monkeypatch):
    import numstd.native as native_mod
    from numstd.reference.summation import halving_sum

    rng = np.random.default_rng(12)
    cases = []
    for n in (1, 2, 3, 7, 8, 9, 100, 1000, 4096, 4097):
        for lead in ((), (1,), (3,), (2, 5)):
            x = rng.standard_normal(lead + (n,)) * np.exp2(rng.integers(-60, 60, lead + (n,)).astype(float))
            x[..., ::7] *= -1e12  # cancellation: the order of the additions shows in the bits
            cases.append(x)
    special = rng.standard_normal((4, 33))
    special[0, 3], special[1, 5], special[2, :2], special[3, 1] = np.nan, np.inf, [np.inf, -np.inf], 5e-324
    cases.append(special)
    got = [halving_sum(x) for x in cases]
    monkeypatch.setattr(native_mod, "compiled", lambda: None)  # the numpy tree
    with np.errstate(invalid="ignore"):  # (inf - inf)
        want = [halving_sum(x) for x in cases]
    for (gs, gd, gg), (ws, wd, wg) in zip(got, want):
        assert gs.shape == ws.shape and (gd, gg) == (wd, wg)
        assert np.array_equal(gs.view(np.uint64), ws.view(np.uint64))


@needs_native
def test_compiled_reference_bounds_match_the_numpy_path(monkeypatch):
    # finish_bound (every reference) and dot_bound (contractions): the same bits as numpy
    import ml_dtypes

    import numstd.native as native_mod
    import numstd.reference.contraction as contraction
    from numstd.reference import reference

    rng = np.random.default_rng(4)
    x = rng.standard_normal(3000).astype(np.float32) * 30
    x[:4] = [np.inf, -np.inf, np.nan, 89.0]
    A = rng.standard_normal((300, 96)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((96, 40)).astype(ml_dtypes.bfloat16)
    Ac = np.repeat(rng.standard_normal((300, 1)), 96, axis=1).astype(np.float32)  # cancelling rows:
    Bc = np.concatenate([np.ones((48, 40)), -np.ones((48, 40))]).astype(np.float32)  # float64 ulps: refined

    def run():
        with np.errstate(over="ignore", invalid="ignore"):
            out = [reference("exp", [x])]
        out += [reference("matmul", [A, B], resolution="bfloat16"), reference("matmul", [Ac, Bc], resolution="float64"),
                reference("softmax", [x.reshape(30, 100)], axis=-1)]
        return [(r.values, r.error_bound) for r in out]

    got = run()
    monkeypatch.setattr(native_mod, "compiled", lambda: None)
    monkeypatch.setattr(contraction, "compiled", lambda: None)
    want = run()
    for (gv, gb), (wv, wb) in zip(got, want):
        assert np.array_equal(gv, wv, equal_nan=True) and np.array_equal(gb, wb, equal_nan=True)


def test_checks_in_threads_with_prefetch_and_pool_give_the_serial_verdicts():
    # many chunks per check (so the prefetch thread and the allocator pool run), 8 checks at once
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    base = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    outs = [base.copy() for _ in range(6)]
    for k, o in enumerate(outs):
        o.reshape(-1)[k::37] = np.nextafter(o.reshape(-1)[k::37], np.float32(1))
    serial = [numstd.check(o, op="softmax", inputs=[x], axis=-1).to_json() for o in outs]
    with ThreadPoolExecutor(8) as threads:
        parallel = list(threads.map(lambda o: numstd.check(o, op="softmax", inputs=[x], axis=-1, chunk_size=600).to_json(),
                                    outs * 3))
    assert parallel == serial * 3
    if NATIVE and hasattr(compiled(), "pool_stats"):
        assert compiled().pool_stats()[:2] == (0, 0)


def _standard_envs():
    """(standard, environment, reference) of every active standard's first suite case, with the
    environment's arrays made adversarial: zeros, NaN, ±inf, negative, tiny and huge values."""
    from numstd.models import environment
    from numstd.reference import reference
    from numstd.registry import list_standards
    from numstd.suites import cases_for

    rng = np.random.default_rng(21)
    seen = set()
    for std in list_standards():
        if std.status != "active" or std.op == "module" or std.model.error.text in seen:
            continue
        seen.add(std.model.error.text)
        case = cases_for(std, quick=True, seeds=[0])[0]
        with np.errstate(all="ignore"):
            ref = reference(std.op, list(case.inputs), input_rounding=std.model.input_rounding or None,
                            **dict(case.params))
        env = environment(ref, {"output": std.output, "accumulate": std.accumulate, "input": std.inputs[0]})
        for k, v in list(env._terms.items()):
            if isinstance(v, np.ndarray) and v.size > 8:
                v = v.copy()
                flat = v.reshape(-1)
                idx = rng.choice(flat.size, 6, replace=False)
                flat[idx] = [0.0, np.nan, np.inf, -np.inf, -1.5, 1e300]
                env._terms[k] = v
        yield std, env, ref


@needs_native
def test_compiled_error_formulas_give_numpy_values():
    # every active standard's formula: model_eval's E and B against numpy's evaluation of the
    # formula text and the bound formula of numstd.models (one numpy operation at a time)
    from numstd.ulp import ulp as ulp_np

    compiled_count = 0
    for std, env, ref in _standard_envs():
        m = std.model
        prog = m.error.program(__import__("collections").ChainMap(m.constants, env), ref.values.shape)
        e, b = m.evaluate(env, std.output, ref.error_bound)
        scope = dict(m.constants)
        scope.update({k: env[k] for k in env})
        with np.errstate(all="ignore"):
            want_e = np.broadcast_to(np.asarray(m.error.evaluate(scope), dtype=np.float64), ref.values.shape)
            want_b = want_e + m.rho * np.asarray(ulp_np(np.abs(ref.values) + want_e, std.output), dtype=np.float64)
            if m.ftz:
                want_b = want_b + std.output.smallest_normal
            want_b = want_b + ref.error_bound
        assert np.array_equal(np.broadcast_to(e, ref.values.shape), want_e, equal_nan=True), std.key
        assert np.array_equal(b, want_b, equal_nan=True), std.key
        compiled_count += prog is not None
    assert compiled_count >= 12  # every formula of the shipped standards compiles (none uses ** or log2)


def test_formula_programs_leave_out_what_numpy_must_compute():
    from numstd.models.formula import Formula

    allowed = {"a", "b", "c", "K", "row"}
    shape = (3, 5)
    env = {"a": np.ones(shape), "b": np.full(shape, 2.0), "c": 3.0, "K": np.asarray(5.0), "row": np.ones((3, 1))}
    ok = {"a * b + c", "c * sqrt(K) * a", "-a / (b - row)", "abs(a) + sqrt(b)", "c * K", "a"}
    for text in ok:
        assert Formula.parse(text, allowed, "t").program(env, shape) is not None, text
    deep = "a * b"
    for _ in range(8):  # nine intermediate values live at once: more than the eight registers
        deep = f"a * b + ({deep})"
    assert Formula.parse(deep.replace("a * b + (a * b)", "a * b", 1), allowed, "t").program(env, shape) is not None
    for text in ("a ** 2", "log2(a)", "max(a, b)", "min(a, c)", "a * b ** c", deep):
        assert Formula.parse(text, allowed, "t").program(env, shape) is None, text
    # per column, as (5,) or (1, 5): compiled; neither full, per row, per column nor a single value,
    # or not float64: numpy's broadcasting
    assert Formula.parse("a * b", allowed, "t").program(dict(env, b=np.ones((1, 5))), shape) is not None
    assert Formula.parse("a * b", allowed, "t").program(dict(env, b=np.ones(5)), shape) is not None
    env3 = {"a": np.ones((2, 3, 5)), "b": np.ones((2, 1, 5))}
    assert Formula.parse("a * b", allowed, "t").program(env3, (2, 3, 5)) is None
    assert Formula.parse("a * b", allowed, "t").program(dict(env, b=np.ones(shape, np.float32)), shape) is None
    # values: the compiled program against numpy's evaluation of the text, on adversarial terms
    if NATIVE:
        rng = np.random.default_rng(3)
        terms = {"a": rng.standard_normal(shape) * 1e3, "b": rng.standard_normal(shape), "c": -3.5,
               "K": np.asarray(5.0), "row": rng.standard_normal((3, 1))}
        terms["a"][0, :3] = [0.0, np.inf, np.nan]
        terms["b"][1, :2] = [0.0, -0.0]
        from numstd.ulp import _spacing_params

        for text in ok | {"c - a / b", "c / (row - a) - K", "sqrt(c * a) - -b", "abs(c - row) / K"}:
            prog = Formula.parse(text, allowed, "t").program(terms, shape)
            e, b = np.empty(shape), np.empty(shape)
            compiled().model_eval(prog.code, prog.consts, prog.arrays, prog.rowlen, np.zeros(shape), np.zeros(1), e, b,
                                  0.0, False, 0.0, *_spacing_params(get_format("float32")))
            with np.errstate(all="ignore"):
                want = np.broadcast_to(Formula.parse(text, allowed, "t").evaluate(terms), shape)
            assert np.array_equal(e, want, equal_nan=True), text
    # the single values are folded by the formula's own evaluation: sqrt(K) * c is one constant
    prog = Formula.parse("c * sqrt(K) * a", allowed, "t").program(env, shape)
    assert prog.consts.tolist() == [3.0 * np.sqrt(5.0)] and prog.code.size == 6


@pytest.mark.parametrize("native", [True, False])
def test_formula_compute_is_evaluate_broadcast(native, monkeypatch):
    # Formula.compute (the reference bounds of softmax, attention, cross-entropy): a new array of the
    # requested shape holding evaluate()'s values, compiled or not; absref is an ordinary term here
    import numstd.native as native_mod
    from numstd.models.formula import Formula

    if native and not NATIVE:
        pytest.skip("numstd._native is not built")
    if not native:
        monkeypatch.setattr(native_mod, "compiled", lambda: None)
    rng = np.random.default_rng(8)
    shape = (5, 700)
    env = {"U": 2.0**-53, "dev": np.abs(rng.standard_normal(shape)) * 30, "devmean": rng.random((5, 1)),
           "gamma": 1e-15, "absref": rng.random(shape), "w": rng.standard_normal(700)}
    env["dev"][2, 5:9] = [0.0, np.inf, np.nan, 1e308]
    for text in ("U * dev + 11 * U + U * devmean + gamma", "absref * w - devmean / gamma", "devmean", "gamma * 2"):
        f = Formula.parse(text, set(env), "t")
        got = f.compute(env, shape)
        with np.errstate(all="ignore"):
            want = np.broadcast_to(f.evaluate(env), shape)
        assert got.shape == shape and got.flags.writeable and np.array_equal(got, want, equal_nan=True), text
        assert not any(got is v or np.shares_memory(got, v) for v in env.values() if isinstance(v, np.ndarray))


@needs_native
def test_compiled_module_histogram_bins_are_exact_at_every_edge():
    # hist_add (DistributionAccumulator.add's bins) against the mpmath edges: ceil(16 log2 x), clipped
    xs, want = _edge_values()
    xs = np.concatenate([xs, [0.0, 5e-324, 2.0**-1022, 1e300, np.inf]])
    want = np.concatenate([want, [0, 1, 1, 1761, 1761]])
    h = np.zeros(1762, dtype=np.int64)
    compiled().hist_add(xs, h)
    assert np.array_equal(h, np.bincount(want, minlength=1762))


def test_module_ulp_distribution_identical_with_and_without_the_compiled_bins(monkeypatch):
    from numstd.core import distribution as dist_mod

    g = np.random.default_rng(3)
    err = g.standard_normal(5000) * 10.0 ** g.uniform(-12, 30, 5000)
    err[::97] = 0.0
    ref = g.standard_normal(5000)

    def dist():
        a = dist_mod.DistributionAccumulator()
        a.add(err, ref)
        return a.result(), a._hist.copy()

    got, hist = dist()
    monkeypatch.setattr(dist_mod, "compiled", lambda: None)
    want, hist0 = dist()
    assert np.array_equal(hist, hist0) and got == want
