"""A real vision model for the benchmarks on the torch that has torchvision (2.14.1):
torchvision's ResNet-18, random weights."""

import torch
import torchvision


# onnx-export: name="ResNet18"
def build_resnet18():
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 224, 224),), {}
