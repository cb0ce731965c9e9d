"""Bugs written the way real torch code gets them wrong, judged on the suite cases of each op.

Each bug is a small torch function of the op's inputs and parameters.  It computes in fp32: 16-bit
inputs are upcast once and the result is rounded once to the case's dtype, as a careful kernel
does, so that the bug is the only departure from a legitimate implementation (composed torch code
that keeps bf16/fp16 intermediates is itself rejected by the default standards — a composed bf16
softmax on most bf16 cases — and would make every 16-bit "detection" partly the composition's).
``CONTROLS``, the same code without its bug, check that (``--controls``).  The bf16-inputs bugs
round to bf16 on purpose; they run on fp32 cases only.  It runs on every case of the default
standard of its op (the same cases
``benchmarks/real_impls.py`` gives the library kernels) and is judged by :func:`numstd.check` and
by the fixed-tolerance checks of :mod:`benchmarks.side_by_side`.

The nine families of issue 17 (``FAMILIES``): no max subtraction on large logits; one-pass
variance on rows with a large mean; ``log(softmax(x))`` where softmax underflows; bf16 inputs in
an fp32 matmul; a missing bias or scale, the wrong axis, an attention mask off by one (``misc``);
an exclusive instead of an inclusive scan; a mean divided by n−1; a bit-trick fast rsqrt; exp2
with a truncated log2(e).

**Observable.**  A bug is *observable on a case* when the output the buggy code produces there has
at least one element outside the standard's per-element error bound of the float64 truth:
``max_i |a_i − r_i| / B_i > 1`` (``Verdict.normalized_max``), or a non-finite value where the
truth has another one (the ``specials`` criterion), or the wrong dtype.  ``B_i`` is the
standard's a-priori bound on the error of any legitimate implementation (its error model at the
standard's constants), so an observable output is one no legitimate arithmetic produces.  A bug
that stays inside ``B`` on a case (a fast rsqrt with two Newton steps in bf16, a one-pass variance
on rows with mean 0) is not observable there; numstd may still reject it through its statistical
criteria (bias), which the table reports apart.  numstd's ``bound`` criterion is that same test,
so it detects every observable bug by construction; what the side-by-side measures is how the
fixed-tolerance checks do on the same outputs, and how often each method rejects real kernels.

Usage::

    python benchmarks/real_bugs.py [--ops softmax,layer_norm] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

__all__ = ["Bug", "BUGS", "CONTROLS", "FAMILIES", "LOG2E_TRUNC", "fast_rsqrt", "run", "run_bug", "summary", "main"]

#: log2(e) = 1.4426950408889634 truncated to five significant digits, as hand-written exp2 code has it
LOG2E_TRUNC = 1.4427

FAMILIES = {
    "nomax": "no max subtraction on large logits",
    "one_pass_var": "one-pass variance on rows with a large mean",
    "log_of_softmax": "log(softmax(x)) where softmax underflows",
    "bf16_inputs": "bf16 inputs in an fp32 matmul",
    "misc": "a missing bias or scale, the wrong axis, an attention mask off by one",
    "exclusive_scan": "an exclusive instead of an inclusive scan",
    "n_minus_1": "a mean divided by n-1",
    "fast_rsqrt": "a bit-trick fast rsqrt",
    "exp2_log2e": "exp2 with a truncated log2(e)",
}


@dataclass(frozen=True)
class Bug:
    """One buggy implementation of ``op``.

    Attributes
    ----------
    name : str
    family : str
        Key of :data:`FAMILIES`.
    op : str
    fn : callable
        ``fn(tensors, params) -> tensor`` on the op's inputs (torch tensors in the case's dtype,
        ``None`` for an absent optional input) and its validated parameters.
    formats : tuple of str
        Input formats it runs on (default: every format with a default standard).
    params : dict
        Parameters that replace the case's (the reference is computed with them too), e.g.
        ``causal=True`` for a causal-mask bug.
    """

    name: str
    family: str
    op: str
    fn: Callable[[list, dict], Any]
    formats: tuple[str, ...] = ("float32", "bfloat16", "float16")
    params: dict = field(default_factory=dict)


def _ax(p: dict) -> int:
    a = p.get("axis", -1)
    return a if isinstance(a, int) else -1


def fast_rsqrt(x: Any, newton: int = 1) -> Any:
    """The 0x5f3759df bit trick with ``newton`` Newton steps, in fp32 (16-bit inputs upcast)."""
    import torch

    x32 = x.float()
    i = torch.tensor(0x5F3759DF, dtype=torch.int32) - (x32.view(torch.int32) >> 1)
    y = i.view(torch.float32)
    for _ in range(newton):
        y = y * (1.5 - 0.5 * x32 * y * y)
    return y.to(x.dtype)


# ----------------------------------------------------------------------------- softmax family
def _softmax_nomax(a: list, p: dict) -> Any:
    e = a[0].exp()
    return e / e.sum(_ax(p), keepdim=True)


def _log_softmax_nomax(a: list, p: dict) -> Any:
    return a[0] - a[0].exp().sum(_ax(p), keepdim=True).log()


def _nll(logp: Any, target: Any, reduction: str) -> Any:
    import torch

    picked = -logp.gather(1, target.long()[:, None])[:, 0]
    return {"mean": picked.mean(), "sum": picked.sum(), "none": picked}.get(reduction, torch.mean(picked))


def _ce_nomax(a: list, p: dict) -> Any:
    x = a[0]
    return _nll(x - x.exp().sum(1, keepdim=True).log(), a[1], p["reduction"])


def _ce_log_of_softmax(a: list, p: dict) -> Any:
    return _nll(a[0].softmax(1).log(), a[1], p["reduction"])


def _other_axis(p: dict, x: Any) -> int:
    ax = _ax(p) % x.dim()
    return 0 if ax != 0 else 1


def _softmax_exp2(a: list, p: dict) -> Any:
    x = a[0]
    ax = _ax(p)
    e = ((x - x.amax(ax, keepdim=True)) * LOG2E_TRUNC).exp2()
    return e / e.sum(ax, keepdim=True)


# ----------------------------------------------------------------------------- normalization
def _ln(a: list, p: dict, *, var: Callable[[Any], Any], rs: Callable[[Any], Any] | None = None,
        bias: bool = True) -> Any:
    """layer_norm as hand-written torch code: stats in fp32 (x.float()), result in x's dtype."""
    import torch

    x = a[0].float()
    mu = x.mean(-1, keepdim=True)
    v = var(x)
    r = rs(v + p["eps"]) if rs is not None else torch.rsqrt(v + p["eps"])
    y = (x - mu) * r
    if a[1] is not None:
        y = y * a[1].float()
    if bias and a[2] is not None:
        y = y + a[2].float()
    return y.to(a[0].dtype)


