"""Legitimate: two-pass statistics per (sample, group) in fp32, rsqrt, per-channel affine, one rounding."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[:2]
        g = self.gn.num_groups
        xf = x.float().reshape(n, g, -1)
        mean = xf.sum(dim=-1, keepdim=True) / xf.shape[-1]
        d = xf - mean
        var = (d * d).sum(dim=-1, keepdim=True) / xf.shape[-1]
        y = (d * torch.rsqrt(var + self.gn.eps)).reshape(x.shape)
        shape = (1, c) + (1,) * (x.dim() - 2)
        y = y * self.gn.weight.float().reshape(shape) + self.gn.bias.float().reshape(shape)
        return y.to(x.dtype)
