"""Write the verdict JSON of every published standard's quick suite, for every applicable corpus variant.

Used to prove that a refactoring changed no verdict: run it before and after and compare the files
(``cmp``) or the printed sha256.  Only public names are used (``numstd.check``, ``numstd.registry``,
``numstd.suites``, ``numstd.corpus``), so the same script runs on both sides of a change of layout.

    python scripts/verdict_snapshot.py OUT.jsonl [--chunk-size N]
"""

from __future__ import annotations

import argparse
import hashlib
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--chunk-size", type=int, default=None)
    args = p.parse_args(argv)
    import numstd
    from numstd.corpus import variants_for
    from numstd.ops import validate
    from numstd.registry import list_standards
    from numstd.suites import cases_for

    h = hashlib.sha256()
    n = 0
    extra = {} if args.chunk_size is None else {"chunk_size": args.chunk_size}
    with open(args.out, "w") as f:
        for s in list_standards():
            if s.op == "module":
                continue
            variants = variants_for(s.op)
            for case in cases_for(s, quick=True):
                _, arrays, full = validate(s.op, case.inputs, case.params)
                for var in variants:
                    if not var.applicable(arrays, full, s.output, s.accumulate):
                        continue
                    out = var(case.inputs, case.params, out=s.output, acc=s.accumulate, seed=0)
                    v = numstd.check(out, op=s.op, inputs=case.inputs, standard=s.key, **case.params, **extra)
                    line = f"{s.key}\t{case.id}\t{var.key}\t{v.to_json()}\n"
                    f.write(line)
                    h.update(line.encode())
                    n += 1
    print(f"{n} verdicts, sha256 {h.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
