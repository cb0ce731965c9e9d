"""Suites: seeded, reproducible input sets for an op (DESIGN.md "Suite").

A case is ``(op, shape, distribution, seed)``; :func:`make_case` regenerates its inputs bit for bit on
any machine (numpy's PCG64 stream from ``np.random.default_rng([seed, crc32(case id)])``), already
rounded (RNE) into the standard's input formats, so captures from different machines join by
:attr:`Case.id`.

Distributions (what each can reveal; see DESIGN.md "Inputs decide what can be seen"):

``normal``     N(0, 1): the common case.
``uniform``    U(−1, 1): signed, bounded.
``uniform01``  U[0, 1): what KernelBench draws; hides dropped negative branches (kept for comparison).
``heavy``      Student-t with 2 degrees of freedom: rare large values.
``offset``     N(0, 1) + 100 per row: large mean, small spread (one-pass variance, cancellation);
               for the channel norms ±100 per normalised channel group.
``large``      N(0, 1)·40: large logits (missing max-subtraction overflows exp).
``rowscale``   rows scaled by 10^U(−2, 2.5): rows that differ by hundreds (softmax with a global max).
``wide``       sign·2^U(−40, 40) clipped to the format's range: huge dynamic range.
``smallvar``   1 + N(0, 1)·0.01 per row: variance near eps (missing or misplaced eps).
``specials``   normal plus ±0, subnormals, ±max and values at the format's rounding boundaries.
``ties``       per row, four equally spaced values (steps of 0.5: exact in every format) from
               {−1.5 … 0}, {0 … 1.5} or {−0.75 … 0.75}, zeros of random sign: many ties, and rows
               whose maximum (or minimum) is a zero held as both −0 and +0 (the extrema).
``nonfinite``  normal with, per row (last axis), a NaN, a +inf, a −inf, NaN and +inf together, or a
               whole row of +inf or −inf (about 40 % of rows): NaN propagation and infinite extrema.

Shapes by op: matmul ``[M, K, N]`` (``[B, M, K, N]`` batched), scaled_matmul ``[M, K, N]`` (real operands
quantized by the scale rule of the suite's ``scaling``), linear ``[rows, in, out]``,
row ops and elementwise ops the shape of ``x``, attention ``[B, L, S, E]``, cross_entropy ``[N, C]``,
mse_loss, huber_loss and smooth_l1_loss the shape of ``input``; kl_div ``[N, C]``, log_softmax rows
against softmax rows (log_softmax with ``log_target``) (``target`` an independent draw of the same distribution); the
channel norms and pooling the shape of ``x`` (``(N, C, *spatial)``; the norms' weight ``1 + 0.1 N(0, 1)``,
bias ``0.1 N(0, 1)`` per channel, batch_norm's running mean and variance near the batch's own);
conv ``[N, C_in, C_out, groups, stride, padding, dilation, *kernel, *spatial]`` (1 to 3 spatial
dims; the last four parameters become the case's ``params``, the weight is drawn normal / sqrt(K)),
conv_transpose ``[N, C_in, C_out, groups, stride, padding, output_padding, dilation, *kernel, *spatial]``
(weight ``(C_in, C_out/groups, *kernel)``).
Positive-domain functions (log, sqrt, rsqrt) take ``|x|`` (and ``|x| + smallest normal`` for rsqrt).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["DISTRIBUTIONS", "MASKED", "Case", "make_case", "cases_for", "draw"]

DISTRIBUTIONS = ("normal", "uniform", "uniform01", "heavy", "offset", "large", "rowscale", "wide", "smallvar", "specials",
                 "ties", "nonfinite")


#: suffix of a cumsum distribution whose cases also draw a boolean ``mask`` (each element kept with
#: probability 1/2, drawn after x): ``"normal+mask"`` (the masked-cumsum standards' suites)
MASKED = "+mask"


@dataclass(frozen=True)
class Case:
    """One suite case and its regenerated inputs."""

    op: str
    shape: tuple
    distribution: str
    seed: int
    inputs: list = field(compare=False, repr=False)
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def id(self) -> str:
        """Stable case ID, e.g. ``matmul/64x256x32/normal/s0``."""
        return f"{self.op}/{'x'.join(map(str, self.shape))}/{self.distribution}/s{self.seed}"


def _rng(case_id: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(case_id.encode())])


def draw(rng: np.random.Generator, shape: Sequence[int], dist: str, fmt: Any = "float32") -> np.ndarray:
    """Float64 values of ``shape`` from distribution ``dist`` (before rounding into ``fmt``).

    Raises
    ------
    ParameterError
        For an unknown distribution name.
    """
    from ..core.errors import ParameterError
    from ..core.formats import get_format

    f = get_format(fmt)
    shape = tuple(int(s) for s in shape)
    rows = shape[:-1] + (1,) if shape else ()
    if dist == "normal":
        x = rng.standard_normal(shape)
    elif dist == "uniform":
        x = rng.uniform(-1.0, 1.0, shape)
    elif dist == "uniform01":
        x = rng.uniform(0.0, 1.0, shape)
    elif dist == "heavy":
        x = rng.standard_t(2.0, shape)
    elif dist == "offset":
        x = rng.standard_normal(shape) + 100.0 * np.where(rng.random(rows) < 0.5, -1.0, 1.0)
    elif dist == "large":
        x = rng.standard_normal(shape) * 40.0
    elif dist == "rowscale":
        x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-2.0, 2.5, rows)
    elif dist == "wide":
        lim = min(40.0, 0.45 * f.emax)
        x = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * 2.0 ** rng.uniform(-lim, lim, shape)
    elif dist == "smallvar":
        x = 1.0 + rng.standard_normal(shape) * 0.01
    elif dist == "specials":
        x = rng.standard_normal(shape)
        flat = x.reshape(-1)
        n = flat.size
        if n:
            specials = np.array([0.0, -0.0, f.smallest_subnormal, -f.smallest_subnormal, f.smallest_normal,
                                 f.max_finite / 4, -f.max_finite / 4, 1.0 + f.eps / 2, 1.0 - f.eps / 4])
            k = min(n // 8 + 1, n)
            pos = rng.choice(n, size=k, replace=False)
            flat[pos] = specials[rng.integers(0, specials.size, k)]
    elif dist == "ties":
        lo = rng.choice(np.array([-1.5, 0.0, -0.75]), size=rows)
        x = lo + 0.5 * rng.integers(0, 4, shape)
        x = np.where(x == 0, np.where(rng.random(shape) < 0.5, -0.0, 0.0), x)
    elif dist == "nonfinite":
        x = _nonfinite(rng, shape)
    else:
        raise ParameterError(f"unknown distribution {dist!r}; use one of {', '.join(DISTRIBUTIONS)}")
    return np.asarray(x, dtype=np.float64)


def _nonfinite(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """``normal`` with NaN and infinities placed per row of the last axis (``nonfinite``, module docstring)."""
    x = rng.standard_normal(shape)
    k = shape[-1] if shape else 1
    t = x.reshape(-1, k) if k else x.reshape(0, 0)
    kind = rng.random(t.shape[0])
    pos = rng.integers(0, max(k, 1), (t.shape[0], 2))
    for r in range(t.shape[0]):
        c = kind[r]
        if c < 0.1:
            t[r, pos[r, 0]] = np.nan
        elif c < 0.2:
            t[r, pos[r, 0]] = np.inf
        elif c < 0.3:
            t[r, pos[r, 0]] = -np.inf
        elif c < 0.35:
            t[r, pos[r, 0]], t[r, pos[r, 1]] = np.inf, np.nan
        elif c < 0.375:
            t[r] = np.inf
        elif c < 0.4:
            t[r] = -np.inf
    return t.reshape(shape)


def _clip(x: np.ndarray, f: Any) -> np.ndarray:
    """``x`` clipped to the format's finite range; infinities (the ``nonfinite`` draws) are kept."""
    return np.where(np.isinf(x), x, np.clip(x, -f.max_finite, f.max_finite))


