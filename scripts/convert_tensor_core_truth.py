#!/usr/bin/env python
"""Convert the tensor-core validation data of Khattak & Mikaitis into ``reference_data/tensor_core/``.

Source: https://github.com/north-numerical-computing/MATLAB-tensor-core (BSD-2-Clause), folder
``model_validation/<GPU>/<format>/``.  Reading rules (``model_validation/Validate_TC_models.m``,
``readHexFloatFile.m``, ``readIeeeFloatsFromFile.m``):

- ``a_<GPU>_<format>.txt``, ``b_<GPU>_<format>.txt``: one block FMA per line, ``K`` fp32 bit
  patterns in hexadecimal separated by spaces (the fp16/bf16/tf32/fp8 inputs widened to fp32);
- ``c_<GPU>_fp32.txt``: one fp32 bit pattern per line as 32 binary digits (the accumulator);
- ``d_<GPU>_fp32.txt`` / ``d_<GPU>_fp16.txt``: the GPU's ``d = c + a.b`` as 32 binary digits, in
  fp32, or for fp16 output ``__half2float(d)`` where the kernel rounded ``c`` to fp16 with
  ``__float2half`` (round to nearest even) -- see ``model_validation/CUDA/*.cu``.

Each folder ``<GPU>/<format>`` becomes one Parquet file ``<gpu>_<format>.parquet`` (lower case)
with columns ``a``, ``b`` (fixed-size lists of ``K`` uint32), ``c`` (uint32) and ``d_fp32`` /
``d_fp16`` (uint32, the outputs present in the folder), zstd-compressed.  The bit patterns are
stored exactly; nothing is rounded.  ``manifest.json`` records the source repository and commit,
the licence, the attribution, each file's sha256, ``K`` and the rows of every dataset (one dataset
= one folder x one output format); ``LICENSE`` is the upstream licence text.

Usage::

    python scripts/convert_tensor_core_truth.py GIT_DIR [--out reference_data/tensor_core]

``GIT_DIR`` is a clone (or bare git directory) of the upstream repository; files are read with
``git show HEAD:path`` so no upstream code is copied.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = "north-numerical-computing/MATLAB-tensor-core"
ATTRIBUTION = ("Faizan A. Khattak and Mantas Mikaitis, \"Accurate models of NVIDIA tensor cores\", "
               "arXiv:2512.07004 (2025); data measured on the GPUs by the authors, repository "
               "https://github.com/north-numerical-computing/MATLAB-tensor-core")


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True,
                          capture_output=True).stdout


def read_hex(text: bytes) -> np.ndarray:
    """Rows of space-separated hexadecimal fp32 patterns -> uint32 array (rows, K)."""
    rows = [line.split() for line in text.decode().splitlines() if line.strip()]
    k = len(rows[0])
    if any(len(r) != k for r in rows):
        raise ValueError("ragged hex file")
    return np.array([[int(t, 16) for t in r] for r in rows], dtype=np.uint32)


def read_bin(text: bytes) -> np.ndarray:
    """One 32-digit binary fp32 pattern per line -> uint32 array (rows,)."""
    toks = text.decode().split()
    if any(len(t) != 32 for t in toks):
        raise ValueError("a line without 32 bits")
    return np.array([int(t, 2) for t in toks], dtype=np.uint32)


def c_used(gpu: str, fmt: str, out: str) -> bool:
    """False where the kernel starts from d = 0 and ignores the c file.

    ``Validate_TC_models.m``: H100/H200 fp8 inputs run on WGMMA with fp32 output, whose
    accumulator starts from zero (``C = zeros``); the fp16-output fp8 kernel
    (``mma_fp8_output_fp16.cu``, ``mma.sync`` with ``c[0] = __float2half(cc)``) uses c.
    """
    return not (gpu in ("H100", "H200") and fmt.lower() in ("e4m3", "e5m2") and out == "fp32")


def convert(git_dir: Path, out: Path) -> dict:
    commit = git(git_dir, "rev-parse", "HEAD").decode().strip()
    names = git(git_dir, "ls-tree", "-r", "--name-only", "HEAD", "model_validation/").decode().split()
    folders = sorted({tuple(n.split("/")[1:3]) for n in names if n.count("/") == 3})
    out.mkdir(parents=True, exist_ok=True)
    files, datasets = [], []
    for gpu, fmt in folders:
        base = f"model_validation/{gpu}/{fmt}/"
        def show(name: str) -> bytes:
            return git(git_dir, "show", f"HEAD:{base}{name}")
        a = read_hex(show(f"a_{gpu}_{fmt}.txt"))
        b = read_hex(show(f"b_{gpu}_{fmt}.txt"))
        c = read_bin(show(f"c_{gpu}_fp32.txt"))
        rows, k = a.shape
        cols = {"a": pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), k),
                "b": pa.FixedSizeListArray.from_arrays(pa.array(b.ravel()), k),
                "c": pa.array(c)}
        outs = []
        for o in ("fp32", "fp16"):
            name = f"d_{gpu}_{o}.txt"
            if base + name in names:
                d = read_bin(show(name))
                if d.shape != (rows,) or b.shape != a.shape or c.shape != (rows,):
                    raise ValueError(f"{base}: inconsistent row counts")
                cols[f"d_{o}"] = pa.array(d)
                outs.append(o)
        fname = f"{gpu.lower()}_{fmt.lower()}.parquet"
        table = pa.table(cols)
        table = table.replace_schema_metadata({"source": f"{REPO}@{commit}:{base}"})
        pq.write_table(table, out / fname, compression="zstd", compression_level=19)
        sha = hashlib.sha256((out / fname).read_bytes()).hexdigest()
        files.append({"file": fname, "sha256": sha, "gpu": gpu, "format": fmt.lower(), "K": k,
                      "rows": rows, "source": base})
        datasets += [{"dataset": f"{gpu}/{fmt.lower()}/{o}", "file": fname, "column": f"d_{o}",
                      "rows": rows, "c_used": c_used(gpu, fmt, o)} for o in outs]
    licence = git(git_dir, "show", "HEAD:LICENCE").decode()
    (out / "LICENSE").write_text(licence)
    copyright_line = next(line.strip() for line in licence.splitlines() if "Copyright" in line)
    manifest = {
        "name": "tensor-core validation data (Khattak & Mikaitis)",
        "source": {"repository": f"https://github.com/{REPO}", "commit": commit,
                   "path": "model_validation/<GPU>/<format>/"},
        "licence": {"spdx": "BSD-2-Clause", "copyright": copyright_line, "file": "LICENSE",
                    "text": licence},
        "attribution": ATTRIBUTION,
        "reading_rules": [
            "a, b: K fp32 bit patterns per row (inputs widened exactly to fp32)",
            "c: fp32 accumulator bits; fp16-output kernels round c to fp16 (__float2half, RNE)",
            "d_fp32: the GPU's d = c + a.b in fp32 bits; d_fp16: __half2float(d) of fp16 output",
            "H100/H200 fp8 inputs with fp32 output (WGMMA): d starts from 0, c is not used "
            "(Validate_TC_models.m)",
        ],
        "converter": "scripts/convert_tensor_core_truth.py",
        "files": files,
        "datasets": datasets,
        "total_outputs": sum(d["rows"] for d in datasets),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("git_dir", type=Path)
    ap.add_argument("--out", type=Path, default=Path("reference_data/tensor_core"))
    args = ap.parse_args()
    m = convert(args.git_dir, args.out)
    print(f"{len(m['datasets'])} datasets, {m['total_outputs']} outputs -> {args.out}")


if __name__ == "__main__":
    main()
