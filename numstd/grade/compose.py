"""Short compositions of torch calls that compute one catalog op (issue 18 item 11).

:func:`numstd.grade` judges a module by an op standard when its reference's ``forward`` is one
recorded torch call of a catalog op (:func:`numstd.grade.grading._as_op`).  Many problems write
the op out as a few calls (KernelBench's ``x * torch.sigmoid(x)`` for swish, ``torch.cumsum(x.flip(d),
d).flip(d)`` for the reverse cumsum).  :data:`PATTERNS` is a table of such compositions: each names
the recorded calls in order, the catalog op, and how to read the op's inputs and parameters from the
calls (the data flow between the calls is checked by object identity: the tensor a call receives
must be the module's input or an earlier call's result where the pattern says so).

A match is only a proposal.  :func:`confirm` accepts it for a case only when the op's own float64
reference (:func:`numstd.reference.reference` with ``resolution="float64"``) on the read inputs and
parameters reproduces the module's float64 output (the case's truth) elementwise within

.. math::  |r_i - t_i| \\le 10^{-12} \\max_j |t_j| + 4\\,\\mathrm{ulp}_{64}(t_i)

(NaN and infinities in the same places).  The truth is the module evaluated in float64: it differs
from the exact value by the float64 rounding of its few operations, at most ``γ_K Σ|terms|`` for a
reduction of length ``K`` (Higham 2002, §4.2) and typically ``√K · 2^-53`` relative; for the sizes
graded (``K ≤ 2^20``) that is ≤ 1.2e-13 relative, under the 1e-12 term.  A pattern that reads a
wrong axis, parameter or op differs by O(1) relative (or by the working format's 6e-8 where the
op's inputs were read as an intermediate rounded to it), 4 to 12 orders of magnitude above the
tolerance.  A wrong pattern is therefore harmless: it is not applied, and the report's ``op_note``
says why.

Some patterns read the op on a reshaped view (layer_norm over several trailing dims is layer_norm
over their product; a norm over a middle axis is the op over the last axis after ``moveaxis``):
:class:`View` transforms the module's output (candidate and truth) the same way, and the report
records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..core.arrays import to_numpy

__all__ = ["Composition", "View", "PATTERNS", "match", "confirm", "REL_TOL", "ULP_TOL"]

#: relative term of the confirmation tolerance (times max |truth|)
REL_TOL = 1e-12
#: float64 ulps of each truth element added to the tolerance
ULP_TOL = 4


@dataclass(frozen=True)
class View:
    """How the module's output maps onto the op's: ``reshape`` to ``shape`` or ``moveaxis(axis → -1)``."""

    kind: str
    shape: tuple = ()
    axis: int = 0
    note: str = ""

    def apply(self, y: Any) -> np.ndarray:
        y = np.asarray(y)
        if self.kind == "reshape":
            return y.reshape(self.shape)
        return np.ascontiguousarray(np.moveaxis(y, self.axis, -1))


@dataclass(frozen=True)
class Composition:
    """One pattern: the recorded call names in order, the op, and the reader of its inputs and params.

    ``read(calls, src)`` gets the recorded ``(name, args, kwargs, result)`` calls and ``src(t)``, which
    says where a tensor came from (``("in", k)``: the module's input ``k``; ``("call", j)``: call
    ``j``'s result; None: elsewhere, e.g. a parameter), and returns ``(inputs, params, view)`` or None.
    """

    name: str
    calls: tuple
    op: str
    expression: str
    read: Callable[[list, Callable[[Any], Any]], tuple | None]


def _np(t: Any) -> np.ndarray | None:
    return None if t is None else to_numpy(t, name="input").copy()


def _is_tensor(t: Any) -> bool:
    return hasattr(t, "dim") and hasattr(t, "shape")


def _other(args: Sequence, t: Any) -> Any:
    """The operand of a binary call that is not ``t`` (the object itself), or a sentinel when ``t`` is absent."""
    if len(args) != 2:
        return _NONE
    if args[0] is t:
        return args[1]
    if args[1] is t:
        return args[0]
    return _NONE


_NONE = object()


def _dim(v: Any, ndim: int) -> int | None:
    if isinstance(v, (list, tuple)):
        if len(v) != 1:
            return None
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v % ndim if -ndim <= v < ndim else None


def _kw(call: tuple, pos: int, name: str, default: Any = _NONE) -> Any:
    _, args, kwargs, _ = call
    return args[pos] if len(args) > pos else kwargs.get(name, default)


def _input(src: Callable, t: Any) -> bool:
    return _is_tensor(t) and (src(t) or ("",))[0] == "in"


def _from(src: Callable, t: Any, j: int) -> bool:
    return _is_tensor(t) and src(t) == ("call", j)


# ------------------------------------------------------------------------------------- readers
def _swish(c: list, src: Callable) -> tuple | None:  # sigmoid(x); mul(x, s)
    x = c[0][1][0] if c[0][1] else None
    if not _input(src, x) or _other(c[1][1], x) is not c[0][3]:
        return None
    return [_np(x)], {}, None


def _softsign(c: list, src: Callable) -> tuple | None:  # abs(x); add(a, 1); div(x, d)
    x = c[0][1][0] if c[0][1] else None
    if not _input(src, x):
        return None
    one = _other(c[1][1], c[0][3])
    if isinstance(one, bool) or not isinstance(one, (int, float)) or one != 1 or c[1][2]:
        return None
    if len(c[2][1]) != 2 or c[2][1][0] is not x or c[2][1][1] is not c[1][3]:
        return None
    return [_np(x)], {}, None


def _norm_div(c: list, src: Callable) -> tuple | None:  # norm(x, p, dim, keepdim); div(x, n)
    x = c[0][1][0] if c[0][1] else None
    if not _input(src, x) or len(c[1][1]) != 2 or c[1][1][0] is not x or c[1][1][1] is not c[0][3]:
        return None
    p, dim = _kw(c[0], 1, "p", "fro"), _kw(c[0], 2, "dim", None)
    if _kw(c[0], 4, "dtype", None) is not None:
        return None
    # (torch.norm(x, p='fro') without dim, the Frobenius norm of the whole tensor, would be normalize of
    # the flattened x over dim 0; not recognised: NS-NORMALIZE-FP32@1's bias criterion rejects torch's own
    # F.normalize on a single 128-element vector in 11 of 20 draws, one shared norm shifting every element)
    d = _dim(dim, x.dim())
    if d is None or p not in (1, 2, 1.0, 2.0) or not bool(_kw(c[0], 3, "keepdim", False)):
        return None
    return [_np(x)], {"p": float(p), "dim": d, "eps": 1e-12}, None


def _rms(c: list, src: Callable) -> tuple | None:  # pow(x, 2); mean(q, dim, keepdim); add(m, eps); sqrt; div(x, r)
    x = c[0][1][0] if c[0][1] else None
    if not _input(src, x) or len(c[0][1]) != 2 or c[0][1][1] != 2:
        return None
    if not (c[1][1] and c[1][1][0] is c[0][3]) or not bool(_kw(c[1], 2, "keepdim", False)):
        return None
    d = _dim(_kw(c[1], 1, "dim", None), x.dim())
    eps = _other(c[2][1], c[1][3])
    if d is None or isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        return None
    if not (c[3][1] and c[3][1][0] is c[2][3]) or len(c[4][1]) != 2 or c[4][1][0] is not x \
            or c[4][1][1] is not c[3][3]:
        return None
    xs = np.ascontiguousarray(np.moveaxis(_np(x), d, -1))
    view = None if d == x.dim() - 1 else View("moveaxis", axis=d, note=f"axis {d} of x and of the output moved last")
    return [xs, None], {"eps": float(eps)}, view


def _layer_norm(c: list, src: Callable) -> tuple | None:  # layer_norm(x, shape, weight, bias, eps), shape of ≥ 2 dims
    x = c[0][1][0] if c[0][1] else None
    shape = _kw(c[0], 1, "normalized_shape", None)
    if not _input(src, x) or shape is None or len(tuple(shape)) < 2:
        return None
    shape = tuple(int(s) for s in shape)
    if tuple(x.shape[x.dim() - len(shape):]) != shape:
        return None
    n = int(np.prod(shape))
    lead = tuple(x.shape[:x.dim() - len(shape)])
    w, b = _kw(c[0], 2, "weight", None), _kw(c[0], 3, "bias", None)
    flat = lambda t: None if t is None else _np(t).reshape(n)  # noqa: E731
    view = View("reshape", lead + (n,), note=f"the trailing dims {shape} of x, weight, bias and the output "
                                             f"flattened to {n}")
    return [_np(x).reshape(lead + (n,)), flat(w), flat(b)], {"eps": float(_kw(c[0], 4, "eps", 1e-5))}, view


def _einsum(c: list, src: Callable) -> tuple | None:  # einsum("...l,lk->...k", A, B) with distinct letters
    args = c[0][1]
    if len(args) != 3 or not isinstance(args[0], str) or not (_input(src, args[1]) and _input(src, args[2])):
        return None
    eq = args[0].replace(" ", "")
    if "->" not in eq or eq.count(",") != 1 or "." in eq:
        return None
    lhs, out = eq.split("->")
    a, b = lhs.split(",")
    if len(b) != 2 or not a or a[-1] != b[0] or out != a[:-1] + b[1] or len(set(a + b[1])) != len(a) + 1:
        return None
    return [_np(args[1]), _np(args[2])], {}, None


def _mse(c: list, src: Callable) -> tuple | None:  # sub(p, t); pow(d, 2); mean(q)
    args = c[0][1]
    if len(args) != 2 or not (_input(src, args[0]) and _input(src, args[1])) or c[0][2]:
        return None
    if len(c[1][1]) != 2 or c[1][1][0] is not c[0][3] or c[1][1][1] != 2:
        return None
    if len(c[2][1]) != 1 or c[2][1][0] is not c[1][3] or c[2][2]:
        return None
    return [_np(args[0]), _np(args[1])], {"reduction": "mean"}, None


def _cumsum_reverse(c: list, src: Callable) -> tuple | None:  # flip(x, d); cumsum(f, d); flip(s, d)
    x = c[0][1][0] if c[0][1] else None
    if not _input(src, x) or c[1][1][:1] != (c[0][3],) or not (c[2][1] and c[2][1][0] is c[1][3]):
        return None
    n = x.dim()
    d1, d2, d3 = (_dim(_kw(c[0], 1, "dims", None), n), _dim(_kw(c[1], 1, "dim", None), n),
                  _dim(_kw(c[2], 1, "dims", None), n))
    if d1 is None or not d1 == d2 == d3 or _kw(c[1], 2, "dtype", None) is not None:
        return None
    return [_np(x)], {"axis": d1, "reverse": True}, None


def _cumsum_masked(c: list, src: Callable) -> tuple | None:  # mul(x, mask); cumsum(m, d)
    args = c[0][1]
    if len(args) != 2 or not (_input(src, args[0]) and _input(src, args[1])):
        return None
    x, mask = args if args[1].dtype.is_floating_point is False else args[::-1]
    if str(mask.dtype) != "torch.bool" or not x.dtype.is_floating_point or tuple(mask.shape) != tuple(x.shape):
        return None
    d = _dim(_kw(c[1], 1, "dim", None), x.dim())
    if c[1][1][:1] != (c[0][3],) or d is None or _kw(c[1], 2, "dtype", None) is not None:
        return None
    return [_np(x), _np(mask)], {"axis": d}, None


def _cumsum_exclusive(c: list, src: Callable) -> tuple | None:
    # narrow(x, d, 0, n-1); cumsum(v, d); select(x, d, 0); unsqueeze(s, d); zeros_like(u); cat((z, cs), d)
    x = c[0][1][0] if c[0][1] else None
    if not _input(src, x):
        return None
    n = x.dim()
    d = _dim(_kw(c[0], 1, "dim", None), n)
    if d is None or _kw(c[0], 2, "start", None) != 0 or _kw(c[0], 3, "length", None) != x.shape[d] - 1:
        return None
    if c[1][1][:1] != (c[0][3],) or _dim(_kw(c[1], 1, "dim", None), n) != d:
        return None
    parts = _kw(c[5], 0, "tensors", None)
    if not isinstance(parts, (list, tuple)) or len(parts) != 2 or parts[0] is not c[4][3] or parts[1] is not c[1][3]:
        return None
    if _dim(_kw(c[5], 1, "dim", 0), n) != d or tuple(c[4][3].shape) != tuple(x.shape[:d]) + (1,) + tuple(x.shape[d + 1:]):
        return None
    return [_np(x)], {"axis": d, "exclusive": True}, None


def _new_gelu(c: list, src: Callable) -> tuple | None:
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))): the constants are read, behaviour decides the rest
    x = c[1][1][0] if c[1][1] else None
    if not _input(src, x) or c[0][1][:1] != (x,) or c[1][1][1:] != (3.0,) or c[3][1][:1] != (x,):
        return None
    if not (c[5][1] and c[5][1][0] is c[4][3]):
        return None
    return [_np(x)], {}, None


def _diag_matmul(c: list, src: Callable) -> tuple | None:  # unsqueeze(a, 1); mul(u, B): diag(a) @ B
    a = c[0][1][0] if c[0][1] else None
    if not _input(src, a) or a.dim() != 1 or _kw(c[0], 1, "dim", None) not in (1, -1):
        return None
    b = _other(c[1][1], c[0][3])
    if not _input(src, b) or b.dim() != 2 or b.shape[0] != a.shape[0]:
        return None
    return [np.diag(_np(a)), _np(b)], {}, None


#: the composition table; each entry is tried where its call names match the recording exactly
PATTERNS: tuple[Composition, ...] = (
    Composition("swish", ("sigmoid", "mul"), "swish", "x * torch.sigmoid(x)", _swish),
    Composition("softsign", ("abs", "add", "div"), "softsign", "x / (1 + torch.abs(x))", _softsign),
    Composition("normalize", ("norm", "div"), "normalize", "x / torch.norm(x, p, dim, keepdim=True), p = 1 or 2",
                _norm_div),
    Composition("rms_norm", ("pow", "mean", "add", "sqrt", "div"), "rms_norm",
                "x / torch.sqrt(torch.mean(x ** 2, dim, keepdim=True) + eps)", _rms),
    Composition("layer_norm", ("layer_norm",), "layer_norm", "F.layer_norm(x, trailing shape of ≥ 2 dims, w, b, eps)",
                _layer_norm),
    Composition("einsum-matmul", ("einsum",), "matmul", "torch.einsum('...l,lk->...k', A, B)", _einsum),
    Composition("mse_loss", ("sub", "pow", "mean"), "mse_loss", "torch.mean((p - t) ** 2)", _mse),
    Composition("cumsum-reverse", ("flip", "cumsum", "flip"), "cumsum",
                "torch.cumsum(x.flip(d), d).flip(d)", _cumsum_reverse),
    Composition("cumsum-masked", ("mul", "cumsum"), "cumsum", "torch.cumsum(x * mask, d), mask boolean",
                _cumsum_masked),
    Composition("cumsum-exclusive", ("narrow", "cumsum", "select", "unsqueeze", "zeros_like", "cat"), "cumsum",
                "torch.cat((zeros, torch.cumsum(x.narrow(d, 0, n - 1), d)), d)", _cumsum_exclusive),
    Composition("new_gelu", ("mul", "pow", "mul", "add", "mul", "tanh", "add", "mul"), "new_gelu",
                "0.5 * x * (1 + torch.tanh(c * (x + 0.044715 * torch.pow(x, 3))))", _new_gelu),
    Composition("diag-matmul", ("unsqueeze", "mul"), "matmul", "a.unsqueeze(1) * B = torch.diag(a) @ B", _diag_matmul),
)


def match(calls: Sequence[tuple], results: Sequence[Any], module_inputs: Sequence[Any]) -> tuple | None:
    """``(op, inputs, params, label, view)`` of the first pattern whose calls and reader match, else None.

    ``calls`` are the recorded ``(name, args, kwargs)``, ``results`` their results, ``module_inputs``
    the tensors the forward received.
    """
    names = tuple(c[0] for c in calls)
    if len(results) != len(calls):
        return None
    full = [(n, tuple(a), dict(k), r) for (n, a, k), r in zip(calls, results)]
    ids = {id(t): ("in", k) for k, t in enumerate(module_inputs) if _is_tensor(t)}
    ids.update({id(r): ("call", j) for j, r in enumerate(results) if _is_tensor(r)})

    def src(t: Any) -> Any:
        return ids.get(id(t))

    for p in PATTERNS:
        if p.calls != names:
            continue
        try:
            got = p.read(full, src)
        except (TypeError, ValueError, IndexError, AttributeError):  # a call shaped unlike the pattern's
            got = None
        if got is not None:
            inputs, params, view = got
            return p.op, inputs, params, f"composition {p.name}: {p.expression}", view
    return None


def confirm(op: str, inputs: list, params: dict, truth: np.ndarray, view: View | None) -> str:
    """Empty when the op's float64 reference reproduces ``truth`` (the module's float64 output) within
    the tolerance of the module docstring; else why not."""
    from ..core.errors import NumstdError
    from ..ops import validate
    from ..reference import reference

    t = np.asarray(truth, dtype=np.float64)
    try:
        if view is not None:
            t = view.apply(t)
        _, arrays, full = validate(op, list(inputs), dict(params))
        r = np.asarray(reference(op, arrays, resolution="float64", **full).values, dtype=np.float64)
    except (NumstdError, ValueError) as exc:
        return f"the op's reference does not run on the read inputs ({exc})"
    if r.shape != t.shape:
        return f"the op's output has shape {r.shape}, the module's {t.shape}"
    fr, ft = np.isfinite(r), np.isfinite(t)
    if not np.array_equal(fr, ft) or not np.array_equal(r[~fr], t[~ft], equal_nan=True):
        return "the op's reference and the module's float64 output have NaN or infinities in different places"
    if not ft.any():
        return ""
    scale = float(np.max(np.abs(t[ft])))
    tol = REL_TOL * scale + ULP_TOL * np.spacing(np.abs(t[ft]))
    d = np.abs(r[fr] - t[ft])
    if np.all(d <= tol):
        return ""
    k = int(np.argmax(d - tol))
    return (f"the op's float64 reference differs from the module's float64 output by {d[k]:.3g} "
            f"({d[k] / scale if scale else float('inf'):.3g} of max|output|; tolerance {REL_TOL:g}·max|output| + "
            f"{ULP_TOL} ulp)")
