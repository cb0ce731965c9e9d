"""Legitimate: blocked scan in fp32 — scans of 32-element blocks plus a scan of the block totals."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        rows, n = xf.shape
        pad = (-n) % 32
        blocks = torch.nn.functional.pad(xf, (0, pad)).reshape(rows, -1, 32)
        inner = torch.cumsum(blocks, dim=2)
        totals = inner[:, :, -1]
        carry = torch.cat([torch.zeros_like(totals[:, :1]), torch.cumsum(totals, dim=1)[:, :-1]], dim=1)  # exclusive
        y = (inner + carry[:, :, None]).reshape(rows, -1)[:, :n]
        return y.to(x.dtype)
