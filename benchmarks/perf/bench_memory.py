#!/usr/bin/env python
"""Benchmark: peak extra memory of ``numstd.check`` as a fraction of its inputs' size.

``x`` is 2^24 float32 values (64 MiB), the output ``np.exp(x)`` (float32).  After one warm-up
``check`` (imports, the standard registry), two measurements of one more call:

``tracemalloc``  peak traced bytes above the level at the start of the call (numpy registers its
                 data buffers with tracemalloc, so every array temporary is counted), plus the
                 most bytes ``numstd.native.pool`` kept for reuse at once during the call
                 (tracemalloc sees those blocks as freed; the sum is an upper bound);
``rss``          the process's peak resident set (``VmHWM``, reset through
                 ``/proc/self/clear_refs``) minus its resident set before the call — skipped where
                 the kernel does not allow the reset.

Fraction = extra bytes / ``x.nbytes`` (the op's input; the kernel's output, as large again, is not
counted in the denominator).  Target ≤ 0.25 (``check`` works in chunks).  Prints one JSON line.

Reductions: ``--op sum`` / ``mean`` reduce all of ``x`` (output: numpy's float32 result, 0-d);
``--op softmax`` / ``log_softmax`` / ``cumsum`` / ``layer_norm`` / ``rms_norm`` take rows of
``2^--log2row`` elements (default 2^20) along the last axis (outputs: the float64 results rounded
to float32; the norms without weight and bias, eps 1e-5); ``--op cross_entropy`` takes rows of
``2^--log2row`` logits (classes) with random targets, ``reduction="none"``.

Contractions: ``--op matmul`` takes ``A (16, 2^--log2k) @ B (2^--log2k, 16)`` (default K = 2^21:
128 MiB each in float32) of standard normal values rounded to ``--dtype`` (``float32`` or
``bfloat16``); the output is the float64 product rounded to float32 (bf16 for bf16 inputs).  The
fraction's denominator is then ``A.nbytes + B.nbytes``.

    python benchmarks/perf/bench_memory.py [--op exp] [--log2n 24] [--log2row 20]
    python benchmarks/perf/bench_memory.py --op matmul [--log2k 21] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

TARGET_FRACTION = 0.25


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _rss_extra(fn) -> int | None:  # noqa: ANN001
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    before = _status_kib("VmRSS")
    fn()
    peak = _status_kib("VmHWM")
    if before is None or peak is None:
        return None
    return max(0, peak - before) * 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="exp")
    p.add_argument("--log2n", type=int, default=24)
    p.add_argument("--log2row", type=int, default=20, help="softmax rows: 2^N elements each")
    p.add_argument("--log2k", type=int, default=21, help="matmul: K = 2^N")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="matmul inputs")
    args = p.parse_args()

    import numpy as np

    rng = np.random.default_rng(3)
    if args.op == "matmul":
        from numstd.formats import round_to

        k = 1 << args.log2k
        a = round_to(rng.standard_normal((16, k), dtype=np.float32), args.dtype)
        b = round_to(rng.standard_normal((k, 16), dtype=np.float32), args.dtype)
        input_bytes = a.nbytes + b.nbytes
        out = round_to(a.astype(np.float64) @ b.astype(np.float64), args.dtype)
        return _measure(args, [a, b], out, {}, input_bytes, [16, k, 16])
    x = rng.standard_normal(1 << args.log2n, dtype=np.float32)
    if args.op in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + np.float32(1e-3)
    params: dict = {}
    if args.op in ("sum", "mean"):
        out = np.asarray(getattr(np, args.op)(x, dtype=np.float32))
    elif args.op in ("softmax", "log_softmax"):
        x = x.reshape(-1, 1 << args.log2row)
        x64 = x.astype(np.float64)
        e = np.exp(x64 - x64.max(-1, keepdims=True))
        y = e / e.sum(-1, keepdims=True)
        out = (y if args.op == "softmax" else np.log(y)).astype(np.float32)
        del x64, e, y
        params = {"axis": -1}
    elif args.op == "cumsum":
        x = x.reshape(-1, 1 << args.log2row)
        out = np.cumsum(x.astype(np.float64), axis=-1).astype(np.float32)
        params = {"axis": -1}
    elif args.op in ("layer_norm", "rms_norm"):
        x = x.reshape(-1, 1 << args.log2row)
        x64 = x.astype(np.float64)
        if args.op == "layer_norm":
            x64 -= x64.mean(-1, keepdims=True)
        out = (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)
        del x64
        params = {"eps": 1e-5}
    elif args.op == "cross_entropy":
        x = x.reshape(-1, 1 << args.log2row)
        target = rng.integers(0, x.shape[1], x.shape[0])
        x64 = x.astype(np.float64)
        m = x64.max(-1)
        lse = m + np.log(np.exp(x64 - m[:, None]).sum(-1))
        out = (lse - x64[np.arange(x.shape[0]), target]).astype(np.float32)
        del x64
        params = {"reduction": "none"}
    else:
        out = getattr(np, args.op)(x) if args.op in ("exp", "log", "tanh", "sqrt") else x.copy()

    inputs = [x, target] if args.op == "cross_entropy" else [x]
    return _measure(args, inputs, out, params, x.nbytes, list(x.shape))


def _measure(args: argparse.Namespace, inputs: list, out: object, params: dict, input_bytes: int,
             shape: list) -> int:
    """Warm up, then measure one ``check`` call (module docstring); print the JSON line."""
    import numstd
    from numstd.chunks import DEFAULT_CHUNK

    def run() -> bool:
        return numstd.check(out, op=args.op, inputs=inputs, **params).passed

    from numstd.native import compiled

    nat = compiled()
    pooled = getattr(nat, "pool_stats", None)
    passed = run()  # warm-up
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    if pooled:
        pooled(True)
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    pool_peak = pooled()[2] if pooled else 0  # (the most bytes it kept at once; numpy data held: [4])
    traced = max(0, peak - base) + pool_peak
    rss = _rss_extra(run)
    frac = traced / input_bytes
    emit({
        "benchmark": "memory", "op": args.op, "shape": shape, "dtype": str(getattr(inputs[0], "dtype", "")),
        "input_bytes": int(input_bytes),
        "chunk_elements": DEFAULT_CHUNK, "passed": passed, "tracemalloc_peak_bytes": int(traced - pool_peak),
        "pool_peak_bytes": int(pool_peak),
        "fraction": round(frac, 4), "rss_peak_extra_bytes": rss,
        "rss_fraction": None if rss is None else round(rss / input_bytes, 4),
        "target_fraction": TARGET_FRACTION, "ok": frac <= TARGET_FRACTION,
    })
    return 0 if frac <= TARGET_FRACTION else 1


if __name__ == "__main__":
    sys.exit(main())
