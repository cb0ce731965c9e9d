"""KernelBench level-1-like torch modules whose 16-bit torch CPU kernels are a poor baseline.

Shared by ``tests/test_module_standard.py`` and ``benchmarks/module_baseline.py`` (loaded by path,
never collected by pytest).  Each entry of :data:`ZOO` is ``name -> (Model class, init args,
get_inputs)``, sizes as in KernelBench level 1 but smaller so that a CPU grade takes seconds.
Issue 17 lists these modules: in bf16, torch's BatchNorm has a mean signed error of about
−40 ulp against the float64 truth, and a correctly rounded candidate failed NS-MODULE@1's paired
bias test.

:func:`correctly_rounded` builds the most accurate candidate there is (the reference module run in
float64, rounded once, RNE, to the working dtype) and the planted bugs of :data:`BUGS`.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ZOO", "BUGS", "correctly_rounded"]


class BatchNorm(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(x)


class InstanceNorm(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(c)

    def forward(self, x):
        return self.inorm(x)


class RMSNorm(nn.Module):
    """KernelBench level 1 #36: x / sqrt(mean(x², dim=1) + eps)."""

    def __init__(self, c: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)


class FrobeniusNorm(nn.Module):
    """KernelBench level 1 #37: x / ||x||_F."""

    def forward(self, x):
        return x / torch.norm(x, p="fro")


class KLDiv(nn.Module):
    """KernelBench level 1 #98: kl_div(log(predictions), targets, batchmean) — a scalar loss."""

    def forward(self, p, q):
        return F.kl_div(torch.log(p), q, reduction="batchmean")


class Triplet(nn.Module):
    """KernelBench level 1 #99: TripletMarginLoss(margin=1) — a scalar loss."""

    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=margin)

    def forward(self, a, p, n):
        return self.loss(a, p, n)


class Swish(nn.Module):
    """KernelBench level 1 #25: x * sigmoid(x)."""

    def forward(self, x):
        return x * torch.sigmoid(x)


class Softsign(nn.Module):
    """KernelBench level 1 #30: x / (1 + |x|)."""

    def forward(self, x):
        return x / (1 + torch.abs(x))


class MinGPTGelu(nn.Module):
    """KernelBench level 1 #88: the tanh GELU of minGPT."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _softmax_pair():
    return [torch.randn(64, 256).softmax(dim=-1), torch.randn(64, 256).softmax(dim=-1)]


ZOO = {
    "batchnorm": (BatchNorm, (16,), lambda: [torch.randn(8, 16, 16, 16)]),
    "instancenorm": (InstanceNorm, (16,), lambda: [torch.randn(8, 16, 16, 16)]),
    "rmsnorm": (RMSNorm, (16,), lambda: [torch.randn(8, 16, 16, 16)]),
    "frobenius": (FrobeniusNorm, (), lambda: [torch.randn(16, 16, 16, 16)]),
    "kldiv": (KLDiv, (), _softmax_pair),
    "triplet": (Triplet, (), lambda: [torch.randn(64, 256) for _ in range(3)]),
    "swish": (Swish, (), lambda: [torch.randn(64, 1024)]),
    "softsign": (Softsign, (), lambda: [torch.randn(64, 1024)]),
    "mingpt_gelu": (MinGPTGelu, (), lambda: [torch.randn(64, 1024)]),
}


#: planted bugs: name -> what it does to the float64 output before the final rounding
BUGS = {
    "rtz": "the final rounding truncates (round toward zero) instead of RNE: -0.5 ulp systematic",
    "scale": "the output scaled by (1 + 8u), u the unit roundoff of the dtype (a normalizer off by a few "
             "roundings): +4 to +8 ulp systematic",
    "one_element": "one element (the first) multiplied by 1.25 (a dropped branch or clamp)",
}


def _rtz(y: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    """Round float64 ``y`` toward zero into ``dt`` (via numstd.formats.round_to)."""
    from numstd.formats import round_to

    r = np.asarray(round_to(y.numpy(), str(dt).split(".")[-1], "rtz"), dtype=np.float64)
    return torch.from_numpy(r).to(dt)  # exact: r is representable in dt


def correctly_rounded(model_cls: type, bug: str | None = None) -> type:
    """A candidate class: ``model_cls`` run in float64 on the (working-dtype) inputs, rounded once
    (RNE) to the dtype — the most accurate candidate there is — or with a planted ``bug`` of
    :data:`BUGS`.  It subclasses ``model_cls``, so the grader copies the reference's weights by
    state_dict."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug {bug!r}: use one of {', '.join(BUGS)}")

    def forward(self, *xs):
        dt = next(x.dtype for x in xs if x.is_floating_point())
        r = copy.deepcopy(self)
        r.__class__ = model_cls
        r = r.double()
        with torch.no_grad():
            y = r(*[x.double() if x.is_floating_point() else x for x in xs])
            if bug == "rtz":
                return _rtz(y, dt)
            if bug == "scale":
                y = y * (1.0 + 8.0 * torch.finfo(dt).eps / 2)
            if bug == "one_element":
                y = y.clone()
                y.view(-1)[0] *= 1.25
        return y.to(dt)

    name = f"{'CorrectlyRounded' if bug is None else bug.title().replace('_', '')}{model_cls.__name__}"
    return type(name, (model_cls,), {"forward": forward})
