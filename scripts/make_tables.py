#!/usr/bin/env python
"""Generate the shipped exhaustive reference tables and the float32 hard-case list with mpmath.

For every elementwise catalog function (``numstd.tables.TABLE_FUNCTIONS``) and every 8- and 16-bit
format (``numstd.tables.TABLE_FORMATS``), each input bit pattern gets

* ``y``: the bits of the correctly rounded result (round to nearest, ties to even, with unbounded
  exponent range and overflow to ±inf, or NaN in formats without infinities — the convention of
  :func:`numstd.formats.round_to`), and
* ``exact``: the float64 nearest the exact result (also RNE: ±inf beyond float64's range, a signed
  zero below half its smallest subnormal).

Correct rounding is decided with a Ziv loop (Ziv, "Fast evaluation of elementary mathematical
functions with correctly rounded last bit", ACM TOMS 17(3), 1991): the function is evaluated with a
*local* :class:`mpmath.MPContext` at precisions ``P`` and ``2P``; with
``err = |v_2P - v_P| + 2**(4-P) |v_2P|`` (the disagreement of the two evaluations, which bounds the
error of the less precise one, plus a floor of 16 units in its last place) the interval
``[v_2P - err, v_2P + err]`` (endpoints rounded outward with :mod:`mpmath.libmp`) must round to
the same value both in the target format and in float64 — rounding is monotone, so then every
value in the interval, the exact one included, rounds the same.  Otherwise ``P`` doubles, from
:data:`START_PREC` up to :data:`MAX_PREC`.  Results that are exact by construction (zeros,
``sqrt``/``rsqrt`` of exact squares) are detected and rounded directly; transcendental values of
non-zero rational inputs are never dyadic (Lindemann–Weierstrass), so no exact ties arise
otherwise.  Special inputs (±0, ±inf, NaN, inputs outside the domain) take IEEE 754 values/limits.

Formulas (well conditioned forms of the catalog formulas, ``numstd.ops``):
``sigmoid(x) = 1/(1+exp(-x))``, ``silu(x) = x/(1+exp(-x))``,
``gelu(x) = x/2 * erfc(-x/sqrt 2)`` (approximate="none"),
``gelu(x) = x/2 (1 + tanh z) = x / (1 + exp(-2z))``, ``z = sqrt(2/pi) (x + 0.044715 x^3)``
(approximate="tanh"; ``0.044715`` the exact decimal), ``rsqrt(x) = 1/sqrt(x)``.

Hard cases for float32 (``hardcases_float32.json``): per function, float32 inputs whose exact
result lies closest to a rounding midpoint of float32, found by screening seeded samples (every
binade, both signs, plus ``±(1 + j 2^-23) 2^e``) in float64 (numpy/scipy), then confirming and
ranking the best candidates with the same Ziv loop.

Usage::

    python scripts/make_tables.py [--out reference_data/tables] [--jobs 2] [--only exp,sqrt]
                                  [--formats bfloat16,float16] [--no-hardcases]

Writes one Parquet file per (function, format) (pyarrow, zstd) and ``manifest.json`` (sha256,
rows, generator version, mpmath version, precision used, hardest rows, date).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import mpmath  # noqa: E402
from mpmath import libmp  # noqa: E402

from numstd.formats import Format, get_format  # noqa: E402
from numstd.tables import (  # noqa: E402
    HARDCASES_FILE,
    MANIFEST,
    SCHEMA,
    TABLE_FORMATS,
    TABLE_FUNCTIONS,
    table_filename,
)

__all__ = ["GENERATOR_VERSION", "START_PREC", "MAX_PREC", "Rounded", "correctly_rounded",
           "compute_rows", "main"]

GENERATOR_VERSION = "1"
START_PREC = 80
MAX_PREC = 8192
HARDEST_ROWS = 8  # per table, recorded in the manifest
HARDCASES_PER_FUNCTION = 12
HARDCASE_SAMPLES = 1 << 17  # random float32 candidates per function (plus structured ones)
HARDCASE_CONFIRM = 192  # best float64-screened candidates confirmed with mpmath
SEED = 20240611
CHUNK = 4096

_F64 = get_format("float64")
_CTX: mpmath.MPContext | None = None


def _ctx() -> mpmath.MPContext:
    """This process's private mpmath context (never the global ``mpmath.mp``)."""
    global _CTX
    if _CTX is None:
        _CTX = mpmath.MPContext()
    return _CTX


