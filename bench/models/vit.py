"""A real vision model for the benchmarks: transformers' ViT from a small config (2 layers,
hidden size 64, 32×32 images), random weights."""

import torch
from transformers import ViTConfig, ViTModel


# onnx-export: name="ViT"
def build_vit():
    torch.manual_seed(0)
    config = ViTConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, image_size=32, patch_size=4)
    return ViTModel(config).eval(), (), {"pixel_values": torch.randn(2, 3, 32, 32)}
