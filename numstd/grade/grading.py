"""``numstd.grade``: judge a whole candidate module against its reference, KernelBench style.

For every trial and every input distribution of the module standard's suite, three runs see the
same inputs (each its own copy):

* **truth** — the reference in float64 (a deep copy of the working-dtype reference, upcast, so
  its weights are exactly the ones the kernels use);
* **baseline** — the reference in the working dtype (what the framework itself delivers);
* **candidate** — the candidate in the working dtype, with the reference's weights.

The candidate is judged by ``NS-MODULE-<FORMAT>`` (:func:`judge_module`): for each quantile
``q`` in :data:`QUANTILES` the candidate's ``q``-quantile of ``|ULP error|`` against the truth
may not exceed ``factor · base_q + rho``, where ``base_q`` is the baseline's ``q``-quantile
(the standard's ``[model] error`` formula evaluated with ``base = base_q``, plus ``rho``), and its
sign-adjusted mean ULP error must be within ``τ + z·sd/√n`` of the baseline's (``sd`` the
standard deviation of the paired per-element differences).  A module that is a single catalog op
(detected from what its ``forward`` calls, or declared as ``NUMSTD_OP``/``op=``) is judged by
that op's own standard as well, through :func:`numstd.check`.

Inputs: the draw of ``make_inputs()`` (seeded, ``"original"``) and redraws of the same shapes
and dtypes from the suite's distributions (:func:`numstd.suites.draw`: signed normal, uniform ±1,
heavy-tailed, large offset, wide range, variance near eps); integer and boolean inputs are kept
as ``make_inputs()`` drew them.  Nothing here touches global RNG state outside
``torch.random.fork_rng`` blocks, which are serialised by a lock (``make_inputs`` and module
constructors draw from torch's global generator).  See ``docs/grading.md``.
"""

from __future__ import annotations

import functools
import sys
import time
import types
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.arrays import to_numpy
from ..core.errors import NumstdError, ParameterError
from .frameworks import _Adapter, _Torch, _adapter_for, _is_torch_class
from .report import SCHEMA, CaseVerdict, GradeReport
from .module_standard import (QUANTILES, ModuleErrors, _early, _leaves, describe_module_standard, judge_module,
                              module_errors, module_standard, paired_bias, quantiles, reduction_length)
from ..judge.verdict import Verdict

__all__ = [
    "grade",
    "GradeReport",
    "CaseVerdict",
    "CaseRun",
    "Protocol",
    "combined_seed",
    "run_cases",
    "judge_module",
    "judge_case",
    "module_errors",
    "ModuleErrors",
    "quantiles",
    "paired_bias",
    "module_standard",
    "describe_module_standard",
    "QUANTILES",
    "ORIGINAL",
    "SCHEMA",
]

#: name of the make_inputs() draw among the distributions
ORIGINAL = "original"


_IGNORED = {"__get__", "size", "dim", "numel", "contiguous", "__len__", "is_floating_point", "type", "__format__"}


def _arg(args: Sequence, kwargs: Mapping, pos: int, name: str, default: Any = None) -> Any:
    return args[pos] if len(args) > pos else kwargs.get(name, default)


