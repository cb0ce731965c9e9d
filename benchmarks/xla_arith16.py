"""Which elementwise ops does XLA CPU compute in 16-bit arithmetic? (docs/methodology.md §2.1, arith16)

jax's CPU output for bf16 and fp16 inputs, on the 12 suite cases of each op's fp32-policy standard
(98,304 elements per format), compared bit for bit with every legitimate corpus variant evaluated
twice: with every primitive rounded to the 16-bit format (``acc`` = the 16-bit format, ``@16``) and
in float32 then rounded once (``@32``).  A variant at 0 differing outputs *is* what XLA computes.

Usage::

    python benchmarks/xla_arith16.py [exp,sigmoid,...]
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["compare"]


def compare(op: str, fmt: str) -> dict[str, tuple[int, int]]:
    """``{"<variant>@16" | "<variant>@32": (outputs that differ from jax's, outputs)}`` for one op and format."""
    from numstd import backends
    from numstd.catalog.suites import cases_for
    from numstd.core.formats import get_format
    from numstd.corpus import variants_for
    from numstd.ops import validate
    from numstd.registry import find_standard

    be = backends.get("jax:cpu")
    std = find_standard(op, inputs=[fmt], output=fmt, policy="fp32")
    f16, f32 = get_format(fmt), get_format("float32")
    legit = [v for v in variants_for(op, legit=True) if v.acc_formats is None]
    res: dict[str, tuple[int, int]] = {}
    for case in cases_for(std):
        _, arrays, params = validate(op, list(case.inputs), dict(case.params))
        y = np.asarray(be.run(op, list(case.inputs), **dict(case.params))).astype(np.float64)
        for v in legit:
            if v.applies and not v.applies(f16, [f16], params):
                continue
            for tag, acc in (("16", f16), ("32", f32)):
                m = np.asarray(v.fn(list(case.inputs), params, f16, acc, 0)).astype(np.float64)
                same = (m == y) | (np.isnan(m) & np.isnan(y))
                a, b = res.get(f"{v.name}@{tag}", (0, 0))
                res[f"{v.name}@{tag}"] = (a + int((~same).sum()), b + same.size)
    return res


def main(argv: list[str] | None = None) -> int:
    from numstd.ops import OPS

    argv = sys.argv[1:] if argv is None else argv
    ops = argv[0].split(",") if argv else [o for o, e in OPS.items() if e.kind == "elementwise"]
    for op in ops:
        for fmt in ("bfloat16", "float16"):
            res = compare(op, fmt)
            print(f"{op:12s} {fmt:9s} differ: " + "  ".join(f"{k}:{a}/{b}" for k, (a, b) in sorted(res.items())),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
