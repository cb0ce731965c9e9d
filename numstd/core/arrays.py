"""Host arrays: turning numpy, ml_dtypes, torch and jax arrays into numpy without importing torch/jax.

numstd never imports torch or jax to *recognise* their arrays: it looks at the type's module name,
so ``import numstd`` stays light and an array from a library that is not installed can never
reach this code anyway.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .errors import DtypeError

__all__ = ["to_numpy", "is_torch", "is_jax"]

# torch dtypes numpy cannot hold natively, mapped to the unsigned view + ml_dtypes dtype.
_TORCH_VIEW = {
    "torch.bfloat16": ("int16", ml_dtypes.bfloat16),
    "torch.float8_e4m3fn": ("uint8", ml_dtypes.float8_e4m3fn),
    "torch.float8_e5m2": ("uint8", ml_dtypes.float8_e5m2),
    "torch.float8_e4m3fnuz": ("uint8", ml_dtypes.float8_e4m3fnuz),
    "torch.float8_e5m2fnuz": ("uint8", ml_dtypes.float8_e5m2fnuz),
    "torch.float8_e8m0fnu": ("uint8", ml_dtypes.float8_e8m0fnu),
}


# ml_dtypes floats have dtype kind "V"; these are the ones numstd knows
_ML_FLOATS = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                        "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu"})


def is_torch(x: Any) -> bool:
    """True for a ``torch.Tensor`` (checked by module name; torch is not imported)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def is_jax(x: Any) -> bool:
    """True for a jax array (checked by module name; jax is not imported)."""
    mod = type(x).__module__
    return mod.startswith("jax") or mod.startswith("jaxlib")


def to_numpy(x: Any, *, name: str = "array") -> np.ndarray:
    """Return ``x`` as a host numpy array, keeping its floating-point format.

    Parameters
    ----------
    x : numpy array, ml_dtypes array, torch.Tensor, jax.Array, Python scalar or nested list.
    name : str
        What the array is called in error messages (``"actual"``, ``"inputs[1]"``).

    Returns
    -------
    numpy.ndarray
        A view or copy on the host; bfloat16/float8 tensors come back with the ml_dtypes dtype of
        the same bits.

    Raises
    ------
    DtypeError
        For objects that are not arrays of numbers (strings, object arrays, complex numbers) and
        torch tensors without dense host values (meta, sparse, quantized, nested).
    """
    if is_torch(x):
        arr = _torch_to_numpy(x, name)
    elif is_jax(x):
        try:
            arr = np.asarray(x)
        except Exception as exc:  # abstract tracers, deleted buffers, sharded arrays off host
            raise DtypeError(f"{name}: cannot read this jax array on the host ({exc}); pass a concrete array "
                             "(jax.device_get(x)), not a tracer") from None
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # ragged lists and the like
            raise DtypeError(
                f"{name}: cannot turn a {type(x).__name__} into an array ({exc}); "
                "pass a numpy, torch or jax array"
            ) from None
    if arr.dtype == object or arr.dtype.kind in "USMmc" or (arr.dtype.kind == "V" and arr.dtype.name not in _ML_FLOATS):
        raise DtypeError(
            f"{name}: dtype {arr.dtype} is not a real floating-point or integer array; "
            "pass real numbers (float64/32/16, bfloat16, float8)"
        )
    return arr


def _torch_to_numpy(x: Any, name: str) -> np.ndarray:
    """A torch tensor's values as numpy: dense, strided, real, on the host (else a DtypeError).

    Tensors with no host data (``meta``), other layouts (sparse COO/CSR/…), quantized and nested
    tensors are refused with the conversion that makes them usable; the lazy negative and
    conjugate bits (``z.conj().imag``) are materialised first.
    """
    t = x.detach()
    kind = ("a nested tensor" if getattr(t, "is_nested", False) else
            "a quantized tensor" if getattr(t, "is_quantized", False) else
            f"a {t.layout} tensor" if str(t.layout) != "torch.strided" else
            "a tensor on the 'meta' device (it has no values)" if t.device.type == "meta" else None)
    if kind is not None:
        fix = {"a nested tensor": "pass each component (t.unbind()) or t.to_padded_tensor(0.0)",
               "a quantized tensor": "pass t.dequantize() and the dequantized values the kernel saw"}.get(
            kind, "pass a real tensor with values" if "meta" in kind else "pass t.to_dense()")
        raise DtypeError(f"{name}: {kind} is not an array of numbers numstd can read; {fix}")
    try:
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.resolve_conj().resolve_neg()
        key = str(t.dtype)
        if key in _TORCH_VIEW:
            import torch  # torch is loaded already: x is a torch tensor

            int_name, np_dtype = _TORCH_VIEW[key]
            return t.contiguous().view(getattr(torch, int_name)).numpy().view(np_dtype)
        return t.numpy()
    except Exception as exc:  # dtypes numpy has no match for (uint16 in old torch, float8 variants…)
        raise DtypeError(f"{name}: cannot read a torch tensor of dtype {t.dtype} as numbers ({exc}); "
                         "pass t.float() or a numpy array") from None
