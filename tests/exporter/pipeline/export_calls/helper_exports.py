"""Functions whose torch.onnx.export call is made by a helper of another file (timm's
``onnx_export.py`` calls ``timm.utils.onnx.onnx_export``): with no inputs and no model
returned, a pragma's function is checked with the first call it reaches, located at the line of
the function that leads to it (tests/exporter/pipeline/test_export_call_targets.py)."""

import functools

import export_library
import torch
from export_library import Exporter, onnx_export
from torch import nn


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, images):
        return self.conv(images).relu().mean(dim=(2, 3))


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a branch on a value: the export fails here
            return x * 2
        return x


# onnx-export:
def timm_like():
    model = Stem()
    onnx_export(model, "stem.onnx", torch.randn(2, 3, 16, 16), dynamic_size=True)


def traced(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper


# onnx-export:
@traced
@traced
def decorated():
    export_library.onnx_export(Stem(), "decorated.onnx", torch.randn(3, 3, 8, 8))


# onnx-export:
def first_of_a_loop():
    for width in (12, 20):
        with torch.no_grad():
            onnx_export(Stem(), f"stem_{width}.onnx", torch.randn(2, 3, width, width))


# onnx-export:
def by_a_method():
    exporter = Exporter(opset=18)
    exporter.export(Gate(), (torch.randn(4),), "gate.onnx")