def _as_op(name: str, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``(op, inputs, params)`` for one recorded torch call, or None when it is no catalog op."""
    if kwargs.get("dtype") is not None or kwargs.get("out") is not None:
        return None
    x = args[0] if args else kwargs.get("input")
    if name in ("softmax", "log_softmax"):
        dim = _arg(args, kwargs, 1, "dim")
        return (name, [x], {"axis": int(dim)}) if dim is not None else None
    if name in ("cumsum", "cumprod"):
        dim = _arg(args, kwargs, 1, "dim")
        return (name, [x], {"axis": int(dim)}) if dim is not None else None
    if name in ("matmul", "__matmul__", "mm", "bmm"):
        return "matmul", [x, _arg(args, kwargs, 1, "other", kwargs.get("mat2"))], {}
    if name == "linear":
        return "linear", [x, _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias")], {}
    if name in ("conv1d", "conv2d", "conv3d"):  # F.conv*d and nn.Conv*d (padding_mode="zeros")
        return _conv_call(name, x, args, kwargs)
    if name in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):  # and nn.ConvTranspose*d
        return _conv_transpose_call(name, x, args, kwargs)
    if name in ("sum", "mean"):
        dim = _arg(args, kwargs, 1, "dim")
        axis = None if dim is None else (tuple(dim) if isinstance(dim, (list, tuple)) else int(dim))
        return name, [x], {"axis": axis, "keepdims": bool(_arg(args, kwargs, 2, "keepdim", False))}
    if name in ("amax", "amin", "max", "min"):
        return _extremum_call(name, x, args, kwargs)
    # argmax/argmin (issue 18 item 4): torch.argmax(x, dim=None, keepdim=False); a forward returning
    # torch.max/min(x, dim)'s (values, indices) pair is judged as op max/min (_pair_op)
    if name in ("argmax", "argmin"):
        dim = _arg(args, kwargs, 1, "dim")
        if dim is not None and not isinstance(dim, int):
            return None
        return name, [x], {"axis": dim, "keepdims": bool(_arg(args, kwargs, 2, "keepdim", False))}
    if name == "layer_norm":
        shape = _arg(args, kwargs, 1, "normalized_shape")
        if shape is None or len(tuple(shape)) != 1:
            return None
        return "layer_norm", [x, _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")], \
            {"eps": float(_arg(args, kwargs, 4, "eps", 1e-5))}
    if name == "rms_norm":
        shape = _arg(args, kwargs, 1, "normalized_shape")
        if shape is None or len(tuple(shape)) != 1:
            return None
        return "rms_norm", [x, _arg(args, kwargs, 2, "weight")], {"eps": _arg(args, kwargs, 3, "eps")}
    if name == "cross_entropy":
        if _arg(args, kwargs, 2, "weight") is not None or float(kwargs.get("label_smoothing", 0.0)) != 0.0:
            return None
        return "cross_entropy", [x, _arg(args, kwargs, 1, "target")], {"reduction": kwargs.get("reduction", "mean")}
    if name == "mse_loss":  # F.mse_loss and nn.MSELoss (whose forward calls it)
        if any(kwargs.get(k) is not None for k in ("size_average", "reduce", "weight")):
            return None
        return "mse_loss", [x, _arg(args, kwargs, 1, "target")], {"reduction": kwargs.get("reduction", "mean")}
    if name in ("group_norm", "instance_norm", "batch_norm"):
        return _channel_norm_call(name, x, args, kwargs)
    if name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
        return _pool_call(name, x, args, kwargs)
    if name == "hinge_embedding_loss":  # (input, target, margin, size_average, reduce, reduction)
        if any(_arg(args, kwargs, i, k) is not None for i, k in ((3, "size_average"), (4, "reduce"))):
            return None
        return name, [x, _arg(args, kwargs, 1, "target")], {
            "margin": float(_arg(args, kwargs, 2, "margin", 1.0)), "reduction": _arg(args, kwargs, 5, "reduction", "mean")}
    if name == "nll_loss":  # F.nll_loss(input, target, weight, size_average, ignore_index, reduce, reduction)
        if _arg(args, kwargs, 2, "weight") is not None or any(_arg(args, kwargs, i, k) is not None
                                                             for i, k in ((3, "size_average"), (5, "reduce"))):
            return None
        return "nll_loss", [x, _arg(args, kwargs, 1, "target")], {
            "reduction": _arg(args, kwargs, 6, "reduction", "mean"),
            "ignore_index": int(_arg(args, kwargs, 4, "ignore_index", -100))}
    if name == "kl_div":  # F.kl_div(input, target, size_average, reduce, reduction, log_target), nn.KLDivLoss
        if any(kwargs.get(k) is not None for k in ("size_average", "reduce")) or any(a is not None for a in args[2:4]):
            return None
        return "kl_div", [x, _arg(args, kwargs, 1, "target")], {
            "reduction": _arg(args, kwargs, 4, "reduction", "mean"),
            "log_target": bool(_arg(args, kwargs, 5, "log_target", False))}
    if name in ("huber_loss", "smooth_l1_loss"):  # F.* and nn.HuberLoss / nn.SmoothL1Loss (their forwards)
        if any(kwargs.get(k) is not None for k in ("size_average", "reduce", "weight")):
            return None
        params = {"reduction": kwargs.get("reduction", "mean")}
        if name == "huber_loss":  # huber_loss(input, target, reduction, delta, weight)
            if len(args) > 4 and args[4] is not None:
                return None
            params["reduction"] = _arg(args, kwargs, 2, "reduction", "mean")
            params["delta"] = _arg(args, kwargs, 3, "delta", 1.0)
        else:  # smooth_l1_loss(input, target, size_average, reduce, reduction, beta)
            if any(a is not None for a in args[2:4]):
                return None
            params["reduction"] = _arg(args, kwargs, 4, "reduction", "mean")
            params["beta"] = _arg(args, kwargs, 5, "beta", 1.0)
        return name, [x, _arg(args, kwargs, 1, "target")], params
    # similarity (numstd.ops.similarity): F.normalize, F.cosine_similarity / nn.CosineSimilarity,
    # F.cosine_embedding_loss / nn.CosineEmbeddingLoss, F.triplet_margin_loss / nn.TripletMarginLoss
    # (their Python wrappers hand the call to the mode with torch's keyword names)
    if name == "normalize":  # normalize(input, p=2.0, dim=1, eps=1e-12, out=None)
        return name, [x], {"p": float(_arg(args, kwargs, 1, "p", 2.0)), "dim": int(_arg(args, kwargs, 2, "dim", 1)),
                           "eps": float(_arg(args, kwargs, 3, "eps", 1e-12))}
    if name == "cosine_similarity":  # cosine_similarity(x1, x2, dim=1, eps=1e-8)
        return name, [_arg(args, kwargs, 0, "x1"), _arg(args, kwargs, 1, "x2")], {
            "dim": int(_arg(args, kwargs, 2, "dim", 1)), "eps": float(_arg(args, kwargs, 3, "eps", 1e-8))}
    if name == "cosine_embedding_loss":  # (input1, input2, target, margin, size_average, reduce, reduction)
        if any(_arg(args, kwargs, i, k) is not None for i, k in ((4, "size_average"), (5, "reduce"))):
            return None
        return name, [_arg(args, kwargs, 0, "input1"), _arg(args, kwargs, 1, "input2"), _arg(args, kwargs, 2, "target")], {
            "margin": float(_arg(args, kwargs, 3, "margin", 0.0)), "reduction": _arg(args, kwargs, 6, "reduction", "mean")}
    if name == "triplet_margin_loss":  # (anchor, positive, negative, margin, p, eps, swap, size_average, reduce, reduction)
        if any(_arg(args, kwargs, i, k) is not None for i, k in ((7, "size_average"), (8, "reduce"))):
            return None
        return name, [_arg(args, kwargs, 0, "anchor"), _arg(args, kwargs, 1, "positive"), _arg(args, kwargs, 2, "negative")], {
            "margin": float(_arg(args, kwargs, 3, "margin", 1.0)), "p": float(_arg(args, kwargs, 4, "p", 2.0)),
            "eps": float(_arg(args, kwargs, 5, "eps", 1e-6)), "swap": bool(_arg(args, kwargs, 6, "swap", False)),
            "reduction": _arg(args, kwargs, 9, "reduction", "mean")}
    if name == "scaled_dot_product_attention":
        if _arg(args, kwargs, 3, "attn_mask") is not None or float(_arg(args, kwargs, 4, "dropout_p", 0.0)) != 0.0:
            return None
        return "attention", [x, _arg(args, kwargs, 1, "key"), _arg(args, kwargs, 2, "value")], \
            {"causal": bool(_arg(args, kwargs, 5, "is_causal", False)), "scale": kwargs.get("scale")}
    return _entry_call(name, args, kwargs)


_MISSING = object()


def _conv_call(name: str, x: Any, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``F.conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)`` as the catalog's
    conv; an unbatched input (one dim fewer, which the catalog's conv does not take) is no catalog op."""
    if x is None or getattr(x, "dim", None) is None or x.dim() != int(name[4]) + 2:
        return None

    def norm(v: Any) -> Any:
        return v if isinstance(v, (int, str)) else tuple(int(u) for u in v)

    params = {"stride": norm(_arg(args, kwargs, 3, "stride", 1)), "padding": norm(_arg(args, kwargs, 4, "padding", 0)),
              "dilation": norm(_arg(args, kwargs, 5, "dilation", 1)), "groups": int(_arg(args, kwargs, 6, "groups", 1))}
    return "conv", [x, _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias")], params


def _conv_transpose_call(name: str, x: Any, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``F.conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups, dilation)``
    as the catalog's conv_transpose (batched inputs only)."""
    if x is None or getattr(x, "dim", None) is None or x.dim() != int(name[-2]) + 2:
        return None

    def norm(v: Any) -> Any:
        return int(v) if isinstance(v, int) else tuple(int(u) for u in v)

    params = {"stride": norm(_arg(args, kwargs, 3, "stride", 1)), "padding": norm(_arg(args, kwargs, 4, "padding", 0)),
              "output_padding": norm(_arg(args, kwargs, 5, "output_padding", 0)),
              "groups": int(_arg(args, kwargs, 6, "groups", 1)), "dilation": norm(_arg(args, kwargs, 7, "dilation", 1))}
    return "conv_transpose", [x, _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias")], params


def _channel_norm_call(name: str, x: Any, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``F.group_norm(x, num_groups, weight, bias, eps)``, ``F.instance_norm(x, running_mean,
    running_var, weight, bias, use_input_stats, momentum, eps)`` and ``F.batch_norm(x, running_mean,
    running_var, weight, bias, training, momentum, eps)`` (what nn.GroupNorm, nn.InstanceNorm*d and
    nn.BatchNorm*d call) as catalog ops; instance_norm without input statistics normalises with the
    running ones, which is batch_norm's eval mode."""
    if name == "group_norm":
        return "group_norm", [x, _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")], \
            {"num_groups": int(_arg(args, kwargs, 1, "num_groups")), "eps": float(_arg(args, kwargs, 4, "eps", 1e-5))}
    rm, rv = _arg(args, kwargs, 1, "running_mean"), _arg(args, kwargs, 2, "running_var")
    w, b = _arg(args, kwargs, 3, "weight"), _arg(args, kwargs, 4, "bias")
    eps = float(_arg(args, kwargs, 7, "eps", 1e-5))
    if name == "instance_norm":
        if bool(_arg(args, kwargs, 5, "use_input_stats", True)):
            return "instance_norm", [x, w, b], {"eps": eps}
        return "batch_norm", [x, rm, rv, w, b], {"training": False, "eps": eps}
    training = bool(_arg(args, kwargs, 5, "training", False))
    return "batch_norm", [x, rm, rv, w, b], {"training": training, "eps": eps}


def _pool_call(name: str, x: Any, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``F.max_pool{d}d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices)`` and
    ``F.avg_pool{d}d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)``
    (what nn.MaxPool*d / nn.AvgPool*d call); returned indices and a divisor override are no catalog op."""
    def norm(v: Any) -> Any:
        return tuple(int(i) for i in v) if isinstance(v, (list, tuple)) else (None if v is None else int(v))

    stride = norm(_arg(args, kwargs, 2, "stride"))
    params: dict = {"kernel_size": norm(_arg(args, kwargs, 1, "kernel_size")), "stride": stride or None,
                    "padding": norm(_arg(args, kwargs, 3, "padding", 0))}
    if name.startswith("max"):
        if bool(_arg(args, kwargs, 6, "return_indices", False)):
            return None
        params.update(dilation=norm(_arg(args, kwargs, 4, "dilation", 1)),
                      ceil_mode=bool(_arg(args, kwargs, 5, "ceil_mode", False)))
    else:
        if name != "avg_pool1d" and _arg(args, kwargs, 6, "divisor_override") is not None:
            return None
        params.update(ceil_mode=bool(_arg(args, kwargs, 4, "ceil_mode", False)),
                      count_include_pad=bool(_arg(args, kwargs, 5, "count_include_pad", True)))
    return name, [x], params


def _extremum_call(name: str, x: Any, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """``torch.amax``/``amin(x, dim, keepdim)`` as the catalog's amax/amin, and ``torch.max``/``min``
    in their reducing forms: ``max(x)`` (all elements) and ``max(x, dim, keepdim)``, whose values
    (the first of the returned (values, indices) pair, which a forward returns as ``[0]`` or
    ``.values``) are amax's.  ``max(x, other)``, the elementwise maximum of two tensors, is no
    catalog op."""
    op = {"max": "amax", "min": "amin"}.get(name, name)
    dim = _arg(args, kwargs, 1, "dim", _MISSING)
    keepdim = bool(_arg(args, kwargs, 2, "keepdim", False))
    if name in ("max", "min"):
        if "other" in kwargs or (dim is not _MISSING and not isinstance(dim, int)):
            return None
    if dim is _MISSING or dim is None or (isinstance(dim, (list, tuple)) and not dim):
        axis = None  # (torch.amax's dim=() reduces every axis)
    else:
        axis = tuple(int(d) for d in dim) if isinstance(dim, (list, tuple)) else int(dim)
    return op, [x], {"axis": axis, "keepdims": keepdim}


def _pair_op(call: tuple | None, r: "CaseRun") -> str | None:
    """``"max"``/``"min"`` when the reference's forward was ``torch.max``/``min(x, dim)`` (detected as
    amax/amin with an int axis) and returned both outputs, ``(values, indices)``; else None."""
    fname = r.op_call[3] if r.op_call is not None else ""
    if call is None or fname not in ("max", "min") or not isinstance(call[2].get("axis"), int) or len(r.truth) != 2:
        return None
    return fname


@functools.lru_cache(maxsize=1)
def _torch_names() -> Mapping[str, tuple]:
    """torch function name -> the elementwise entries whose torch call it is (``numstd.ops``), in catalog
    order (``F.gelu`` is both ``gelu`` and ``new_gelu``, which fixes ``approximate="tanh"``)."""
    from ..ops import OPS

    out: dict[str, list] = {}
    for e in OPS.values():
        if e.kind == "elementwise" and "torch" in e.calls:
            out.setdefault(e.calls["torch"].fn.rsplit(".", 1)[1], []).append(e)
    return {k: tuple(v) for k, v in out.items()}


def _entry_call(name: str, args: Sequence, kwargs: Mapping) -> tuple[str, list, dict] | None:
    """A recorded call of an elementwise op's torch function, read back through its entry's
    :class:`~numstd.ops.entry.Call`: the inputs, then the mapped parameters (positional or by
    torch's names); parameters the call left out get numstd's defaults, which are torch's.  Of the
    entries sharing the function, the first (catalog order) whose fixed arguments the call does not
    contradict."""
    for info in _torch_names().get(name, ()):
        n = len(info.inputs)
        inputs = [_arg(args, kwargs, i, "input" if i == 0 else info.inputs[i]) for i in range(n)]
        params, fits = {}, True
        for i, (torch_name, ours) in enumerate(info.calls["torch"].kwargs.items()):
            value = _arg(args, kwargs, n + i, torch_name, _MISSING)
            if isinstance(ours, tuple):  # a fixed argument: the call must give exactly it
                fits = fits and value is not _MISSING and value == ours[1]
            elif value is not _MISSING:
                params[ours] = value
        if fits:
            return info.name, inputs, params
    return None


#: the recorder keeps call results (for numstd.grade.compose's data flow) up to this many calls
_KEEP_RESULTS = 16


def _recorder() -> Any:
    """A TorchFunctionMode that records the calls a forward makes (not the calls inside them)."""
    return _recorder_class()()


@functools.lru_cache(maxsize=1)
def _recorder_class() -> type:
    from torch.overrides import TorchFunctionMode

    class _Record(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, tuple, dict]] = []
            self.results: list[Any] = []  # (each recorded call's result: compositions follow the data flow)

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name not in _IGNORED:
                self.calls.append((name, args, dict(kwargs)))
                out = func(*args, **kwargs)
                if len(self.calls) <= _KEEP_RESULTS:
                    self.results.append(out)
                else:  # (a longer forward is no composition: its intermediates are not held)
                    self.results.clear()
                return out
            return func(*args, **kwargs)

    return _Record


def _bookkeeping(name: str, args: tuple) -> bool:
    """nn.BatchNorm's ``num_batches_tracked.add_(1)`` in training mode: an in-place update of a 0-d
    integer buffer, not part of what the forward computes."""
    t = args[0] if args else None
    return name == "add_" and getattr(t, "dim", None) is not None and t.dim() == 0 and not t.is_floating_point()


def _detected_op(calls: list) -> tuple[str, list, dict, str] | None:
    calls = [c for c in calls if not _bookkeeping(c[0], c[1])]
    if len(calls) != 1:
        return None
    name, args, kwargs = calls[0]
    found = _as_op(name, args, kwargs)
    if found is None:
        return None
    op, inputs, params = found
    return op, [None if x is None else to_numpy(x, name="input").copy() for x in inputs], params, name


# ---------------------------------------------------------------------------------- the runs
@dataclass
class CaseRun:
    """One (trial, distribution): the three runs' outputs and what the candidate did.

    Attributes
    ----------
    truth, baseline : list of numpy arrays
    candidate : list of numpy arrays, or None when it raised or returned no arrays (``error`` says which)
    mutated : list of int
        Positions of inputs the candidate wrote into.
    op_call : tuple or None
        ``(op, inputs, params, torch function name)`` of the catalog op the reference's forward
        consisted of; for a composition (:mod:`numstd.grade.compose`) the name is
        ``"composition <pattern>: <expression>"``, kept only where every case confirms it.
    op_view : View or None
        How the module's output maps onto the composition's op (a reshape or moveaxis), or None.
    inputs : list
        The working-format inputs as numpy (kept only when asked: a declared op needs them).
    order : str
        ``"candidate-first"`` or ``"reference-first"``: which ran first on this case.
    reproducible : bool or None
        Whether a second candidate run on the same inputs gave the same bits (None: not tested).
    cached : str
        Why the output looks cached or input-independent (empty when it does not).
    input_elements : int
        The largest floating-point input's element count (``L`` of
        :func:`~numstd.grade.module_standard.reduction_length` is it over the output's).
    """

    trial: int
    distribution: str
    seed: int
    truth: list
    baseline: list
    candidate: list | None
    error: str = ""
    mutated: list = field(default_factory=list)
    op_call: tuple | None = None
    inputs: list = field(default_factory=list)
    order: str = "reference-first"
    reproducible: bool | None = None
    cached: str = ""
    input_elements: int = 0
    op_view: Any = None


def _seed_of(seed: int, trial: int, dist: str) -> int:
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, trial, zlib.crc32(dist.encode())]).generate_state(1)[0])


def _redraw(adapter: _Adapter, x: Any, rng: np.random.Generator, dist: str, fmt: Any) -> Any:
    from ..core.formats import round_to
    from ..catalog.suites import draw

    shape = tuple(x.shape)
    v = np.clip(draw(rng, shape, dist, fmt), -fmt.max_finite, fmt.max_finite)
    return adapter.from_float64(np.asarray(round_to(v, fmt), dtype=np.float64), fmt)


def _working_format(dtype: Any, sample: Sequence[Any], adapter: _Adapter) -> Any:
    from ..core.formats import get_format

    if dtype is not None:
        return get_format(dtype)
    for x in sample:
        if adapter.is_float(x):
            return get_format(x.dtype)
    return get_format("float32")


def _instantiate(obj: Any, init_inputs: Sequence[Any]) -> Any:
    return obj(*init_inputs) if isinstance(obj, type) else obj


@dataclass
class _Setup:
    adapter: _Adapter
    reference: Any
    candidate: Any
    samples: list
    init: list = field(default_factory=list)


def _setup(reference: Any, candidate: Any, make_inputs: Callable, init_inputs: Any, trials: int, seed: int,
           device: str) -> _Setup:
    """Construct module classes (seeded alike), pick the framework, draw ``make_inputs`` per trial (seeded)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ParameterError(f"trials must be an int ≥ 1, got {trials!r}")
    if not callable(make_inputs):
        raise ParameterError("make_inputs must be a function returning the list of inputs (e.g. get_inputs)")
    init = list(init_inputs() if callable(init_inputs) else init_inputs)
    adapter: _Adapter | None = None
    if _is_torch_class(reference) or _is_torch_class(candidate) or _is_torch_object(reference) \
            or _is_torch_object(candidate):
        adapter = _Torch(device)
        with adapter.seeded(_seed_of(seed, 0, "init")):
            reference = _instantiate(reference, init)
        with adapter.seeded(_seed_of(seed, 0, "init")):
            candidate = _instantiate(candidate, init)
    samples: list[list] = []
    for trial in range(trials):
        s = _seed_of(seed, trial, ORIGINAL)
        if adapter is None:  # plain callables: the inputs tell the framework
            adapter = _adapter_for(reference, candidate, list(make_inputs()), device)
        with adapter.seeded(s):
            samples.append(list(make_inputs()))
    assert adapter is not None
    return _Setup(adapter, reference, candidate, samples, init)


def _is_torch_object(x: Any) -> bool:
    return any(c.__module__.startswith("torch.nn") for c in type(x).__mro__)


def _run_all(setup: _Setup, fmt: Any, distributions: Sequence[str], seed: int, record: bool,
             keep_inputs: bool, protocol: "Protocol | None" = None, stats: "_Stats | None" = None,
             tick: Callable[[], None] | None = None) -> list[CaseRun]:
    from ..core.formats import get_format

    protocol = protocol or Protocol.off()
    stats = stats if stats is not None else _Stats()
    adapter = setup.adapter
    truth_fn, base_fn, cand_fn = adapter.prepare(setup.reference, setup.candidate, fmt)
    if hasattr(cand_fn, "bind"):  # an isolated candidate: built in its own process
        cand_fn.bind(base_fn, adapter, fmt, setup.init, _seed_of(seed, 0, "init"))
    f64 = get_format("float64")
    runs: list[CaseRun] = []
    index = 0
    for trial, sample in enumerate(setup.samples):
        work0 = [adapter.cast(x, fmt) for x in sample]
        for dist in (ORIGINAL, *distributions):
            s = _seed_of(seed, trial, dist)
            if dist == ORIGINAL:
                work = work0
            else:
                rng = np.random.default_rng(s)
                work = [_redraw(adapter, x, rng, dist, fmt) if adapter.is_float(x) else adapter.copy(x) for x in work0]
            first = index == 0
            run = _run_one(adapter, truth_fn, base_fn, cand_fn, work, fmt, f64, trial, dist, s, record,
                           candidate_first=protocol.swap_order and index % 2 == 1,
                           reference_twice=protocol.reference_determinism and first,
                           candidate_twice=protocol.reproducibility and first, stats=stats)
            if keep_inputs:
                run.inputs = [to_numpy(x, name="input").copy() if adapter.is_array(x) else x for x in work]
            runs.append(run)
            index += 1
            if tick is not None:
                tick()
    if protocol.input_dependence:
        _mark_cached(runs)
    return runs


def _digest(arrays: Sequence[np.ndarray] | None) -> bytes | None:
    if arrays is None:
        return None
    import hashlib

    h = hashlib.sha256()
    for a in arrays:
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.digest()


def _rounded_truth(r: CaseRun) -> list | None:
    """The float64 truth rounded to the candidate's output formats (None where they do not pair up)."""
    from ..core.formats import FORMATS, round_to

    if r.truth is None or r.candidate is None or len(r.truth) != len(r.candidate):
        return None
    out = []
    for t, c in zip(r.truth, r.candidate):
        name = getattr(getattr(c, "dtype", None), "name", None)
        if name not in FORMATS or np.shape(t) != np.shape(c):
            return None
        out.append(np.asarray(round_to(np.asarray(t, dtype=np.float64), name)))
    return out


def _differ_visibly(a: list, b: list) -> bool:
    """Two rounded truths differ so that a correct candidate's outputs must differ too: in some element
    of an output of ≥ 16 elements, or by more than 4 ulps (a scalar loss rounded to 16 bits can take the
    same value on two draws, and a correct kernel may land a few ulps off either way)."""
    from ..core.ulp import ulp_distance

    for x, y in zip(a, b):
        if x.shape != y.shape:
            return True
        d = np.abs(np.asarray(ulp_distance(x, y, x.dtype.name), dtype=np.float64))
        if (x.size >= 16 and np.any(d > 0)) or np.any(d > 4):
            return True
    return False


def _mark_cached(runs: list[CaseRun]) -> None:
    """A candidate output bit-identical to an earlier case's where the correctly rounded truths differ
    visibly (:func:`_differ_visibly`) and the reference's own outputs differ too: a cached result, an
    output aliasing an earlier call, or one that ignores its inputs.  Where the reference returned the
    same bits on both cases, legitimate arithmetic does so (torch's bf16 nll_loss, whose stored 16-bit
    partial sums err by hundreds of ulps of a mean that cancels, returned one value for a normal and a
    heavy-tailed draw whose truths differ by more than 4 ulps), so the candidate's repeat proves nothing.
    The rounded truths are computed only for runs whose digest repeats."""
    seen: dict[bytes, int] = {}
    rounded: dict[int, list | None] = {}

    def truth_of(k: int) -> list | None:
        if k not in rounded:
            rounded[k] = _rounded_truth(runs[k])
        return rounded[k]

    for k, r in enumerate(runs):
        d = _digest(r.candidate)
        if d is None:
            continue
        if d in seen:
            j = seen[d]
            truth, earlier = truth_of(k), truth_of(j)
            ref_d = _digest(r.baseline)
            same_ref = ref_d is not None and ref_d == _digest(runs[j].baseline)
            if truth is not None and earlier is not None and not same_ref and _differ_visibly(truth, earlier):
                r.cached = (f"the candidate returned the same bits as on {runs[j].distribution} inputs of trial "
                            f"{runs[j].trial} while the correctly rounded outputs differ: a cached result, an output "
                            "aliasing an earlier call, or an output that ignores its inputs")
        seen.setdefault(d, k)


@dataclass
class _Stats:
    """Forward counts and seconds of one grade (the cost benchmark reads them)."""

    forwards: dict = field(default_factory=lambda: {"truth": 0, "reference": 0, "candidate": 0})
    seconds: dict = field(default_factory=lambda: {"truth": 0.0, "reference": 0.0, "candidate": 0.0})

    def timed(self, kind: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.forwards[kind] += 1
            self.seconds[kind] += time.perf_counter() - t


@dataclass(frozen=True)
class Protocol:
    """The steps of :func:`grade`'s anti-gaming protocol; each can be switched off.

    Attributes
    ----------
    secret : bool
        Draw every input from the public ``seed`` combined with a ``secret_seed`` (recorded in the
        report; drawn with :mod:`secrets` when not given).
    swap_order : bool
        Run the candidate before the reference on every other case (a candidate reading the
        reference's freed output memory, KernelBench's result-reuse exploit, fails there).
    input_dependence : bool
        Fail a case whose output is bit-identical to an earlier case's while the reference's differ
        (cached results, aliasing, inputs ignored), and a constant output where the reference's varies.
    reproducibility : bool
        Run the candidate twice on the first case's inputs and report whether the bits agree.
    require_reproducible : bool
        Fail the first case when they do not (a standard that demands bit-reproducibility).
    reference_determinism : bool
        Run the reference twice on the first case's inputs; raise when they differ (dropout, random ops).
    second_shapes : bool
        Grade a second shape set too where one is given (:func:`grade`'s ``shapes2``).
    diagnose : bool
        Attach :func:`numstd.diagnosis.diagnose`'s causes to failing verdicts.
    """

    secret: bool = True
    swap_order: bool = True
    input_dependence: bool = True
    reproducibility: bool = True
    require_reproducible: bool = False
    reference_determinism: bool = True
    second_shapes: bool = True
    diagnose: bool = True

    @classmethod
    def off(cls) -> "Protocol":
        """Every step off (what :func:`run_cases` does for calibration)."""
        return cls(False, False, False, False, False, False, False, False)

    @classmethod
    def of(cls, value: Any) -> "Protocol":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            bad = sorted(set(value) - set(cls.__dataclass_fields__))
            if bad:
                raise ParameterError(f"protocol: unknown step(s) {bad}; steps are {', '.join(cls.__dataclass_fields__)}")
            return replace(cls(), **{k: bool(v) for k, v in value.items()})
        raise ParameterError(f"protocol={value!r}: pass a numstd.grade.Protocol or a dict of steps, e.g. "
                             "{'swap_order': False}")

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def run_cases(reference: Any, candidate: Any, make_inputs: Callable[[], Sequence[Any]], *,
              init_inputs: Any = (), dtype: Any = None, trials: int = 5, seed: int = 0,
              distributions: Sequence[str] = (), device: str = "cpu", detect_op: bool = False,
              keep_inputs: bool = False) -> tuple[Any, list[CaseRun], str]:
    """Run truth, baseline and candidate on every case without judging (grade and calibration use it).

    Parameters are those of :func:`grade`; ``distributions`` is a sequence of names (the original
    draw always comes first).

    Returns
    -------
    fmt : Format
        The working format.
    runs : list of CaseRun
    framework : str
        ``"torch"``, ``"jax"`` or ``"numpy"``.
    """
    setup = _setup(reference, candidate, make_inputs, init_inputs, trials, seed, device)
    fmt = _working_format(dtype, setup.samples[0], setup.adapter)
    runs = _run_all(setup, fmt, _distributions(list(distributions), None), seed,
                    detect_op and setup.adapter.name == "torch", keep_inputs)
    _confirm_compositions(runs)  # (a composition's op_call stays only where every case confirms it)
    return fmt, runs, setup.adapter.name


def _run_one(adapter: _Adapter, truth_fn: Callable, base_fn: Callable, cand_fn: Callable, work: list, fmt: Any,
             f64: Any, trial: int, dist: str, seed: int, record: bool, *, candidate_first: bool = False,
             reference_twice: bool = False, candidate_twice: bool = False, stats: "_Stats | None" = None) -> CaseRun:
    stats = stats if stats is not None else _Stats()
    truth_in = [adapter.cast(x, f64) if adapter.is_float(x) else adapter.copy(x) for x in work]
    base_in = [adapter.copy(x) for x in work]
    cand_in = [adapter.copy(x) for x in work]
    where = f"trial {trial}, {dist} inputs"

    def candidate_run(inputs: list) -> tuple[list | None, str]:
        try:
            out = stats.timed("candidate", adapter.call, cand_fn, inputs)
        except Exception as exc:  # noqa: BLE001 - a candidate that crashes fails, it does not crash the grader
            return None, f"the candidate raised {type(exc).__name__}: {exc}"
        try:
            return [np.array(x, copy=True) for x in _leaves(out)], ""
        except NumstdError as exc:
            return None, f"the candidate returned {type(out).__name__}, not arrays ({exc})"

    if candidate_first:
        candidate, error = candidate_run(cand_in)
    try:
        truth = [np.asarray(x, dtype=np.float64) if x.dtype.kind in "fV" else x
                 for x in _leaves(stats.timed("truth", adapter.call, truth_fn, truth_in, float64=True))]
    except Exception as exc:  # noqa: BLE001 - the reference must run: that is a usage error
        raise NumstdError(f"the reference raised {type(exc).__name__}: {exc} in float64 ({where}); "
                          "grade needs a reference that runs in float64 on the suite's inputs") from exc
    op_call, op_view = None, None
    try:
        if record:
            rec = _recorder()
            base_out = stats.timed("reference", adapter.call, base_fn, base_in, recorder=rec)
            op_call = _detected_op(rec.calls)
            # compositions of torch calls that compute one catalog op (numstd.grade.compose, issue 18
            # item 11): a proposal that grade confirms on the case's float64 truth before using it
            composed = None if op_call is not None else _composition(rec, base_in)
            if composed is not None:
                op_call, op_view = composed[:4], composed[4]
        else:
            base_out = stats.timed("reference", adapter.call, base_fn, base_in)
        baseline = [np.array(x, copy=True) for x in _leaves(base_out)]
        if reference_twice:
            again = _leaves(stats.timed("reference", adapter.call, base_fn, [adapter.copy(x) for x in work]))
            _require_deterministic(baseline, again, where)
    except NumstdError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise NumstdError(f"the reference raised {type(exc).__name__}: {exc} in {fmt.name} ({where})") from exc
    if not candidate_first:
        candidate, error = candidate_run(cand_in)
    mutated = [i for i, (a, b) in enumerate(zip(cand_in, work)) if not adapter.same(a, b)]
    mutated = sorted(set(mutated) | set(getattr(cand_fn, "last_mutated", ()) or ()))
    reproducible = None
    if candidate_twice and candidate is not None:
        again, _ = candidate_run([adapter.copy(x) for x in work])
        reproducible = again is not None and _digest(again) == _digest(candidate)
    n_in = max((int(np.prod(tuple(x.shape))) for x in work if adapter.is_float(x)), default=0)
    return CaseRun(trial, dist, seed, truth, baseline, candidate, error, mutated, op_call,
                   order="candidate-first" if candidate_first else "reference-first", reproducible=reproducible,
                   input_elements=n_in, op_view=op_view)


def _composition(rec: Any, module_inputs: list) -> tuple | None:
    from .compose import match

    calls = [(c, r) for c, r in zip(rec.calls, rec.results) if not _bookkeeping(c[0], c[1])]
    return match([c for c, _ in calls], [r for _, r in calls], module_inputs)


def _require_deterministic(first: list, second: list, where: str) -> None:
    """Raise when two reference runs on the same inputs differ beyond a few ULPs of the output's scale."""
    for a, b in zip(first, second):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            raise NumstdError(f"the reference returned different shapes on the same inputs ({where})")
        fa, fb = np.isfinite(a), np.isfinite(b)
        if not np.array_equal(fa, fb) or not np.array_equal(a[~fa], b[~fb], equal_nan=True):
            diff = True
        else:
            scale = float(np.max(np.abs(a[fa]))) if fa.any() else 0.0
            diff = bool(fa.any()) and float(np.max(np.abs(a[fa] - b[fb]))) > 2.0 ** -7 * max(scale, 1e-30)
        if diff:
            raise NumstdError(
                f"the reference is nondeterministic: two runs on the same inputs differ ({where}), so no verdict would be "
                "reproducible. Usual causes: dropout or batch-norm in training mode, random ops (torch.rand*, "
                "bernoulli) in forward. Fix: call .eval() on the model, remove the random ops, or seed them inside "
                "forward (torch.manual_seed(<fixed>)); or pass protocol={'reference_determinism': False}")


# ---------------------------------------------------------------------------------- grade
def _distributions(distributions: Any, std: Any) -> tuple[str, ...]:
    from ..catalog.suites import DISTRIBUTIONS

    if distributions == "standard":
        names = [d for d in std.suite.get("distributions", ["normal"]) if d != ORIGINAL]
    elif distributions in (None, "original", ()):
        names = []
    elif isinstance(distributions, str):
        names = [distributions]
    else:
        names = [d for d in distributions if d != ORIGINAL]
    bad = [d for d in names if d not in DISTRIBUTIONS]
    if bad:
        raise ParameterError(f"unknown distribution(s) {bad}; use 'standard' or names from {', '.join(DISTRIBUTIONS)}")
    return tuple(names)


def _declared_op(op: Any) -> tuple[str, dict] | None:
    if op is None or op is False or op == "auto":
        return None
    if isinstance(op, str):
        return op, {}
    if isinstance(op, (list, tuple)) and len(op) == 2 and isinstance(op[0], str) and isinstance(op[1], Mapping):
        return op[0], dict(op[1])
    raise ParameterError(f"op={op!r}: declare the catalog op as ('softmax', {{'axis': -1}}) or a name")


def combined_seed(seed: int, secret_seed: int | None) -> int:
    """The seed every input is drawn from: ``seed`` alone, or mixed with ``secret_seed`` (SeedSequence)."""
    if secret_seed is None:
        return int(seed)
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(secret_seed) & 0xFFFFFFFFFFFFFFFF,
                                       0x5EC7]).generate_state(1)[0])


def grade(reference: Any, candidate: Any, make_inputs: Callable[[], Sequence[Any]], *, init_inputs: Any = (),
          dtype: Any = None, trials: int = 5, seed: int = 0, distributions: Any = "standard",
          device: str = "cpu", op: Any = "auto", standard: Any = None, secret_seed: int | None = None,
          protocol: Any = None, shapes2: tuple | None = None,
          progress: Callable[[int, int], None] | None = None) -> GradeReport:
    """Grade a candidate module against its reference; see the module docstring and ``docs/grading.md``.

    Parameters
    ----------
    reference, candidate : torch.nn.Module (instance or class), or a callable (torch, jax or numpy)
        Classes are constructed from ``init_inputs`` with torch seeded identically; module weights are
        copied from the reference into the candidate when the state_dict names and shapes match.
        Neither object is modified (deep copies are moved to the working dtype and to float64).
        In-process grading *trusts the candidate* (it shares the grader's memory and could patch
        it); :func:`numstd.grade_cli.grade_files` with ``isolate=True`` runs it in a subprocess.
    make_inputs : callable
        Returns the list of inputs (KernelBench ``get_inputs``); called once per trial, seeded.
    init_inputs : sequence or callable
        Constructor arguments for module classes (KernelBench ``get_init_inputs``).
    dtype : format-like, optional
        Working format (``"bf16"``, ``torch.float16``, …); default: the first float input's dtype.
        Float inputs are rounded (RNE) into it; models are cast with ``.to(dtype)``.
    trials : int
        Independent draws of ``make_inputs`` (each with every distribution's redraw).
    seed : int
        The public seed of every draw.
    distributions : "standard", sequence of names, or None
        Redraws besides the original draw: the module standard's suite (default), a list of
        :data:`numstd.suites.DISTRIBUTIONS` names, or None for the original draw only.
    device : str
        ``"cpu"`` or ``"cuda"`` (torch).
    op : "auto", None, str or (name, params)
        The catalog op the reference computes, judged by that op's standard as well: ``"auto"``
        detects a forward that is a single call of a catalog op (torch only); None disables it.
    standard : str or Standard, optional
        Pin the module standard (``"NS-MODULE-BF16@1"``); default: the one for the working format.
    secret_seed : int, optional
        Mixed with ``seed`` into every draw (:func:`combined_seed`) so a candidate cannot predict its
        inputs; drawn with :mod:`secrets` when None and the protocol's ``secret`` step is on.  Recorded
        in the report: the same ``seed`` and ``secret_seed`` reproduce every verdict exactly.
    protocol : Protocol or mapping, optional
        The anti-gaming steps (:class:`Protocol`; default: all on but ``require_reproducible``).
    shapes2 : (make_inputs, init_inputs), optional
        A second shape set (module classes are rebuilt from its ``init_inputs``); its cases are
        labelled ``<distribution>@shapes2``.  :func:`numstd.grade_cli.grade_files` derives one from
        the problem's size constants.
    progress : callable, optional
        ``progress(done, total)`` after each case has run (truth, baseline and candidate; the
        judging that follows takes a fraction of that), and ``progress(total, total)`` at the end.
        Only reports: the verdicts are the same with or without it.

    Returns
    -------
    GradeReport

    Raises
    ------
    NumstdError
        When the reference raises, or gives different outputs on the same inputs (dropout in
        training mode, random ops: call ``.eval()`` or fix a seed).
    """
    import secrets

    start = time.perf_counter()
    proto = Protocol.of(protocol)
    if secret_seed is None and proto.secret:
        secret_seed = secrets.randbits(32)
    mixed = combined_seed(seed, secret_seed)
    stats = _Stats()
    declared = _declared_op(op)
    if declared is None and op == "auto":
        declared = _declared_op(getattr(_module_of(reference), "NUMSTD_OP", None))
    setup = _setup(reference, candidate, make_inputs, init_inputs, trials, mixed, device)
    fmt = _working_format(dtype, setup.samples[0], setup.adapter)
    std = module_standard(fmt, standard)
    dists = _distributions(distributions, std)
    detect = declared is None and op == "auto" and setup.adapter.name == "torch"
    n_cases = trials * (1 + len(dists)) * (2 if shapes2 is not None and proto.second_shapes else 1)
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(min(done[0], n_cases), n_cases)

    runs = _run_all(setup, std.output, dists, mixed, detect, True, proto, stats, tick)
    shapes_note = ""
    if shapes2 is not None and proto.second_shapes:
        if isinstance(reference, type) or isinstance(candidate, type) or setup.adapter.name != "torch":
            try:
                s2 = _setup(reference, candidate, shapes2[0], shapes2[1], trials, combined_seed(mixed, 2), device)
                more = _run_all(s2, std.output, dists, combined_seed(mixed, 2), detect, True,
                                replace(proto, reference_determinism=False, reproducibility=False), stats, tick)
                for r in more:
                    r.distribution = f"{r.distribution}@shapes2"
                runs += more
                shapes_note = "graded"
            except NumstdError as exc:
                shapes_note = f"skipped: {exc}"
        else:
            shapes_note = "skipped: module instances cannot be rebuilt at other shapes (pass classes)"
    from ..catalog.registry import find_standard
    from ..core.formats import format_of
    from ..judge.check import check, selector_params

    cases: list[CaseVerdict] = []
    op_used, op_note, op_failed = None, "", False
    if declared is None:  # a composition judges by its op standard only where every case confirms it
        op_note = _confirm_compositions(runs)
    op_found: set = set()  # (op, input format, selectors) whose op standard find_standard has found
    for r in runs:
        params = {"trial": r.trial, "distribution": r.distribution, "seed": r.seed, "order": r.order}
        v = judge_case(std, r, params, require_reproducible=proto.require_reproducible)
        if proto.diagnose and not v.passed and not v.diagnosis:
            v = replace(v, diagnosis=_diagnose_case(r, std.output, setup.adapter, declared))
        cases.append(CaseVerdict(r.trial, r.distribution, r.seed, "module", v))
        call = _op_call_for(declared, r)
        if call is None:
            if not op_note:
                op_note = ("disabled" if op is None else
                           "none: the reference is not a single catalog op (declare NUMSTD_OP to add one)"
                           if setup.adapter.name == "torch" else
                           "none: op detection needs torch; pass op=(name, params) to add the op's standard")
            continue
        pair = _pair_op(call, r)
        if op_failed or r.candidate is None or r.mutated or r.cached or len(r.candidate) != (2 if pair else 1):
            continue
        name, inputs, oparams, how = call
        if pair:  # torch.max/min(x, dim) returned as (values, indices): values as amax, indices as argmax
            name = pair
        try:
            # the op standard for the module's own output format (bf16/fp16 inputs may have only an
            # autocast standard with an fp32 output: not the one for this module)
            floats = [format_of(a).name for a in inputs if a is not None and np.asarray(a).dtype.kind in "fV"]
            selectors = {k: v for k, v in oparams.items() if k in selector_params(name)}
            key = (name, tuple(floats[:1]), repr(sorted(selectors.items())))
            if key not in op_found:  # (the same lookup for every case of one op: done once)
                # (a pair: the values' standard, e.g. amax's for op max)
                find_standard(call[0] if pair else name, inputs=floats[:1], output=std.output.name,
                              **selectors)  # StandardNotFound
                op_found.add(key)
            y = r.candidate[0] if r.op_view is None else r.op_view.apply(r.candidate[0])
            ov = check(tuple(r.candidate) if pair else y, op=name, inputs=inputs, **oparams)
        except NumstdError as exc:
            op_failed, op_note = True, f"{name} not judged by an op standard: {exc}"
            continue
        op_used = (name, dict(oparams))
        op_note = f"{name} ({how}); judged by {ov.standard_id} too"
        ov = replace(ov, params=dict(ov.params, **params))
        if proto.diagnose and not ov.passed and not pair:
            t = r.truth[0] if r.op_view is None else r.op_view.apply(r.truth[0])
            ov = replace(ov, diagnosis=_diagnose_op(y, t, ov, name, inputs, oparams))
        cases.append(CaseVerdict(r.trial, r.distribution, r.seed, "op", ov))
    if progress is not None:  # (the second shape set may have been skipped: the bar ends here either way)
        progress(n_cases, n_cases)
    passed = all(c.verdict.passed for c in cases)
    reproducible = next((r.reproducible for r in runs if r.reproducible is not None), None)
    seconds = time.perf_counter() - start
    from .frameworks import precision_environment

    return GradeReport(passed=passed, standard_id=std.key, dtype=std.output.name, device=device,
                       framework=setup.adapter.name, op=op_used, op_note=op_note, cases=tuple(cases), trials=trials,
                       distributions=(ORIGINAL, *dists), seed=seed, seconds=seconds, secret_seed=secret_seed,
                       protocol=dict(proto.to_dict(), isolation=getattr(candidate, "isolation", "in-process"),
                                     second_shapes_note=shapes_note),
                       environment=precision_environment(setup.adapter.name), reproducible=reproducible,
                       forwards=dict(stats.forwards), forward_seconds=round(sum(stats.seconds.values()), 6))


def _diagnose_case(r: CaseRun, fmt: Any, adapter: _Adapter, declared: tuple | None) -> tuple:
    """Causes of a failing module case: from the protocol's reason, or :func:`numstd.diagnosis.diagnose`
    on the output (as the detected/declared catalog op when there is one, else as a module)."""
    from ..judge.diagnosis import Diagnosis, diagnose

    if r.cached:
        return (Diagnosis("cached-output", 0.95, r.cached),)
    if r.candidate is None or r.mutated or len(r.candidate) != len(r.truth):
        return ()
    if len(r.candidate) == 1 and r.candidate[0].shape == r.truth[0].shape:
        y, t = r.candidate[0], r.truth[0]
    else:
        try:
            y = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in r.candidate])
            t = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in r.truth])
        except ValueError:
            return ()
    call = _op_call_for(declared, r)
    if call is not None and y.shape == t.shape and r.op_view is None:
        name, inputs, oparams, _ = call
        return _diagnose_op(y, t, None, name, inputs, oparams, fmt)
    return diagnose(y, t, fmt=fmt, inputs=None, rerun=None)


