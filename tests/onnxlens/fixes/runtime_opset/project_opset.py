"""The opset comes from the project's settings (pyproject.toml: 23): the fix sets the default
in the pragma, or in the export call's own `opset_version`."""

import torch
import torch.nn.functional as F


# onnx-export: args=tuple(torch.randn(1, 1, 3, 4) for _ in range(3))
class ProjectAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=0.5)


class Pooled(torch.nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(x, x, x).mean(dim=-2)


# onnx-export:
def export_pooled():
    torch.onnx.export(Pooled(), (torch.randn(1, 2, 3, 4),), dynamo=True, opset_version=23)
