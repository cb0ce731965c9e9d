"""Diagnosis of a failing output: the likely cause of the error, from its evidence.

:func:`diagnose` compares an output ``y`` with the float64 truth ``t`` of the same computation and
tests one hypothesis per cause of :data:`CAUSES`.  Two kinds of test:

* **evidence** — statistics of the error itself: the sign-adjusted mean ULP error of truncation
  (``m = mean(e·sign t) ≈ −½`` with ``|e| ≤ 1``), a constant ratio ``y/t`` (scale), a constant
  output, non-finite values where ``t`` is finite, zeros where ``|t|`` is subnormal;
* **re-runs** — the reference recomputed under the suspected change (inputs rounded to bf16,
  fp16 or TF32; a tail of the reduction axis zeroed; the other axis; a one-pass variance; the
  causal mask shifted by one; the other GELU), through the ``rerun`` callable.  A hypothesis
  ``h`` explains the output when ``d(y, h) ≤ ¼·d(y, t)``, ``d`` the median ``|·|`` in output ULPs;
  its confidence is ``0.95·(1 − d(y, h)/d(y, t))``.

Each cause that fits gives one :class:`Diagnosis` entry; :func:`diagnose` returns them most
likely (highest confidence) first.  :func:`combine` merges the entries of several failing cases
(sum of confidences per cause, normalised by the number of cases).  The vocabulary, its tests and
the suggested fixes are documented in ``docs/grading.md`` ("Diagnosis").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["CAUSES", "FIXES", "Diagnosis", "diagnose", "combine"]

#: the documented vocabulary of causes: name -> one-sentence meaning
CAUSES: Mapping[str, str] = {
    "truncation": "rounding toward zero instead of to nearest (mean signed error ≈ −½ ulp)",
    "precision-downgrade": "inputs or intermediates in a narrower format (bf16, fp16, tf32, fp8)",
    "low-precision-accumulation": "a sum accumulated in a 16-bit format (error grows like K·u₁₆)",
    "missing-max-subtraction": "exp without subtracting the row max: overflow, NaN or zeros on large logits",
    "one-pass-variance": "var = E[x²] − E[x]²: error concentrated on rows with a large mean",
    "scale": "a constant relative error (a wrong scale factor or denominator)",
    "dropped-terms": "terms missing from a sum: a tile, a tail of K, or one term (exclusive scan)",
    "approximation": "a cheaper formula (tanh-gelu for erf-gelu, a short series, a bit-trick rsqrt)",
    "wrong-axis": "reduced over the wrong axis, or an operand transposed",
    "mask": "a causal or padding mask off by one, or applied where it should not be",
    "constant-output": "zeros, a constant, or an output that ignores its input",
    "flush-to-zero": "subnormal results (or inputs) flushed to zero",
    "specials": "NaN, ±inf or signed zeros where the exact result differs",
    "cached-output": "the same output for different inputs (a result cached from an earlier call)",
    "nondeterminism": "different outputs for the same inputs",
}

#: a suggested fix per cause (the review block quotes it)
FIXES: Mapping[str, str] = {
    "truncation": "convert to the output format with round-to-nearest-even (e.g. __float2bfloat16_rn, not _rz)",
    "precision-downgrade": "keep the inputs and intermediates in the declared format (disable TF32/autocast, "
                           "no .to(bfloat16) before the math)",
    "low-precision-accumulation": "accumulate in float32 and round once at the end",
    "missing-max-subtraction": "subtract each row's max before exp (log-sum-exp trick)",
    "one-pass-variance": "compute the variance in two passes (or Welford) around the mean",
    "scale": "check the scale factor / denominator (1/sqrt(E), N vs N−1, mean vs sum)",
    "dropped-terms": "check the loop bounds: the last tile, the K remainder, inclusive vs exclusive scan",
    "approximation": "use the exact formula (erf-gelu, a full-precision exp/rsqrt) or one that meets the standard",
    "wrong-axis": "reduce over the axis the reference uses; check operand layouts (transposes)",
    "mask": "check the mask's offset (j > i, not j > i + 1) and where it applies",
    "constant-output": "compute the output from the inputs (no placeholder, no reading the wrong buffer)",
    "flush-to-zero": "keep subnormals (no FTZ/DAZ compiler flags for this kernel)",
    "specials": "handle large/small arguments (clamp, case split) so inf/NaN/−inf appear only where exact",
    "cached-output": "compute every call from its own inputs (no memoisation, no output aliasing an input)",
    "nondeterminism": "make the kernel deterministic (fixed reduction order, no atomics), or declare it",
}

_EXP_OPS = ("softmax", "log_softmax", "cross_entropy", "attention")
_REDUCING = ("matmul", "linear", "sum", "mean", "cumsum", "softmax", "log_softmax", "layer_norm", "rms_norm",
             "attention", "cross_entropy", "mse_loss", "huber_loss", "smooth_l1_loss", "kl_div", "nll_loss", "hinge_embedding_loss")
_ELEMENTWISE = ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "rsqrt", "sqrt")


@dataclass(frozen=True)
class Diagnosis:
    """One likely cause of a failure: a :data:`CAUSES` name, a confidence in [0, 1], the evidence."""

    cause: str
    confidence: float
    evidence: str

    def to_dict(self) -> dict:
        return {"cause": self.cause, "confidence": round(float(self.confidence), 4), "evidence": self.evidence}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Diagnosis":
        return cls(str(d["cause"]), float(d["confidence"]), str(d["evidence"]))

    @property
    def fix(self) -> str:
        return FIXES.get(self.cause, "")


# ---------------------------------------------------------------------------------- helpers
def _f64(x: Any) -> np.ndarray:
    from ..core.arrays import to_numpy

    with np.errstate(all="ignore"):
        return np.asarray(to_numpy(x, name="output"), dtype=np.float64)


def _ulp(t: np.ndarray, fmt: Any) -> np.ndarray:
    """The ULP of ``fmt`` at ``|t|`` (subnormal spacing below the normal range)."""
    a = np.maximum(np.abs(np.where(np.isfinite(t), t, 0.0)), fmt.smallest_normal)
    return np.exp2(np.floor(np.log2(a)) - (fmt.p - 1))


def _dist(y: np.ndarray, h: np.ndarray, spacing: np.ndarray) -> float:
    """Median ``|y − h|`` in output ULPs over the elements both have finite (inf when none)."""
    ok = np.isfinite(y) & np.isfinite(h)
    if not ok.any():
        return float("inf")
    with np.errstate(all="ignore"):
        return float(np.median(np.abs(y[ok] - h[ok]) / spacing[ok]))


def _tail(y: np.ndarray, h: np.ndarray, spacing: np.ndarray) -> float:
    """The 99.9th percentile of ``|y − h|`` in output ULPs (inf when nothing is comparable)."""
    ok = np.isfinite(y) & np.isfinite(h)
    if not ok.any():
        return float("inf")
    with np.errstate(all="ignore"):
        return float(np.quantile(np.abs(y[ok] - h[ok]) / spacing[ok], 0.999))


def _bias(y: np.ndarray, h: np.ndarray, spacing: np.ndarray) -> float:
    """Mean of ``(y − h)·sign(h)`` in output ULPs over the elements both have finite and ``h ≠ 0``."""
    ok = np.isfinite(y) & np.isfinite(h) & (h != 0)
    if not ok.any():
        return float("nan")
    with np.errstate(all="ignore"):
        return float(np.mean((y[ok] - h[ok]) * np.sign(h[ok]) / spacing[ok]))


class _Case:
    """What the tests share: output, truth, their ULP errors, inputs and the re-run."""

    def __init__(self, y: np.ndarray, t: np.ndarray, fmt: Any, op: str | None, inputs: Sequence[Any] | None,
                 params: Mapping[str, Any], rerun: Callable[..., Any] | None) -> None:
        self.y, self.t, self.fmt, self.op, self.params = y, t, fmt, op, dict(params)
        self.inputs = None if inputs is None else [None if x is None else _f64(x) for x in inputs]
        self.rerun = rerun
        self.spacing = _ulp(t, fmt)
        self.fin = np.isfinite(y) & np.isfinite(t)
        with np.errstate(all="ignore"):
            self.e = np.where(self.fin, (y - t) / self.spacing, 0.0)
        self.d_truth = _dist(y, t, self.spacing)
        self.b_truth = _bias(y, t, self.spacing)
        self.b_truth = 0.0 if not np.isfinite(self.b_truth) else self.b_truth
        self.q_truth = _tail(y, t, self.spacing)
        self.n_special = int(((~np.isfinite(y) & np.isfinite(t)) | (np.isfinite(y) & ~np.isfinite(t))).sum())

    def explains(self, h: Any, label: str, cause: str, out: list, *, scale: float = 0.95) -> bool:
        """Add ``cause`` when the hypothesis output ``h`` explains ``y`` (module docstring): its median
        distance is ≤ ¼ of the truth's, or (for sub-ULP systematic errors) its mean signed error is."""
        if h is None:
            return False
        h = np.broadcast_to(_f64(h), self.t.shape)
        from ..core.formats import round_to

        h = np.asarray(round_to(h, self.fmt), dtype=np.float64) if self.fmt.p < 53 else h
        d = _dist(self.y, h, self.spacing)
        wrong = ~np.isfinite(self.y) & np.isfinite(self.t)
        same_specials = bool(wrong.any()) and bool(np.array_equal(~np.isfinite(h), ~np.isfinite(self.y)))
        conf = 0.0
        if self.d_truth > 0.5 and d <= 0.25 * self.d_truth or same_specials and d <= max(0.25 * self.d_truth, 0.5):
            conf = scale * (1.0 - d / self.d_truth) if 0.0 < self.d_truth < float("inf") else 0.9 * scale
            how = f"{d:.3g} ulp from the output (truth: {self.d_truth:.3g} ulp)"
        else:
            b, bt = _bias(self.y, h, self.spacing), self.b_truth
            q, qt = _tail(self.y, h, self.spacing), self.q_truth
            if np.isfinite(b) and abs(bt) > 0.1 and abs(b) <= 0.25 * abs(bt) and d <= self.d_truth + 0.1:
                conf = 0.9 * scale * (1.0 - abs(b) / abs(bt))
                how = f"mean signed error {b:+.3g} ulp against it (truth: {bt:+.3g} ulp)"
            elif qt > 2.0 and q <= 0.25 * qt and d <= self.d_truth + 0.1:
                conf = 0.85 * scale * (1.0 - q / qt)
                how = f"99.9th percentile error {q:.3g} ulp against it (truth: {qt:.3g} ulp)"
        if conf <= 0.0:
            return False
        out.append(Diagnosis(cause, max(conf, 0.5), f"{label}: {how}"))
        return True

    def run(self, inputs: Sequence[Any] | None = None, **params: Any) -> Any:
        if self.rerun is None:
            return None
        try:
            with np.errstate(all="ignore"):
                return self.rerun(self.inputs if inputs is None else inputs, **params)
        except Exception:  # noqa: BLE001 - a hypothesis the reference cannot express is not tested
            return None


