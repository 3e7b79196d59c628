"""Reads address 0 in forward: the process checking it dies of SIGSEGV."""

import ctypes

import torch


# onnx-export: args=(torch.randn(2, 4),)
class Segfault(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return x