def _var_one_pass(x: Any) -> Any:
    return (x * x).mean(-1, keepdim=True) - x.mean(-1, keepdim=True) ** 2


def _var_two_pass(x: Any) -> Any:
    return ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True)


def _var_unbiased(x: Any) -> Any:
    return x.var(-1, keepdim=True)  # torch's default: correction=1, i.e. divided by n-1


def _rms(a: list, p: dict, *, n_minus_1: bool = False, rs: Callable[[Any], Any] | None = None,
         scale: bool = True) -> Any:
    import torch

    x = a[0].float()
    n = x.shape[-1]
    ms = (x * x).sum(-1, keepdim=True) / (n - 1 if n_minus_1 else n)
    y = x * (rs(ms + p["eps"]) if rs is not None else torch.rsqrt(ms + p["eps"]))
    if scale and a[1] is not None:
        y = y * a[1].float()
    return y.to(a[0].dtype)


# ----------------------------------------------------------------------------- reductions, scans
def _mean_n_minus_1(a: list, p: dict) -> Any:
    x = a[0]
    dims = tuple(range(x.dim())) if p["axis"] is None else (p["axis"] if isinstance(p["axis"], tuple) else (p["axis"],))
    n = math.prod(x.shape[d] for d in dims)
    return x.sum(dim=dims, keepdim=p["keepdims"]) / (n - 1)


def _mse_n_minus_1(a: list, p: dict) -> Any:
    d = (a[0] - a[1]) ** 2
    return d.sum() / (d.numel() - 1)


