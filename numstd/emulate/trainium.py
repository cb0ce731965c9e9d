"""AWS Trainium (NeuronCore) TensorE + PSUM matmul and ScalarE activations.

What the Neuron documentation states (AWS Neuron SDK docs, "nki.isa.nc_matmul", "Trainium /
Inferentia2 architecture guide for NKI", "Trainium2 architecture guide", "Neuron rounding modes"):

- The Tensor Engine is a 128 x 128 systolic array of processing elements (PEs).  ``nc_matmul``
  contracts over the *partition* dimension of its operands, which is at most 128 (the stationary
  free size is at most 128, the moving free size at most 512): one instruction multiplies a
  K-tile of at most 128 rows.
- "The matmul accumulation and results are always in float32": results go to PSUM, and a
  contraction longer than 128 is done by accumulating several ``nc_matmul`` outputs into the same
  PSUM tile.
- NeuronCore-v3 (Trainium2) has an fp8 "double row" performance mode (``perf_mode=double_row``)
  that packs two fp8 element pairs per PE row, i.e. 256 contraction rows per instruction.
- NeuronCore-v2 and later round with RNE or, when ``NEURON_RT_STOCHASTIC_ROUNDING_EN=1``,
  stochastic rounding (SR) when results are converted to narrower formats.

- neuronx-cc casts fp32 matmuls to bf16 by default: "By default, the Neuron Compiler will
  automatically cast FP32 matrix multiplication operations to BF16" ("Mixed Precision and
  Performance-accuracy Tuning (neuronx-cc)", ``general/appnotes/neuronx-cc/
  neuronx-cc-training-mixed-precision``); the options ``--auto-cast {none, matmult, all}`` and
  ``--auto-cast-type {bf16, fp16, tf32, fp8_e4m3}`` of the compiler CLI reference
  (``compiler/neuronx-cc/api-reference-guide``) select it, ``--auto-cast=none`` keeps fp32.

Sources, at awsdocs-neuron.readthedocs-hosted.com/en/latest/: ``nki/api/generated/
nki.isa.nc_matmul.html`` (fp32 accumulation and results, partition size <= 128, PSUM
accumulation of several ``nc_matmul`` outputs, ``perf_mode=double_row``),
``general/arch/neuron-features/rounding-modes`` (RNE, stochastic rounding), the two compiler pages
above.

Model (the assumptions are ours, the hardware's internals are not documented):

- ``auto_cast="matmult"`` (the compiler default, :data:`AUTO_CAST_DEFAULT`): float32 operands are
  first rounded to ``auto_cast_type`` with RNE (the cast's rounding is not documented; RNE is the
  NeuronCore default), then multiplied as below.  ``auto_cast="none"`` (default here) leaves
  them in fp32.  Operands already narrower than fp32 are never cast.

- K is cut into tiles of ``tile_k`` rows (``2 * tile_k`` in fp8 double-row mode), the last one
  shorter (K = 300 -> 128, 128, 44).
- Within a tile (one ``nc_matmul``) the products are exact and the column sum is the exact sum
  rounded once to fp32, ``T_j = RN_32(sum_{k in tile j} a_k b_k)`` (``tile_accumulation="exact"``,
  the default).  Choice and justification: the documentation only says that accumulation is in
  fp32; an exact-then-rounded column is the limit of a PE chain whose partial sums are kept wider
  than fp32 and is the most accurate behaviour consistent with the documentation, while the
  opposite limit -- every PE rounding its partial sum to fp32, ``s = RN_32(s + a_k b_k)`` down
  the column -- is available as ``tile_accumulation="sequential"``.  Real hardware lies between
  the two; calibration should run both.
- PSUM accumulates the tile results in fp32 with RNE in tile order:
  ``S_1 = T_1``, ``S_j = RN_32(S_{j-1} + T_j)``.
- The PSUM value is converted to ``out`` once, with RNE or seeded stochastic rounding
  (``P(round away from zero) = fractional distance``; exact SR, whereas hardware SR uses a finite
  number of random bits).
"""

from __future__ import annotations

