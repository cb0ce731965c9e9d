"""The shipped exhaustive tables and float32 hard cases: truth (fresh mpmath), integrity, rebuild.

Independent truth: every checked row is recomputed here with mpmath at 480+ bits in a local
context, from the catalog's formulas (``numstd.ops``), and judged by the definition of round to
nearest: a stored value ``y`` is the correctly rounded ``v`` iff ``|v - y| < ulp(v)/2`` with
Goldberg's ``ulp(v) = 2^(max(floor(log2|v|), emin) - p + 1)`` (strict: no exact ties occur for
these functions at these inputs), and overflow iff ``|v|`` exceeds ``max_finite + ulp(max)/2``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import sys
import threading
from pathlib import Path

import mpmath
import numpy as np
import pytest

from numstd.errors import DataIntegrityError, ParameterError
from numstd.formats import get_format, round_to
from numstd.tables import (
    HARDCASES_FILE,
    MANIFEST,
    TABLE_FORMATS,
    TABLE_FUNCTIONS,
    load_hardcases,
    load_table,
    read_manifest,
    table_filename,
    tables_root,
)

REPO = Path(__file__).resolve().parent.parent
PREC = 480
ALL_TABLES = [(k, f) for k in TABLE_FUNCTIONS for f in TABLE_FORMATS]


def _load(key: str, fmt: str):
    op, params = TABLE_FUNCTIONS[key]
    return load_table(op, fmt, **params)


# ------------------------------------------------------------------------------------------------
# fresh mpmath truth (independent of scripts/make_tables.py)
# ------------------------------------------------------------------------------------------------

def _truth(key: str, x: float, ctx: mpmath.MPContext):
    """The exact value at ctx.prec bits, or a float for IEEE special results."""
    if x == 0 or (key in ("log", "sqrt", "rsqrt") and x < 0):
        return None
    m = ctx.mpf(x)
    if key == "exp":
        return ctx.exp(m)
    if key == "log":
        return ctx.log(m)
    if key == "tanh":
        return ctx.tanh(m)
    if key == "sigmoid":
        return 1 / (1 + ctx.exp(-m))
    if key == "erf":
        return ctx.erf(m)
    if key == "gelu-none":  # x/2 * erfc(-x/sqrt 2), the catalog's cancellation-free form
        return m / 2 * ctx.erfc(-m / ctx.sqrt(2))
    if key == "gelu-tanh":  # x/2 (1 + tanh z) directly where the cancellation fits the precision
        z = ctx.sqrt(2 / ctx.pi) * (m + ctx.mpf("0.044715") * m ** 3)
        if z > -60:
            return m / 2 * (1 + ctx.tanh(z))
        return m * ctx.exp(2 * z) / (1 + ctx.exp(2 * z))  # = x/2 (1 + tanh z), exactly
    if key == "silu":
        return m / (1 + ctx.exp(-m))
    if key == "rsqrt":
        return 1 / ctx.sqrt(m)
    if key == "sqrt":
        return ctx.sqrt(m)
    raise KeyError(key)


def _special(key: str, x: float) -> float:
    """IEEE 754 results at zero and outside the domain (hand-written, not from the generator)."""
    neg = math.copysign(1.0, x) < 0
    if x < 0:  # log, sqrt, rsqrt of a negative number
        return math.nan
    return {"exp": 1.0, "log": -math.inf, "sigmoid": 0.5, "rsqrt": -math.inf if neg else math.inf}.get(key, x)


def _ulp(v, p: int, emin: int, ctx: mpmath.MPContext):
    if v == 0:
        return ctx.ldexp(1, emin - p + 1)
    e = int(ctx.floor(ctx.log(abs(v), 2)))
    # floor(log2) from mpmath can be off by one next to powers of two: fix it exactly
    while ctx.ldexp(1, e) > abs(v):
        e -= 1
    while ctx.ldexp(1, e + 1) <= abs(v):
        e += 1
    return ctx.ldexp(1, max(e, emin) - p + 1)


def _assert_rounds_to(v, y: float, fmt: str, ctx: mpmath.MPContext, where: str) -> None:
    """``y`` (a value of ``fmt``, inf/NaN for overflow) is the RNE rounding of the real ``v``."""
    f = get_format(fmt)
    threshold = ctx.mpf(f.max_finite) + ctx.ldexp(1, f.emax - f.p) if f.name != "float64" else \
        ctx.ldexp(2, 1023) - ctx.ldexp(1, 1023 - 53)
    if abs(v) > threshold:
        assert math.isinf(y) if f.has_inf else math.isnan(y), f"{where}: {v} overflows {fmt}, got {y}"
        if f.has_inf:
            assert (y > 0) == (v > 0), where
        return
    assert math.isfinite(y), f"{where}: expected a finite value for {v}, got {y}"
    err = abs(ctx.mpf(y) - v) / _ulp(v, f.p, f.emin, ctx)
    assert err < 0.5, f"{where}: {y!r} is {float(err)} ulp from the exact {v} in {fmt}"


def _check_row(key: str, fmt: str, bits: int, y_bits: int, exact: float, ctx: mpmath.MPContext) -> None:
    f = get_format(fmt)
    uint = np.dtype(f"uint{8 * f.dtype.itemsize}")
    x = float(np.array(bits, dtype=uint).view(f.dtype).astype(np.float64))
    y = float(np.array(y_bits, dtype=uint).view(f.dtype).astype(np.float64))
    where = f"{key}.{fmt} x={x!r} (0x{bits:x})"
    if not math.isfinite(x):
        return  # limits at ±inf/NaN are conventions, checked in test_special_rows
    v = _truth(key, x, ctx)
    if v is None:
        s = _special(key, x)
        assert (math.isnan(s) and math.isnan(exact)) or s == exact, where
        want = float(round_to(np.array(s), fmt))
        assert (math.isnan(want) and math.isnan(y)) or want == y, where
        return
    _assert_rounds_to(v, y, fmt, ctx, where)
    _assert_rounds_to(v, exact, "float64", ctx, where + " (exact column)")
    if y == 0 and v != 0 and f.has_negative_zero:
        assert (math.copysign(1, y) > 0) == (v > 0), f"{where}: sign of zero"


def _rows_to_check(key: str, fmt: str, rng: np.random.Generator) -> np.ndarray:
    t = _load(key, fmt)
    n = t.x_bits.size
    hardest = [int(h["x"], 16) for h in t.entry["hardest_rows"]]
    if n <= 256:
        return np.arange(n)
    return np.unique(np.concatenate([rng.choice(n, size=40, replace=False), hardest]))


@pytest.mark.parametrize("key", list(TABLE_FUNCTIONS))
def test_tables_agree_with_fresh_mpmath(key: str) -> None:
    """Random rows of each 16-bit table, every fp8 row, and each table's hardest rows."""
    ctx = mpmath.MPContext()
    rng = np.random.default_rng([7, sorted(TABLE_FUNCTIONS).index(key)])
    with ctx.workprec(PREC):
        for fmt in TABLE_FORMATS:
            t = _load(key, fmt)
            for i in _rows_to_check(key, fmt, rng):
                _check_row(key, fmt, int(t.x_bits[i]), int(t.y_bits[i]), float(t.exact[i]), ctx)


