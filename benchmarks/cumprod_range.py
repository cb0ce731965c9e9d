"""torch's fp32 cumprod on wide-range rows under NS-CUMPROD-FP32@2 and @3 (issue 17, range exits).

    PYTHONPATH=. python benchmarks/cumprod_range.py            # (16, 32768) rows, numpy default_rng(0)
    PYTHONPATH=. python benchmarks/cumprod_range.py --rows 4 --n 8192 --seed 3
    PYTHONPATH=. python benchmarks/cumprod_range.py --framework jax --seeds 3   # pass/fail per seed only

The rows are the ``wide`` distribution (``numstd.catalog.suites.draw``: sign·2^U(−40, 40)) rounded to
fp32, as grade's wide-range redraw makes them.  Printed: how torch's output and the float64 reference
(``numstd.reference.scan.cumprod``) disagree in kind (torch ±inf where the reference is in range, torch
0 where it is beyond fp32's overflow threshold or a normal value), then each standard's criteria.
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv=None) -> int:  # noqa: ANN001
    import torch

    import numstd
    from numstd.catalog.suites import draw
    from numstd.core.formats import get_format, round_to
    from numstd.reference.scan import cumprod

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--n", type=int, default=32768)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--framework", choices=("torch", "jax"), default="torch")
    ap.add_argument("--seeds", type=int, default=0, help="pass/fail of @2 and @3 on seeds 0 .. N-1 only")
    a = ap.parse_args(argv)
    if a.seeds:
        return _sweep(a)
    f = get_format("float32")
    rng = np.random.default_rng(a.seed)
    v = np.clip(draw(rng, (a.rows, a.n), "wide", f), -f.max_finite, f.max_finite)
    x = np.asarray(round_to(v, f), dtype=np.float32)
    y = torch.cumprod(torch.from_numpy(x), dim=-1).numpy()
    with np.errstate(all="ignore"):
        r = cumprod("cumprod", [x.astype(np.float64)], {"axis": -1})[0]
        yd = y.astype(np.float64)
        beyond = ~(np.abs(r) < 2.0**128 - 2.0**103)  # fp32's overflow threshold (RNE)
        normal = ~beyond & (np.abs(r) >= 2.0**-126)
        print(f"torch ±inf, reference within fp32's range: {int(np.count_nonzero(np.isinf(yd) & ~beyond)):,}")
        print(f"torch 0, reference beyond fp32's range: {int(np.count_nonzero((yd == 0) & beyond)):,}")
        print(f"torch 0, reference a normal fp32 value: {int(np.count_nonzero((yd == 0) & normal)):,}")
    for key in ("NS-CUMPROD-FP32@2", "NS-CUMPROD-FP32@3"):
        ver = numstd.check(y, op="cumprod", inputs=[x], axis=-1, standard=key)
        print(f"{key}: {'PASS' if ver.passed else 'FAIL'}")
        for c in ver.criteria:
            print(f"  {c.name}: {'pass' if c.passed else 'FAIL'} — {c.message}")
    return 0


def _run(framework: str, x: np.ndarray) -> np.ndarray:
    """``framework``'s cumprod of ``x`` along the last axis, in ``x``'s dtype, as numpy."""
    if framework == "jax":
        import jax.numpy as jnp

        return np.asarray(jnp.cumprod(jnp.asarray(x), axis=-1))
    import torch

    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[np.dtype(x.dtype).name]
    t = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dt)  # (16-bit values are exact in float32)
    return torch.cumprod(t, dim=-1).float().numpy().astype(x.dtype)


def _sweep(a: argparse.Namespace) -> int:
    """``--seeds N``: @2 and @3 of each format on wide rows (fp32 ``rows × n``, 16-bit 8 × 4096)."""
    import numstd
    from numstd.catalog.suites import draw
    from numstd.core.formats import get_format, round_to

    for fmt, key, shape in (("float32", "FP32", (a.rows, a.n)), ("bfloat16", "BF16", (8, 4096)),
                            ("float16", "FP16", (8, 4096))):
        f = get_format(fmt)
        for seed in range(a.seeds):
            rng = np.random.default_rng(seed)
            v = np.clip(draw(rng, shape, "wide", f), -f.max_finite, f.max_finite)
            x = np.asarray(round_to(v, f), dtype=np.float64).astype(f.dtype)
            y = _run(a.framework, x)
            out = []
            for ver in (2, 3):
                r = numstd.check(y, op="cumprod", inputs=[x], axis=-1, standard=f"NS-CUMPROD-{key}@{ver}")
                out.append(f"@{ver} " + ("PASS" if r.passed else "FAIL " + ",".join(c.name for c in r.criteria
                                                                                    if not c.passed)))
            print(a.framework, fmt, shape, "seed", seed, " | ".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
