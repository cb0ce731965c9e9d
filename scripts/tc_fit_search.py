#!/usr/bin/env python
"""Reproduce the searches behind the tensor-core paths marked "fitted" in docs/emulators.md.

Only the *even* rows of each dataset are used (the fixed fitting half); the odd rows are the
held-out measurement reported by ``scripts/tc_match_table.py``.  Every number printed is the count
of even rows (of 2,500) reproduced bit for bit by one candidate datapath, built from
:func:`numstd.emulate.tensor_core.block_fma`:

1. fp8 -> fp16 on H100, H200, B200 (``mma.sync ... m16n8k32 ... .f16``): the 32 products split
   into two halves of 16 by one bit of the index ``k`` (bit 0: even/odd k, ..., bit 4: k < 16),
   the halves in either order, or one block of 32; ``c`` in the first block FMA or added last
   (RNE); each block FMA in the GPU's fp16 -> fp16 datapath (16 products, n_eab = 2, RNE,
   e_min_align = -21).  Then, for the chosen structure, ``n_eab`` from -10 to 3.
2. B200 fp8 -> fp32: one block of 32 or the register halves (bit 1), ``c`` in the block (as
   ``B200TC.m``) or added last, n_eab 2 or 8, RZ or RNE.
3. Ada fp8 -> fp16: ``AdaTC.m`` (16 products, n_eab = -10, RNE to fp16), against the n_eab = 1 of
   the earlier fit.

Usage::

    python scripts/tc_fit_search.py
"""

from __future__ import annotations

import numpy as np

from numstd.emulate import tensor_core_truth as truth
from numstd.emulate._terms import ProductTerms
from numstd.emulate.tensor_core import _ACCS, _round_acc, block_fma
from numstd.formats import round_to


class EvenRows:
    """The even rows of one dataset: exact products, exponent sums, c rounded to the output."""

    def __init__(self, name: str) -> None:
        ds = truth.load(name)
        t = ProductTerms(ds.A[0::2], ds.B[0::2])
        self.prods, self.sums = t.terms(0, t.K), t.exponent_sums(0, t.K)
        self.out = ds.out
        self.c = round_to(ds.c[0::2].astype(np.float64), ds.out).astype(np.float64)
        self.c = self.c.reshape(-1, 1, 1)
        self.d = ds.d_bits[0::2]

    def matches(self, groups, c_last: bool, neab: int, rounding: str, min_exp: int) -> int:
        x = np.zeros_like(self.c) if c_last else self.c
        for g in groups:
            g = list(g)
            x = block_fma(x, self.prods[g], self.sums[g], neab, rounding=rounding,
                          min_exp=min_exp, acc=self.out)
        if c_last:
            p, emin, emax = _ACCS[self.out]
            x = _round_acc(self.c + x, p, emin, emax, "rne")
        return int((x.reshape(-1).astype(np.float32).view(np.uint32) == self.d).sum())


def halves(bit: int) -> tuple[list[int], list[int]]:
    k = np.arange(32)
    return list(k[(k >> bit) & 1 == 0]), list(k[(k >> bit) & 1 == 1])


def main() -> None:
    print("1. fp8 -> fp16, H100/H200/B200: even rows of 2,500 per structure")
    structures = {"one block of 32": [range(32)]}
    for bit in range(5):
        lo, hi = halves(bit)
        structures[f"bit {bit} = 0 then 1"] = [lo, hi]
        structures[f"bit {bit} = 1 then 0"] = [hi, lo]
    names = [f"{g}/{f}/fp16" for g in ("H100", "H200", "B200") for f in ("e4m3", "e5m2")]
    data = {n: EvenRows(n) for n in names}
    print("   structure, c: " + " | ".join(names))
    for label, groups in structures.items():
        for c_last in (False, True):
            row = [data[n].matches(groups, c_last, 2, "rne", -21) for n in names]
            print(f"   {label}, c {'last' if c_last else 'first'}: " + " | ".join(map(str, row)))
    print("   bit 1 = 0 then 1, c last, by n_eab:")
    for neab in (-10, -8, -6, -4, -3, -2, 0, 1, 2, 3):
        row = [data[n].matches(halves(1), True, neab, "rne", -21) for n in names]
        print(f"     n_eab={neab}: " + " | ".join(map(str, row)))
    print("2. B200 fp8 -> fp32: even rows of 2,500")
    for name in ("B200/e4m3/fp32", "B200/e5m2/fp32"):
        ev = EvenRows(name)
        for label, groups in (("one block of 32", [range(32)]), ("bit 1 halves", halves(1))):
            for c_last in (False, True):
                row = {(n, r): ev.matches(groups, c_last, n, r, -133)
                       for n in (2, 8) for r in ("rz", "rne")}
                print(f"   {name} {label}, c {'last' if c_last else 'first'}: "
                      + ", ".join(f"n_eab={n} {r}: {m}" for (n, r), m in row.items()))
    print("3. Ada fp8 -> fp16 (blocks of 16, RNE, c first): even rows of 2,500")
    for name in ("Ada/e4m3/fp16", "Ada/e5m2/fp16"):
        ev = EvenRows(name)
        row = {n: ev.matches([range(16), range(16, 32)], False, n, "rne", -132) for n in (-10, 1)}
        print(f"   {name}: " + ", ".join(f"n_eab={n}: {m}" for n, m in row.items()))


if __name__ == "__main__":
    main()