def _exclusive(kind: str) -> Callable[[list, dict], Any]:
    def f(a: list, p: dict) -> Any:
        import torch

        x = a[0]
        ax = _ax(p) % x.dim()
        fill = torch.zeros_like if kind == "cumsum" else torch.ones_like
        head = fill(x.narrow(ax, 0, 1))
        body = getattr(torch, kind)(x, dim=ax).narrow(ax, 0, x.shape[ax] - 1)
        return torch.cat([head, body], dim=ax)

    return f


def _scan_wrong_axis(a: list, p: dict) -> Any:
    import torch

    return torch.cumsum(a[0], dim=_other_axis(p, a[0]))


# ----------------------------------------------------------------------------- contractions
def _bf16(t: Any) -> Any:
    import torch

    return t.to(torch.bfloat16).to(t.dtype)


def _matmul_bf16_inputs(a: list, p: dict) -> Any:
    return _bf16(a[0]) @ _bf16(a[1])


def _linear(a: list, p: dict, *, bf16: bool = False, bias: bool = True) -> Any:
    import torch.nn.functional as F

    x, w = (_bf16(a[0]), _bf16(a[1])) if bf16 else (a[0], a[1])
    return F.linear(x, w, a[2] if bias else None)


def _attn(a: list, p: dict, *, scale: bool = True, shift: int = 0, axis: int = -1, bf16: bool = False) -> Any:
    """softmax(q·kᵀ·scale [+ causal mask]) · v written out, as a hand-written attention does."""
    import torch

    q, k, v = a
    if bf16:
        q, k = _bf16(q), _bf16(k)
    s = q @ k.transpose(-2, -1)
    if scale:
        s = s * (p["scale"] if p.get("scale") is not None else 1.0 / math.sqrt(q.shape[-1]))
    if p.get("causal"):
        L, S = s.shape[-2], s.shape[-1]
        keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=shift)
        s = s.masked_fill(~keep, float("-inf"))
    return s.softmax(axis) @ v


# ----------------------------------------------------------------------------- elementwise
def _exp_exp2(a: list, p: dict) -> Any:
    return (a[0] * LOG2E_TRUNC).exp2()


def _sigmoid_exp2(a: list, p: dict) -> Any:
    return 1.0 / (1.0 + (-a[0] * LOG2E_TRUNC).exp2())


def _silu_exp2(a: list, p: dict) -> Any:
    return a[0] / (1.0 + (-a[0] * LOG2E_TRUNC).exp2())


_FP32 = ("float32",)

