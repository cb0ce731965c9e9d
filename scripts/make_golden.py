"""Record golden verdicts: for every published standard ``ID@N``, a few cases and their verdict JSON.

    python scripts/make_golden.py            # add the goldens of standards that have none
    python scripts/make_golden.py --check    # recompute every golden; exit 1 on any difference

Each ``reference_data/golden/<ID>@<N>.json`` holds three cases — the reference rounded to the
output format, the same output 4 ulp off everywhere, and a NaN in its first element — each with
its inputs and output (raw bytes, base64), call parameters and the verdict's JSON (its
``diagnosis`` key, advisory, and ``numstd_version`` left out: see docs/verdict-schema.md).  A golden
file is written once and never rewritten: ``tests/test_golden.py`` requires every recorded verdict
identical (:func:`differences`), so a citation of ``ID@N`` means the same thing in every release.
Identical means: every key, string, boolean and integer equal, and every float equal to a relative
``FLOAT_REL`` = 1e-6.  The floats are statistics of ULP errors against the float64 reference, whose
last bit depends on the CPU where numpy's exp and log run (its AVX-512 loops differ from the AVX2
ones by an ulp of float64): measured, the mean signed error of an fp32 attention golden moved by
1.5e-10 relative between an AVX-512 and the recording machine; a changed criterion moves it by
far more than 1e-6.
``manifest.json`` records each file's sha256 (checked by ``python -m numstd verify``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "reference_data" / "golden"
#: keys of a verdict's JSON that goldens do not compare (advisory or the release's name)
IGNORED = ("diagnosis", "numstd_version")
#: small shapes per op (the suite's shapes would make the inputs large)
SHAPES = {"matmul": (6, 16, 5), "linear": (6, 16, 5), "scaled_matmul": (6, 160, 5), "attention": (1, 6, 8, 4), "cross_entropy": (6, 10), "nll_loss": (16, 10),
          "softmax": (4, 12), "log_softmax": (4, 12), "layer_norm": (4, 12), "rms_norm": (4, 12),
          "sum": (4, 12), "mean": (4, 12), "argmax": (4, 12), "argmin": (4, 12), "cumsum": (4, 12),
          "conv": (2, 4, 6, 2, 2, 1, 1, 3, 3, 7, 7), "conv_transpose": (2, 4, 6, 2, 2, 1, 1, 1, 3, 3, 4, 4),
          "group_norm": (2, 8, 3, 3), "instance_norm": (2, 3, 6), "batch_norm": (8, 3, 2),
          "max_pool1d": (2, 3, 12), "max_pool2d": (2, 2, 7, 6), "max_pool3d": (1, 2, 5, 5, 4),
          "avg_pool1d": (2, 3, 12), "avg_pool2d": (2, 2, 7, 6), "avg_pool3d": (1, 2, 5, 5, 4),
          "normalize": (4, 12), "cosine_similarity": (4, 12), "cosine_embedding_loss": (6, 10), "triplet_margin_loss": (6, 10)}  # conv: [N, C_in, C_out, groups, stride, padding, dilation, *kernel, *spatial]


def encode(a: np.ndarray) -> dict:
    a = np.array(a, order="C", copy=True)  # (ascontiguousarray would make a 0-d array 1-d)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode()}


def decode(d: dict) -> np.ndarray:
    from numstd.formats import get_format

    name = d["dtype"]
    dtype = np.dtype(name) if name in np.sctypeDict or name.startswith(("int", "uint", "float")) and not name.startswith("float8") else get_format(name).dtype
    return np.frombuffer(base64.b64decode(d["b64"]), dtype=dtype).reshape(d["shape"]).copy()


def canonical(verdict_dict: dict) -> str:
    """The verdict JSON as goldens compare it: ignored keys removed, keys sorted."""
    return json.dumps({k: v for k, v in verdict_dict.items() if k not in IGNORED}, sort_keys=True, allow_nan=True)


#: relative tolerance of a golden's floats (see the module docstring)
FLOAT_REL = 1e-6
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def differences(recorded: str, today: str) -> list[str]:
    """Where two canonical verdict JSONs differ (empty when identical in the sense of the module
    docstring): paths such as ``ulp.mean_signed: 0.2462 != 0.2471``."""
    import math

    out: list[str] = []

    def walk(a, b, path: str) -> None:  # noqa: ANN001
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in a or k not in b:
                    out.append(f"{path}{k}: only in {'today' if k in b else 'the golden'}")
                else:
                    walk(a[k], b[k], f"{path}{k}.")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{path[:-1]}: {len(a)} items != {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}{i}.")
        elif isinstance(a, float) and isinstance(b, float) and type(a) is type(b):
            same = (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=FLOAT_REL, abs_tol=0.0)
            if not same:
                out.append(f"{path[:-1]}: {a!r} != {b!r}")
        elif isinstance(a, str) and isinstance(b, str) and a != b:
            # messages quote the reference's float64 repr (17 digits): those numbers to FLOAT_REL,
            # everything else of the text (and every shorter number: the formatted statistics) exactly
            ta, tb = _NUMBER.split(a), _NUMBER.split(b)
            na, nb = _NUMBER.findall(a), _NUMBER.findall(b)
            if ta != tb or len(na) != len(nb) or any(
                    x != y and not (len(x.lstrip("+-").replace(".", "")) >= 12 and
                                    math.isclose(float(x), float(y), rel_tol=FLOAT_REL, abs_tol=0.0))
                    for x, y in zip(na, nb)):
                out.append(f"{path[:-1]}: {a!r} != {b!r}")
        elif type(a) is not type(b) or a != b:
            out.append(f"{path[:-1]}: {a!r} != {b!r}")

    walk(json.loads(recorded), json.loads(today), "")
    return out


def judge(case: dict, standard: str) -> str:
    import numstd

    inputs = [None if x is None else decode(x) for x in case["inputs"]]
    v = numstd.check(decode(case["actual"]), op=case["op"], inputs=inputs, standard=standard, **case["params"])
    return canonical(v.to_dict())


def cases_of(std) -> list[dict]:  # noqa: ANN001 - Standard
    from numstd.formats import round_to
    from numstd.ops import get_op
    from numstd.reference import reference
    from numstd.suites import make_case
    from numstd.ulp import ulp

    shape = SHAPES.get(std.op, (64,))
    params = dict(std.suite.get("params", {}))
    params.update(std.selector)
    case = make_case(std.op, shape, "normal", 0, [f.name for f in std.inputs], params)
    inputs = list(case.inputs)
    call = dict(case.params)
    from numstd.ops import get_op

    op_params = get_op(std.op).params  # (a selector that is an op parameter, cast's to, stays in the call)
    ref = reference(std.op, inputs, **{k: v for k, v in call.items() if k not in std.selector or k in op_params}).values
    exact = np.asarray(round_to(ref, std.output), dtype=std.output.dtype)
    off = np.asarray(round_to(ref + 4 * np.asarray(ulp(ref, std.output)), std.output), dtype=std.output.dtype)
    nan = exact.copy()
    nan.reshape(-1)[:1] = np.nan
    enc_in = [None if x is None else encode(np.asarray(x)) for x in inputs]
    out = []
    actuals = (("rounded-reference", exact), ("4-ulp-off", off), ("nan-first", nan))
    if get_op(std.op).index_of:  # argmax/argmin: the first indices, an off-by-one, float indices
        from numstd.reference.exact import first_index

        first = first_index(std.op, np.asarray(inputs[0], dtype=np.float64), call.get("axis"), False)
        n = np.shape(inputs[0])[-1]
        actuals = (("first-index", first), ("off-by-one", np.minimum(first + 1, n - 1)),
                   ("float-indices", first.astype(np.float32)))
    for name, actual in actuals:
        c = {"name": name, "op": std.op, "params": call, "inputs": enc_in, "actual": encode(actual)}
        c["verdict"] = judge(c, std.key)
        out.append(c)
    return out


def published():  # noqa: ANN201
    from numstd.registry import list_standards

    return [s for s in list_standards(status=("active", "deprecated")) if s.op != "module"]


def write_manifest() -> None:
    files = {p.name: {"sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
             for p in sorted(GOLDEN.glob("NS-*.json"))}
    (GOLDEN / "manifest.json").write_text(json.dumps({"schema": "numstd.golden/1", "ignored_keys": list(IGNORED),
                                                      "files": files}, indent=1) + "\n")


def main(argv=None) -> int:  # noqa: ANN001
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="recompute every golden verdict; exit 1 on a difference")
    args = p.parse_args(argv)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    bad = 0
    for std in published():
        path = GOLDEN / f"{std.key}.json"
        if args.check:
            if not path.exists():
                print(f"missing: {path.name}")
                bad += 1
                continue
            doc = json.loads(path.read_text())
            for c in doc["cases"]:
                diff = differences(c["verdict"], judge(c, std.key))
                if diff:
                    print(f"DIFFERENT: {path.name} case {c['name']}: {'; '.join(diff[:5])}")
                    bad += 1
            continue
        if path.exists():
            continue  # goldens are written once
        doc = {"standard": std.key, "sha256": std.sha256, "cases": cases_of(std)}
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.name}")
    if not args.check:
        write_manifest()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
