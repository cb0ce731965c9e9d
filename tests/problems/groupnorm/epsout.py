"""Near miss: eps added outside the square root, 1/(sqrt(var) + eps) (visible where the group variance is near eps)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[:2]
        xf = x.float().reshape(n, self.gn.num_groups, -1)
        mean = xf.mean(dim=-1, keepdim=True)
        d = xf - mean
        std = (d * d).mean(dim=-1, keepdim=True).sqrt()
        y = (d / (std + self.gn.eps)).reshape(x.shape)
        shape = (1, c) + (1,) * (x.dim() - 2)
        y = y * self.gn.weight.float().reshape(shape) + self.gn.bias.float().reshape(shape)
        return y.to(x.dtype)