BUGS: tuple[Bug, ...] = (
    Bug("softmax_nomax", "nomax", "softmax", _softmax_nomax),
    Bug("log_softmax_nomax", "nomax", "log_softmax", _log_softmax_nomax),
    Bug("cross_entropy_nomax", "nomax", "cross_entropy", _ce_nomax),
    Bug("layer_norm_one_pass", "one_pass_var", "layer_norm", lambda a, p: _ln(a, p, var=_var_one_pass)),
    Bug("log_softmax_log_of_softmax", "log_of_softmax", "log_softmax", lambda a, p: a[0].softmax(_ax(p)).log()),
    Bug("cross_entropy_log_of_softmax", "log_of_softmax", "cross_entropy", _ce_log_of_softmax),
    Bug("matmul_bf16_inputs", "bf16_inputs", "matmul", _matmul_bf16_inputs, _FP32),
    Bug("linear_bf16_inputs", "bf16_inputs", "linear", lambda a, p: _linear(a, p, bf16=True), _FP32),
    Bug("attention_bf16_qk", "bf16_inputs", "attention", lambda a, p: _attn(a, p, bf16=True), _FP32),
    Bug("linear_no_bias", "misc", "linear", lambda a, p: _linear(a, p, bias=False)),
    Bug("layer_norm_no_bias", "misc", "layer_norm", lambda a, p: _ln(a, p, var=_var_two_pass, bias=False)),
    Bug("rms_norm_no_scale", "misc", "rms_norm", lambda a, p: _rms(a, p, scale=False)),
    Bug("attention_no_scale", "misc", "attention", lambda a, p: _attn(a, p, scale=False)),
    Bug("attention_mask_off_by_one", "misc", "attention", lambda a, p: _attn(a, p, shift=1), params={"causal": True}),
    Bug("attention_softmax_wrong_axis", "misc", "attention", lambda a, p: _attn(a, p, axis=-2)),
    Bug("softmax_wrong_axis", "misc", "softmax", lambda a, p: a[0].softmax(_other_axis(p, a[0]))),
    Bug("cumsum_wrong_axis", "misc", "cumsum", _scan_wrong_axis),
    Bug("cumsum_exclusive", "exclusive_scan", "cumsum", _exclusive("cumsum")),
    Bug("cumprod_exclusive", "exclusive_scan", "cumprod", _exclusive("cumprod")),
    Bug("mean_n_minus_1", "n_minus_1", "mean", _mean_n_minus_1),
    Bug("mse_loss_n_minus_1", "n_minus_1", "mse_loss", _mse_n_minus_1),
    Bug("layer_norm_unbiased_var", "n_minus_1", "layer_norm", lambda a, p: _ln(a, p, var=_var_unbiased)),
    Bug("rms_norm_n_minus_1", "n_minus_1", "rms_norm", lambda a, p: _rms(a, p, n_minus_1=True)),
    Bug("rsqrt_fast_1newton", "fast_rsqrt", "rsqrt", lambda a, p: fast_rsqrt(a[0], 1)),
    Bug("rsqrt_fast_2newton", "fast_rsqrt", "rsqrt", lambda a, p: fast_rsqrt(a[0], 2)),
    Bug("layer_norm_fast_rsqrt", "fast_rsqrt", "layer_norm", lambda a, p: _ln(a, p, var=_var_two_pass, rs=fast_rsqrt)),
    Bug("rms_norm_fast_rsqrt", "fast_rsqrt", "rms_norm", lambda a, p: _rms(a, p, rs=fast_rsqrt)),
    Bug("exp_exp2_log2e", "exp2_log2e", "exp", _exp_exp2),
    Bug("sigmoid_exp2_log2e", "exp2_log2e", "sigmoid", _sigmoid_exp2),
    Bug("silu_exp2_log2e", "exp2_log2e", "silu", _silu_exp2),
    Bug("softmax_exp2_log2e", "exp2_log2e", "softmax", _softmax_exp2),
)


#: The same hand-written code without its bug: each should pass where the bug is judged, so that a
#: detection is the bug's and not the hand-written harness's (``python benchmarks/real_bugs.py --controls``)
CONTROLS: tuple[Bug, ...] = (
    Bug("softmax_composed", "control", "softmax", lambda a, p: _softmax_nomax([a[0] - a[0].amax(_ax(p), keepdim=True)], p)),
    Bug("layer_norm_two_pass", "control", "layer_norm", lambda a, p: _ln(a, p, var=_var_two_pass)),
    Bug("rms_norm_composed", "control", "rms_norm", lambda a, p: _rms(a, p)),
    Bug("linear_functional", "control", "linear", lambda a, p: _linear(a, p)),
    Bug("attention_composed", "control", "attention", lambda a, p: _attn(a, p)),
    Bug("attention_composed_causal", "control", "attention", lambda a, p: _attn(a, p), params={"causal": True}),
    Bug("mean_sum_over_n", "control", "mean", lambda a, p: a[0].sum(dim=_ax(p), keepdim=p["keepdims"]) / a[0].shape[_ax(p)]),
)


def run_bug(bug: Bug, case: Any) -> np.ndarray:
    """The bug's output on ``case`` (a numpy array of the output's dtype)."""
    import torch

    from numstd.arrays import to_numpy
    from numstd.backends.torch_backend import to_torch
    from numstd.ops import validate

    params = {**dict(case.params), **bug.params}
    _spec, arrays, full = validate(case.op, list(case.inputs), params)
    args = [None if a is None else to_torch(a, torch.device("cpu")) for a in arrays]
    dtype = args[0].dtype
    if dtype in (torch.bfloat16, torch.float16):  # fp32 inside, one rounding at the end
        args = [a.float() if a is not None and a.is_floating_point() else a for a in args]
    with torch.no_grad():
        out = bug.fn(args, full)
    return np.asarray(to_numpy(out.to(dtype) if out.is_floating_point() else out))