def make_case(op: str, shape: Sequence[int], distribution: str, seed: int, formats: Sequence[Any],
              params: Mapping[str, Any] | None = None) -> Case:
    """Regenerate one case's inputs, rounded (RNE) into ``formats`` (one per input; the last repeats)."""
    from ..core.formats import get_format, round_to
    from ..ops import get_op
    from ..ops.similarity import SIMILARITY_OPS, suite_inputs

    shape = tuple(int(s) for s in shape)
    case = Case(op, shape, distribution, int(seed), [], dict(params or {}))
    rng = _rng(case.id, seed)
    fmts = [get_format(f) for f in formats]

    def fmt(i: int) -> Any:
        return fmts[min(i, len(fmts) - 1)]

    def q(x: np.ndarray, i: int) -> np.ndarray:
        return round_to(_clip(x, fmt(i)), fmt(i))

    if op == "matmul":
        *b, m, k, n = shape
        a_ = draw(rng, (*b, m, k), distribution, fmt(0))
        b_ = draw(rng, (*b, k, n), "normal" if distribution in ("offset", "smallvar") else distribution, fmt(1))
        inputs = [q(a_, 0), q(b_, 1)]
    elif op == "linear":
        rows, fin, fout = shape
        inputs = [q(draw(rng, (rows, fin), distribution, fmt(0)), 0),
                  q(draw(rng, (fout, fin), "normal", fmt(1)) / np.sqrt(fin), 1),
                  q(draw(rng, (fout,), "normal", fmt(2)), 2)]
    elif op == "conv":
        n, cin, cout, groups, stride, pad, dil, *rest = shape
        nd = len(rest) // 2
        kernel, spatial = rest[:nd], rest[nd:]
        params = {**dict(params or {}), "groups": groups, "stride": stride, "padding": pad, "dilation": dil}
        k = cin // max(groups, 1) * int(np.prod(kernel))
        inputs = [q(draw(rng, (n, cin, *spatial), distribution, fmt(0)), 0),
                  q(draw(rng, (cout, cin // max(groups, 1), *kernel), "normal", fmt(1)) / np.sqrt(k), 1),
                  q(draw(rng, (cout,), "normal", fmt(2)), 2)]
    elif op == "conv_transpose":
        n, cin, cout, groups, stride, pad, opad, dil, *rest = shape
        nd = len(rest) // 2
        kernel, spatial = rest[:nd], rest[nd:]
        params = {**dict(params or {}), "groups": groups, "stride": stride, "padding": pad,
                  "output_padding": opad, "dilation": dil}
        k = cin // max(groups, 1) * int(np.prod(kernel))
        inputs = [q(draw(rng, (n, cin, *spatial), distribution, fmt(0)), 0),
                  q(draw(rng, (cin, cout // max(groups, 1), *kernel), "normal", fmt(1)) / np.sqrt(k), 1),
                  q(draw(rng, (cout,), "normal", fmt(2)), 2)]
    elif op == "attention":
        bsz, lq, s, e = shape
        inputs = [q(draw(rng, (bsz, lq, e), distribution, fmt(0)), 0),
                  q(draw(rng, (bsz, s, e), distribution, fmt(1)), 1),
                  q(draw(rng, (bsz, s, e), "normal", fmt(2)), 2)]
    elif op == "cross_entropy":
        nrow, c = shape
        inputs = [q(draw(rng, (nrow, c), distribution, fmt(0)), 0), rng.integers(0, c, nrow)]
    elif op in ("mse_loss", "huber_loss", "smooth_l1_loss"):
        inputs = [q(draw(rng, shape, distribution, fmt(0)), 0), q(draw(rng, shape, distribution, fmt(1)), 1)]
    elif op in ("group_norm", "instance_norm", "batch_norm"):
        c = shape[1]
        if distribution == "offset":  # a large mean per normalised group (per channel group), small spread
            groups = int((params or {}).get("num_groups", c)) if op == "group_norm" else c
            sign = np.where(rng.random(groups) < 0.5, -1.0, 1.0).repeat(c // groups)
            x = q(rng.standard_normal(shape) + 100.0 * sign.reshape((1, c) + (1,) * (len(shape) - 2)), 0)
        else:
            x = q(draw(rng, shape, distribution, fmt(0)), 0)
        w, b = q(1.0 + 0.1 * rng.standard_normal(c), 1), q(0.1 * rng.standard_normal(c), 2)
        if op == "batch_norm":  # running statistics near the batch's (used when training=False)
            xs = np.moveaxis(np.asarray(x, dtype=np.float64), 1, 0).reshape(c, -1)
            rm = q(xs.mean(axis=1) + 0.1 * rng.standard_normal(c), 1)
            rv = q(xs.var(axis=1) * np.exp(0.2 * rng.standard_normal(c)), 1)
            inputs = [x, rm, rv, w, b]
        else:
            inputs = [x, w, b]
    elif op == "cumsum" and distribution.endswith(MASKED):  # (x from the base distribution, then a mask)
        x = q(draw(rng, shape, distribution[:-len(MASKED)], fmt(0)), 0)
        inputs = [x, rng.random(shape) < 0.5]
    elif op == "hinge_embedding_loss":  # targets +-1 with equal odds
        inputs = [q(draw(rng, shape, distribution, fmt(0)), 0), q(rng.choice([-1.0, 1.0], size=tuple(shape)), 1)]
    elif op == "nll_loss":  # log_softmax rows; about 1 in 8 targets is ignore_index
        nrow, c = shape
        z = draw(rng, (nrow, c), distribution, fmt(0))
        z = z - z.max(axis=-1, keepdims=True)
        t = rng.integers(0, c, nrow)
        t[rng.random(nrow) < 0.125] = (params or {}).get("ignore_index", -100)
        inputs = [q(z - np.log(np.exp(z).sum(axis=-1, keepdims=True)), 0), t]
    elif op == "kl_div":  # log-probabilities against probabilities (log-probabilities for log_target)
        def logp(z: np.ndarray) -> np.ndarray:
            z = z - z.max(axis=-1, keepdims=True)
            return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

        lt = logp(draw(rng, shape, distribution, fmt(1)))
        inputs = [q(logp(draw(rng, shape, distribution, fmt(0))), 0),
                  q(lt if (params or {}).get("log_target") else np.exp(lt), 1)]
    elif op == "scaled_matmul":  # codes and scales of each layout's scale rule (numstd.ops.scaled.suite_inputs)
        from ..ops.scaled import suite_inputs as scaled_inputs

        inputs = scaled_inputs(rng, shape, distribution, lambda s, d: draw(rng, s, d, "float32"), fmts, params or {})
    elif op in SIMILARITY_OPS:  # (zero and tiny rows, a spread of cosines: numstd.ops.similarity.suite_inputs)
        inputs = suite_inputs(op, rng, shape, distribution, lambda s, d: draw(rng, s, d, fmt(0)), q, params or {})
    elif op in ("layer_norm", "rms_norm"):
        x = q(draw(rng, shape, distribution, fmt(0)), 0)
        w = q(1.0 + 0.1 * rng.standard_normal(shape[-1:]), 1)
        inputs = [x, w] + ([q(0.1 * rng.standard_normal(shape[-1:]), 2)] if op == "layer_norm" else [])
    else:
        x = draw(rng, shape, distribution, fmt(0))
        if get_op(op).positive:
            x = np.abs(x) + (fmt(0).smallest_normal if op == "rsqrt" else 0.0)
        inputs = [q(x, 0)]
    return Case(op, shape, distribution, int(seed), inputs, dict(params or {}))


def cases_for(standard: Any, *, quick: bool = False, seeds: Sequence[int] | None = None) -> list[Case]:
    """All cases of a standard's ``[suite]`` (``quick``: first shape, first seed only)."""
    suite = standard.suite
    shapes = suite.get("shapes", [])
    dists = suite.get("distributions", ["normal"])
    seed_list = list(seeds) if seeds is not None else list(suite.get("seeds", [0]))
    if quick:
        shapes, seed_list = shapes[:1], seed_list[:1]
    fmts = [f.name for f in standard.inputs]
    params = dict(suite.get("params", {}))
    return [make_case(standard.op, sh, d, s, fmts, params) for sh in shapes for d in dists for s in seed_list]
