"""Near miss: log-sum-exp without subtracting the maximum (overflows on large logits)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        z = logits.float()
        loss = torch.log(torch.exp(z).sum(dim=1)) - z.gather(1, target[:, None])[:, 0]
        return loss.to(logits.dtype)