# --------------------------------------------------------------------------------------------
# the functions
# --------------------------------------------------------------------------------------------

def _gelu_none(c: Any, x: Any) -> Any:
    return x / 2 * c.erfc(-x / c.sqrt(2))


def _gelu_tanh(c: Any, x: Any) -> Any:
    z = c.sqrt(2 / c.pi) * (x + c.mpf("0.044715") * x ** 3)
    return x / (1 + c.exp(-2 * z))


_MP: dict[str, Callable[[Any, Any], Any]] = {
    "exp": lambda c, x: c.exp(x),
    "log": lambda c, x: c.log(x),
    "tanh": lambda c, x: c.tanh(x),
    "sigmoid": lambda c, x: 1 / (1 + c.exp(-x)),
    "erf": lambda c, x: c.erf(x),
    "gelu-none": _gelu_none,
    "gelu-tanh": _gelu_tanh,
    "silu": lambda c, x: x / (1 + c.exp(-x)),
    "rsqrt": lambda c, x: 1 / c.sqrt(x),
    "sqrt": lambda c, x: c.sqrt(x),
}

_INF = math.inf
_NAN = math.nan


def _special(key: str, x: float) -> float | None:
    """IEEE 754 value (or limit) for zeros, infinities, NaN and inputs outside the domain."""
    if math.isnan(x):
        return _NAN
    neg = math.copysign(1.0, x) < 0
    if x == 0:
        return {"exp": 1.0, "log": -_INF, "sigmoid": 0.5, "rsqrt": -_INF if neg else _INF}.get(key, x)
    if key in ("log", "sqrt", "rsqrt") and x < 0:
        return _NAN
    if math.isinf(x):
        pos = {"exp": _INF, "log": _INF, "tanh": 1.0, "sigmoid": 1.0, "erf": 1.0, "gelu-none": _INF,
               "gelu-tanh": _INF, "silu": _INF, "rsqrt": 0.0, "sqrt": _INF}
        negv = {"exp": 0.0, "tanh": -1.0, "sigmoid": 0.0, "erf": -1.0, "gelu-none": -0.0,
                "gelu-tanh": -0.0, "silu": -0.0}
        return negv[key] if neg else pos[key]
    return None


# --------------------------------------------------------------------------------------------
# exact rounding of an mpf into a format
# --------------------------------------------------------------------------------------------

def _rne(t: tuple, f: Format) -> float:
    """Round the finite mpf tuple ``t = (sign, man, exp, bc)`` (value ``±man 2^exp``) into ``f``.

    RNE with unbounded exponent range, then overflow above ``max_finite`` to ±inf (NaN without
    infinities); the result is a Python float (a value of ``f``), zeros signed, except that
    formats without -0 give +0.
    """
    sign, man, exp, bc = t
    if not man:
        return 0.0
    top = exp + bc - 1  # floor(log2 |v|)
    over = _INF if f.has_inf else _NAN
    if top > f.emax:
        return -over if sign else over
    qexp = max(top, f.emin) - f.p + 1
    shift = qexp - exp
    if shift <= 0:
        k = man << -shift
    elif shift > bc:  # |v|/q = man/2^shift < 2^(bc-shift) <= 1/2: strictly below half a quantum
        k = 0
    else:
        k = man >> shift
        rem = man - (k << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and k & 1):
            k += 1
    if k == 0:
        return (-0.0 if sign and f.has_negative_zero else 0.0)
    if k >= 1 << f.p and max(top, f.emin) == f.emax:  # rounded up to 2^(emax+1)
        return -over if sign else over
    v = math.ldexp(k, qexp)
    if v > f.max_finite:
        return -over if sign else over
    return -v if sign else v


