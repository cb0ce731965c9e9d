"""The ``torch:cpu`` and ``torch:cuda`` backends: PyTorch's own kernels for each catalog op.

Each op is the torch call a PyTorch user writes, on tensors of the input's dtype (bfloat16 and
float8 tensors are made from the same bits, never through float32):

=============  ===============================================================================
matmul         ``torch.matmul(A, B)``
linear         ``F.linear(x, W, b)``
conv           ``F.conv1d/2d/3d(x, W, b, stride, padding, dilation, groups)`` by the rank of ``x``
conv_transpose ``F.conv_transpose1d/2d/3d(x, W, b, stride, padding, output_padding, groups, dilation)``
sum, mean      ``torch.sum`` / ``torch.mean`` over ``dim=axis`` (all dims for ``axis=None``)
cumsum         ``torch.cumsum(x, dim=axis)``
amax, amin     ``torch.amax`` / ``torch.amin`` (``dim=axis, keepdim=keepdims``)
argmax, argmin ``torch.argmax`` / ``torch.argmin`` (``dim=axis, keepdim=keepdims``; int64 indices)
softmax        ``F.softmax(x, dim=axis)``, ``F.log_softmax``
layer_norm     ``F.layer_norm(x, x.shape[-1:], weight, bias, eps)``
rms_norm       ``F.rms_norm(x, x.shape[-1:], weight, eps)``
group_norm     ``F.group_norm(x, num_groups, weight, bias, eps)``
instance_norm  ``F.instance_norm(x, None, None, weight, bias, True, 0.1, eps)``
batch_norm     ``F.batch_norm(x, running_mean, running_var, weight, bias, training, 0.1, eps)``
               (training: running statistics not passed, so nothing is updated)
pooling        ``F.max_pool{d}d`` / ``F.avg_pool{d}d`` with the op's parameters (the entries' calls)
elementwise    ``torch.exp``, ``log``, ``tanh``, ``sigmoid``, ``erf``, ``rsqrt``, ``sqrt``,
               ``F.gelu(x, approximate=...)``, ``F.silu``, ``F.relu``
attention      ``F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)``
cross_entropy  ``F.cross_entropy(logits, target, reduction=...)``
mse_loss       ``F.mse_loss(input, target, reduction=...)`` (the entry's call)
huber_loss     ``F.huber_loss(input, target, reduction=..., delta=...)`` (the entry's call)
smooth_l1_loss ``F.smooth_l1_loss(input, target, reduction=..., beta=...)`` (the entry's call)
kl_div         ``F.kl_div(input, target, reduction=..., log_target=...)`` (the entry's call)
nll_loss       ``F.nll_loss(input, target.long(), reduction=..., ignore_index=...)``
hinge_embedding_loss ``F.hinge_embedding_loss(input, target, margin=..., reduction=...)`` (the entry's call)
=============  ===============================================================================

Flags: ``allow_tf32`` (default False) sets ``torch.backends.cuda.matmul.allow_tf32`` (and the cuDNN
flag) for the duration of one CUDA call and restores it afterwards, under a process-wide lock so
that concurrent calls with different settings cannot see each other's value.  On the CPU there
is no TF32 and the flag is accepted as a permission only.  :meth:`TorchBackend.flags` records the
TF32 and reduced-precision-reduction settings and the CPU thread count, which decide the
accumulation order.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from .base import Backend, framework_call, framework_ops, missing_module_reason, version_string

__all__ = ["TorchBackend", "to_torch"]

# torch dtypes numpy holds as ml_dtypes: build the tensor from the same bits through an int view
_VIEWS = {
    "bfloat16": ("int16", "bfloat16"),
    "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
    "float8_e5m2": ("uint8", "float8_e5m2"),
    "float8_e4m3fnuz": ("uint8", "float8_e4m3fnuz"),
    "float8_e5m2fnuz": ("uint8", "float8_e5m2fnuz"),
}

_TF32_LOCK = threading.Lock()


def to_torch(arr: np.ndarray, device: Any) -> Any:
    """A torch tensor on ``device`` holding exactly ``arr``'s values (same dtype, same bits)."""
    import torch

    arr = np.ascontiguousarray(arr)
    name = arr.dtype.name
    if name in _VIEWS:
        int_name, torch_name = _VIEWS[name]
        t = torch.from_numpy(arr.view(int_name)).view(getattr(torch, torch_name))
    else:
        t = torch.from_numpy(arr)
    return t.to(device)


