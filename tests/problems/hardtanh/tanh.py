"""Near miss: tanh(x), a smooth saturation, for hardtanh."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (torch.tanh(xf)).to(x.dtype)
