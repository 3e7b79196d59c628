"""Benchmark model (c): a 6-layer TransformerEncoder with d_model 256."""

import torch


# onnx-export: args=(torch.randn(2, 32, 256),), atol=1e-3
class Encoder(torch.nn.Module):
    def __init__(self, layers: int = 6, width: int = 256):
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(width, nhead=8, dim_feedforward=4 * width,
                                                 batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=layers,
                                                   enable_nested_tensor=False)

    def forward(self, tokens):
        return self.encoder(tokens)