import types
from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import DtypeError, ParameterError
from ..core.formats import get_format, round_to
from ._accumulator import Accumulator
from ._terms import ProductTerms, check_order_parameter, host_array
from .matmul import to_output
from .summation import sequential_sum

__all__ = ["trainium_matmul", "scalar_engine", "ACTIVATIONS", "AUTO_CAST_DEFAULT"]

PARTITIONS = 128  # rows of the PE array: the largest contraction per nc_matmul
AUTO_CAST_DEFAULT = ("matmult", "bf16")  # neuronx-cc --auto-cast / --auto-cast-type defaults
_CAST_TYPES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "tf32", "fp8_e4m3": "float8_e4m3fn"}


def trainium_matmul(
    A: Any,
    B: Any,
    *,
    out: Any = "bfloat16",
    tile_k: int = PARTITIONS,
    out_rounding: str = "rne",
    seed: int | None = None,
    fp8_double_row: bool = False,
    tile_accumulation: str = "exact",
    auto_cast: str = "none",
    auto_cast_type: str = "bf16",
) -> np.ndarray:
    """Emulate ``A @ B`` on a NeuronCore Tensor Engine with fp32 PSUM accumulation.

    ``C = RN_out(S_J)`` with ``S_1 = T_1``, ``S_j = RN_32(S_{j-1} + T_j)`` and
    ``T_j = RN_32(sum of the exact products of K-tile j)`` (module docstring: sources and
    assumptions).

    Parameters
    ----------
    A, B : array-like
        Operands, numpy matmul shapes ``(..., M, K)`` and ``(..., K, N)``, at most 26 bits.
    out : format-like
        Output format (default bfloat16); ``"float32"`` returns the PSUM value.
    tile_k : int
        Contraction rows per ``nc_matmul`` (1 .. 128, default 128).
    out_rounding : {"rne", "stochastic"}
        Rounding of the PSUM -> ``out`` conversion; stochastic (``NEURON_RT_STOCHASTIC_ROUNDING_EN
        =1``) needs ``seed``.  ``"rtz"`` is accepted for experiments.
    seed : int, optional
        Seed of ``np.random.default_rng`` for stochastic rounding.
    fp8_double_row : bool
        NeuronCore-v3 fp8 double-row mode: tiles of ``2 * tile_k`` rows; both operands must be fp8.
    tile_accumulation : {"exact", "sequential"}
        Within-tile model: exact sum rounded once to fp32, or fp32 round-to-nearest after every
        product in partition order.
    auto_cast : {"none", "matmult", "all"}
        neuronx-cc ``--auto-cast``: ``"matmult"`` (the compiler's default) and ``"all"`` round
        float32 operands to ``auto_cast_type`` (RNE) before the Tensor Engine; ``"none"`` keeps
        them (``NEURON_CC_FLAGS=--auto-cast=none``).
    auto_cast_type : {"bf16", "fp16", "tf32", "fp8_e4m3"}
        neuronx-cc ``--auto-cast-type`` (default bf16).

    Returns
    -------
    numpy.ndarray
        Result in the dtype of ``out``.
    """
    tile_k = check_order_parameter("tile_k", tile_k)
    if tile_k > PARTITIONS:
        raise ParameterError(
            f"tile_k={tile_k}: a NeuronCore contracts at most {PARTITIONS} partitions per "
            "nc_matmul; use fp8_double_row=True for 256-row fp8 tiles"
        )
    if tile_accumulation not in ("exact", "sequential"):
        raise ParameterError(
            f"tile_accumulation must be 'exact' or 'sequential', got {tile_accumulation!r}"
        )
    if auto_cast not in ("none", "matmult", "all"):
        raise ParameterError(f"auto_cast must be 'none', 'matmult' or 'all' (neuronx-cc "
                             f"--auto-cast), got {auto_cast!r}")
    if auto_cast_type not in _CAST_TYPES:
        raise ParameterError(f"auto_cast_type must be one of {', '.join(_CAST_TYPES)} (neuronx-cc "
                             f"--auto-cast-type), got {auto_cast_type!r}")
    if auto_cast != "none":
        A, B = (_auto_cast(x, _CAST_TYPES[auto_cast_type], name) for x, name in ((A, "A"), (B, "B")))
    terms = ProductTerms(A, B)
    if fp8_double_row:
        fmts = (terms.a.fmt, terms.b.fmt)
        if any(f is None or not f.name.startswith("float8") for f in fmts):
            raise DtypeError(
                "fp8_double_row is an fp8 mode (NeuronCore-v3 perf_mode=double_row): both "
                f"operands must be fp8 arrays, got {[f.name if f else 'float64' for f in fmts]}"
            )
        tile_k *= 2
    fp32 = get_format("float32")
    ar = Accumulator(fp32, terms_in_format=terms.in_format(fp32))
    psum = None
    for k0 in range(0, terms.K, tile_k):
        k1 = min(k0 + tile_k, terms.K)
        if tile_accumulation == "exact":
            tile = ar.sum_exact(terms, k0, k1)
        else:
            tile = sequential_sum(terms, k0, k1, ar)
        psum = tile if psum is None else ar.add(psum, tile)
    if psum is None:
        psum = ar.zeros(terms.shape)
    rng = np.random.default_rng(seed) if seed is not None else None
    return terms.finish(to_output(psum, out, out_rounding, rng))