# ---------------------------------------------------------------------------------- evidence
def _constant(c: _Case, out: list) -> None:
    y, t = c.y, c.t
    if y.size == 1 and y.reshape(-1)[0] == 0 and np.isfinite(t).all() and t.reshape(-1)[0] != 0:
        out.append(Diagnosis("constant-output", 0.9, f"the output is 0 where the truth is {t.reshape(-1)[0]:.6g}"))
        return
    if y.size < 2 or np.ptp(np.where(np.isfinite(t), t, 0.0)) == 0:
        return
    fy = y[np.isfinite(y)]
    if fy.size == y.size and np.ptp(fy) == 0:
        what = "zeros" if fy[0] == 0 else f"the constant {fy[0]:.6g}"
        out.append(Diagnosis("constant-output", 0.97, f"every one of the {y.size:,} outputs is {what}"))
        return
    if y.ndim >= 2 and y.shape[-1] > 1 and fy.size == y.size:
        rows_y = np.ptp(y, axis=-1) == 0
        rows_t = np.ptp(t, axis=-1) == 0
        if rows_y.all() and not rows_t.all():
            out.append(Diagnosis("constant-output", 0.9, "each output row is constant while the truth's rows vary"))


def _specials(c: _Case, out: list) -> None:
    bad = (~np.isfinite(c.y) & np.isfinite(c.t)) | (np.isfinite(c.y) & ~np.isfinite(c.t))
    zeros = (c.y == 0) & (np.abs(c.t) > 64 * c.spacing) & np.isfinite(c.t)
    n_bad = int(bad.sum())
    if c.op in _EXP_OPS and c.inputs:
        rows = _exp_rows(c)
        if rows is not None and (n_bad or zeros.any()):
            hot, far = rows
            y2 = (bad | zeros).reshape(-1, bad.shape[-1]) if bad.ndim >= 1 and bad.size else None
            if y2 is not None and y2.shape[0] == hot.size:
                hit = y2.any(axis=1)
                fits = [sus for sus in (hot, far, hot | far) if sus.any() and sus[hit].mean() >= 0.9
                        and hit[sus].mean() >= 0.9]
                if hit.any() and fits:
                    out.append(Diagnosis("missing-max-subtraction", 0.92,
                                         f"the {int(hit.sum())} rows with NaN/inf/zero outputs are the rows whose "
                                         "logits exceed 88.7 (exp overflows) or lie far below the tensor's max"))
                    return
            elif n_bad and (hot.any() or far.any()):
                out.append(Diagnosis("missing-max-subtraction", 0.85,
                                     f"{n_bad} non-finite outputs where the truth is finite; logits reach "
                                     f"{_max_logit(c):.3g} (exp overflows beyond 88.7)"))
                return
    if n_bad and c.op == "cross_entropy" and c.inputs and _max_logit(c) > 88.7:
        out.append(Diagnosis("missing-max-subtraction", 0.9, f"{n_bad} non-finite losses where the truth is finite; "
                                                             f"logits reach {_max_logit(c):.3g} (exp overflows beyond 88.7)"))
        return
    if n_bad:
        rest = np.abs(c.e[c.fin])
        conf = 0.85 if rest.size == 0 or float(np.quantile(rest, 0.99)) <= 4.0 else 0.45
        kinds = ", ".join(k for k, m in (("NaN", np.isnan(c.y)), ("±inf", np.isinf(c.y))) if (m & bad).any())
        out.append(Diagnosis("specials", conf, f"{n_bad} outputs are {kinds or 'finite'} where the truth is "
                                               f"{'finite' if kinds else 'not'}"))