def test_hardest_rows_are_near_midpoints_and_needed_more_precision() -> None:
    """The manifest's hardest rows are genuinely hard: their recorded midpoint distance is
    confirmed by fresh mpmath (up to 1e-6 relative), and they lie within 2^-8 ulp of a midpoint."""
    ctx = mpmath.MPContext()
    with ctx.workprec(PREC):
        for key, fmt in [("exp", "bfloat16"), ("sigmoid", "float16"), ("gelu-tanh", "bfloat16"), ("log", "float16")]:
            t = _load(key, fmt)
            f = t.format
            for h in t.entry["hardest_rows"]:
                x = float(t.inputs[int(h["x"], 16)].astype(np.float64))
                v = _truth(key, x, ctx)
                frac = abs(v) / _ulp(v, f.p, f.emin, ctx)
                dist = abs(frac - ctx.floor(frac) - ctx.mpf(0.5))
                assert dist < 2.0**-8
                assert float(dist) == pytest.approx(h["midpoint_distance_ulp"], rel=1e-6, abs=1e-300)


def test_special_rows() -> None:
    """Zeros, infinities, NaN and negative inputs follow IEEE 754 (hand-derived values)."""
    cases = {  # key: (f(+0), f(-0), f(+inf), f(-inf), f(-1))
        "exp": (1.0, 1.0, math.inf, 0.0, math.exp(-1)),
        "log": (-math.inf, -math.inf, math.inf, math.nan, math.nan),
        "sqrt": (0.0, -0.0, math.inf, math.nan, math.nan),
        "rsqrt": (math.inf, -math.inf, 0.0, math.nan, math.nan),
        "sigmoid": (0.5, 0.5, 1.0, 0.0, 1 / (1 + math.e)),
        "tanh": (0.0, -0.0, 1.0, -1.0, math.tanh(-1)),
    }
    x = np.array([0.0, -0.0, math.inf, -math.inf, -1.0])
    for key, want in cases.items():
        for fmt in ("bfloat16", "float16", "float8_e5m2"):
            t = _load(key, fmt)
            bits = x.astype(t.format.dtype).view(t.x_bits.dtype)
            got = t.exact[bits]
            np.testing.assert_allclose(got, want, rtol=1e-15)
            assert [math.copysign(1, g) for g in got[:2] if g == 0] == [math.copysign(1, w) for w in want[:2] if w == 0]


