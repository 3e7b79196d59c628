"""Super-resolution export, modelled on the PyTorch tutorial's TorchScript-exporter call.

Source: https://github.com/pytorch/tutorials
        advanced_source/super_resolution_with_onnxruntime.py
        (commit 07e4be05724551c9250da0602e7911a948c0a4c0; the model itself comes unchanged from
        pytorch/examples super_resolution/model.py)
License: BSD-3-Clause, Copyright (c) 2017-2022, Pytorch contributors.

Adapted: ``SuperResolutionNet`` is kept as in the tutorial (only modernised ``super()``); the
pretrained weights are not downloaded (random orthogonal init instead), the example batch is 1
instead of 64, and the module-level export is wrapped in a parameterless ``export()``.
The ``torch.onnx.export`` call keeps the tutorial's arguments (opset 10, dynamic batch axis).
"""

import torch
import torch.nn as nn
import torch.nn.init as init


class SuperResolutionNet(nn.Module):
    def __init__(self, upscale_factor, inplace=False):
        super().__init__()

        self.relu = nn.ReLU(inplace=inplace)
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


# onnx-export:
def export():
    torch_model = SuperResolutionNet(upscale_factor=3)
    # set the model to inference mode
    torch_model.eval()

    batch_size = 1  # the tutorial uses 64 ("just a random number")
    # Input to the model
    x = torch.randn(batch_size, 1, 224, 224, requires_grad=True)

    # Export the model
    torch.onnx.export(
        torch_model,  # model being run
        x,  # model input (or a tuple for multiple inputs)
        "super_resolution.onnx",  # where to save the model (can be a file or file-like object)
        export_params=True,  # store the trained parameter weights inside the model file
        opset_version=10,  # the ONNX version to export the model to
        do_constant_folding=True,  # whether to execute constant folding for optimization
        input_names=["input"],  # the model's input names
        output_names=["output"],  # the model's output names
        dynamic_axes={
            "input": {0: "batch_size"},  # variable length axes
            "output": {0: "batch_size"},
        },
    )


if __name__ == "__main__":
    export()