def _max_logit(c: _Case) -> float:
    x = c.inputs[0]
    return float(np.nanmax(np.where(np.isfinite(x), x, -np.inf))) if x is not None and x.size else 0.0


def _exp_rows(c: _Case) -> tuple[np.ndarray, np.ndarray] | None:
    """Per output row: its logits exceed 88.7 (``hot``), or lie 80 below the tensor's max (``far``)."""
    x = c.inputs[0]
    if c.op == "attention" and len(c.inputs) >= 2:
        q, k = c.inputs[0], c.inputs[1]
        scale = c.params.get("scale") or 1.0 / np.sqrt(q.shape[-1])
        x = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    elif c.op in ("softmax", "log_softmax"):
        x = np.moveaxis(x, int(c.params.get("axis", -1)), -1)
    if c.op == "cross_entropy" or x is None or x.ndim < 1:
        return None
    m = np.max(x, axis=-1).reshape(-1)
    return m > 88.7, m < np.max(m) - 80.0


def _flush(c: _Case, out: list) -> None:
    sub = np.isfinite(c.t) & (c.t != 0) & (np.abs(c.t) < c.fmt.smallest_normal)
    flushed = sub & (c.y == 0)
    rest = np.abs(c.e[c.fin & ~sub])
    if c.n_special or (rest.size and float(np.quantile(rest, 0.999)) > 2.0):
        return
    if flushed.sum() >= max(1, 0.5 * sub.sum()) and sub.any():
        out.append(Diagnosis("flush-to-zero", 0.88, f"{int(flushed.sum())} of {int(sub.sum())} subnormal results "
                                                    "are zero"))


