"""A hand-written ONNX translation that is subtly wrong: the values diverge at its call."""

import torch
from onnxscript import opset18 as op


def fast_gelu(x, approximate: str = "none"):
    return op.Mul(x, op.Sigmoid(x))  # that is SiLU, not GELU


# onnx-export: args=(torch.randn(4, 32),), atol=1e-4,
#     custom_translation_table={torch.ops.aten.gelu.default: fast_gelu}
class FeedForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x):
        hidden = torch.nn.functional.gelu(self.up(x))
        return self.down(hidden)
