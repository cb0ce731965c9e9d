"""Near miss: returns its input (right on U[0, 1), wrong on every negative value)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clone()
