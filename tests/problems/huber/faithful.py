"""Legitimate: |d| in fp32, both branches in fp32, sums in blocks of 64, then one division."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        z = (predictions.float() - targets.float()).abs()
        terms = torch.where(z < 1.0, 0.5 * z * z, z - 0.5).reshape(-1)
        pad = (-terms.numel()) % 64
        s = torch.nn.functional.pad(terms, (0, pad)).reshape(-1, 64).sum(dim=1).sum()
        return (s / terms.numel()).to(predictions.dtype)
