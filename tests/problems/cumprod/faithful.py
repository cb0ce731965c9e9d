"""Legitimate: the running product in fp32 for every input dtype (torch.cumprod on the float32 copy),
one rounding to the working dtype."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x.float(), dim=self.dim).to(x.dtype)