def _truncation(c: _Case, out: list) -> None:
    from ..core.formats import round_to

    ok = c.fin & (c.t != 0)
    if ok.sum() < 8 or c.fmt.p >= 53:
        return
    t = c.t[ok]
    rne = np.asarray(round_to(t, c.fmt), dtype=np.float64)
    rtz = np.asarray(round_to(t, c.fmt, "rtz"), dtype=np.float64)
    differ = rne != rtz
    a = c.e[ok] * np.sign(t)
    m = float(a.mean())
    if differ.sum() >= 8:
        at_rtz = float((c.y[ok][differ] == rtz[differ]).mean())
        if at_rtz >= 0.7:
            out.append(Diagnosis("truncation", 0.9 * at_rtz, f"{at_rtz:.0%} of the outputs where RNE and RTZ differ "
                                                             f"are the RTZ value; mean signed error {m:+.2f} ulp "
                                                             "toward zero"))
            return
    if -0.8 <= m <= -0.25 and float((a <= 0).mean()) >= 0.7 and float(np.quantile(np.abs(a), 0.99)) <= 2.0:
        out.append(Diagnosis("truncation", 0.6, f"mean signed error {m:+.2f} ulp toward zero, "
                                                f"{float((a <= 0).mean()):.0%} of the errors toward zero"))


