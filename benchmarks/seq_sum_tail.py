"""The tail of a sequential fp32 sum of non-negative terms, in units of u·sqrt(K).

A probabilistic bound ``lam·u·sqrt(K)`` on the relative error of a sum of K non-negative terms
(Higham & Mary 2019) holds "with high probability" only for ``lam`` several standard deviations of
the worst legitimate order.  The worst common order is the sequential one (torch CPU's
``x.norm(p=1, dim)`` is a sequential fp32 sum, bit for bit: tests/test_similarity.py): its partial
sums grow linearly, so its relative error ``sum_i delta_i s_i / S`` has a standard deviation of
about ``u·sqrt(K)/4`` (u = 2^-24).  This script measures that standard deviation and the largest
value over many rows, per K and input distribution, and writes ``benchmarks/results/seq_sum_tail.json``.
NS-NORMALIZE-FP32@3 takes its ``lam`` floor from it (docs/methodology.md §2.4, §14).

Run: ``python benchmarks/seq_sum_tail.py`` (about 4 minutes on one core; seeded, deterministic).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

U = 2.0 ** -24
KS = (16, 64, 256, 1000, 4096)
DISTS = ("normal", "uniform", "heavy", "offset", "product", "exp")
TOTAL = 2 * 10 ** 7  # terms per (K, distribution)


def _draw(rng: np.random.Generator, dist: str, shape: tuple) -> np.ndarray:
    """Non-negative terms: |N(0,1)|, U[0,1) (torch.rand), |t_2|, N(0,1) + 100 (the suites' offset rows),
    U·U (the products of a matmul of torch.rand operands), exp(N(0,1)) (softmax's row sums)."""
    if dist == "normal":
        return np.abs(rng.standard_normal(shape))
    if dist == "uniform":
        return rng.random(shape)
    if dist == "offset":
        return rng.standard_normal(shape) + 100.0
    if dist == "product":
        return rng.random(shape) * rng.random(shape)
    if dist == "exp":
        return np.exp(rng.standard_normal(shape))
    return np.abs(rng.standard_t(2, shape))


def measure(k: int, dist: str, seed: int = 1) -> dict:
    """Sequential fp32 sums of ``|x|`` over rows of length ``k``: sd, max and mean of ``err/(S u sqrt(k))``."""
    rng = np.random.default_rng([seed, k, DISTS.index(dist)])
    rows = max(20000, TOTAL // k)
    x = _draw(rng, dist, (rows, k)).astype(np.float32)
    s = np.zeros(rows, np.float32)
    for j in range(k):
        s = (s + x[:, j]).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=1)  # exact to far below u: 53-bit partial sums of 24-bit terms
    z = (s.astype(np.float64) - exact) / exact / U / np.sqrt(k)
    return {"K": k, "distribution": dist, "rows": rows, "sd": float(z.std()), "max_abs": float(np.abs(z).max()),
            "mean": float(z.mean())}


def main() -> None:
    rows = [measure(k, d) for k in KS for d in DISTS]
    out = pathlib.Path(__file__).parent / "results" / "seq_sum_tail.json"
    out.write_text(json.dumps({"unit": "relative error / (2^-24 * sqrt(K))", "rows": rows}, indent=1) + "\n")
    print("| K | distribution | rows | sd | max abs | max / sd |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['K']} | {r['distribution']} | {r['rows']:,} | {r['sd']:.3f} | {r['max_abs']:.3f} | "
              f"{r['max_abs'] / r['sd']:.2f} |")


if __name__ == "__main__":
    main()
