"""Legitimate: fp32 internal, max subtraction, row sum in blocks of 64 added in reverse order."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        e = torch.exp(xf - xf.amax(dim=1, keepdim=True))
        rows, n = e.shape
        pad = (-n) % 64
        blocks = torch.nn.functional.pad(e, (0, pad)).reshape(rows, -1, 64).sum(dim=2)
        s = torch.zeros(rows, 1)
        for j in reversed(range(blocks.shape[1])):
            s = s + blocks[:, j:j + 1]
        return (e / s).to(x.dtype)
