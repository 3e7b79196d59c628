"""Allocates without bound."""

import torch


# onnx-export: args=(torch.randn(2, 4),)
class MemoryHog(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        blocks = []
        while True:
            blocks.append(torch.ones(32 * 1024 * 1024))
