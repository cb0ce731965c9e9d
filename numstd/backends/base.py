"""The :class:`Backend` interface: run one catalog op on one platform and return host numpy.

A backend is what a *user of a library* would run on a platform: ``torch.matmul`` on the CPU or a
GPU, ``jax.numpy`` under XLA, an NKI kernel on a NeuronCore, or plain numpy.  Calibration runs
backends as legitimate implementations; :mod:`numstd.capture` runs a standard's suite on one and
writes the exact output bits.

Contract of :meth:`Backend.run` (shared by every backend, enforced here):

1. the call is validated by :func:`numstd.ops.validate` (op name, inputs, shapes, parameters with
   numpy names — ``axis``, ``eps``, ``approximate``, ``scale``, ``causal``, ``reduction`` — and
   defaults filled in), so a bad call raises the same :class:`~numstd.errors.NumstdError` on every
   backend;
2. *flag* parameters (``allow_tf32``, and those a backend adds in :attr:`Backend.flag_params`) are
   taken out first: they change how the platform computes, not what the op is.  ``allow_tf32=True``
   is a *permission*: backends without TF32 compute in full float32, which any TF32 standard
   accepts;
3. the result is a host :class:`numpy.ndarray` in the backend's natural output format: the format
   of the first input (bfloat16 and float8 as ``ml_dtypes`` dtypes), as torch returns it.

Unavailable backends (library not installed, no device) raise
:class:`~numstd.errors.BackendUnavailable` with the reason :meth:`Backend.available` gives.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core.errors import BackendUnavailable, DtypeError, ParameterError
from ..ops import OPS

__all__ = ["Backend", "ALL_OPS", "reduce_loss", "channel_norm", "huber_terms", "kl_div_loss", "nll_loss_of", "hinge_terms", "ELEMENTWISE_OPS", "FLOAT_FORMATS", "missing_module_reason", "version_string",
           "env_flags", "framework_call", "framework_ops"]

#: the elementwise part of the catalog (``numstd.ops`` kind ``elementwise``)
ELEMENTWISE_OPS: frozenset[str] = frozenset(n for n, e in OPS.items() if e.kind == "elementwise")

#: every op of the catalog that ``check`` judges (all but ``module``)
ALL_OPS: frozenset[str] = frozenset(n for n, e in OPS.items() if e.kind != "module")

#: the floating-point formats libraries hold natively (fp8 and tf32 excluded)
FLOAT_FORMATS: frozenset[str] = frozenset({"float64", "float32", "float16", "bfloat16"})


class Backend:
    """One platform that runs catalog ops (abstract: subclasses implement :meth:`_compute`).

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"torch:cuda"``.
    flag_params : tuple of str
        Call parameters that configure the platform rather than the op (default ``allow_tf32``).
    """

    name: str = ""
    flag_params: tuple[str, ...] = ("allow_tf32",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._availability: tuple[bool, str] | None = None

    # ------------------------------------------------------------------ what subclasses provide
    def _probe(self) -> tuple[bool, str]:
        """Import the library and find the device; ``(False, reason)`` when that fails."""
        raise NotImplementedError

    def _compute(self, op: str, arrays: list, params: dict, flags: dict) -> np.ndarray:
        """Run a validated call; ``arrays`` as returned by :func:`numstd.ops.validate`."""
        raise NotImplementedError

    def ops(self) -> frozenset[str]:
        """Catalog ops this backend implements."""
        return ALL_OPS

    def input_formats(self) -> frozenset[str]:
        """Floating-point formats this backend accepts as (first) inputs."""
        return FLOAT_FORMATS

    def version(self) -> str:
        """Library versions, e.g. ``"torch 2.13.0"`` (empty when the library is missing)."""
        return ""

    def device(self) -> str:
        """The device the ops run on, e.g. ``"cpu"`` or ``"NVIDIA H200"``."""
        return ""

    def flags(self) -> dict:
        """Settings that change the numbers: TF32, precision defaults, rounding env variables."""
        return {}

    # ------------------------------------------------------------------ shared behaviour
    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when the backend can run here, else ``(False, why and how to fix it)``.

        The probe runs once per backend object (thread-safe); it never raises.
        """
        with self._lock:
            if self._availability is None:
                try:
                    self._availability = self._probe()
                except Exception as exc:  # a broken install must read as "unavailable", not crash
                    self._availability = (False, f"{type(exc).__name__} while loading: {exc}")
            return self._availability

    def require(self) -> None:
        """Raise :class:`~numstd.errors.BackendUnavailable` with the reason when unavailable."""
        ok, why = self.available()
        if not ok:
            raise BackendUnavailable(f"backend {self.name!r} is unavailable: {why}")

    def output_format(self, op: str, input_formats: Sequence[Any]) -> Any:
        """The :class:`~numstd.formats.Format` of ``run(op, ...)``'s output for these input formats.

        The first input's format (torch's type rule for every op of the catalog), or ``None`` when
        this backend cannot run ``op`` on inputs of that format (an op it does not implement, fp8
        on a library without fp8 math, float64 on a device without it).
        """
        from ..core.formats import get_format

        first = next((f for f in input_formats if f is not None), None)
        if first is None or op not in self.ops():
            return None
        fmt = get_format(first)
        return fmt if fmt.name in self.input_formats() else None

    def run(self, op: str, inputs: Sequence[Any], **params: Any) -> np.ndarray:
        """Run ``op`` on ``inputs`` and return the output as a host numpy array.

        Parameters
        ----------
        op : str
            Catalog op name (:data:`numstd.ops.OPS`) that this backend implements (:meth:`ops`).
        inputs : sequence of arrays
            numpy (incl. ml_dtypes), torch or jax arrays, in the op's input order.
        **params
            Op parameters with numpy names, plus flag parameters (:attr:`flag_params`).

        Returns
        -------
        numpy.ndarray
            The output, in the format of the first input.

        Raises
        ------
        BackendUnavailable
            When :meth:`available` is False.
        UnknownOpError, ParameterError, DtypeError, ShapeError
            For a malformed call, or an op/format this backend does not implement.
        """
        from ..ops.catalog import get_op, validate

        self.require()
        flags = {k: params.pop(k) for k in list(params) if k in self.flag_params}
        if "allow_tf32" in flags and not isinstance(flags["allow_tf32"], (bool, np.bool_)):
            raise ParameterError(f"{self.name}: allow_tf32 must be True or False, got {flags['allow_tf32']!r}")
        spec = get_op(op)
        if spec.name not in self.ops():
            raise ParameterError(
                f"backend {self.name!r} does not implement {spec.name!r}; it implements "
                f"{', '.join(sorted(self.ops()))}. Use the 'numpy' backend for the whole catalog.")
        spec, arrays, full = validate(spec.name, list(inputs), dict(params))
        first = arrays[0]
        if first.dtype.name not in self.input_formats():
            raise DtypeError(
                f"backend {self.name!r} cannot run {spec.name} on {first.dtype.name} inputs; it takes "
                f"{', '.join(sorted(self.input_formats()))}. Use the 'numpy' backend (float32 math, "
                "rounded to the input format) for other formats.")
        with np.errstate(all="ignore"):
            out = self._compute(spec.name, arrays, full, flags)
        return out

    def describe(self) -> dict:
        """Name, availability, reason, versions, device, flags and ops (for ``numstd backends``)."""
        ok, why = self.available()
        info: dict[str, Any] = {"name": self.name, "available": ok, "reason": why,
                                "ops": sorted(self.ops()), "formats": sorted(self.input_formats())}
        for key in ("version", "device", "flags"):
            try:
                info[key] = getattr(self, key)() if ok or key == "version" else ({} if key == "flags" else "")
            except Exception as exc:  # describing must never fail
                info[key] = f"unknown ({type(exc).__name__}: {exc})"
        return info

    def __repr__(self) -> str:
        return f"<numstd backend {self.name}>"


