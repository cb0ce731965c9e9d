"""Near miss: relu (the negative slope dropped): within 0.01 |x| for x < 0."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (torch.relu(xf)).to(x.dtype)
