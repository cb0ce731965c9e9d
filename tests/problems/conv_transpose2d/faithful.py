"""Legitimate: the stride-1 convolution of the zero-dilated input with the flipped, channel-swapped
kernel (fp32 arithmetic, one rounding at the end)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1,
                                                   output_padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv_transpose2d
        n, ci, h, w = x.shape
        k = c.kernel_size[0]
        xd = torch.zeros(n, ci, 2 * h - 1, 2 * w - 1, dtype=torch.float32)
        xd[:, :, ::2, ::2] = x.float()
        lo = k - 1 - c.padding[0]
        xd = F.pad(xd, (lo, lo + c.output_padding[1], lo, lo + c.output_padding[0]))
        wt = torch.flip(c.weight.float(), dims=(2, 3)).transpose(0, 1)
        return F.conv2d(xd, wt, c.bias.float()).to(x.dtype)
