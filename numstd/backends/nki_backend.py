"""The ``nki`` backend: numstd's NKI kernels (:mod:`numstd.backends.nki_kernels`) on a NeuronCore
or in the NKI CPU simulator.

Mode (``flags()["mode"]``):

- ``"device"`` — ``kernel(*arrays)``: ``nki.jit`` compiles the kernel with ``neuronx-cc`` and runs
  it on a NeuronCore; chosen when a Neuron device is present (``/dev/neuron0``);
- ``"simulate"`` — ``nki.simulate(kernel)(*arrays)``: the NKI CPU simulator (NKI 0.3+, Neuron SDK
  2.29+), which runs every ``nki.isa`` instruction in numpy and stores bf16/fp8 tiles as ml_dtypes
  (``NKI_PRECISE_FP=1``, its default); chosen elsewhere.

``NUMSTD_NKI_MODE=device|simulate`` overrides the choice.  The simulator approximates the engines
(its ``exp`` is numpy's, not the Scalar Engine's polynomial): a simulated capture checks the
kernels' algorithm and tiling, a device capture is the hardware evidence; captures record which.

Host-side layout (data movement only, no arithmetic): matmul passes ``A`` transposed
(``lhsT = A.T``, the Tensor Engine contracts over partitions) and loops over broadcast batch
axes; softmax moves ``axis`` last; every kernel sees 2-D ``[rows, last axis]`` arrays (1-D
elementwise inputs of 128·k elements as ``[128, k]``); layer norm's missing weight/bias are passed
as ones/zeros (exact).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

import numpy as np

from .base import ELEMENTWISE_OPS, Backend, env_flags, module_versions

__all__ = ["NkiBackend", "NKI_ENV"]

#: environment variables that change what the kernels compute or how they are run
NKI_ENV: tuple[str, ...] = (
    "NUMSTD_NKI_MODE", "NKI_SIMULATOR", "NKI_PRECISE_FP", "NEURON_PLATFORM_TARGET_OVERRIDE",
    "NEURON_RT_STOCHASTIC_ROUNDING_EN", "NEURON_RT_STOCHASTIC_ROUNDING_SEED", "NEURON_CC_FLAGS",
    "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VISIBLE_CORES",
)

_INSTALL = ("the NKI package of the AWS Neuron SDK is not installed (the same-named packages on "
            "pypi.org are placeholders): on a Trn1/Trn2/Trn3 instance (or any Linux x86-64 host for "
            "nki.simulate) run pip install --extra-index-url https://pip.repos.neuron.amazonaws.com "
            "nki neuronx-cc; see docs/trainium.md")


#: the ops numstd's NKI kernels implement: the elementwise ones of ``nki_kernels.elementwise.FUNCTIONS``
#: (that module imports nki, so it is not read here; tests/test_backends.py compares the two where nki is
#: installed) and the four kernels of nki_kernels
_KERNEL_OPS: frozenset[str] = frozenset({"exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt",
                                         "matmul", "softmax", "layer_norm", "rms_norm"})
assert _KERNEL_OPS <= ELEMENTWISE_OPS | {"matmul", "softmax", "layer_norm", "rms_norm"}


class NkiBackend(Backend):
    """numstd's NKI kernels, on a NeuronCore (``nki.jit``) or in ``nki.simulate``; module docstring."""

    name = "nki"

    def __init__(self) -> None:
        super().__init__()
        self._mode = ""

    def _probe(self) -> tuple[bool, str]:
        try:
            nki = importlib.import_module("nki")
        except ModuleNotFoundError:
            return False, _INSTALL
        except Exception as exc:
            return False, f"nki failed to import ({type(exc).__name__}: {exc}); reinstall the Neuron SDK"
        missing = [n for n in ("jit", "simulate") if not hasattr(nki, n)]
        if missing:
            return False, (f"the installed nki ({getattr(nki, '__version__', 'unknown version')}) has no "
                           f"{' or '.join('nki.' + m for m in missing)}: numstd's kernels need NKI 0.3 or later "
                           "(Neuron SDK 2.29+)")
        mode = os.environ.get("NUMSTD_NKI_MODE", "").strip().lower()
        if mode not in ("", "device", "simulate"):
            return False, f"NUMSTD_NKI_MODE={mode!r}: use 'device' or 'simulate'"
        if not mode:
            mode = "device" if os.path.exists("/dev/neuron0") else "simulate"
        if mode == "device" and not os.path.exists("/dev/neuron0"):
            return False, "NUMSTD_NKI_MODE=device but no Neuron device (/dev/neuron0); neuron-ls lists them"
        self._mode = mode
        return True, ""

    def ops(self) -> frozenset[str]:
        return _KERNEL_OPS

    def input_formats(self) -> frozenset[str]:
        return frozenset({"float32", "float16", "bfloat16"})

    def version(self) -> str:
        return module_versions(("nki", "neuronxcc"))

    def device(self) -> str:
        self.require()
        if self._mode == "simulate":
            target = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "auto (trn3 without a device)")
            return f"nki.simulate on the CPU (target {target})"
        return "NeuronCore (nki.jit)"

    def flags(self) -> dict:
        out = {"mode": self._mode}
        out.update(env_flags(NKI_ENV))
        return out

    # ------------------------------------------------------------------ running kernels
    def _kernel(self, op: str) -> Callable[..., Any]:
        from .nki_kernels import KERNELS

        module, name = KERNELS[op]
        kernel = getattr(importlib.import_module(f"{__package__}.nki_kernels.{module}"), name)
        if self._mode == "simulate":
            import nki

            return nki.simulate(kernel)
        return kernel

    def _call(self, op: str, *args: Any) -> np.ndarray:
        out = np.asarray(self._kernel(op)(*args))
        want = args[0].dtype
        return out if out.dtype == want else out.astype(want)  # NKI_PRECISE_FP=0 returns float32

    def _compute(self, op: str, arrays: list, params: dict, flags: dict) -> np.ndarray:
        x = arrays[0]
        if op == "matmul":
            return self._matmul(x, arrays[1])
        if op == "softmax":
            moved = np.moveaxis(x, params["axis"], -1)
            y = self._call(op, np.ascontiguousarray(moved.reshape(-1, moved.shape[-1])))
            return np.moveaxis(y.reshape(moved.shape), -1, params["axis"])
        if op in ("layer_norm", "rms_norm"):
            n = x.shape[-1]
            rows = np.ascontiguousarray(x.reshape(-1, n))
            w = arrays[1] if arrays[1] is not None else np.ones(n, x.dtype)
            args: list[Any] = [rows, np.ascontiguousarray(w.reshape(1, n))]
            if op == "layer_norm":
                b = arrays[2] if arrays[2] is not None else np.zeros(n, x.dtype)
                args.append(np.ascontiguousarray(b.reshape(1, n)))
            return self._call(op, *args, float(params["eps"])).reshape(x.shape)
        fn = "gelu_tanh" if op == "gelu" and params["approximate"] == "tanh" else op
        if x.ndim >= 2:
            flat = x.reshape(-1, x.shape[-1])
        else:
            n = x.size
            flat = x.reshape(128, n // 128) if n and n % 128 == 0 else x.reshape(1, n)
        return self._call(op, np.ascontiguousarray(flat), fn).reshape(x.shape)

    def _matmul(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """numpy matmul semantics (1-D operands, broadcast batch axes) over the 2-D kernel."""
        a2 = A[None, :] if A.ndim == 1 else A
        b2 = B[:, None] if B.ndim == 1 else B
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        a3 = np.broadcast_to(a2, batch + a2.shape[-2:]).reshape(-1, *a2.shape[-2:])
        b3 = np.broadcast_to(b2, batch + b2.shape[-2:]).reshape(-1, *b2.shape[-2:])
        if a3.shape[0] == 0:
            out = np.zeros(batch + (a2.shape[-2], b2.shape[-1]), dtype=A.dtype)
            return out[..., 0, :] if A.ndim == 1 else (out[..., 0] if B.ndim == 1 else out)
        outs = [self._call("matmul", np.ascontiguousarray(a.T), np.ascontiguousarray(b)) for a, b in zip(a3, b3)]
        out = np.stack(outs).reshape(batch + (a2.shape[-2], b2.shape[-1]))
        if A.ndim == 1:
            out = out[..., 0, :]
        if B.ndim == 1:
            out = out[..., 0]
        return out
