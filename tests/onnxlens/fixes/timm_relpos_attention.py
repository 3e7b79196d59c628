"""timm's smallest ViT with relative position biases, built as users usually build a timm
model: its export fails where timm calls `F.scaled_dot_product_attention` with the bias, in
timm's code, where the user cannot edit a line; built `exportable=True` it computes attention
with plain tensor operations, a fix that onnxlens tries (docs/fixes.md)."""

import timm
import torch


# onnx-export: name="vit_relpos"
def build_model():
    torch.manual_seed(0)
    model = timm.create_model("test_vit_relpos", pretrained=False).eval()
    return model, (torch.randn(2, 3, 160, 160),)
