"""Near miss: fp32 products, but the running sum is kept in bfloat16."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        a, b = A.float(), B.float()
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
        for i in range(a.shape[1]):
            acc = (acc.float() + a[:, i:i + 1] * b[i:i + 1, :]).to(torch.bfloat16)
        return acc.to(A.dtype)
