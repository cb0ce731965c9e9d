"""Row bias before/after (issue 17 item 3): what the @1 and @2 fp32 reduction standards accept.

    PYTHONPATH=. python benchmarks/row_bias.py            # every op (a few minutes on 2 cores)
    PYTHONPATH=. python benchmarks/row_bias.py softmax    # one op
    PYTHONPATH=. python benchmarks/row_bias.py drift      # shared drifts at 2048 rows (row_bias_rel)
    PYTHONPATH=. python benchmarks/row_bias.py perf       # check time @1 vs @2

For each op, on one realistic case (softmax/log_softmax/layer_norm: 64×4096 N(0,1) rows; matmul
256×1024 @ 1024×256; sum/mean 256×1024 rows, seed 0):

* **legitimate orders** (every legitimate corpus variant that applies): the row statistic ``T``
  (mean over groups of the mean of ``sign(r)(a − r)/B``), its across-group sd, the @2 limit and
  ``|T|/limit``;
* **systematic errors**: the output ``RN(r·(1 + k))`` (log_softmax: ``RN(r − k)``, an lse off by
  ``k``) for ``k`` from 1e-7 to 3e-5, judged by ``@1`` and ``@2``: the smallest ``k`` each rejects;
* **10× the legitimate per-group spread**: ``k`` chosen so that the error's ``T`` is 10× the
  largest across-group sd of the legitimate orders, and the @2 verdict on it.
"""

from __future__ import annotations

import sys

import numpy as np

import numstd
from numstd.corpus import variants_for
from numstd.ops import validate
from numstd.registry import get_standard

__all__ = ["main", "run", "drift", "perf"]

KEYS = {"softmax": "NS-SOFTMAX-FP32", "log_softmax": "NS-LOGSOFTMAX-FP32", "layer_norm": "NS-LAYERNORM-FP32",
        "matmul": "NS-MATMUL-FP32", "sum": "NS-SUM-FP32", "mean": "NS-MEAN-FP32"}
SCALES = (1e-7, 3e-7, 1e-6, 3e-6, 1e-5, 3e-5)


def _case(op: str) -> tuple[list, dict]:
    rng = np.random.default_rng(0)
    if op == "matmul":
        return [rng.standard_normal((256, 1024)).astype(np.float32),
                rng.standard_normal((1024, 256)).astype(np.float32)], {}
    if op in ("sum", "mean"):
        return [rng.standard_normal((256, 1024)).astype(np.float32)], {"axis": -1}
    return [rng.standard_normal((64, 4096)).astype(np.float32)], ({} if op == "layer_norm" else {"axis": -1})


def _perturb(op: str, r: np.ndarray, k: float) -> np.ndarray:
    return (r - k if op == "log_softmax" else r * (1 + k)).astype(np.float32)


def _row(v: numstd.Verdict) -> object:
    return next((c for c in v.criteria if c.name == "row_bias"), None)


def run(op: str) -> list[str]:
    """The report lines of one op."""
    key = KEYS[op]
    inputs, params = _case(op)
    _, arrays, full = validate(op, list(inputs), dict(params))
    exact = numstd.reference(op, arrays, **full).values
    std = get_standard(f"{key}@2")
    c = std.criteria
    lines = [f"## {key}: @2 row_bias_tau {c.row_bias_tau:g}, row_bias_rel {c.row_bias_rel:g}, z {c.row_bias_z:g}; "
             f"shape {' @ '.join('x'.join(map(str, a.shape)) for a in inputs)}"]
    spreads = []
    for v in variants_for(op):
        if not v.legit or not v.applicable(arrays, full, std.output, std.accumulate):
            continue
        y = v.fn([None if a is None else np.array(a) for a in arrays], full, std.output, std.accumulate, 5)
        ver = numstd.check(y, op=op, inputs=inputs, standard=std.key, **params)
        rc = _row(ver)
        sd = float(rc.message.split("sd ")[1].split(";")[0])
        spreads.append(sd)
        lines.append(f"  legit {v.name:<22} {'pass' if ver.passed else 'FAIL'}  T {rc.value:+.5f}  sd {sd:.3g}  "
                     f"limit {rc.limit:.5f}  |T|/limit {abs(rc.value) / rc.limit:.2f}")
    first = {}
    for k in SCALES:
        out = _perturb(op, exact, k)
        for ver_n in (1, 2):
            ver = numstd.check(out, op=op, inputs=inputs, standard=f"{key}@{ver_n}", **params)
            if not ver.passed and ver_n not in first:
                first[ver_n] = k
        rc = _row(ver)
        lines.append(f"  error k={k:g}: @2 T {rc.value:+.5f} limit {rc.limit:.5f} -> {'fail' if not ver.passed else 'pass'}")
    lines.append(f"  smallest k rejected: @1 {first.get(1, 'none of ' + str(SCALES[-1]))}, @2 {first.get(2, 'none')}")
    # 10× the largest legitimate per-group spread: T is linear in k (while the bound holds)
    unit = _row(numstd.check(_perturb(op, exact, 1e-6), op=op, inputs=inputs, standard=std.key, **params)).value / 1e-6
    target = 10 * max(spreads)
    k10 = target / unit
    ver = numstd.check(_perturb(op, exact, k10), op=op, inputs=inputs, standard=std.key, **params)
    rc = _row(ver)
    lines.append(f"  10x the largest legit sd ({max(spreads):.3g}): k = {k10:.3g}, T {rc.value:+.4f} limit {rc.limit:.4f} "
                 f"-> @2 {'fail' if not ver.passed else 'pass'}")
    return lines