def missing_module_reason(module: str, extra: str, exc: BaseException) -> str:
    """A reason string for an import that failed: what is missing and the install command."""
    if isinstance(exc, ModuleNotFoundError):
        return f"{module} is not installed (pip install {extra})"
    return f"{module} failed to import ({type(exc).__name__}: {exc}); reinstall it (pip install {extra})"


def version_string(pairs: Iterable[tuple[str, str]]) -> str:
    """``"torch 2.13.0, cuda 12.8"`` from (name, version) pairs, skipping empty versions."""
    return ", ".join(f"{n} {v}" for n, v in pairs if v)


def module_versions(modules: Iterable[str]) -> str:
    """:func:`version_string` of the importable ones among ``modules`` (their ``__version__``)."""
    import importlib

    pairs = []
    for mod in modules:
        try:
            pairs.append((mod, str(getattr(importlib.import_module(mod), "__version__", ""))))
        except Exception:
            continue
    return version_string(pairs)


def env_flags(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict:
    """The named environment variables that are set (value as a string)."""
    import os

    env = os.environ if environ is None else environ
    return {n: env[n] for n in names if n in env}


def framework_ops(framework: str, special: Iterable[str] = ()) -> frozenset[str]:
    """Ops a framework backend runs: those whose entry has a :class:`~numstd.ops.entry.Call` for it,
    plus the backend's own ``special`` (non-mechanical) implementations."""
    return frozenset(n for n, e in OPS.items() if framework in e.calls) | frozenset(special)


def framework_call(op: str, framework: str) -> Any:
    """``fn(arrays, params)`` that computes ``op`` as its entry's call for ``framework`` says
    (``numstd.ops.entry.Call``: the dotted function, the arrays in order, the mapped keyword
    arguments), or None where the entry has none."""
    call = OPS[op].calls.get(framework) if op in OPS else None
    if call is None:
        return None
    import importlib

    module, _, name = call.fn.rpartition(".")
    fn = getattr(importlib.import_module(module), name)
    n = len(OPS[op].inputs)
    return lambda arrays, params: fn(*arrays[:n], **call.arguments(params))


def reduce_loss(xp: Any, loss: Any, reduction: str) -> Any:
    """A per-element loss reduced as torch.nn.functional does: ``xp.mean`` for ``"mean"``,
    ``xp.sum`` for ``"sum"``, unchanged for ``"none"`` (``xp``: numpy or jax.numpy)."""
    if reduction == "mean":
        return xp.mean(loss)
    if reduction == "sum":
        return xp.sum(loss)
    return loss


def channel_norm(xp: Any, op: str, x: Any, w: list, p: Mapping[str, Any], normalise: Callable[[Any, Any], Any],
                 cast: Callable[[Any], Any] = lambda a: a) -> Any:
    """group_norm / instance_norm / batch_norm of ``x`` (``(N, C, *spatial)``) with array module ``xp``
    (numpy or jax.numpy), as the numpy and jax backends compute them: rows of one normalised group
    (group: ``(n, g)``; instance: ``(n, c)``; batch: channel ``c``), their mean, the mean of the squared
    deviations, ``normalise(d, var + eps)`` (the backend's division by the square root, or
    multiplication by rsqrt), then the per-channel affine; batch_norm with ``training=False`` uses the
    running statistics ``w[0]``, ``w[1]``.  ``cast`` converts the statistics and affine parameters to the
    working dtype."""
    n, c = x.shape[:2]
    shape = (1, c) + (1,) * (x.ndim - 2)
    eps = p["eps"]
    if op == "batch_norm" and not p["training"]:
        y = normalise(x - cast(w[0]).reshape(shape), cast(w[1]).reshape(shape) + eps)
        w = w[2:]
    else:
        if op == "batch_norm":
            rows = xp.moveaxis(x, 1, 0).reshape(c, -1)
        else:
            rows = x.reshape(n * (p["num_groups"] if op == "group_norm" else c), -1)
        d = rows - xp.mean(rows, axis=-1, keepdims=True)
        r = normalise(d, xp.mean(d * d, axis=-1, keepdims=True) + eps)
        y = xp.moveaxis(r.reshape((c, n) + x.shape[2:]), 0, 1) if op == "batch_norm" else r.reshape(x.shape)
    if w[0] is not None:
        y = y * cast(w[0]).reshape(shape)
    if w[1] is not None:
        y = y + cast(w[1]).reshape(shape)
    return y


def huber_terms(xp: Any, x: Any, target: Any, delta: float, smooth: bool) -> Any:
    """huber_loss's terms (``smooth`` False) or smooth_l1_loss's (``delta`` is beta) in the inputs'
    dtype, as torch.nn.functional defines them (``xp``: numpy or jax.numpy)."""
    z = xp.abs(x - target)
    if smooth and delta == 0:
        return z
    quad = 0.5 * z * z
    if smooth:
        return xp.where(z < delta, quad / delta, z - 0.5 * delta)
    return xp.where(z < delta, quad, delta * (z - 0.5 * delta))


def kl_div_loss(xp: Any, x: Any, target: Any, reduction: str, log_target: bool) -> Any:
    """torch.nn.functional.kl_div's formula in the inputs' dtype (``xp``: numpy or jax.numpy):
    ``exp(t) (t - x)`` for log targets, else ``xlogy(t, t) - t x`` (0 where t = 0), reduced
    (``"batchmean"``: the sum over ``x.shape[0]``)."""
    if log_target:
        loss = xp.exp(target) * (target - x)
    else:
        pos = target > 0
        other = xp.where(target == 0, xp.zeros_like(target), xp.full_like(target, xp.nan))
        tlogt = xp.where(pos, target * xp.log(xp.where(pos, target, xp.ones_like(target))), other)
        loss = tlogt - target * x
    if reduction == "batchmean":
        return xp.sum(loss) / (x.shape[0] if x.ndim else 1)
    return reduce_loss(xp, loss, reduction)


def nll_loss_of(xp: Any, x: Any, target: Any, reduction: str, ignore_index: int) -> Any:
    """torch.nn.functional.nll_loss's formula (``xp``: numpy or jax.numpy): ``-x[n, t_n]``, 0 for
    ignored rows, the mean over the rows kept."""
    keep = target != ignore_index
    picked = xp.take_along_axis(x, xp.where(keep, target, 0)[:, None], axis=-1)[:, 0]
    loss = xp.where(keep, -picked, xp.zeros_like(picked))
    if reduction == "mean":
        return xp.sum(loss) / xp.sum(keep).astype(x.dtype)
    return reduce_loss(xp, loss, reduction)


def hinge_terms(xp: Any, x: Any, target: Any, margin: float) -> Any:
    """torch.nn.functional.hinge_embedding_loss's terms (``xp``: numpy or jax.numpy): ``x`` where the
    target is 1, ``max(0, margin - x)`` where it is -1, in the inputs' dtype."""
    zero = xp.zeros_like(x)
    return xp.where(target == 1, x, xp.maximum(margin - x, zero))
