import time

import torch


# onnx-export: args=(torch.rand(4, 8) + 0.5,)
class SlowA(torch.nn.Module):
    """Four seconds a forward (a check runs several): it holds the one place while the
    others are opened. i0 has no ONNX translation: ONNX201 on line 13."""

    def forward(self, x):
        time.sleep(4.0)
        return torch.special.i0(x)
