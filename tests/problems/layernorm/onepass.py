"""Near miss: one-pass variance E[x^2] - E[x]^2 (cancels on rows with a large mean)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
