"""Legitimate: x/2 * erfc(-x / sqrt(2)) in fp32 (accurate in the negative tail, unlike 1 + erf)."""
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (0.5 * xf * torch.erfc(xf * (-1.0 / math.sqrt(2.0)))).to(x.dtype)
