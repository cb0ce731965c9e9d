"""Near miss: alpha (exp(x) - 1) with exp in float16 (a half-precision fast path, no expm1):
cancellation near 0 and a 2^-11 relative error of exp."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        e = torch.exp(xf.clamp(max=0.0).half()).float()
        return torch.where(xf > 0, xf, self.alpha * (e - 1.0)).to(x.dtype)
