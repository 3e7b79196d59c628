"""Benchmark model for goal 4: 1.07 B parameters (4.3 GB of float32 weights)."""

import torch


# onnx-export: args=(torch.randn(2, 8192),), weights="none"
class Big(torch.nn.Module):
    def __init__(self, depth: int = 16, width: int = 8192):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)
