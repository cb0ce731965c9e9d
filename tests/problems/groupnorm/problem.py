"""Group Normalization (KernelBench level 1, 35): nn.GroupNorm with a random affine transform."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)
        with torch.no_grad():
            self.gn.weight.normal_(1.0, 0.1)
            self.gn.bias.normal_(0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


batch_size = 4
features = 32
num_groups = 8
dim1 = 16
dim2 = 16


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features, num_groups]
