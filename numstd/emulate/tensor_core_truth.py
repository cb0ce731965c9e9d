"""Measured tensor-core outputs (Khattak & Mikaitis) and their replay through the emulator.

``reference_data/tensor_core/`` holds the validation data of the MATLAB-tensor-core repository
(BSD-2-Clause, Copyright (c) 2025 Faizan A. Khattak and Mantas Mikaitis; converted by
``scripts/convert_tensor_core_truth.py``, sources, licence and sha256 in its ``manifest.json``):
per GPU and input format, 5,000 block FMAs ``d = c + sum_k a_k b_k`` (``K`` = the datapath's block
size, or two blocks on Ada fp8) with the inputs, the fp32 ``c`` and the GPU's ``d`` bit patterns,
for fp32 output and, where measured, fp16 output.

:func:`replay` feeds one dataset to :func:`numstd.emulate.tensor_core_matmul` -- one call, the
architecture of the GPU (:data:`numstd.emulate.TENSOR_CORES`, attribute ``gpus``), ``c`` as the
dataset gives it (or zero where the kernel ignores it, ``c_used`` in the manifest), ``out`` the
measured output format -- and compares bit patterns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import ParameterError
from .tensor_core import TENSOR_CORES, tensor_core_matmul

__all__ = ["TruthDataset", "datasets", "load", "replay", "arch_of", "data_root"]

# dataset format name -> numstd format of the operands (tf32 values are held in float32)
_INPUT_FORMATS = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32",
                  "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
_OUT_FORMATS = {"fp32": "float32", "fp16": "float16"}


def data_root() -> Any:
    """The shipped ``tensor_core`` data directory (an importlib.resources Traversable)."""
    from importlib import resources

    return resources.files("numstd.reference_data") / "tensor_core"


def _manifest() -> dict:
    return json.loads((data_root() / "manifest.json").read_text())


def datasets() -> list[str]:
    """Names ``"<GPU>/<format>/<out>"`` of every shipped dataset, in manifest order."""
    return [d["dataset"] for d in _manifest()["datasets"]]


def arch_of(gpu: str) -> str:
    """The :data:`TENSOR_CORES` architecture whose ``gpus`` include ``gpu`` (``"A2"`` -> a100)."""
    for name, model in TENSOR_CORES.items():
        if gpu in model.gpus:
            return name
    raise ParameterError(f"no tensor-core model lists GPU {gpu!r}; known GPUs: "
                         f"{', '.join(g for m in TENSOR_CORES.values() for g in m.gpus)}")


@dataclass(frozen=True)
class TruthDataset:
    """One measured dataset: operands, accumulator and the GPU's output bit patterns.

    Attributes
    ----------
    name : str
        ``"<GPU>/<format>/<out>"``.
    gpu, arch, input_format, out : str
        GPU, its model architecture, the numstd operand format and the output format.
    A, B : numpy.ndarray
        Operands of shape ``(rows, 1, K)`` and ``(rows, K, 1)`` in ``input_format``.
    c : numpy.ndarray
        fp32 accumulator, shape ``(rows, 1, 1)`` (zeros where the kernel ignores c).
    d_bits : numpy.ndarray
        The GPU's outputs as fp32 bit patterns (uint32, shape ``(rows,)``).
    """

    name: str
    gpu: str
    arch: str
    input_format: str
    out: str
    A: np.ndarray
    B: np.ndarray
    c: np.ndarray
    d_bits: np.ndarray


def load(name: str) -> TruthDataset:
    """Read one dataset (see :func:`datasets`) from the shipped Parquet files."""
    import pyarrow.parquet as pq

    from ..core.formats import get_format

    entry = next((d for d in _manifest()["datasets"] if d["dataset"] == name), None)
    if entry is None:
        raise ParameterError(f"no tensor-core dataset {name!r}; use one of "
                             f"numstd.emulate.tensor_core_truth.datasets()")
    gpu, fmt, out = name.split("/")
    with (data_root() / entry["file"]).open("rb") as fh:
        t = pq.read_table(fh)
    k = t.schema.field("a").type.list_size
    bits = {col: np.asarray(t[col].combine_chunks().flatten() if col in "ab" else t[col],
                            dtype=np.uint32) for col in ("a", "b", "c", entry["column"])}
    dtype = get_format(_INPUT_FORMATS[fmt]).dtype
    a = bits["a"].view(np.float32).reshape(-1, k)
    b = bits["b"].view(np.float32).reshape(-1, k)
    c = bits["c"].view(np.float32)
    if not entry["c_used"]:
        c = np.zeros_like(c)
    return TruthDataset(name, gpu, arch_of(gpu), _INPUT_FORMATS[fmt], _OUT_FORMATS[out],
                        a.astype(dtype)[:, None, :], b.astype(dtype)[:, :, None],
                        c[:, None, None], bits[entry["column"]])


def replay(data: TruthDataset | str) -> np.ndarray:
    """Per row, True where the emulator's output has the GPU's bit pattern.

    ``tensor_core_matmul(A, B, arch=arch, c=c, out=out)``; fp16 outputs are compared as
    ``__half2float(d)`` (exact widening), NaNs with NaNs.
    """
    ds = load(data) if isinstance(data, str) else data
    with np.errstate(all="ignore"):
        r = tensor_core_matmul(ds.A, ds.B, arch=ds.arch, c=ds.c, out=ds.out)
        r32 = np.asarray(r, dtype=np.float32).reshape(-1)
    gpu = ds.d_bits.view(np.float32)
    return (r32.view(np.uint32) == ds.d_bits) | (np.isnan(r32) & np.isnan(gpu))
