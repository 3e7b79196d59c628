import time

import torch


# onnx-export: args=(torch.rand(4, 8) + 0.5,)
class SlowA(torch.nn.Module):
    """Each forward takes a second (the check runs it several times), and i0 has no ONNX
    translation: ONNX201 on line 13."""

    def forward(self, x):
        time.sleep(1.0)
        return torch.special.i0(x)
