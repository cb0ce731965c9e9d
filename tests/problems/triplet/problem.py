"""Triplet margin loss (KernelBench level 1, 99): nn.TripletMarginLoss(margin) on (N, D) embeddings."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(anchor, positive, negative)


batch_size = 32
input_shape = (256,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randn(batch_size, *input_shape),
            torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [1.0]