def test_float32_hardcases_agree_with_fresh_mpmath() -> None:
    """Every shipped float32 hard case: rounded bits and exact column are correct, and the exact
    value lies within the recorded distance (< 2^-8 ulp) of a float32 rounding midpoint."""
    doc = json.loads((tables_root() / HARDCASES_FILE).read_bytes())
    f = get_format("float32")
    ctx = mpmath.MPContext()
    assert set(doc["functions"]) == set(TABLE_FUNCTIONS)
    with ctx.workprec(PREC):
        for key, cases in doc["functions"].items():
            assert len(cases) >= 8
            dists = [c["midpoint_distance_ulp"] for c in cases]
            assert dists == sorted(dists)
            for c in cases:
                x = float(np.uint32(int(c["x"], 16)).view(np.float32))
                v = _truth(key, x, ctx)
                y = float(np.uint32(int(c["rounded"], 16)).view(np.float32))
                _assert_rounds_to(v, y, "float32", ctx, f"{key} hard case {c['x']}")
                _assert_rounds_to(v, float(c["exact"]), "float64", ctx, f"{key} hard case {c['x']} exact")
                frac = abs(v) / _ulp(v, f.p, f.emin, ctx)
                dist = abs(frac - ctx.floor(frac) - ctx.mpf(0.5))
                assert dist < 2.0**-8
                assert float(dist) == pytest.approx(c["midpoint_distance_ulp"], rel=1e-6, abs=1e-300)
            np.testing.assert_array_equal(
                load_hardcases(*TABLE_FUNCTIONS[key][:1], **TABLE_FUNCTIONS[key][1]).view(np.uint32),
                [int(c["x"], 16) for c in cases])


def test_round_to_exact_matches_bits_except_on_float64_midpoints() -> None:
    """``round_to(exact) == y`` everywhere except rows whose float64 ``exact`` is itself a midpoint of
    the format (double rounding: there the bits, decided by mpmath, must be kept)."""
    n_double = 0
    for key, fmt in ALL_TABLES:
        t = _load(key, fmt)
        y = t.outputs.astype(np.float64)
        r = round_to(t.exact, fmt).astype(np.float64)
        same = (y == r) | (np.isnan(y) & np.isnan(r))
        bad = np.nonzero(~same)[0]
        if bad.size:
            e = t.exact[bad]
            f = t.format
            q = np.ldexp(1.0, np.maximum(np.frexp(np.abs(e))[1] - 1, f.emin) - f.p + 1)
            s = np.abs(e) / q
            assert np.all(s - np.floor(s) == 0.5), f"{key}.{fmt}: rows {bad[:5]} differ without a midpoint"
            n_double += bad.size
    assert n_double < 1000  # a handful of structural cases (gelu/silu of tiny bf16 subnormals)


