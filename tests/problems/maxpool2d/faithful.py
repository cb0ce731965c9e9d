"""Legitimate: pad with -inf, take the strided, dilated windows with unfold, reduce with amax (exact)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.k, self.s, self.p, self.d = kernel_size, stride, padding, dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p, span = self.p, self.d * (self.k - 1) + 1
        xp = F.pad(x, (p, p, p, p), value=float("-inf"))
        w = xp.unfold(2, span, self.s).unfold(3, span, self.s)[..., ::self.d, ::self.d]
        return w.amax(dim=(-2, -1))
