"""Near miss: returns zeros (KernelBench issue #165: passes allclose(atol=1e-2) for long rows)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