def _midpoint_distance(t: tuple, f: Format) -> float:
    """Distance of ``t`` to the nearest rounding midpoint of ``f``, in units of ``f``'s quantum."""
    sign, man, exp, bc = t
    if not man:
        return 0.5
    top = exp + bc - 1
    if top > f.emax + 1:
        return 0.5
    shift = max(top, f.emin) - f.p + 1 - exp
    if shift <= 0 or shift > bc + 1:
        return 0.5
    rem = man & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    d = abs(rem - half)
    # d / 2^shift as a float without overflow: keep 60 leading bits
    excess = max(d.bit_length() - 60, 0)
    return math.ldexp(d >> excess, excess - shift)


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


@dataclass(frozen=True)
class Rounded:
    """One decided row: the value in the target format, the nearest float64, and provenance."""

    y: float  # value of the target format (float), nan/inf included
    exact: float  # float64 nearest the exact value
    prec: int  # precision of the final (more precise) evaluation; 0 for special/exact cases
    distance: float  # distance of the exact value to the nearest midpoint of the target, in ulps


def _exact_result(key: str, x: Any, v: Any) -> bool:
    """True when ``v`` is exactly ``key(x)`` (only sqrt/rsqrt of exact squares qualify)."""
    c = _ctx()
    with c.workprec(4 * c.prec + 64):
        if key == "sqrt":
            return v * v == x
        if key == "rsqrt":
            return v * v * x == 1
    return False


def correctly_rounded(key: str, x: float, fmt: Any) -> Rounded:
    """Decide the correctly rounded value of ``key(x)`` in ``fmt`` and in float64 (Ziv loop).

    Raises
    ------
    RuntimeError
        If :data:`MAX_PREC` bits do not decide the rounding (never observed; would mean an
        unexpected exact tie).
    """
    f = get_format(fmt)
    s = _special(key, x)
    if s is not None:
        ts = libmp.from_float(s) if math.isfinite(s) and s != 0 else None
        y = _rne(ts, f) if ts is not None else (s if (math.isnan(s) or f.has_inf or s == 0) else _NAN)
        if s == 0 and not f.has_negative_zero:
            y = 0.0
        d = _midpoint_distance(ts, f) if ts is not None else 0.5
        return Rounded(y, s, 0, d)
    c = _ctx()
    fn = _MP[key]
    prec = START_PREC
    with c.workprec(prec):
        xm = c.mpf(x)  # exact: prec >= 53
        lo = fn(c, xm)
    while True:
        with c.workprec(2 * prec):
            hi = fn(c, xm)
            if lo == hi and _exact_result(key, xm, hi):
                t = hi._mpf_
                return Rounded(_rne(t, f), _rne(t, _F64), 2 * prec, _midpoint_distance(t, f))
        t_hi = hi._mpf_
        wp = 2 * prec + 64
        diff = libmp.mpf_abs(libmp.mpf_sub(t_hi, lo._mpf_, wp, "u"))
        floor = libmp.mpf_shift(libmp.mpf_abs(t_hi), 4 - prec)
        err = libmp.mpf_add(diff, floor, wp, "u")
        a = libmp.mpf_sub(t_hi, err, wp, "f")
        b = libmp.mpf_add(t_hi, err, wp, "c")
        ya, yb = _rne(a, f), _rne(b, f)
        ea, eb = _rne(a, _F64), _rne(b, _F64)
        if _same(ya, yb) and _same(ea, eb):
            return Rounded(ya, ea, 2 * prec, _midpoint_distance(t_hi, f))
        prec *= 2
        if prec > MAX_PREC:
            raise RuntimeError(f"{key}({x!r}) in {f.name}: rounding undecided at {MAX_PREC} bits")
        lo = hi


def _uint(f: Format) -> np.dtype:
    return np.dtype(f"uint{8 * f.dtype.itemsize}")


