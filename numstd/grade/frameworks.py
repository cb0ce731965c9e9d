"""How :func:`numstd.grade` runs modules in each framework: torch, jax or plain numpy callables.

An adapter casts inputs and weights to the working dtype or to float64, copies, compares and calls,
so that :mod:`numstd.grade` itself never imports a framework.  torch's global RNG (which
``make_inputs`` and module constructors draw from) is only used inside ``torch.random.fork_rng``
blocks serialised by :data:`_SEEDED`.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..core.arrays import to_numpy
from ..core.errors import DtypeError, ParameterError

__all__ = ["precision_environment"]  # (the adapters are internal to numstd.grade)

_SEEDED = threading.Lock()  # make_inputs and constructors use torch's global RNG


_TORCH_DTYPES = ("float64", "float32", "bfloat16", "float16")


class _Adapter:
    """How to cast, copy, compare and call in one framework (torch, jax or numpy)."""

    name = "numpy"

    def __init__(self, device: str) -> None:
        self.device = device

    # arrays
    def is_float(self, x: Any) -> bool:
        return isinstance(x, np.ndarray) and x.dtype.kind in "fV"

    def is_array(self, x: Any) -> bool:
        return isinstance(x, np.ndarray)

    def from_float64(self, values: np.ndarray, fmt: Any) -> Any:
        return np.asarray(values, dtype=np.float64).astype(fmt.dtype)

    def cast(self, x: Any, fmt: Any) -> Any:
        """A float array rounded (RNE) into ``fmt``; other values copied."""
        if self.is_float(x):
            from ..core.formats import round_to

            return np.asarray(round_to(to_numpy(x, name="input"), fmt))
        return self.copy(x)

    def copy(self, x: Any) -> Any:
        return x.copy() if isinstance(x, np.ndarray) else copy.deepcopy(x)

    def same(self, a: Any, b: Any) -> bool:
        if self.is_array(a) and self.is_array(b):
            x, y = to_numpy(a, name="input"), to_numpy(b, name="input")
            return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - objects without a usable ==: assume unchanged
            return True

    # models
    def prepare(self, reference: Any, candidate: Any, fmt: Any) -> tuple[Callable, Callable, Callable]:
        return reference, reference, candidate

    def call(self, fn: Callable, inputs: Sequence[Any], *, float64: bool = False, recorder: Any = None) -> Any:
        return fn(*inputs)

    def seeded(self, seed: int) -> Any:
        import contextlib

        return contextlib.nullcontext()


class _Torch(_Adapter):
    name = "torch"

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        try:
            self.dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ParameterError(f"device {device!r} is not a torch device ({exc}); use 'cpu' or 'cuda'") from None
        if self.dev.type == "cuda" and not torch.cuda.is_available():
            from ..core.errors import BackendUnavailable

            raise BackendUnavailable("device='cuda' but torch.cuda.is_available() is False; grade on device='cpu'")
        super().__init__(str(self.dev))

    def dtype(self, fmt: Any) -> Any:
        if fmt.name not in _TORCH_DTYPES:
            raise DtypeError(f"torch grading supports {', '.join(_TORCH_DTYPES)}, not {fmt.name}")
        return getattr(self.torch, fmt.name)

    def is_float(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor) and x.is_floating_point()

    def is_array(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor)

    def from_float64(self, values: np.ndarray, fmt: Any) -> Any:
        t = self.torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
        return t.to(device=self.dev, dtype=self.dtype(fmt))

    def cast(self, x: Any, fmt: Any) -> Any:
        if self.is_float(x):
            return x.detach().to(device=self.dev, dtype=self.dtype(fmt)).clone()
        if self.is_array(x):
            return x.detach().to(self.dev).clone()
        return copy.deepcopy(x)

    def copy(self, x: Any) -> Any:
        return x.clone() if self.is_array(x) else copy.deepcopy(x)

    def same(self, a: Any, b: Any) -> bool:
        if self.is_array(a) and self.is_array(b):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.is_floating_point():  # bitwise: NaN equals NaN, -0 differs from +0
                width = {8: self.torch.int64, 4: self.torch.int32, 2: self.torch.int16, 1: self.torch.uint8}
                view = width[a.element_size()]
                return bool(self.torch.equal(a.contiguous().view(view), b.contiguous().view(view)))
            return bool(self.torch.equal(a, b))
        return super().same(a, b)

    def prepare(self, reference: Any, candidate: Any, fmt: Any) -> tuple[Callable, Callable, Callable]:
        nn = self.torch.nn
        dt = self.dtype(fmt)
        if isinstance(reference, nn.Module):
            base = copy.deepcopy(reference).to(device=self.dev, dtype=dt)
            truth = copy.deepcopy(base).to(dtype=self.torch.float64)
        else:
            base = truth = reference
        if isinstance(candidate, nn.Module):
            cand = copy.deepcopy(candidate).to(device=self.dev, dtype=dt)
            if isinstance(base, nn.Module):
                _share_weights(base, cand)
        else:
            cand = candidate
        return truth, base, cand

    def call(self, fn: Callable, inputs: Sequence[Any], *, float64: bool = False, recorder: Any = None) -> Any:
        import contextlib

        with self.torch.no_grad(), (recorder if recorder is not None else contextlib.nullcontext()):
            return fn(*inputs)

    def seeded(self, seed: int) -> Any:
        import contextlib

        torch = self.torch

        @contextlib.contextmanager
        def block() -> Iterator[None]:
            with _SEEDED:
                devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
                with torch.random.fork_rng(devices=devices):
                    torch.manual_seed(seed)
                    yield

        return block()


class _Jax(_Adapter):
    name = "jax"

    def __init__(self, device: str) -> None:
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        super().__init__(device)

    def is_float(self, x: Any) -> bool:
        from ..core.arrays import is_jax

        return is_jax(x) and self.jnp.issubdtype(x.dtype, self.jnp.floating)

    def is_array(self, x: Any) -> bool:
        from ..core.arrays import is_jax

        return is_jax(x)

    def from_float64(self, values: np.ndarray, fmt: Any) -> Any:
        return self.jnp.asarray(np.asarray(values, dtype=np.float64).astype(fmt.dtype))

    def cast(self, x: Any, fmt: Any) -> Any:
        if self.is_float(x):
            from ..core.formats import round_to

            if fmt.name == "float64":
                with self.jax.enable_x64(True):
                    return self.jnp.asarray(np.asarray(to_numpy(x, name="input"), dtype=np.float64))
            return self.jnp.asarray(np.asarray(round_to(to_numpy(x, name="input"), fmt)))
        return x  # jax arrays are immutable

    def copy(self, x: Any) -> Any:
        return x if self.is_array(x) else copy.deepcopy(x)

    def call(self, fn: Callable, inputs: Sequence[Any], *, float64: bool = False, recorder: Any = None) -> Any:
        if float64:
            with self.jax.enable_x64(True):
                out = fn(*inputs)
                return self.jax.tree_util.tree_map(np.asarray, out)
        return fn(*inputs)


def precision_environment(framework: str = "") -> dict:
    """The switches that change a kernel's arithmetic behind its back, as strings (recorded in reports).

    torch (when imported): ``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``,
    ``torch.get_float32_matmul_precision()``, autocast state on CPU and CUDA; jax (when imported):
    ``jax_default_matmul_precision``; the environment variables ``NEURON_CC_FLAGS``,
    ``NVIDIA_TF32_OVERRIDE`` and ``XLA_FLAGS``.  Frameworks not yet imported are not imported.
    """
    import os
    import sys

    env: dict = {k: os.environ.get(k) for k in ("NEURON_CC_FLAGS", "NVIDIA_TF32_OVERRIDE", "XLA_FLAGS")}
    torch = sys.modules.get("torch")
    if torch is not None or framework == "torch":
        import torch

        env["torch"] = torch.__version__
        env["torch.backends.cuda.matmul.allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        env["torch.backends.cudnn.allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        env["torch.float32_matmul_precision"] = torch.get_float32_matmul_precision()
        for dev in ("cpu", "cuda"):
            try:
                env[f"torch.autocast.{dev}"] = bool(torch.is_autocast_enabled(dev))
            except (TypeError, RuntimeError):  # older torch: per-device functions
                env[f"torch.autocast.{dev}"] = bool(torch.is_autocast_cpu_enabled() if dev == "cpu"
                                                    else torch.is_autocast_enabled())
        env["torch.cuda"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    jax = sys.modules.get("jax")
    if jax is not None:
        env["jax"] = getattr(jax, "__version__", "")
        env["jax_default_matmul_precision"] = str(jax.config.jax_default_matmul_precision)
    return env


def _share_weights(base: Any, cand: Any) -> bool:
    """Load the reference's state into the candidate when names and shapes match (else keep its own)."""
    src, dst = base.state_dict(), cand.state_dict()
    if set(src) != set(dst) or any(tuple(src[k].shape) != tuple(dst[k].shape) for k in src):
        return False
    cand.load_state_dict(src)
    return True


def _adapter_for(reference: Any, candidate: Any, sample: Sequence[Any], device: str) -> _Adapter:
    from ..core.arrays import is_jax, is_torch

    mods = {type(x).__module__.split(".")[0] for x in (reference, candidate)}
    if "torch" in mods or any(is_torch(x) for x in sample) or _is_torch_class(reference):
        return _Torch(device)
    if any(is_jax(x) for x in sample):
        return _Jax(device)
    if device not in ("cpu", None):
        raise ParameterError(f"device={device!r} needs torch or jax models; numpy callables run on the cpu")
    return _Adapter("cpu")


def _is_torch_class(x: Any) -> bool:
    return isinstance(x, type) and any(c.__module__.startswith("torch.nn") for c in x.__mro__)


