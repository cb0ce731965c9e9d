"""Max Pooling 2D (KernelBench level 1, 42): nn.MaxPool2d with padding and dilation."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.maxpool(x)


batch_size = 4
channels = 8
height = 32
width = 32
kernel_size = 2
stride = 2
padding = 1
dilation = 3


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