def _bits_of(values: np.ndarray, f: Format) -> np.ndarray:
    """Bit patterns of float64 values that are values of ``f`` (NaN -> the cast's NaN pattern)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(f.dtype).view(_uint(f))


def compute_rows(key: str, fmt: Any, bits: Sequence[int]) -> dict[str, np.ndarray]:
    """Rows of the table ``key`` × ``fmt`` for the given input bit patterns.

    Returns
    -------
    dict with ``x`` (bits), ``y`` (bits of the correctly rounded result), ``exact`` (float64),
    ``prec`` (int32, bits of the deciding evaluation; 0 for special and exact cases) and
    ``distance`` (float64, distance to the nearest midpoint in ulps of ``fmt``).
    """
    f = get_format(fmt)
    xb = np.asarray(bits, dtype=_uint(f))
    with np.errstate(invalid="ignore"):  # NaN patterns
        xs = xb.view(f.dtype).astype(np.float64)
    rows = [correctly_rounded(key, float(x), f) for x in xs]
    return {
        "x": xb,
        "y": _bits_of(np.array([r.y for r in rows], dtype=np.float64), f),
        "exact": np.array([r.exact for r in rows], dtype=np.float64),
        "prec": np.array([r.prec for r in rows], dtype=np.int32),
        "distance": np.array([r.distance for r in rows], dtype=np.float64),
    }


def _task(args: tuple[str, str, int, int]) -> tuple[str, str, int, dict[str, np.ndarray]]:
    key, fmt, start, stop = args
    f = get_format(fmt)
    return key, fmt, start, compute_rows(key, f, np.arange(start, stop, dtype=np.uint64))


# --------------------------------------------------------------------------------------------
# float32 hard cases
# --------------------------------------------------------------------------------------------

def _screen_f64(key: str, x: np.ndarray) -> np.ndarray:
    """float64 values of ``key`` (numpy/scipy), used only to rank candidates before mpmath."""
    import scipy.special as sp

    with np.errstate(all="ignore"):
        if key == "exp":
            return np.exp(x)
        if key == "log":
            return np.log(x)
        if key == "tanh":
            return np.tanh(x)
        if key == "sigmoid":
            return sp.expit(x)
        if key == "erf":
            return sp.erf(x)
        if key == "gelu-none":
            return x / 2 * sp.erfc(-x / math.sqrt(2))
        if key == "gelu-tanh":
            return x * sp.expit(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
        if key == "silu":
            return x * sp.expit(x)
        if key == "rsqrt":
            return 1 / np.sqrt(x)
        if key == "sqrt":
            return np.sqrt(x)
    raise KeyError(key)


def _f32_midpoint_distance(r: np.ndarray) -> np.ndarray:
    """|frac(r/q) - 1/2| with q the float32 quantum at r (nan where r is not a useful target)."""
    f = get_format("float32")
    a = np.abs(r)
    ok = np.isfinite(a) & (a > 0) & (a <= f.max_finite)
    a = np.where(ok, a, 1.0)
    _, e = np.frexp(a)
    q = np.maximum(e - 1, f.emin) - f.p + 1
    s = np.ldexp(a, -q)
    d = np.abs(s - np.floor(s) - 0.5)
    return np.where(ok, d, np.nan)


def _hardcase_candidates(key: str, rng: np.random.Generator) -> np.ndarray:
    """float32 candidate inputs: uniform over binades (and signs) + ``±(1 + j 2^-23) 2^e``."""
    positive_only = key in ("log", "sqrt", "rsqrt")
    n = HARDCASE_SAMPLES
    expo = rng.integers(0, 255, size=n, dtype=np.uint32)  # biased exponent field 0..254
    mant = rng.integers(0, 1 << 23, size=n, dtype=np.uint32)
    sign = np.zeros(n, np.uint32) if positive_only else rng.integers(0, 2, size=n, dtype=np.uint32)
    random_bits = (sign << 31) | (expo << 23) | mant
    j = np.arange(16, dtype=np.uint32)
    e = np.arange(1, 255, dtype=np.uint32)
    structured = ((e[:, None] << 23) | j[None, :]).ravel()
    signs = [0] if positive_only else [0, 1]
    structured = np.concatenate([structured | np.uint32(s << 31) for s in signs])
    bits = np.unique(np.concatenate([random_bits, structured]))
    return bits.view(np.float32)


def find_hardcases(key: str, seed: int = SEED) -> list[dict]:
    """The :data:`HARDCASES_PER_FUNCTION` float32 inputs of ``key`` closest to a midpoint."""
    rng = np.random.default_rng([seed, sorted(TABLE_FUNCTIONS).index(key)])
    x = _hardcase_candidates(key, rng)
    d = _f32_midpoint_distance(_screen_f64(key, x.astype(np.float64)))
    order = np.argsort(np.where(np.isnan(d), np.inf, d), kind="stable")[:HARDCASE_CONFIRM]
    f32 = get_format("float32")
    found = []
    for xv in x[order]:
        r = correctly_rounded(key, float(xv), f32)
        if math.isfinite(r.y):
            found.append((r.distance, float(xv), r))
    found.sort(key=lambda t: (t[0], t[1]))
    out = []
    for dist, xv, r in found[:HARDCASES_PER_FUNCTION]:
        out.append({
            "x": f"0x{int(np.float32(xv).view(np.uint32)):08x}",
            "x_value": repr(xv),
            "rounded": f"0x{int(np.float32(r.y).view(np.uint32)):08x}",
            "exact": repr(r.exact),
            "midpoint_distance_ulp": dist,
            "precision_bits": r.prec,
        })
    return out


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------

def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def write_table(path: str, rows: dict[str, np.ndarray]) -> None:
    """Write one table as Parquet: columns x, y (bit patterns), exact (float64); zstd."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"x": rows["x"], "y": rows["y"], "exact": rows["exact"]})
    pq.write_table(
        table, path, compression="zstd", compression_level=19, use_dictionary=False,
        column_encoding={"x": "DELTA_BINARY_PACKED", "y": "PLAIN", "exact": "BYTE_STREAM_SPLIT"},
        write_statistics=False, store_schema=False,
    )


