"""An export script written for the TorchScript exporter: a helper with the legacy arguments,
and a function that exports two models through it and one directly."""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 8)

    def forward(self, tokens, mask):
        return self.linear(tokens) * mask


class Flattening(nn.Module):
    def forward(self, x):
        return x.view(2, 12)  # the batch of 2 is written into the graph


def save(model, example, path):
    torch.onnx.export(model, example, path, input_names=["input_ids", "attention_mask"],
                      dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}},
                      opset_version=18)


# onnx-export:
def export_all():
    encoder = Encoder().eval()
    tokens, mask = torch.randn(2, 5, 16), torch.ones(2, 5, 1)
    save(encoder, (tokens, mask), "encoder.onnx")
    torch.onnx.export(Flattening(), (torch.randn(2, 3, 4),), "flat.onnx",
                      input_names=["x"], dynamic_axes={"x": [0]})
    if tokens.numel() < 0:
        torch.onnx.export(encoder, (tokens, mask), "never.onnx")


if __name__ == "__main__":
    export_all()
