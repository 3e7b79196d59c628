"""A Swin backbone from a small config: its export fails inside transformers' own modeling
code, where the user cannot edit a line; building it with eager attention is a fix that
onnxlens tries (docs/fixes.md)."""

import torch
from transformers import SwinConfig, SwinModel


# onnx-export: name="Swin"
def build_model():
    torch.manual_seed(0)
    config = SwinConfig(
        depths=[1, 1, 1, 1],
        embed_dim=32,
        image_size=64,
        num_heads=[2, 2, 2, 2],
        window_size=2,
    )
    model = SwinModel(config).eval()
    return model, (torch.randn(2, 3, 64, 64),)
