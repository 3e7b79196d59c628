"""A module of another file whose top level exports through its own helper (no target)."""

import torch
from torch import nn


def save_identity(path):
    torch.onnx.export(nn.Identity(), (torch.randn(1, 2),), path)


save_identity("helper_module.onnx")