def _provenance() -> dict:
    """Generator version, mpmath version/backend and date, recorded per file."""
    return {"generator_version": GENERATOR_VERSION, "mpmath_version": mpmath.__version__,
            "mpmath_backend": libmp.BACKEND, "date": datetime.date.today().isoformat()}


def _table_entry(key: str, fmt: str, rows: dict[str, np.ndarray], path: str) -> dict:
    op, params = TABLE_FUNCTIONS[key]
    prec = rows["prec"]
    order = np.argsort(rows["distance"], kind="stable")[:HARDEST_ROWS]
    f = get_format(fmt)
    width = 2 * f.dtype.itemsize
    return {
        "op": op, "params": dict(params), "format": fmt, "rows": int(rows["x"].size),
        "sha256": _sha256(path), "bytes": os.path.getsize(path), **_provenance(),
        "columns": {"x": f"uint{8 * f.dtype.itemsize} input bit pattern (row i holds pattern i)",
                    "y": f"uint{8 * f.dtype.itemsize} bits of the correctly rounded (RNE) result",
                    "exact": "float64 nearest (RNE) the exact result"},
        "precision": {"start": START_PREC, "max_used": int(prec.max(initial=0)),
                      "rows_above_start": int((prec > 2 * START_PREC).sum())},
        "hardest_rows": [{"x": f"0x{int(rows['x'][i]):0{width}x}",
                          "midpoint_distance_ulp": float(rows["distance"][i]),
                          "precision_bits": int(prec[i])} for i in order],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--out", default=os.path.join(here, os.pardir, "reference_data", "tables"))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", default="", help="comma-separated table keys (default all)")
    p.add_argument("--formats", default="", help="comma-separated formats (default all)")
    p.add_argument("--no-hardcases", action="store_true")
    args = p.parse_args(argv)
    keys = [k for k in args.only.split(",") if k] or list(TABLE_FUNCTIONS)
    fmts = [get_format(s).name for s in args.formats.split(",") if s] or list(TABLE_FORMATS)
    unknown = [k for k in keys if k not in TABLE_FUNCTIONS]
    if unknown:
        p.error(f"unknown table keys {unknown}; known: {', '.join(TABLE_FUNCTIONS)}")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    tasks = []
    for key in keys:
        for fmt in fmts:
            n = 1 << get_format(fmt).bits
            tasks += [(key, fmt, s, min(s + CHUNK, n)) for s in range(0, n, CHUNK)]
    tasks.sort(key=lambda t: (t[0] not in ("gelu-none", "gelu-tanh"), t))  # slow ones first
    parts: dict[tuple[str, str], list] = {}
    if args.jobs > 1:
        import multiprocessing as mp_

        with mp_.get_context("spawn").Pool(args.jobs) as pool:
            for i, (key, fmt, start, rows) in enumerate(pool.imap_unordered(_task, tasks)):
                parts.setdefault((key, fmt), []).append((start, rows))
                print(f"\r{i + 1}/{len(tasks)} chunks, {time.time() - t0:.0f} s", end="", file=sys.stderr)
    else:
        for i, t in enumerate(tasks):
            key, fmt, start, rows = _task(t)
            parts.setdefault((key, fmt), []).append((start, rows))
            print(f"\r{i + 1}/{len(tasks)} chunks, {time.time() - t0:.0f} s", end="", file=sys.stderr)
    print(file=sys.stderr)

    manifest_path = os.path.join(args.out, MANIFEST)
    old = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as fh:
            old = json.load(fh).get("files", {})
    files = dict(old)
    for (key, fmt), chunks in sorted(parts.items()):
        chunks.sort(key=lambda c: c[0])
        rows = {c: np.concatenate([r[c] for _, r in chunks]) for c in chunks[0][1]}
        name = table_filename(key, fmt)
        path = os.path.join(args.out, name)
        write_table(path, rows)
        files[name] = _table_entry(key, fmt, rows, path)
        print(f"{name}: {files[name]['bytes']} bytes, max precision {files[name]['precision']['max_used']}",
              file=sys.stderr)

    if not args.no_hardcases:
        cases = {}
        for key in keys:
            cases[key] = find_hardcases(key)
            print(f"hard cases {key}: best distance {cases[key][0]['midpoint_distance_ulp']:.3g} ulp",
                  file=sys.stderr)
        path = os.path.join(args.out, HARDCASES_FILE)
        previous = {}
        if os.path.exists(path):
            with open(path) as fh:
                previous = json.load(fh).get("functions", {})
        previous.update(cases)
        doc = {"schema": SCHEMA, "format": "float32",
               "description": "float32 inputs whose exact result is closest to a float32 rounding midpoint "
                              "(x, rounded: float32 bits; exact: float64 nearest the exact value; "
                              "midpoint_distance_ulp: |exact/ulp - (k + 1/2)|)",
               "functions": {k: previous[k] for k in sorted(previous)}}
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        files[HARDCASES_FILE] = {
            "format": "float32", "rows": sum(len(v) for v in doc["functions"].values()),
            "sha256": _sha256(path), "bytes": os.path.getsize(path), **_provenance(),
            "samples_per_function": HARDCASE_SAMPLES, "confirmed_per_function": HARDCASE_CONFIRM,
            "seed": SEED,
        }

    manifest = {
        "schema": SCHEMA,
        "generator": "scripts/make_tables.py",
        "generator_version": GENERATOR_VERSION,
        "mpmath_version": mpmath.__version__,
        "mpmath_backend": libmp.BACKEND,
        "date": datetime.date.today().isoformat(),
        "method": "Ziv loop: mpmath at P and 2P bits from P=%d, doubling up to %d, until the rounding "
                  "of [v_2P - err, v_2P + err] is decided in the table's format and in float64" % (START_PREC, MAX_PREC),
        "rounding": "rne, unbounded exponent, overflow to inf (NaN without infinities)",
        "files": {k: files[k] for k in sorted(files)},
    }
    with open(manifest_path, "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    print(f"done in {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