def _diagnose_op(y: Any, t: Any, verdict: Any, name: str, inputs: list, params: Mapping, fmt: Any = None) -> tuple:
    from ..judge.diagnosis import diagnose
    from ..ops import validate
    from ..reference import reference

    try:
        _, arrays, full = validate(name, list(inputs), dict(params))
    except NumstdError:
        return diagnose(y, t, fmt=fmt)

    def rerun(ins: Sequence[Any], **over: Any) -> np.ndarray:
        return reference(name, ins, **dict(full, **over)).values

    f = fmt if fmt is not None else (verdict.formats.get("output") if verdict is not None else None)
    return diagnose(y, t, fmt=f, op=name, inputs=arrays, params=full, rerun=rerun)


def _module_of(obj: Any) -> Any:
    """The Python module that defines ``obj`` (a class, an instance or a function), if loaded."""
    mod = getattr(obj, "__module__", None)
    return sys.modules.get(mod) if isinstance(mod, str) else None


def _op_call_for(declared: tuple | None, r: CaseRun) -> tuple | None:
    if declared is not None:
        return declared[0], _declared_inputs(r), declared[1], "declared"
    if r.op_call is not None:
        name, inputs, params, fname = r.op_call
        if fname.startswith("composition "):
            view = f"; {r.op_view.note}" if r.op_view is not None else ""
            return name, inputs, params, (f"detected: the reference's forward is the {fname}{view}; its float64 "
                                          "output is the op's float64 reference on every case")
        return name, inputs, params, f"detected: the reference's forward is one call of torch {fname}"