def _auto_cast(x: Any, fmt: str, name: str) -> Any:
    """``x`` rounded (RNE) to ``fmt`` when it is a float32 array (the compiler's fp32 cast), as a
    float32 array of the cast values for tf32; other operands unchanged."""
    arr = host_array(x, name)
    if arr.dtype != np.float32:
        return arr
    cast = round_to(arr, fmt)
    return cast.astype(np.float32) if fmt == "tf32" else cast


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.float32(1)
    return one / (one + np.exp(-x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = np.float32(np.sqrt(2.0 / np.pi))
    half, one, k = np.float32(0.5), np.float32(1), np.float32(0.044715)
    return half * x * (one + np.tanh(c * (x + k * x * x * x)))


ACTIVATIONS: Mapping[str, Callable[[np.ndarray], np.ndarray]] = types.MappingProxyType({
    "identity": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
    "square": np.square,
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "sigmoid": _sigmoid,
    "silu": lambda x: x * _sigmoid(x),
    "gelu_tanh": _gelu_tanh,
})
"""float32 numpy formulas of common ScalarE activation functions (each operation rounds to fp32)."""


def scalar_engine(fn: Callable[[np.ndarray], Any] | str, x: Any, *, out: Any = "bfloat16"
                  ) -> np.ndarray:
    """Emulate a ScalarE activation: computed in fp32, rounded once (RNE) to ``out``.

    ``y = RN_out(RN_32(fn(RN_32(x))))``: the input is widened to fp32 (exact for fp32 and
    narrower formats; float64 input is rounded to fp32), ``fn`` is evaluated in float32 numpy
    arithmetic and its result converted to ``out`` with round to nearest even (the NeuronCore
    default, "Neuron rounding modes").  Real ScalarE evaluates functions with its own
    approximations (lookup tables and polynomials, not documented), so this models the data path
    (fp32 compute, one output rounding), not the function's last-bit accuracy.

    Parameters
    ----------
    fn : callable or str
        A function of a float32 array, or a key of :data:`ACTIVATIONS`.
    x : array-like
        Input values.
    out : format-like
        Output format (default bfloat16).

    Returns
    -------
    numpy.ndarray
        ``fn(x)`` in the dtype of ``out``.
    """
    if isinstance(fn, str):
        if fn not in ACTIVATIONS:
            raise ParameterError(f"unknown activation {fn!r}; use a callable or one of "
                                 f"{', '.join(ACTIVATIONS)}")
        fn = ACTIVATIONS[fn]
    arr = host_array(x, "x")
    with np.errstate(all="ignore"):
        x32 = arr.astype(np.float32)
        y32 = np.asarray(fn(x32)).astype(np.float32)
        return round_to(y32, out)
