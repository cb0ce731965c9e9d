"""Backends: run a catalog op on a platform (numpy, torch, JAX, NKI, torch-neuronx).

========================  ===================================================================
name                      what runs
========================  ===================================================================
``numpy``                 numpy on the CPU, float32 math, rounded to the input format
``torch:cpu``             PyTorch CPU kernels
``torch:cuda``            PyTorch CUDA kernels (``allow_tf32`` honoured for matmul)
``jax:cpu`` ``jax:gpu``   JAX/XLA on that platform (matmul precision "highest" by default)
``jax:neuron``            JAX through the Neuron PJRT plugin (Trainium)
``torch-neuronx``         PyTorch on a NeuronCore (native TorchNeuron or torch_xla)
``nki``                   numstd's NKI kernels, on a NeuronCore or in ``nki.simulate``
========================  ===================================================================

``import numstd.backends`` imports no library: each backend imports its library the first time it
is asked whether it is :meth:`~numstd.backends.base.Backend.available` or to run.

>>> from numstd import backends
>>> be = backends.get("torch:cpu")                                  # doctest: +SKIP
>>> be.available()                                                  # doctest: +SKIP
(True, '')
>>> be.run("softmax", [x], axis=-1)                                 # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import importlib
import threading
import types
from typing import Any, Mapping

from ..core.errors import BackendUnavailable
from .base import Backend

__all__ = ["Backend", "get", "names", "all_backends", "BACKENDS"]

#: name -> (module, class, constructor keyword arguments)
BACKENDS: Mapping[str, tuple[str, str, Mapping[str, Any]]] = types.MappingProxyType({
    "numpy": ("numpy_backend", "NumpyBackend", {}),
    "torch:cpu": ("torch_backend", "TorchBackend", {"device": "cpu"}),
    "torch:cuda": ("torch_backend", "TorchBackend", {"device": "cuda"}),
    "jax:cpu": ("jax_backend", "JaxBackend", {"platform": "cpu"}),
    "jax:gpu": ("jax_backend", "JaxBackend", {"platform": "gpu"}),
    "jax:neuron": ("jax_backend", "JaxBackend", {"platform": "neuron"}),
    "torch-neuronx": ("neuron", "TorchNeuronxBackend", {}),
    "nki": ("nki_backend", "NkiBackend", {}),
})

_ALIASES = {"torch": "torch:cpu", "jax": "jax:cpu", "cuda": "torch:cuda", "torch:gpu": "torch:cuda",
            "jax:cuda": "jax:gpu", "neuron": "torch-neuronx", "torch_neuronx": "torch-neuronx"}

_lock = threading.Lock()
_instances: dict[str, Backend] = {}


def names() -> list[str]:
    """Every backend name, available here or not."""
    return list(BACKENDS)


def get(name: str) -> Backend:
    """The backend called ``name`` (one shared instance per name; thread-safe).

    ``"torch"`` and ``"jax"`` mean their CPU backends, ``"cuda"`` means ``"torch:cuda"``.

    Raises
    ------
    BackendUnavailable
        For a name that is not a backend, listing the names (the closest first).
    """
    if isinstance(name, Backend):
        return name
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in BACKENDS:
        close = difflib.get_close_matches(key, list(BACKENDS) + list(_ALIASES), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
        raise BackendUnavailable(f"unknown backend {name!r}; {hint}backends: {', '.join(BACKENDS)} "
                                 "(`python -m numstd backends` says which run here)")
    with _lock:
        if key not in _instances:
            module, cls, kwargs = BACKENDS[key]
            klass = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
            _instances[key] = klass(**kwargs)
        return _instances[key]


def all_backends() -> list[Backend]:
    """One instance of every backend, in :func:`names` order (available or not)."""
    return [get(n) for n in BACKENDS]
