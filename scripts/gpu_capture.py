#!/usr/bin/env python
"""GPU evidence for numstd: capture standard suites with torch and JAX on CUDA, and measure how
often numstd's tensor-core model reproduces ``torch.matmul`` bit for bit.

Run on an NVIDIA GPU machine (written for an H200; Hopper tensor cores, model ``arch="h100"``)::

    python scripts/gpu_capture.py --out gpu_evidence            # full suites, torch:cuda + jax:gpu
    python scripts/gpu_capture.py --device cpu --quick --out /tmp/ev   # the same code on the CPU

What it writes under ``--out``:

- ``captures/<backend>/<ID>.parquet`` — one :mod:`numstd.capture` file per (standard, backend):
  matmul fp32 with TF32 off (``NS-MATMUL-FP32``) and on (``NS-MATMUL-FP32-TF32``: the backend gets
  ``allow_tf32=True``), bf16 and fp16 matmul, softmax, layer norm, RMS norm and the elementwise
  functions in fp32/bf16/fp16.  Standards not yet published are captured as their template
  instance (``ID@0``): the suite and case IDs are those of the published standard, so
  ``python -m numstd compare FILE --standard ID@N`` judges them later;
- ``tensor_core.parquet`` — for matmul cases, the device's ``torch.matmul`` output bits (bf16/fp16
  inputs with 16-bit and, where torch offers it, fp32 output; fp32 inputs in TF32 mode) and, per
  case, the fraction of elements on which :func:`numstd.emulate.tensor_core_matmul` (``--arch``,
  split-K 1/2/4; for TF32 inputs rounded to TF32 by RNE or by truncation) gives the same bits;
- ``manifest.json`` — sha256 and size of every file, versions, device, flags, the command line,
  what was skipped and why, and the tensor-core agreement summary.

Nothing is judged here (device time is for measuring): judge on any machine with
``python -m numstd compare <captures>``.  Exit code 0 when every capture was written, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

# JAX grabs 75% of GPU memory at start-up by default; torch needs its share in the same process
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

FORMATS = {"FP32": "float32", "BF16": "bfloat16", "FP16": "float16"}
ELEMENTWISE = ("EXP", "LOG", "TANH", "SIGMOID", "ERF", "GELU", "SILU", "RSQRT", "SQRT", "RELU")


def standard_ids(quick: bool) -> list[str]:
    """The standards captured: matmul (TF32 off and on), softmax, norms, elementwise."""
    ids = ["NS-MATMUL-FP32", "NS-MATMUL-FP32-TF32", "NS-MATMUL-BF16", "NS-MATMUL-FP16"]
    suffixes = ("FP32", "BF16") if quick else tuple(FORMATS)
    for fam in ("SOFTMAX", "LAYERNORM", "RMSNORM") + ELEMENTWISE:
        ids += [f"NS-{fam}-{s}" for s in suffixes]
    return ids


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def capture_all(out: Path, backends: list[str], ids: list[str], quick: bool, log: Any) -> tuple[list, list]:
    """Write one capture per (standard, backend); returns (file records, skipped records)."""
    from numstd import backends as B
    from numstd.capture import capture, capture_metadata, resolve_standard, write_capture
    from numstd.errors import NumstdError

    files, skipped = [], []
    for name in backends:
        be = B.get(name)
        ok, why = be.available()
        if not ok:
            skipped.append({"backend": name, "reason": why})
            log(f"skip {name}: {why}")
            continue
        for sid in ids:
            try:
                std = resolve_standard(sid)
            except NumstdError as exc:
                skipped.append({"backend": name, "standard": sid, "reason": str(exc)})
                continue
            if be.output_format(std.op, list(std.inputs)) != std.output:
                skipped.append({"backend": name, "standard": std.key,
                                "reason": f"{name} does not produce {std.output.name} from {std.inputs[0].name}"})
                continue
            t0 = time.perf_counter()
            table = capture(std, be, quick=quick)
            path = write_capture(table, out / "captures" / name.replace(":", "_") / f"{std.id}.parquet")
            meta = capture_metadata(table)
            errors = sum(e is not None for e in table.column("error").to_pylist())
            files.append({"path": str(path.relative_to(out)), "kind": "capture", "backend": name,
                          "standard": meta["standard"], "standard_sha256": meta["standard_sha256"],
                          "n_cases": meta["n_cases"], "errors": errors, "selector": meta["selector"]})
            log(f"{name:<10} {std.key:<24} {meta['n_cases']:>3} cases{f', {errors} raised' if errors else ''} "
                f"({time.perf_counter() - t0:.1f} s)")
    return files, skipped


def _torch_matmul(A: np.ndarray, B: np.ndarray, device: str, mode: str) -> np.ndarray | None:
    """torch's product on ``device``: same-dtype output, ``fp32`` output from 16-bit inputs (if this
    torch has ``out_dtype``), or fp32 inputs with TF32 allowed; None when not offered."""
    import torch

    from numstd.arrays import to_numpy
    from numstd.backends.torch_backend import to_torch

    a, b = to_torch(A, device), to_torch(B, device)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    try:
        with torch.no_grad():
            if mode == "fp32-out":
                try:
                    y = torch.mm(a, b, out_dtype=torch.float32)
                except (TypeError, RuntimeError, NotImplementedError):
                    return None
            else:
                y = torch.matmul(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return np.asarray(to_numpy(y, name="torch output"))


def tensor_core_study(out: Path, device: str, arch: str, quick: bool, log: Any) -> tuple[dict | None, dict]:
    """Bit-for-bit agreement of :func:`numstd.emulate.tensor_core_matmul` with torch.matmul."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from numstd.emulate import tensor_core_matmul
    from numstd.formats import round_to
    from numstd.suites import make_case
    from numstd.ulp import ulp_distance

    shapes = [(32, 64, 48)] if quick else [(32, 64, 48), (16, 300, 24), (16, 512, 32), (8, 4096, 16), (64, 1024, 64)]
    dists = ["normal", "uniform"] if quick else ["normal", "uniform", "heavy", "offset", "wide"]
    seeds = [0] if quick else [0, 1]
    plans = [("bfloat16", "same"), ("bfloat16", "fp32-out"), ("float16", "same"), ("float16", "fp32-out"),
             ("float32", "tf32")]
    rows: dict[str, list] = {k: [] for k in ("case_id", "input_format", "mode", "output_format", "output_shape",
                                              "output_bits", "output_sha256", "agreement")}
    summary: dict[str, dict] = {}
    for fmt, mode in plans:
        for shape in shapes:
            for dist in dists:
                for seed in seeds:
                    case = make_case("matmul", shape, dist, seed, [fmt])
                    A, B = case.inputs
                    y = _torch_matmul(A, B, device, mode)
                    if y is None:
                        summary.setdefault(f"{fmt}/{mode}", {"unsupported": "torch.mm has no out_dtype here"})
                        continue
                    agree = {}
                    variants = ([("rne", round_to(A, "tf32"), round_to(B, "tf32")),
                                 ("rtz", round_to(A, "tf32", "rtz"), round_to(B, "tf32", "rtz"))]
                                if mode == "tf32" else [("exact", A, B)])
                    for rounding, a_, b_ in variants:
                        for split_k in (1, 2, 4):
                            model = tensor_core_matmul(a_, b_, arch=arch, out=y.dtype.name, acc="float32", split_k=split_k)
                            d = np.asarray(ulp_distance(model, y, y.dtype.name)).reshape(-1)
                            key = f"{rounding}/split_k={split_k}"
                            agree[key] = {"equal": float(np.mean(d == 0)),
                                          "max_ulp": float(np.nanmax(np.abs(d))) if d.size else 0.0}
                            s = summary.setdefault(f"{fmt}/{mode}", {}).setdefault(key, {"n": 0, "equal": 0})
                            s["n"] += int(d.size)
                            s["equal"] += int(np.sum(d == 0))
                    bits = np.ascontiguousarray(y).tobytes()
                    rows["case_id"].append(case.id)
                    rows["input_format"].append(fmt)
                    rows["mode"].append(mode)
                    rows["output_format"].append(y.dtype.name)
                    rows["output_shape"].append(list(y.shape))
                    rows["output_bits"].append(bits)
                    rows["output_sha256"].append(hashlib.sha256(bits).hexdigest())
                    rows["agreement"].append(json.dumps(agree, sort_keys=True))
    for plan in summary.values():
        for key, s in plan.items():
            if isinstance(s, dict) and s.get("n"):
                s["equal_fraction"] = s["equal"] / s["n"]
    for name, plan in sorted(summary.items()):
        best = max(((k, s["equal_fraction"]) for k, s in plan.items() if isinstance(s, dict) and "n" in s),
                   key=lambda t: t[1], default=None)
        log(f"tensor core {arch} vs torch.matmul on {device}, {name}: "
            + (f"best {best[0]} agrees on {best[1]:.2%} of elements" if best else str(plan)))
    if not rows["case_id"]:
        return None, summary
    path = out / "tensor_core.parquet"
    pq.write_table(pa.table(rows), path, compression="zstd")
    return {"path": path.name, "kind": "tensor_core", "arch": arch, "rows": len(rows["case_id"])}, summary