def _dims(p: dict, ndim: int) -> tuple[int, ...]:
    axis = p["axis"]
    if axis is None:
        return tuple(range(ndim))
    return axis if isinstance(axis, tuple) else (axis,)


def _attention(torch: Any, F: Any, q: Any, k: Any, v: Any, p: dict) -> Any:
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (t.expand(*batch, *t.shape[-2:]) for t in (q, k, v))
    flat = q.dim() == 2
    if flat:  # sdpa wants a batch axis
        q, k, v = q[None], k[None], v[None]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"], scale=p["scale"])
    return out[0] if flat else out


#: the ops :func:`_table` implements (their calls are not mechanical)
_SPECIAL: frozenset[str] = frozenset({"conv", "conv_transpose", "sum", "mean", "layer_norm", "rms_norm", "attention",
                                      "cross_entropy", "nll_loss", "group_norm", "instance_norm", "batch_norm"})


def _table(torch: Any, F: Any) -> dict[str, Callable[[list, dict], Any]]:
    """The calls that are not mechanical; the others come from the ops' entries (framework_call)."""

    def red(fn: Callable) -> Callable:
        return lambda a, p: fn(a[0], dim=_dims(p, a[0].dim()), keepdim=p["keepdims"])

    def conv(a: list, p: dict) -> Any:
        fn = (F.conv1d, F.conv2d, F.conv3d)[a[0].dim() - 3]
        return fn(a[0], a[1], a[2], stride=p["stride"], padding=p["padding"], dilation=p["dilation"],
                  groups=p["groups"])

    def conv_transpose(a: list, p: dict) -> Any:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[a[0].dim() - 3]
        return fn(a[0], a[1], a[2], stride=p["stride"], padding=p["padding"], output_padding=p["output_padding"],
                  groups=p["groups"], dilation=p["dilation"])

    return {
        "conv": conv,
        "conv_transpose": conv_transpose,
        "sum": red(torch.sum),
        "mean": red(torch.mean),
        "layer_norm": lambda a, p: F.layer_norm(a[0], a[0].shape[-1:], a[1], a[2], p["eps"]),
        "rms_norm": lambda a, p: F.rms_norm(a[0], a[0].shape[-1:], a[1], p["eps"]),
        "group_norm": lambda a, p: F.group_norm(a[0], p["num_groups"], a[1], a[2], p["eps"]),
        "instance_norm": lambda a, p: F.instance_norm(a[0], None, None, a[1], a[2], True, 0.1, p["eps"]),
        "batch_norm": lambda a, p: F.batch_norm(a[0], None if p["training"] else a[1], None if p["training"] else a[2],
                                                a[3], a[4], p["training"], 0.1, p["eps"]),
        "attention": lambda a, p: _attention(torch, F, a[0], a[1], a[2], p),
        "cross_entropy": lambda a, p: F.cross_entropy(a[0], a[1].long(), reduction=p["reduction"]),
        "nll_loss": lambda a, p: F.nll_loss(a[0], a[1].long(), reduction=p["reduction"], ignore_index=p["ignore_index"]),
    }


