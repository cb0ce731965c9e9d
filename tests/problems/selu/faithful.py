"""Legitimate: both branches in fp32, expm1 for the negative one."""
import torch
import torch.nn as nn

ALPHA = 1.6732632423543772848170429916717
SCALE = 1.0507009873554804934193349852946


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = torch.where(xf > 0, SCALE * xf, (SCALE * ALPHA) * torch.expm1(torch.clamp(xf, max=0.0)))
        return y.to(x.dtype)
