"""Near miss: the quadratic branch everywhere (the switch to |d| - 0.5 missing: half the MSE)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        d = predictions.float() - targets.float()
        return (0.5 * d * d).mean().to(predictions.dtype)
