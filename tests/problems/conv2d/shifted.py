"""Near miss: the padding offset off by one (the input padded 2 on the left/top and 0 on the
right/bottom instead of 1 and 1): every window reads one row and one column early."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 1):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv2d
        p = c.padding[0]
        xp = F.pad(x.float(), (p + 1, p - 1, p + 1, p - 1))
        y = F.conv2d(xp, c.weight.float(), c.bias.float(), stride=c.stride)
        return y.to(x.dtype)