def _scale(c: _Case, out: list) -> None:
    if c.n_special:
        return
    y, t = _core(c, c.y), _core(c, c.t)
    ok = np.isfinite(y) & np.isfinite(t) & (np.abs(t) > 0)
    if not ok.any():
        return
    big = ok & (np.abs(t) >= 1e-3 * np.max(np.abs(t[ok])))
    r = y[big] / t[big]
    if r.size == 0:
        return
    lo, hi = np.quantile(r, [0.1, 0.9])
    s = float(np.mean(r[(r >= lo) & (r <= hi)])) if r.size >= 10 else float(np.median(r))
    if not np.isfinite(s) or abs(s) < 1e-3 or abs(s - 1.0) < 0.05 * c.fmt.u:
        return
    if r.size == 1:
        simple = any(abs(x - round(x)) < 1e-3 * max(1.0, abs(x)) and round(x) != 0 for x in (s, 1 / s))
        out.append(Diagnosis("scale", 0.8 if simple else 0.4, f"the output is {s:.6g}× the truth"))
        return
    c.explains(_uncore(c, s * t), f"the truth times {s:.6g}", "scale", out, scale=0.9)


def _attention_scale(c: _Case, out: list) -> None:
    if c.op == "attention" and c.inputs:
        E = c.inputs[0].shape[-1]
        for sc, what in ((1.0, "1"), (1.0 / E, "1/E")):
            if c.explains(c.run(scale=sc), f"the reference with scale = {what}", "scale", out):
                return


