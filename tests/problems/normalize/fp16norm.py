"""Near miss: the running sum of squares kept in float16 (a half-precision accumulator for the norm)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        s = torch.zeros(xf.shape[0], 1, dtype=torch.float16)
        for j in range(0, xf.shape[1], 8):  # (in steps of 8 squares, each partial sum rounded to fp16)
            s = (s.float() + (xf[:, j:j + 8] ** 2).sum(dim=1, keepdim=True)).half()
        return (xf / torch.clamp_min(s.float().sqrt(), 1e-12)).to(x.dtype)
