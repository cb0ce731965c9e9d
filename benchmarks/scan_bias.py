"""Scan bias before/after (issue 17, docs/benchmarks.md false rejects item 3): pass counts of jax and
torch on CPU under a scan standard's versions, per distribution, over 12 seeds.

    PYTHONPATH=. python benchmarks/scan_bias.py                                  # NS-CUMPROD-FP32@1 and @2
    PYTHONPATH=. python benchmarks/scan_bias.py NS-CUMSUM-FP32@1 --backends jax:cpu

Each case of ``cases_for(std, seeds=range(12))`` is run by the backend (``backends.get(name).run``)
and judged by ``check``; printed: passes per distribution, the largest ``|bias|/limit``, and every
failing case with its failed criteria, bias value and limit.
"""

from __future__ import annotations

import argparse
import math

import numpy as np


def run(key: str, backend: str, seeds=range(12)) -> list[str]:
    import numstd
    from numstd import backends
    from numstd.suites import cases_for

    std = numstd.get_standard(key)
    be = backends.get(backend)
    stats: dict[str, list] = {}
    fails = []
    for c in cases_for(std, seeds=seeds):
        out = be.run(c.op, c.inputs, **dict(c.params))
        v = numstd.check(out, op=c.op, inputs=c.inputs, standard=std, **dict(c.params))
        bias = next(r for r in v.criteria if r.name == "bias")
        st = stats.setdefault(c.id.split("/")[2], [0, 0, 0.0])
        st[0] += 1
        st[1] += bool(v.passed)
        if math.isfinite(bias.limit) and bias.limit > 0:
            st[2] = max(st[2], abs(bias.value) / bias.limit)
        if not v.passed:
            fails.append(f"    {c.id}: {', '.join(r.name for r in v.criteria if not r.passed)}; "
                         f"bias {bias.value:+.3f} (allowed ±{bias.limit:.3f})")
    return [f"{key} {backend} {d}: {p}/{n} pass; max |bias|/limit {q:.3f}" for d, (n, p, q) in stats.items()] + fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("standards", nargs="*", default=["NS-CUMPROD-FP32@1", "NS-CUMPROD-FP32@2"])
    ap.add_argument("--backends", nargs="*", default=["jax:cpu", "torch:cpu"])
    a = ap.parse_args()
    np.seterr(all="ignore")
    for key in a.standards:
        for b in a.backends:
            print("\n".join(run(key, b)))


if __name__ == "__main__":
    main()