def drift() -> list[str]:
    """Legitimate shared drifts at realistic sizes (why ``row_bias_rel`` exists): two-pass and Welford
    layer_norm on 2048 rows of 4096, and mean as ``sum·fl(1/1000)`` on 2048 rows of mean 1; the limit
    with and without the declared ``row_bias_rel`` term."""
    from numstd.judge.criteria import RowBias, row_bias_limit

    lines = ["## shared drifts at realistic sizes (limit with row_bias_rel, and without it)"]
    cases = [("layer_norm", np.random.default_rng(0).standard_normal((2048, 4096)), {}, ("two-pass", "welford")),
             ("mean", 1 + 0.1 * np.random.default_rng(0).standard_normal((2048, 1000)), {"axis": -1},
              ("reciprocal-multiply", "pairwise"))]
    for op, x, params, names in cases:
        x = x.astype(np.float32)
        std = get_standard(f"{KEYS[op]}@2")
        _, arrays, full = validate(op, [x], dict(params))
        for v in variants_for(op):
            if v.name not in names:
                continue
            y = v.fn([None if a is None else np.array(a) for a in arrays], full, std.output, std.accumulate, 5)
            rc = _row(numstd.check(y, op=op, inputs=[x], standard=std.key, **params))
            rows = int(rc.message.split(" over ")[1].split(" ")[0].replace(",", ""))
            sd = float(rc.message.split("sd ")[1].split(";")[0])
            bare, _ = row_bias_limit(std.criteria.row_bias_tau, std.criteria.row_bias_z, RowBias(rows, 0.0, sd, 1))
            lines.append(f"  {op} {v.name:<20} T {rc.value:+.5f}  limit {rc.limit:.5f}  without row_bias_rel {bare:.5f}"
                         f"  ({'fails' if abs(rc.value) > bare else 'passes'} without it)")
    return lines


def perf(repeats: int = 9) -> list[str]:
    """What the criterion costs: ``check`` of a correctly rounded fp32 softmax (1024×4096) and sum
    (4096×1024) under @1 and @2, alternating, medians of ``repeats``, next to the float64 reference
    plus ``np.allclose``."""
    import statistics
    import time

    x = np.random.default_rng(0).standard_normal((1024, 4096)).astype(np.float32)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    cases = [("softmax", "NS-SOFTMAX-FP32", (e / e.sum(-1, keepdims=True)).astype(np.float32), {"axis": -1}),
             ("sum", "NS-SUM-FP32", x64.reshape(4096, 1024).sum(-1).astype(np.float32), {"axis": -1})]
    lines = ["## cost (medians of %d, seconds)" % repeats]
    for op, key, out, params in cases:
        inp = [x] if op == "softmax" else [x.reshape(4096, 1024)]
        times: dict = {1: [], 2: [], "ref": []}
        for _ in range(repeats):
            for v in (1, 2):
                t0 = time.perf_counter()
                numstd.check(out, op=op, inputs=inp, standard=f"{key}@{v}", **params)
                times[v].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            if op == "softmax":
                ee = np.exp(x64 - x64.max(-1, keepdims=True))
                np.allclose(out, ee / ee.sum(-1, keepdims=True))
            else:
                np.allclose(out, x64.reshape(4096, 1024).sum(-1))
            times["ref"].append(time.perf_counter() - t0)
        m = {k: statistics.median(v) for k, v in times.items()}
        lines.append(f"  {op}: check @1 {m[1]:.4f}, @2 {m[2]:.4f} ({m[2] / m[1]:.2f}x); float64 reference + allclose "
                     f"{m['ref']:.4f} (ratio @1 {m[1] / m['ref']:.2f}, @2 {m[2] / m['ref']:.2f})")
    return lines


def main(argv: list[str]) -> int:
    if argv == ["drift"]:
        print("\n".join(drift()))
        return 0
    if argv == ["perf"]:
        print("\n".join(perf()))
        return 0
    for op in argv or list(KEYS):
        print("\n".join(run(op)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
