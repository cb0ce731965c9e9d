"""Near miss: statistics per channel (instance norm) instead of per group of channels."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.instance_norm(x, weight=self.gn.weight, bias=self.gn.bias, eps=self.gn.eps)
