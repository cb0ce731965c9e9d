"""Legitimate: (clamp(x, -3, 3) + 3) * (1/6) in fp32 (a multiplication instead of a division)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return ((torch.clamp(xf, -3.0, 3.0) + 3.0) * (1.0 / 6.0)).to(x.dtype)
