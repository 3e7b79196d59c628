"""transformers' ViT with the image size declared dynamic: the patch embedding compares the
input's size with the configured one, so torch.export specializes it (a real failing model)."""

import torch
from transformers import ViTConfig, ViTModel


# onnx-export: name="ViTAnySize", dynamic_shapes={"pixel_values": {2: "height", 3: "width"}}
def build_vit_any_size():
    torch.manual_seed(0)
    config = ViTConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, image_size=32, patch_size=4)
    return ViTModel(config).eval(), (), {"pixel_values": torch.randn(2, 3, 32, 32)}
