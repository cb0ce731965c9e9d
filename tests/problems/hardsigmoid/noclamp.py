"""Near miss: x/6 + 1/2 without the clamp (right for |x| <= 3)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.float() / 6.0 + 0.5).to(x.dtype)
