"""Exports cleanly: its result must survive the faults of the files beside it."""

import torch


# onnx-export: args=(torch.randn(2, 4),)
class Good(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))
