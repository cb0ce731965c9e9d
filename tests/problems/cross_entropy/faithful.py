"""Legitimate: log-sum-exp with the row maximum in fp32, the exp sum in blocks of 100."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        z = logits.float()
        m = z.amax(dim=1, keepdim=True)
        rows, c = z.shape
        pad = (-c) % 100
        e = torch.nn.functional.pad(torch.exp(z - m), (0, pad)).reshape(rows, -1, 100).sum(dim=2).sum(dim=1)
        loss = torch.log(e) + (m[:, 0] - z.gather(1, target[:, None])[:, 0])  # both terms >= 0: no cancellation
        return loss.to(logits.dtype)
