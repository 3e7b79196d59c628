"""Loops in native code: no Python signal handler runs until it returns (never)."""

import torch


# onnx-export: args=(torch.randn(2, 4),)
class NativeLoop(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + sum(range(10**15))
