"""transformers' EnCodec (a neural audio codec) from a small config with random weights:
torch.export fails on it (a real model whose capture fails)."""

import torch
from transformers import EncodecConfig, EncodecModel


# onnx-export: name="EnCodec"
def build_encodec():
    torch.manual_seed(0)
    model = EncodecModel(EncodecConfig(hidden_size=64)).eval()
    return model, (), {"input_values": torch.randn(2, 1, 1600)}
