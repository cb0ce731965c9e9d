"""Legitimate: the sum of squares in fp32 in blocks of 64, x * rsqrt(max(sum, eps^2)), one rounding."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        n, k = xf.shape
        pad = (-k) % 64
        sq = torch.nn.functional.pad(xf * xf, (0, pad)).reshape(n, -1, 64).sum(dim=2).sum(dim=1, keepdim=True)
        return (xf * torch.rsqrt(torch.clamp_min(sq, 1e-24))).to(x.dtype)
