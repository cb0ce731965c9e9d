"""Legitimate: differences and squares in fp32, row sums in blocks of 16, then one division."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        d = predictions.float() - targets.float()
        sq = d * d
        rows, n = sq.shape
        pad = (-n) % 16
        s = torch.nn.functional.pad(sq, (0, pad)).reshape(rows, -1, 16).sum(dim=2).sum(dim=1)
        return (s / n).to(predictions.dtype)