def environment(device: str) -> dict:
    """Versions, device and settings recorded in the manifest."""
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "host": platform.node(), "numpy": np.__version__}
    import numstd

    info["numstd"] = numstd.__version__
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        if device == "cuda" and torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(0)
            info["capability"] = list(torch.cuda.get_device_capability(0))
    except ImportError:
        info["torch"] = None
    try:
        import jax

        info["jax"] = jax.__version__
        info["jax_devices"] = [str(d) for d in jax.devices()]
    except ImportError:
        info["jax"] = None
    info.setdefault("device", "cpu" if device == "cpu" else "unknown")
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda (default) or cpu (a dry run)")
    p.add_argument("--quick", action="store_true", help="first shape and seed of each suite, fewer standards")
    p.add_argument("--arch", default="h100", help="tensor-core model (numstd.emulate.TENSOR_CORES; H200 = h100)")
    p.add_argument("--standards", nargs="*", help="only these standard IDs (default: the list in the docstring)")
    p.add_argument("--backends", nargs="*", help="backends (default: torch:cuda jax:gpu, or the CPU ones)")
    p.add_argument("--no-tensor-core", action="store_true", help="skip the tensor-core model comparison")
    args = p.parse_args(argv)

    start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    backends = args.backends or (["torch:cuda", "jax:gpu"] if args.device == "cuda" else ["torch:cpu", "jax:cpu"])
    ids = args.standards or standard_ids(args.quick)

    files, skipped = capture_all(out, backends, ids, args.quick, log)
    tc_summary: dict = {}
    if not args.no_tensor_core:
        try:
            import torch  # noqa: F401

            if args.device == "cuda" and not torch.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
            record, tc_summary = tensor_core_study(out, args.device, args.arch, args.quick, log)
            if record:
                files.append(record)
        except Exception as exc:  # report, do not lose the captures
            skipped.append({"study": "tensor_core", "reason": f"{type(exc).__name__}: {exc}"})
            log(f"skip tensor-core study: {exc}")

    for f in files:
        path = out / f["path"]
        f["sha256"] = _sha256(path)
        f["bytes"] = path.stat().st_size
    from numstd import backends as B

    manifest = {
        "generator": "scripts/gpu_capture.py",
        "command": "python scripts/gpu_capture.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "environment": environment(args.device),
        "backends": {n: B.get(n).describe() for n in backends},
        "files": files,
        "skipped": skipped,
        "tensor_core": {"arch": args.arch, "summary": tc_summary},
        "seconds": round(time.perf_counter() - start, 1),
    }
    for info in manifest["backends"].values():
        info.pop("ops", None)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n", encoding="utf-8")
    n_caps = sum(f["kind"] == "capture" for f in files)
    log(f"wrote {n_caps} captures and {len(files) - n_caps} other file(s) to {out} in {manifest['seconds']} s; "
        f"{len(skipped)} skipped (manifest.json says why)")
    wanted = len(ids) * len(backends)
    return 0 if n_caps == wanted else 1


if __name__ == "__main__":
    sys.exit(main())