def _observable(v: Any) -> bool:
    return bool(v.normalized_max > 1.0 or any(c.name in ("specials", "dtype") and not c.passed for c in v.criteria))


def run(ops: Iterable[str] | None = None, *, quick: bool = False, bugs: Iterable[Bug] = BUGS,
        max_cases: int | None = None, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Every bug on every case of its op's default standards; one row per (bug, case).

    Each row: the bug, its family, op, format, case, numstd's verdict (``passed``, the failed
    criteria, ``normalized_max``), ``observable`` (see the module docstring) and ``methods``, the
    pass/fail of each fixed-tolerance check of :mod:`benchmarks.side_by_side`.
    """
    import numstd
    from numstd.errors import NumstdError
    from numstd.suites import cases_for

    from benchmarks.real_impls import default_standards
    from benchmarks.side_by_side import expected_for, judge_all, truth

    want = set(ops) if ops else None
    rows: list[dict] = []
    for bug in bugs:
        if want and bug.op not in want:
            continue
        t0 = time.perf_counter()
        n = 0
        for std in default_standards([bug.op]):
            fmt = std.inputs[0].name
            if fmt not in bug.formats:
                continue
            for case in cases_for(std, quick=quick)[:max_cases]:
                params = {**dict(case.params), **bug.params}
                base = {"kind": "bug", "bug": bug.name, "family": bug.family, "op": bug.op, "format": fmt,
                        "case": case.id}
                try:
                    out = run_bug(bug, case)
                    v = numstd.check(out, op=case.op, inputs=case.inputs, **params)
                    exp = expected_for(truth(case.op, case.inputs, params), std.output.name)
                except (NumstdError, RuntimeError, ValueError) as exc:
                    rows.append({**base, "passed": None, "error": f"{type(exc).__name__}: {str(exc)[:160]}"})
                    continue
                n += 1
                rows.append({**base, "passed": bool(v.passed), "standard": v.standard_id,
                             "normalized_max": float(v.normalized_max),
                             "failed": [c.name for c in v.criteria if not c.passed], "observable": _observable(v),
                             "methods": judge_all(out, exp, std.output.name)})
        if progress:
            progress(f"{bug.name}: {n} cases, {time.perf_counter() - t0:.1f} s")
    return rows


def summary(rows: list[dict]) -> str:
    """Markdown: per bug the cases run, observable, and detected by numstd (all / observable)."""
    from collections import defaultdict

    g: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if r.get("passed") is not None:
            g[(r["family"], r["bug"])].append(r)
    lines = ["| family | bug | formats | cases | observable | numstd detects (observable) | "
             "numstd detects (not observable) | worst max\\|e\\|/B |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    order = [*FAMILIES, "control"]
    for fam, bug in sorted(g, key=lambda k: (order.index(k[0]), k[1])):
        rs = g[(fam, bug)]
        obs = [r for r in rs if r["observable"]]
        hid = [r for r in rs if not r["observable"]]
        fmts = ", ".join(sorted({r["format"] for r in rs}))
        worst = max(r["normalized_max"] for r in rs)
        lines.append(f"| {fam} | {bug} | {fmts} | {len(rs)} | {len(obs)} | "
                     f"{sum(not r['passed'] for r in obs)} / {len(obs)} | {sum(not r['passed'] for r in hid)} / {len(hid)} | "
                     f"{worst:.3g} |")
    errs = [r for r in rows if r.get("passed") is None]
    if errs:
        lines.append(f"\n{len(errs)} bug runs raised: " + "; ".join(sorted({r['bug'] + ': ' + r['error'][:80] for r in errs})[:5]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="", help="comma-separated ops (default: every op with a bug)")
    ap.add_argument("--quick", action="store_true", help="first shape and seed of each suite only")
    ap.add_argument("--controls", action="store_true", help="run CONTROLS (the hand-written code without its "
                    "bug) instead of the bugs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "real_bugs.json"))
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run([o for o in a.ops.split(",") if o] or None, quick=a.quick, bugs=CONTROLS if a.controls else BUGS,
               progress=lambda m: print(m, file=sys.stderr, flush=True))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"meta": {"seconds": round(time.perf_counter() - t0, 1), "quick": a.quick},
                                       "rows": rows}, indent=1))
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