def _confirm_compositions(runs: list[CaseRun]) -> str:
    """Drop every case's composition unless the op's float64 reference reproduces each case's float64
    truth (:func:`numstd.grade.compose.confirm`); the op note saying why, or empty."""
    from .compose import confirm

    composed = [r for r in runs if r.op_call is not None and r.op_call[3].startswith("composition ")]
    why = ""
    for r in composed:
        if len(r.truth) != 1:
            why = "one output expected"
        else:
            why = confirm(r.op_call[0], r.op_call[1], r.op_call[2], r.truth[0], r.op_view)
        if why:
            why = (f"none: the reference's calls match the {r.op_call[3]}, but not its behaviour on "
                   f"{r.distribution} inputs of trial {r.trial}: {why}; not judged by {r.op_call[0]}'s standard")
            break
    if why or (composed and len(composed) != len(runs)):
        why = why or "none: the composition was recognised on some cases only; not judged by an op standard"
        for r in composed:
            r.op_call, r.op_view = None, None
    return why
    return None


def _declared_inputs(r: CaseRun) -> list:
    """A declared op takes the module's array inputs, in call order."""
    return [x for x in r.inputs if isinstance(x, np.ndarray)]


def judge_case(std: Any, r: CaseRun, params: Mapping[str, Any] | None = None, *,
               require_reproducible: bool = False) -> Verdict:
    """The module verdict of one :class:`CaseRun`: ``runs``/``shape`` when the candidate raised or returned no
    arrays, ``inputs_unchanged`` when it wrote into its inputs, ``input_dependence`` when its output is an
    earlier case's (cached), ``constant_output`` when it is constant where the reference's varies,
    ``reproducible`` when asked for and two runs differ, else :func:`judge_module`."""
    from ..judge.diagnosis import Diagnosis

    params = dict(params or {})
    shape = r.truth[0].shape if len(r.truth) == 1 else (sum(t.size for t in r.truth),)
    if r.candidate is None:
        return _early(std, shape, None, params, "runs" if " raised " in r.error else "shape", r.error)
    if r.mutated:
        which = ", ".join(f"inputs[{i}]" for i in r.mutated)
        return _early(std, shape, None, params, "inputs_unchanged",
                      f"the candidate wrote into {which}: a kernel must not modify its inputs (copy them first)")
    const = _constant(r)
    if const:
        v = _early(std, shape, None, params, "constant_output", const)
        return replace(v, diagnosis=(Diagnosis("constant-output", 0.97, const),))
    if r.cached:
        return _early(std, shape, None, params, "input_dependence", r.cached)
    if require_reproducible and r.reproducible is False:
        return replace(_early(std, shape, None, params, "reproducible",
                              "two candidate runs on the same inputs gave different bits; the standard requires "
                              "bit-reproducibility (fix the reduction order, avoid atomics)"),
                       diagnosis=(Diagnosis("nondeterminism", 0.95, "two runs on the same inputs differ"),))
    return judge_module(r.truth, r.baseline, r.candidate, std, params=params,
                        reduction_length=reduction_length(r.input_elements, r.truth))


def _constant(r: CaseRun) -> str:
    """Why the candidate's output is constant where the reference's is not (empty when it is not)."""
    if r.candidate is None or len(r.candidate) != len(r.baseline):
        return ""
    for y, b in zip(r.candidate, r.baseline):
        y, b = np.asarray(y, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if y.size < 2 or y.shape != b.shape:
            return ""
        with np.errstate(invalid="ignore"):  # (ptp ≠ 0 also where y has a NaN or an infinity: not constant)
            if np.ptp(y) != 0:  # the usual case, decided before the reference's finite values are gathered
                return ""
        fb = b[np.isfinite(b)]
        if fb.size < 2 or np.ptp(fb) == 0:
            return ""
    v = np.asarray(r.candidate[0], dtype=np.float64).reshape(-1)[0]
    return (f"every output element is {'zero' if v == 0 else f'the constant {v:.6g}'} while the reference's vary: "
            "the output does not depend on the inputs")


class _CallableModule(types.ModuleType):
    """``numstd.grade`` names both this module and its function: importing the submodule makes the
    package attribute the module, so the module forwards calls to :func:`grade`."""

    def __call__(self, *args: Any, **kwargs: Any) -> GradeReport:
        return grade(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

