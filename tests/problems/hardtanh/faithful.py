"""Legitimate: min(max(x, -1), 1) with torch.maximum/minimum in fp32 (exact)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (torch.minimum(torch.maximum(xf, torch.tensor(-1.0)), torch.tensor(1.0))).to(x.dtype)
