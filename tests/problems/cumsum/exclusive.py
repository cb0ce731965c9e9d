"""Near miss: exclusive scan (each output misses its own element)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cumsum(x, dim=1)
        return torch.cat([torch.zeros_like(y[:, :1]), y[:, :-1]], dim=1)