def _uncore(c: _Case, v: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_core`."""
    if c.op in ("layer_norm", "rms_norm") and c.inputs:
        w = c.inputs[1] if len(c.inputs) > 1 and c.inputs[1] is not None else 1.0
        b = c.inputs[2] if len(c.inputs) > 2 and c.inputs[2] is not None and c.op == "layer_norm" else 0.0
        return v * w + b
    return v


def _core(c: _Case, v: np.ndarray) -> np.ndarray:
    """The normalised value of a norm's output, ``(v − bias)/weight``, so that a scale shows as a ratio."""
    if c.op in ("layer_norm", "rms_norm") and c.inputs:
        w = c.inputs[1] if len(c.inputs) > 1 else None
        b = c.inputs[2] if len(c.inputs) > 2 and c.op == "layer_norm" else None
        w = 1.0 if w is None else np.where(w == 0, 1.0, w)
        with np.errstate(all="ignore"):
            v = v - (b if b is not None else 0.0)
            return v / w if w is not None else v
    return v


# ---------------------------------------------------------------------------------- re-runs
def _downgrade(c: _Case, out: list) -> None:
    from ..core.formats import get_format, round_to

    if not c.inputs:
        return
    fl = [x for x in c.inputs if x is not None and x.dtype.kind == "f"]
    if not fl:
        return
    for name in ("bfloat16", "float16", "tf32"):
        f = get_format(name)
        changed = [None if x is None else np.asarray(round_to(x, f), dtype=np.float64) for x in c.inputs]
        if any(x is not None and bool((np.isfinite(x) & ~np.isfinite(z)).any()) for x, z in zip(c.inputs, changed)):
            continue  # the inputs overflow that format: not a downgrade a kernel makes
        if all(x is None or np.array_equal(x, y, equal_nan=True) for x, y in zip(changed, c.inputs)):
            continue
        if c.explains(c.run(changed), f"the reference on inputs rounded to {name}", "precision-downgrade", out):
            return


def _accumulation(c: _Case, out: list) -> None:
    from ..emulate import accumulate
    from ..core.formats import get_format

    if c.op not in ("sum", "mean", "matmul", "linear", "cumsum", "softmax", "log_softmax") or not c.inputs:
        return
    x = c.inputs[0]
    for name in ("bfloat16", "float16"):
        acc = get_format(name)
        try:
            with np.errstate(all="ignore"):
                if c.op in ("softmax", "log_softmax"):
                    axis = int(c.params.get("axis", -1))
                    v = np.moveaxis(x, axis, -1)
                    e = np.exp(v - np.max(v, axis=-1, keepdims=True))
                    tot = accumulate(e, -1, order="sequential", acc=acc)[..., None]
                    h = np.moveaxis(e / tot if c.op == "softmax" else np.log(e) - np.log(tot), -1, axis)
                elif c.op in ("sum", "mean"):
                    axis = c.params.get("axis")
                    if axis is not None and not isinstance(axis, int):
                        return
                    v = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
                    h = accumulate(v, -1, order="sequential", acc=acc)
                    h = h / (v.shape[-1] if c.op == "mean" else 1)
                    if c.params.get("keepdims") and axis is not None:
                        h = np.expand_dims(h, axis)
                elif c.op == "cumsum":
                    axis = int(c.params.get("axis", -1))
                    v = np.moveaxis(x, axis, -1)
                    run = np.zeros(v.shape[:-1])
                    cols = []
                    from ..core.formats import round_to

                    for j in range(v.shape[-1]):
                        run = np.asarray(round_to(run + v[..., j], acc), dtype=np.float64)
                        cols.append(run)
                    h = np.moveaxis(np.stack(cols, -1), -1, axis)
                else:
                    b = c.inputs[1] if c.op == "matmul" else np.swapaxes(c.inputs[1], -1, -2)
                    if x.ndim != 2 or b.ndim != 2 or x.shape[0] * x.shape[1] * b.shape[1] > 2 ** 25:
                        return
                    h = accumulate(x[:, :, None] * b[None, :, :], 1, order="sequential", acc=acc)
                    if c.op == "linear" and len(c.inputs) > 2 and c.inputs[2] is not None:
                        h = h + c.inputs[2]
        except Exception:  # noqa: BLE001
            return
        if c.explains(h, f"the sum accumulated sequentially in {name}", "low-precision-accumulation", out):
            return


def _dropped(c: _Case, out: list) -> None:
    if not c.inputs or c.op not in ("sum", "mean", "matmul", "linear", "cumsum", "attention"):
        return
    x = c.inputs[0]
    if c.op == "cumsum":
        axis = int(c.params.get("axis", -1))
        c.explains(c.t - x, "the inclusive scan minus its own term (an exclusive scan)", "dropped-terms", out)
        K = x.shape[axis]
        xl = np.moveaxis(x, axis, -1)
        tl = np.moveaxis(c.t, axis, -1)
        for tile in (128, 64):
            keep = K - (K % tile or tile)
            z = tl.copy()
            z[..., keep:] = 0.0
            if c.explains(np.moveaxis(z, -1, axis), f"the scan with its last {K - keep} outputs never written (a tile "
                                                    "dropped)", "dropped-terms", out):
                return
            pad = (-K) % tile
            chunks = np.concatenate([xl, np.zeros(xl.shape[:-1] + (pad,))], -1).reshape(*xl.shape[:-1], -1, tile)
            h = np.cumsum(chunks, -1).reshape(*xl.shape[:-1], -1)[..., :K]
            if K > tile and c.explains(np.moveaxis(h, -1, axis), f"chunks of {tile} scanned without the carries of "
                                                                 "earlier chunks", "dropped-terms", out):
                return
        return
    if c.op == "attention":
        S = c.inputs[1].shape[-2]
        for tile in (64, 128):
            keep = S - (S % tile or tile)
            if keep > 0:
                ins = [c.inputs[0], c.inputs[1][..., :keep, :], c.inputs[2][..., :keep, :]]
                if c.explains(c.run(ins), f"the reference without the last {S - keep} keys", "dropped-terms", out):
                    return
        return
    axis = -1 if c.op in ("matmul", "linear") else c.params.get("axis")
    if axis is not None and not isinstance(axis, int):
        return
    K = x.size if axis is None else x.shape[axis]
    for tile in (64, 128):
        for r in sorted({K % tile or tile, tile}):
            if 0 < r < K or r == K <= tile:  # (K within one tile: the last tile is all of it)
                v = np.moveaxis(x.copy(), -1 if axis is None else axis, -1) if axis is not None else x.reshape(-1).copy()
                v[..., K - r:] = 0.0
                z = np.moveaxis(v, -1, axis) if axis is not None else v.reshape(x.shape)
                if c.explains(c.run([z, *c.inputs[1:]]), f"the reference without the last {r} of {K} terms",
                              "dropped-terms", out):
                    return
    if c.op in ("matmul", "linear"):
        z = x.copy()
        z[..., :128] *= 2.0
        c.explains(c.run([z, *c.inputs[1:]]), "the reference with the first tile of 128 added twice",
                   "dropped-terms", out)


def _axis(c: _Case, out: list) -> None:
    if not c.inputs:
        return
    x = c.inputs[0]
    if c.op in ("matmul", "linear") and len(c.inputs) > 1 and c.inputs[1] is not None and c.inputs[1].ndim >= 2:
        b = c.inputs[1] if c.op == "matmul" else np.swapaxes(c.inputs[1], -1, -2)
        k, n = b.shape[-2:]
        wrong = np.swapaxes(np.ascontiguousarray(b).reshape(*b.shape[:-2], n, k), -1, -2)  # B's buffer, other layout
        ins = [x, wrong if c.op == "matmul" else np.swapaxes(wrong, -1, -2), *c.inputs[2:]]
        c.explains(c.run(ins), "the reference with B's buffer read in the transposed layout" if k != n else
                   "the reference with B transposed", "wrong-axis", out)
        return
    if c.op in ("softmax", "log_softmax", "cumsum") and x.ndim >= 2:
        axis = int(c.params.get("axis", -1)) % x.ndim
        for other in range(x.ndim):
            if other != axis and c.explains(c.run(axis=other), f"the reference over axis {other}", "wrong-axis", out):
                return
    if c.op == "attention":
        c.explains(_attention(c, softmax_axis=-2), "attention with the softmax over the query axis", "wrong-axis",
                   out)


def _mask(c: _Case, out: list) -> None:
    if c.op != "attention" or not c.inputs:
        return
    causal = bool(c.params.get("causal"))
    for off in ((1, -1) if causal else (0,)):
        label = f"the causal mask shifted by {off:+d}" if causal else "a causal mask applied"
        if c.explains(_attention(c, causal=True, offset=off), label, "mask", out):
            return
    if causal:
        c.explains(c.run(causal=False), "the reference without its causal mask", "mask", out)


def _attention(c: _Case, *, softmax_axis: int = -1, causal: bool | None = None, offset: int = 0) -> np.ndarray | None:
    """float64 attention under a hypothesis (softmax axis, causal mask ``j > i + offset``)."""
    q, k, v = c.inputs[:3]
    if q.shape[-2] * k.shape[-2] * max(1, q.size // (q.shape[-1] * q.shape[-2])) > 2 ** 24:
        return None
    scale = c.params.get("scale") or 1.0 / np.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    causal = bool(c.params.get("causal")) if causal is None else causal
    if causal:
        i = np.arange(s.shape[-2])[:, None]
        j = np.arange(s.shape[-1])[None, :]
        s = np.where(j > i + offset, -np.inf, s)
    with np.errstate(all="ignore"):
        p = np.exp(s - np.max(s, axis=softmax_axis, keepdims=True))
        p = p / np.sum(p, axis=softmax_axis, keepdims=True)
    return np.matmul(p, v)


def _variance(c: _Case, out: list) -> None:
    """One-pass variance scales each row of the normalised output by its own factor ``σ/σ̃``, largest
    where ``(μ/σ)²·u_acc`` is: a per-row scale that explains the output, on rows with ``|μ|/σ ≫ 1``."""
    if c.op != "layer_norm" or not c.inputs or c.n_special or c.y.ndim < 1:
        return
    x = c.inputs[0]
    y, t = _core(c, c.y), _core(c, c.t)
    with np.errstate(all="ignore"):
        r = np.where(np.abs(t) > 1e-3, y / t, np.nan)
        s = np.nanmedian(r, axis=-1, keepdims=True)
        mu = np.abs(np.mean(x, axis=-1)) / (np.std(x, axis=-1) + 1e-300)
    if not np.isfinite(s).all() or float(np.median(mu)) < 30.0:
        return
    c.explains(_uncore(c, s * t), f"a per-row scale (rows' |mean|/std median {float(np.median(mu)):.3g}: "
                                  "E[x²] − E[x]² cancels)", "one-pass-variance", out)


def _gelu(c: _Case, out: list) -> None:
    if c.op == "gelu":
        other = "none" if c.params.get("approximate", "none") == "tanh" else "tanh"
        c.explains(c.run(approximate=other), f"gelu with approximate='{other}'", "approximation", out)


def _approximation(c: _Case, out: list) -> None:
    """An elementwise op off by more than one ULP on the median finite element: a cheaper formula."""
    if c.op in _ELEMENTWISE and c.fin.any():
        med = float(np.median(np.abs(c.e[c.fin])))
        if med > 1.0:
            out.append(Diagnosis("approximation", 0.5, f"a smooth elementwise error of {med:.3g} ulp (median): a "
                                                        "cheaper formula"))


def _fallback(c: _Case, out: list) -> None:
    """Low-confidence guesses from the op's kind when no test fits."""
    if c.d_truth == 0 or not np.isfinite(c.d_truth):
        return
    if c.op in _ELEMENTWISE:
        out.append(Diagnosis("approximation", 0.35, f"an elementwise error of {c.d_truth:.3g} ulp (median): "
                                                     "a cheaper formula"))
    elif c.op in _REDUCING and c.d_truth >= 1.0:
        out.append(Diagnosis("low-precision-accumulation", 0.3, f"a reduction off by {c.d_truth:.3g} ulp (median)"))


_TESTS = (_constant, _specials, _flush, _truncation, _scale, _attention_scale, _downgrade, _accumulation, _dropped, _axis, _mask,
          _variance, _gelu, _approximation)


def diagnose(actual: Any, truth: Any, *, fmt: Any = None, op: str | None = None, inputs: Sequence[Any] | None = None,
             params: Mapping[str, Any] | None = None, rerun: Callable[..., Any] | None = None,
             limit: int = 3) -> tuple[Diagnosis, ...]:
    """The likely causes of ``actual``'s error against ``truth``, most likely first.

    Parameters
    ----------
    actual : array-like
        The failing output.
    truth : array-like
        The exact (float64) result of the same computation, same shape.
    fmt : format-like, optional
        The output format whose ULPs measure the errors (default: ``actual``'s dtype).
    op : str, optional
        The catalog op (enables the op's re-run hypotheses).
    inputs : sequence of arrays, optional
        The inputs the output was computed from (the op's, in order).
    params : mapping, optional
        The op parameters.
    rerun : callable, optional
        ``rerun(inputs, **params) -> float64 array``: the reference recomputed on changed inputs or
        parameters (``numstd.reference(op, inputs, **params).values`` for a catalog op).
    limit : int
        At most this many entries.

    Returns
    -------
    tuple of Diagnosis
        Empty when no cause fits (or the output equals the truth).
    """
    from ..core.formats import format_of, get_format

    y = _f64(actual)
    t = np.broadcast_to(_f64(truth), y.shape) if y.shape else _f64(truth).reshape(y.shape)
    f = get_format(fmt) if fmt is not None else format_of(actual)
    c = _Case(y.reshape(y.shape), np.asarray(t, dtype=np.float64), f, op, inputs, params or {}, rerun)
    found: list[Diagnosis] = []
    for test in _TESTS:
        try:
            test(c, found)
        except (ValueError, IndexError, TypeError, FloatingPointError):  # a shape the test does not model
            continue
    if not found:
        _fallback(c, found)
    best: dict[str, Diagnosis] = {}
    for d in found:
        if d.cause not in best or d.confidence > best[d.cause].confidence:
            best[d.cause] = d
    return tuple(sorted(best.values(), key=lambda d: -d.confidence)[:limit])


def combine(groups: Sequence[Sequence[Diagnosis]], *, limit: int = 3) -> tuple[Diagnosis, ...]:
    """Merge the diagnoses of several failing cases: mean confidence per cause over the cases.

    The evidence of each merged entry is that of its most confident case, prefixed with the count
    of cases the cause was found in.
    """
    n = max(1, len(groups))
    total: dict[str, float] = {}
    top: dict[str, Diagnosis] = {}
    seen: dict[str, int] = {}
    for g in groups:
        for d in g:
            total[d.cause] = total.get(d.cause, 0.0) + d.confidence
            seen[d.cause] = seen.get(d.cause, 0) + 1
            if d.cause not in top or d.confidence > top[d.cause].confidence:
                top[d.cause] = d
    out = [Diagnosis(k, total[k] / n, f"in {seen[k]}/{n} failing cases; {top[k].evidence}") for k in total]
    return tuple(sorted(out, key=lambda d: -d.confidence)[:limit])