class TorchBackend(Backend):
    """PyTorch on ``device`` (``"cpu"`` or ``"cuda"``); see the module docstring.

    Parameters
    ----------
    device : str
        ``"cpu"`` or ``"cuda"`` (the current CUDA device).
    """

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        self._device_kind = device
        self.name = f"torch:{device}"

    def _probe(self) -> tuple[bool, str]:
        try:
            import torch
        except Exception as exc:
            return False, missing_module_reason("torch", "numstd[torch]", exc)
        if self._device_kind == "cuda" and not torch.cuda.is_available():
            build = ("this torch build has no CUDA support (a +cpu wheel); install a CUDA build of torch"
                     if torch.version.cuda is None else "no CUDA device is visible (check nvidia-smi and "
                     "CUDA_VISIBLE_DEVICES)")
            return False, f"torch {torch.__version__}: torch.cuda.is_available() is False: {build}"
        return True, ""

    def _torch_device(self) -> Any:
        import torch

        return torch.device(self._device_kind)

    def ops(self) -> frozenset[str]:
        return framework_ops("torch", _SPECIAL)

    def input_formats(self) -> frozenset[str]:
        return frozenset({"float64", "float32", "float16", "bfloat16"})

    def output_format(self, op: str, input_formats: Sequence[Any]) -> Any:
        """As :meth:`Backend.output_format`; torch 2.x's CPU ``avg_pool3d`` has no bf16/fp16 kernel
        (``"avg_pool3d_out_frame" not implemented for 'BFloat16'``)."""
        fmt = super().output_format(op, input_formats)
        if fmt is not None and op == "avg_pool3d" and self._device_kind == "cpu" and fmt.name in ("bfloat16", "float16"):
            return None
        return fmt

    def version(self) -> str:
        try:
            import torch
        except Exception:
            return ""
        pairs = [("torch", torch.__version__)]
        if self._device_kind == "cuda":
            pairs += [("cuda", torch.version.cuda or ""),
                      ("cudnn", str(torch.backends.cudnn.version() or ""))]
        return version_string(pairs)

    def device(self) -> str:
        import platform

        import torch

        if self._device_kind == "cuda":
            idx = torch.cuda.current_device()
            cap = torch.cuda.get_device_capability(idx)
            return f"{torch.cuda.get_device_name(idx)} (sm_{cap[0]}{cap[1]})"
        return f"cpu ({platform.machine() or 'unknown'})"

    def flags(self) -> dict:
        import torch

        m = torch.backends.cuda.matmul
        out = {
            "allow_tf32": bool(m.allow_tf32),
            "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "allow_bf16_reduced_precision_reduction": bool(m.allow_bf16_reduced_precision_reduction),
            "allow_fp16_reduced_precision_reduction": bool(m.allow_fp16_reduced_precision_reduction),
            "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
            "num_threads": int(torch.get_num_threads()),
        }
        if hasattr(m, "fp32_precision"):  # torch >= 2.9 spells TF32 as fp32_precision = "tf32"
            out["matmul_fp32_precision"] = str(m.fp32_precision)
        from .base import env_flags

        out.update(env_flags(["NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS"]))
        return out

    def _compute(self, op: str, arrays: list, params: dict, flags: dict) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        from ..core.arrays import to_numpy

        if self.output_format(op, [arrays[0].dtype.name]) is None:
            from ..core.errors import DtypeError

            raise DtypeError(f"{self.name} cannot run {op} on {arrays[0].dtype.name} inputs (torch has no such "
                             "kernel on this device); use float32 inputs or another backend")

        dev = self._torch_device()
        args = [None if a is None else to_torch(a, dev) for a in arrays]
        fn = _table(torch, F).get(op) or framework_call(op, "torch")
        with torch.no_grad():
            if self._device_kind != "cuda":
                out = fn(args, params)
            else:
                out = self._with_tf32(bool(flags.get("allow_tf32", False)), fn, args, params)
        return np.asarray(to_numpy(out, name="output"))

    @staticmethod
    def _with_tf32(allow: bool, fn: Callable, args: list, params: dict) -> Any:
        """Run ``fn`` with TF32 set to ``allow`` (restored afterwards), finishing on the device."""
        import torch

        with _TF32_LOCK:
            old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = allow
            torch.backends.cudnn.allow_tf32 = allow
            try:
                out = fn(args, params)
                torch.cuda.synchronize()
            finally:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
        return out
