"""Near miss: an exclusive scan (1, x0, x0 x1, ...): every prefix misses its own factor."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float().movedim(self.dim, -1)
        p = torch.cumprod(xf, dim=-1)
        p = torch.cat([torch.ones_like(p[..., :1]), p[..., :-1]], dim=-1)
        return p.movedim(-1, self.dim).to(x.dtype)
