"""Near miss: a true convolution (the kernel flipped in both spatial axes) instead of torch's
cross-correlation; fp32 arithmetic, one rounding."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 1):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv2d
        w = torch.flip(c.weight.float(), dims=(2, 3))
        y = F.conv2d(x.float(), w, c.bias.float(), stride=c.stride, padding=c.padding)
        return y.to(x.dtype)
