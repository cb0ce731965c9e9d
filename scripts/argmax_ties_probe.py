"""Which index torch CPU, numpy and jax CPU return for tied maxima and NaN (docs/methodology.md,
"Index outputs": the evidence behind ``ties="first"``).

    python scripts/argmax_ties_probe.py

Prints, for hand-made rows (ties, NaN, signed zeros, infinities) in float32 and bfloat16, each
library's argmax/argmin and torch.max(x, dim)'s pair; then, for 4 rows of 4096, 2^16 and 2^20
elements holding 8 tied maxima (and then 8 NaN) at seeded random places, whether each library
returns the first of them.  Needs torch and jax.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch

CASES = {"ties": [1.0, 3.0, 3.0, 2.0, 3.0], "nan": [1.0, np.nan, 5.0, np.nan], "zeros": [-0.0, 0.0, -0.0],
         "inf_nan": [np.inf, np.nan, np.inf], "neg_inf": [-np.inf, -np.inf]}


def main() -> None:
    for name, v in CASES.items():
        for dt in ("float32", "bfloat16"):
            a = np.array(v, dtype=ml_dtypes.bfloat16 if dt == "bfloat16" else np.float32)
            t = torch.tensor(np.array(v, dtype=np.float32)).to(getattr(torch, dt))
            j = jnp.asarray(a)
            mv, mi = torch.max(t, 0)
            print(f"{name:8} {dt:9} argmax np {int(np.argmax(a))} torch {int(torch.argmax(t))} jax {int(jnp.argmax(j))}"
                  f" | argmin np {int(np.argmin(a))} torch {int(torch.argmin(t))} jax {int(jnp.argmin(j))}"
                  f" | torch.max(x, 0) = ({float(mv)}, {int(mi)})")
    rng = np.random.default_rng(0)
    for n in (4096, 1 << 16, 1 << 20):
        x = np.zeros((4, n), np.float32)
        pos = rng.integers(0, n, (4, 8))
        for fill in (1.0, np.nan):
            x[:] = 0.0
            for r in range(4):
                x[r, pos[r]] = fill
            first = pos.min(1)
            tx = torch.from_numpy(x)
            got = {"numpy": np.argmax(x, 1), "torch": torch.argmax(tx, 1).numpy(), "torch.max": torch.max(tx, 1)[1].numpy(),
                   "torch-bf16": torch.argmax(tx.bfloat16(), 1).numpy(), "jax": np.asarray(jnp.argmax(jnp.asarray(x), 1)),
                   "jax-bf16": np.asarray(jnp.argmax(jnp.asarray(x).astype(jnp.bfloat16), 1))}
            print(n, "NaN" if fill != fill else "ties", {k: bool((g == first).all()) for k, g in got.items()})


if __name__ == "__main__":
    main()
