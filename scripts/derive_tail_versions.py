#!/usr/bin/env python
"""Draft the next version of every contraction and average-pool standard with the tail model (``[criteria] tail_n``).

A standard whose bound is the pure probabilistic term ``lam * u_acc * sqrt(K) * absdot`` (matmul,
linear, conv, conv_transpose), or avg_pool's ``u_acc * lam * (K + 1) * absmean`` with a calibrated
``lam < 1`` (a fraction of the worst case, so in effect probabilistic), had its ``lam`` calibrated on suite outputs of at most a few thousand
elements; judged on more, its worst element grows like ``ln N`` (``benchmarks/bound_tail.py``;
torch's own bmm exceeded NS-MATMUL-FP32@2 by 1.07× on 262,144 outputs in the KernelBench level-1
sweep, ``benchmarks/kernelbench_level1.py``).  The next version keeps every constant, the suite and
the evidence (the same file, reused byte for byte: the constants were fitted on it) and adds
``tail_n`` = the largest output of its suite, so every calibration case is judged exactly as
before and larger outputs get ``t(N) = ln N / ln tail_n`` (:func:`numstd.judge.criteria.tail_factor`).

    python scripts/derive_tail_versions.py --out DRAFTS     # writes DRAFTS/<ID>@<N+1>.toml
    for f in DRAFTS/*.toml; do python -m numstd publish "$f" --no-docs; done

Drafts only: publishing stays the reviewed ``python -m numstd publish`` step.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

#: the bound formulas that are one probabilistic term (nothing deterministic to leave unscaled), and
#: the largest calibrated constant for which they are: avg_pool's ``lam·(K + 1)·u·mean|x|`` is the
#: worst case (Higham 2002 eq. 3.5) from lam = 1 on, and a calibrated fraction of it below
PROBABILISTIC = {"lam * u_acc * sqrt(K) * absdot": math.inf, "u_acc * lam * (K + 1) * absmean": 1.0}

NOTE = ("tail_n added to {prev} (constants, suite and evidence unchanged: scripts/derive_tail_versions.py): "
        "above tail_n output elements the model term grows by ln N / ln tail_n (numstd.judge.criteria.tail_factor, "
        "docs/methodology.md 'Many outputs: the tail of a probabilistic bound'; evidence benchmarks/bound_tail.py)")

RATIONALE = """
Many outputs (version {version}): the bound above holds for one element with high probability, but a
verdict needs it on every element, so the constant must cover the worst of N elements, which grows
like ln N (measured on torch CPU and numpy float32 matmul and avg_pool3d, up to 2,097,152
outputs: benchmarks/bound_tail.py). The constant was calibrated on outputs of at most tail_n = {tail_n}
elements; above that the model term is multiplied by ln N / ln tail_n ({factor:.2f} at 1.34e8 outputs)."""


def suite_output_size(std) -> int:
    """The largest output element count of the standard's suite shapes."""
    from numstd.catalog.suites import make_case
    from numstd.ops.catalog import output_shape, validate

    best = 0
    dist = std.suite.get("distributions", ["normal"])[0]
    seed = list(std.suite.get("seeds", [0]))[0]
    for shape in std.suite.get("shapes", []):
        case = make_case(std.op, shape, dist, seed, [f.name for f in std.inputs], dict(std.suite.get("params", {})))
        _, arrays, full = validate(std.op, list(case.inputs), dict(case.params))
        best = max(best, math.prod(output_shape(std.op, arrays, full)))
    return best


def draft_text(std, tail_n: int) -> str:
    """The published file of ``std`` turned into the draft of its next version with ``tail_n``."""
    from derive_version import derive

    why = RATIONALE.format(version=std.version + 1, tail_n=f"{tail_n:,}", factor=math.log(1.34e8) / math.log(tail_n))
    return derive(std, {"tail_n": str(tail_n)}, why, NOTE.format(prev=std.key))


def main() -> int:
    from numstd.catalog.registry import load_registry, load_standard

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    reg = load_registry()
    latest: dict = {}
    for s in reg.by_key.values():
        if s.id not in latest or s.version > latest[s.id].version:
            latest[s.id] = s
    args.out.mkdir(parents=True, exist_ok=True)
    n = 0
    for std in sorted(latest.values(), key=lambda s: s.key):
        if std.status != "active" or std.model.error.text not in PROBABILISTIC or std.criteria.tail_n:
            continue
        if std.model.constants.get("lam", 0.0) >= PROBABILISTIC[std.model.error.text]:
            continue
        tail_n = suite_output_size(std)
        text = draft_text(std, tail_n)
        dest = args.out / f"{std.id}@{std.version + 1}.toml"
        load_standard(text.encode(), str(dest))  # the draft parses
        dest.write_text(text, encoding="utf-8")
        print(f"{std.key} -> {std.id}@{std.version + 1}: tail_n = {tail_n:,}")
        n += 1
    print(f"{n} drafts in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