def test_manifest_covers_every_table() -> None:
    m = read_manifest()
    assert m["generator"] == "scripts/make_tables.py" and m["mpmath_version"]
    for key, fmt in ALL_TABLES:
        e = m["files"][table_filename(key, fmt)]
        assert e["rows"] == 1 << get_format(fmt).bits
        assert e["precision"]["max_used"] >= 160
        assert e["generator_version"] and e["mpmath_version"] and e["date"]
        data = (tables_root() / table_filename(key, fmt)).read_bytes()
        assert hashlib.sha256(data).hexdigest() == e["sha256"]
    total = sum(e["bytes"] for e in m["files"].values())
    assert total < 8_000_000


def _copy(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True)
    for name in [MANIFEST, *names]:
        (root / name).write_bytes((tables_root() / name).read_bytes())
    return root


def test_tampered_table_is_refused(tmp_path: Path) -> None:
    name = table_filename("erf", "bfloat16")
    good = load_table("erf", "bfloat16", root=_copy(tmp_path / "good", [name]))
    np.testing.assert_array_equal(good.exact, _load("erf", "bfloat16").exact)

    root2 = _copy(tmp_path / "tampered", [name, HARDCASES_FILE])
    data = bytearray((root2 / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (root2 / name).write_bytes(bytes(data))
    with pytest.raises(DataIntegrityError, match="sha256"):
        load_table("erf", "bfloat16", root=root2)
    cases = bytearray((root2 / HARDCASES_FILE).read_bytes())
    (root2 / HARDCASES_FILE).write_bytes(bytes(cases).replace(b'"x": "0x', b'"x": "0x0', 1))
    with pytest.raises(DataIntegrityError, match="sha256"):
        load_hardcases("erf", root=root2)
    (root2 / name).unlink()
    with pytest.raises(DataIntegrityError, match="missing"):
        load_table("erf", "bfloat16", root=root2)


def test_loader_is_cached_thread_safe_and_read_only() -> None:
    got = []
    threads = [threading.Thread(target=lambda: got.append(_load("tanh", "float16"))) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(g is got[0] for g in got) and len(got) == 8
    with pytest.raises(ValueError):
        got[0].exact[0] = 1.0


def test_loader_refuses_ops_and_formats_without_tables() -> None:
    with pytest.raises(ParameterError, match="tables exist for"):
        load_table("relu", "bfloat16")
    with pytest.raises(ParameterError, match="float32"):
        load_table("exp", "float32")
    with pytest.raises(ParameterError, match="approximate"):
        load_table("exp", "bfloat16", approximate="tanh")


def _generator():
    path = REPO / "scripts" / "make_tables.py"
    if not path.exists():
        pytest.skip("scripts/make_tables.py is not in this installation (wheel)")
    spec = importlib.util.spec_from_file_location("numstd_make_tables", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_generator_rebuilds_random_rows_identically() -> None:
    gen = _generator()
    rng = np.random.default_rng(11)
    for key in TABLE_FUNCTIONS:
        for fmt in ("bfloat16", "float16", "float8_e4m3fn"):
            t = _load(key, fmt)
            rows = np.sort(rng.choice(t.x_bits.size, size=12, replace=False))
            got = gen.compute_rows(key, fmt, rows)
            np.testing.assert_array_equal(got["y"], t.y_bits[rows])
            np.testing.assert_array_equal(got["exact"].view(np.uint64), t.exact[rows].view(np.uint64))


def test_generator_raises_precision_only_where_the_rounding_is_close() -> None:
    """Hand-derived cases: exp(-2^-25) = 1 - 2^-25 + 2^-51 - … lies 2^-27 float32 ulp above the
    midpoint 1 - 2^-25, so it rounds to 1; gelu(2^-133) = 2^-134 + 2^-266/sqrt(2 pi) + … lies just
    above the bfloat16 midpoint 2^-134 (and float64 holds 2^-134 exactly), so deciding the float64
    column takes more than the first step, and the bfloat16 result is 2^-133."""
    gen = _generator()
    r = gen.correctly_rounded("exp", -(2.0**-25), "float32")
    assert r.y == 1.0 and r.distance == pytest.approx(2.0**-27, rel=1e-6)
    easy = gen.correctly_rounded("exp", 0.75, "float32")
    assert easy.prec == 2 * gen.START_PREC and easy.distance > 2.0**-10
    tiny = gen.correctly_rounded("gelu-none", 2.0**-133, "bfloat16")
    assert tiny.prec > 2 * gen.START_PREC
    assert tiny.y == 2.0**-133 and tiny.exact == 2.0**-134
