"""Legitimate: split-K — fp32 partial products over K-blocks of 64, the partials added last to first."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        a, b = A.float(), B.float()
        k = a.shape[-1]
        parts = [a[:, i:i + 64] @ b[i:i + 64, :] for i in range(0, k, 64)]
        acc = torch.zeros_like(parts[0])
        for p in reversed(parts):
            acc = acc + p
        return acc.to(A.dtype)
