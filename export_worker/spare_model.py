"""The export target a spare job process checks before the worker hands it a job.

A freshly forked process pays for its first check: copy-on-write faults, onnxruntime's
import and first session, caches that torch fills on first use. The export worker keeps one
spare process that has already paid by checking this small model (inputs in a dict and a
list, a dynamic batch, the layers most models use); the next job then runs there.
"""

import torch


# onnx-export: args=(torch.rand(2, 1, 6, 6), {"extra": torch.rand(2, 8)}, [torch.rand(2, 8)]),
#     dynamic_shapes=({0: "batch"}, {"extra": {0: "batch"}}, [{0: "batch"}])
class SpareWarmUp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.linear = torch.nn.Linear(32, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, image: torch.Tensor, named: dict, listed: list) -> torch.Tensor:
        features = torch.flatten(torch.relu(self.conv(image)), 1)
        hidden = torch.sigmoid(self.linear(features)) + named["extra"] * listed[0]
        joined = torch.cat([hidden, hidden], dim=1).view(-1, 2, 8)
        return torch.softmax(self.norm(joined).mean(dim=1), dim=-1)
