"""The ``torch-neuronx`` backend: PyTorch on an AWS Trainium NeuronCore.

The same torch calls as :mod:`numstd.backends.torch_backend`, on the Neuron device, in one of the
two forms the Neuron SDK ships:

- **native TorchNeuron** (``torch-neuronx`` 2.14 and later, Trn2/Trn3): Trainium is PyTorch's
  ``PrivateUse1`` device named ``"neuron"``; ops run eagerly;
- **XLA** (``torch-neuronx`` before 2.14 with ``torch_xla``, Trn1/Trn2): the device is
  ``torch_xla.device()`` under ``PJRT_DEVICE=NEURON``; ops are traced lazily and compiled by
  ``neuronx-cc`` when the result is copied to the host.

What changes the numbers and is recorded by :meth:`TorchNeuronxBackend.flags`:
``NEURON_CC_FLAGS`` (``neuronx-cc`` casts fp32 matmuls to bf16 unless ``--auto-cast=none``),
``NEURON_RT_STOCHASTIC_ROUNDING_EN`` / ``NEURON_RT_STOCHASTIC_ROUNDING_SEED`` (stochastic rounding
of fp32 results converted to narrower formats), ``XLA_USE_BF16`` / ``XLA_DOWNCAST_BF16`` (XLA
stores fp32 tensors as bf16).  See ``docs/trainium.md``.
"""

from __future__ import annotations

from typing import Any

from .base import env_flags, missing_module_reason, module_versions
from .torch_backend import TorchBackend

__all__ = ["TorchNeuronxBackend", "NEURON_ENV"]

#: environment variables that change how Neuron computes or rounds
NEURON_ENV: tuple[str, ...] = (
    "NEURON_CC_FLAGS", "NEURON_RT_STOCHASTIC_ROUNDING_EN", "NEURON_RT_STOCHASTIC_ROUNDING_SEED",
    "XLA_USE_BF16", "XLA_DOWNCAST_BF16", "PJRT_DEVICE", "NEURON_RT_VISIBLE_CORES",
    "NEURON_LOGICAL_NC_CONFIG", "NEURON_PLATFORM_TARGET_OVERRIDE",
)


class TorchNeuronxBackend(TorchBackend):
    """torch on a NeuronCore (native ``"neuron"`` device, else ``torch_xla``); module docstring."""

    def __init__(self) -> None:
        super().__init__("cpu")
        self.name = "torch-neuronx"
        self._mode = ""  # "native" or "xla", set by the probe

    def _probe(self) -> tuple[bool, str]:
        try:
            import torch
        except Exception as exc:
            return False, missing_module_reason("torch", "numstd[torch]", exc)
        try:
            import torch_neuronx  # noqa: F401 - registers the device / the XLA integration
        except Exception as exc:
            return False, missing_module_reason(
                "torch_neuronx", "torch-neuronx --extra-index-url https://pip.repos.neuron.amazonaws.com "
                "(on a Trn1/Trn2 instance with the Neuron driver; see docs/trainium.md)", exc)
        if torch._C._get_privateuse1_backend_name() == "neuron":
            mod = getattr(torch, "neuron", None)
            count = mod.device_count() if mod is not None and hasattr(mod, "device_count") else 0
            if count:
                self._mode = "native"
                return True, ""
        try:
            import torch_xla.runtime as xr
        except Exception as exc:
            return False, ("torch_neuronx is installed but no 'neuron' device is registered and torch_xla "
                           f"cannot be imported ({type(exc).__name__}: {exc}); run on a Trn1/Trn2 instance "
                           "(neuron-ls lists the devices)")
        kind = str(xr.device_type() or "")
        if kind.upper() != "NEURON":
            return False, (f"torch_xla runs on PJRT device {kind or 'none'!r}, not NEURON: set "
                           "PJRT_DEVICE=NEURON on a Trainium instance (neuron-ls lists the devices)")
        self._mode = "xla"
        return True, ""

    def _torch_device(self) -> Any:
        import torch

        if self._mode == "native":
            return torch.device("neuron")
        import torch_xla

        if hasattr(torch_xla, "device"):
            return torch_xla.device()
        import torch_xla.core.xla_model as xm  # torch_xla < 2.5

        return xm.xla_device()

    def input_formats(self) -> frozenset[str]:
        return frozenset({"float32", "float16", "bfloat16"})  # neuronx-cc has no float64 math

    def version(self) -> str:
        return module_versions(("torch", "torch_neuronx", "torch_xla", "neuronxcc"))

    def device(self) -> str:
        self.require()
        return f"NeuronCore ({self._mode}: {self._torch_device()})"

    def flags(self) -> dict:
        # TF32 is a CUDA setting: on Neuron the precision of fp32 matmuls is decided by
        # NEURON_CC_FLAGS (--auto-cast), recorded here; ops run through TorchBackend._compute.
        out = {"mode": self._mode}
        out.update(env_flags(NEURON_ENV))
        return out
