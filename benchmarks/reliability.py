#!/usr/bin/env python
"""Reliability table: how ``check``, the registry and publish answer bad outputs, layouts,
non-arrays, malformed calls and tampering.

For every op of the catalog (one small valid call each, inputs from ``numstd.suites.make_case``)
it tries every case of a category and classifies the answer: a *failing verdict* (and which
criterion failed first), a *passing verdict*, a *numstd error* (a ``NumstdError`` subclass, the
answer a malformed call must get) or a *foreign exception* (anything else: a defect).  Tampering
runs on copies of the shipped standards in a temporary directory.  Writes the table between the
markers ``<!-- reliability:begin -->`` / ``<!-- reliability:end -->`` of docs/benchmarks.md
(``--no-write``: print only).  Deterministic: seeded inputs, fixed case lists.

    python benchmarks/reliability.py [--no-write]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- reliability:begin -->", "<!-- reliability:end -->"
SMALL = {"matmul": (3, 8, 4), "linear": (3, 8, 4), "attention": (1, 3, 5, 4), "cross_entropy": (4, 6),
         "softmax": (3, 7), "log_softmax": (3, 7), "layer_norm": (3, 7), "rms_norm": (3, 7),
         "sum": (3, 7), "mean": (3, 7), "cumsum": (3, 7)}


def classify(call) -> str:  # noqa: ANN001
    from numstd.errors import NumstdError
    from numstd.verdict import Verdict

    try:
        r = call()
    except NumstdError as exc:
        return f"numstd error ({type(exc).__name__})"
    except Exception as exc:  # noqa: BLE001 - what we measure
        return f"FOREIGN {type(exc).__name__}"
    if isinstance(r, Verdict):
        return "passing verdict" if r.passed else f"failing verdict ({r.failed_criteria[0].name})"
    return "returned"


def calls():  # noqa: ANN201
    import numstd
    from numstd.ops import OPS
    from numstd.reference import reference
    from numstd.registry import list_standards
    from numstd.suites import make_case

    out = collections.defaultdict(list)
    for op in sorted(n for n, s in OPS.items() if s.kind != "module"):
        std = [s for s in list_standards(op, status="active") if not s.selector][0]
        c = make_case(op, SMALL.get(op, (16,)), "normal", 1, [f.name for f in std.inputs], dict(std.suite.get("params", {})))
        x, p = list(c.inputs), dict(c.params)
        ref = np.asarray(reference(op, x, **p).values)
        good = ref.astype(std.output.dtype)

        def chk(actual, inputs=x, _op=op, _p=p, **kw):  # noqa: ANN001, ANN202 - (bound now, not late)
            return lambda: numstd.check(actual, op=kw.pop("op", _op), inputs=inputs, **{**_p, **kw})

        for name, a in (("nan", np.full_like(good, np.nan)), ("inf", np.full_like(good, np.inf)), ("zeros", np.zeros_like(good)),
                        ("x2", (ref * 2).astype(std.output.dtype)), ("1e30", np.full(good.shape, 1e30).astype(std.output.dtype)),
                        ("float64", ref), ("float16", ref.astype(np.float16)), ("bfloat16", ref.astype(ml_dtypes.bfloat16)),
                        ("int32", ref.astype(np.int32)), ("bool", ref > 0), ("wrong shape", np.zeros(good.shape + (2,), good.dtype))):
            if name in ("float16", "bfloat16", "float64") and np.dtype(a.dtype) == np.dtype(std.output.dtype):
                continue  # (the standard's own output format: not a bad output)
            out["bad outputs"].append((f"{op}:{name}", chk(a)))
        big = np.repeat(good[..., None], 2, axis=-1)
        for name, a in (("C", good), ("F", np.asfortranarray(good) if good.ndim else good), ("strided", big[..., 0]),
                        ("negative strides", np.flip(np.array(np.flip(good), order="C")) if good.ndim else good),
                        ("read-only", np.frombuffer(good.tobytes(), good.dtype).reshape(good.shape))):
            out["layouts"].append((f"{op}:{name}", chk(a)))
        for name, a in (("None", None), ("str", "x"), ("bytes", b"\0"), ("dict", {"a": 1}), ("object", object()),
                        ("ragged", [[1.0], [1.0, 2.0]]), ("complex", good.astype(np.complex64)), ("Ellipsis", ...)):
            out["non-arrays"].append((f"{op}:{name}", chk(a)))
        for name, kw in (("op typo", {"op": op + "_"}), ("chunk_size '7'", {"chunk_size": "7"}), ("chunk_size 0", {"chunk_size": 0}),
                         ("accumulate int8", {"accumulate": "int8"}), ("allow_tf32=1", {"allow_tf32": 1}),
                         ("unknown param", {"nonsense": 1}), ("axis 99", {"axis": 99}), ("eps 1e400", {"eps": 10**400}),
                         ("standard NS-NOPE@1", {"standard": "NS-NOPE@1"})):
            out["malformed calls"].append((f"{op}:{name}", chk(good, **kw)))
        for name, ins in (("no inputs", []), ("int inputs", [np.zeros(3, np.int32)] * len(x)), ("str input", ["x"] * len(x))):
            out["malformed calls"].append((f"{op}:{name}", chk(good, inputs=ins)))
    return out


def tampering() -> list:
    from numstd import registry
    from numstd.integrity import evidence_path, verify

    shipped = Path(str(__import__("importlib").resources.files("numstd.standards")))
    lock = registry.read_lock((shipped / "LOCK").read_text())
    tmp = Path(tempfile.mkdtemp(prefix="numstd-tamper-"))
    cases = []

    def tamper(rel: str, how: str):  # noqa: ANN202
        d = tmp / f"{how}-{rel.replace('/', '_')}"
        (d / rel).parent.mkdir(parents=True)
        shutil.copyfile(shipped / rel, d / rel)
        (d / "LOCK").write_text(f"{lock[rel]}  {rel}\n")
        std = registry.load_standard((d / rel).read_bytes(), rel)
        ev = Path(std.provenance["evidence"]).name
        (d / "evidence").mkdir()
        shutil.copyfile(shipped.parent / "reference_data" / "evidence" / ev, d / "evidence" / ev)
        f = d / rel
        raw = bytearray(f.read_bytes())
        if how == "constant":  # a changed number (or, where the model has no constants, a changed rho)
            text = f.read_text()
            f.write_text(text.replace("constants = { ", "constants = { z = 1.0, ", 1) if "constants = { " in text
                         else text.replace("rho = ", "rho = 1 + ", 1))
        elif how == "draft":
            f.write_text(f.read_text().replace('status = "active"', 'status = "draft"'))
        elif how == "utf8":
            raw[len(raw) // 3] = 0xFF
            f.write_bytes(bytes(raw))
        elif how == "removed":
            f.unlink()
        elif how == "evidence":
            e = d / "evidence" / ev
            b = bytearray(e.read_bytes())
            b[len(b) // 2] ^= 1
            e.write_bytes(bytes(b))
            registry._cache.clear()
            s = registry.get_standard(std.key, root=d)
            return lambda: evidence_path(s)
        registry._cache.clear()
        return lambda: registry.get_standard(std.key, root=d)

    for rel in sorted(lock):
        for how in ("constant", "draft", "utf8", "removed", "evidence"):
            cases.append((f"{rel}:{how}", tamper(rel, how)))
    cases.append(("verify(all tampered dirs)", lambda: _raise_if(verify([p for p in tmp.iterdir()]))))
    return cases, tmp


def _raise_if(mismatches: list) -> None:
    from numstd.errors import DataIntegrityError

    if mismatches:
        raise DataIntegrityError(f"{len(mismatches)} mismatch(es)")


def main(argv=None) -> int:  # noqa: ANN001
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    groups = calls()
    tcases, tmp = tampering()
    groups["tampering"] = tcases
    rows = ["| category | cases | answers (count) | foreign exceptions |", "|---|---|---|---|"]
    foreign_total = 0
    try:
        for cat in ("bad outputs", "layouts", "non-arrays", "malformed calls", "tampering"):
            answers = collections.Counter()
            foreign = []
            for name, call in groups[cat]:
                a = classify(call)
                answers[a] += 1
                if a.startswith("FOREIGN"):
                    foreign.append(f"{name} → {a}")
            foreign_total += len(foreign)
            text = "; ".join(f"{k}: {v}" for k, v in sorted(answers.items(), key=lambda kv: -kv[1]))
            rows.append(f"| {cat} | {sum(answers.values())} | {text} | {len(foreign)}{': ' + ', '.join(foreign[:5]) if foreign else ''} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        from numstd import registry

        registry._cache.clear()
    table = "\n".join(rows)
    print(table)
    if not args.no_write:
        block = (f"{BEGIN}\nGenerated by `python benchmarks/reliability.py` (every op of the catalog, one small call each;\n"
                 f"tampering on copies of every LOCKed standard). A \"good\" layout of the right values passes; every\n"
                 f"other case must be a failing verdict or a numstd error.\n\n{table}\n{END}")
        text = DOC.read_text()
        if BEGIN in text:
            text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n## Reliability\n\n" + block + "\n"
        DOC.write_text(text)
    return 1 if foreign_total else 0


if __name__ == "__main__":
    sys.exit(main())
