"""Issue 38, item 7 (yolov5's ``export_onnx``, called from ``run()`` under
``@smart_inference_mode()``): the plain exporter runs inside its caller's context, so each call
is checked in the context it was made in: grad and inference mode, autocast, the default dtype,
the modules' train/eval modes as they are at the call.

``Detect`` is modelled on yolov5's detection head: its grids are built by the first forward
and kept (in lists, as yolov5 keeps them); ``decode`` is kept out of ``torch.compile`` and so
out of torch.export's strict capture. A model run once under inference mode holds inference
tensors: exported inside inference mode (or ``no_grad``) it exports, outside it both capture
strategies fail ("Inference tensors cannot be saved for backward" / the excluded ``decode``)."""

import contextlib
import threading

import torch
from torch import nn


@torch.compiler.disable
def decode(xy, wh, grid, anchor_grid):
    return xy * 2 + grid, (wh * 2) ** 2 * anchor_grid


class Detect(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 1)
        self.register_buffer("anchors", torch.tensor([10.0, 13.0]))
        self.grid = [torch.empty(0)]
        self.anchor_grid = [torch.empty(0)]

    def _make_grid(self, nx, ny):
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 0).unsqueeze(0).float() - 0.5
        anchor_grid = (self.anchors * 2).view(1, 2, 1, 1).expand(1, 2, ny, nx)
        return grid, anchor_grid

    def forward(self, x):
        y = self.conv(x).sigmoid()
        ny, nx = y.shape[2:]
        if self.grid[0].shape[2:4] != y.shape[2:4]:
            self.grid[0], self.anchor_grid[0] = self._make_grid(nx, ny)
        xy, wh, conf = y.split((2, 2, 2), 1)
        xy, wh = decode(xy, wh, self.grid[0], self.anchor_grid[0])
        return torch.cat((xy, wh, conf), 1)


def smart_inference_mode():
    """yolov5's ``utils/torch_utils.py``: inference mode as a decorator."""
    def decorate(fn):
        return torch.inference_mode()(fn)
    return decorate


def load_model():
    model = Detect().eval()
    im = torch.zeros(1, 3, 8, 8)
    for _ in range(2):
        model(im)  # dry runs: the grids are built here
    return model, im


def export_onnx(model, im, file, opset=12, dynamic=False):
    torch.onnx.export(model, im, file, verbose=False, opset_version=opset,
                      do_constant_folding=True, input_names=["images"],
                      output_names=["output0"], dynamic_axes=None if not dynamic else {
                          "images": {0: "batch"}, "output0": {0: "batch"}})
    return file


# onnx-export:
@smart_inference_mode()
def run():
    model, im = load_model()
    return export_onnx(model, im, "yolov5s.onnx")


# onnx-export:
def inference_mode_block():
    with torch.inference_mode():
        model, im = load_model()
        torch.onnx.export(model, (im,), "block.onnx", input_names=["images"])


@torch.inference_mode()
def load_for_inference():
    return load_model()


@torch.inference_mode()
def warm_up(model, im):
    model(im)  # the grids are built here, as inference tensors


# onnx-export:
def no_grad_block():
    model, im = Detect().eval(), torch.zeros(1, 3, 8, 8)
    warm_up(model, im)
    with torch.no_grad():
        torch.onnx.export(model, (im,), "no_grad.onnx")


# onnx-export:
def no_grad_loaded():
    """The weights too are inference tensors: torch.export cannot lift them outside inference
    mode, ``no_grad`` or not, as when run."""
    model, im = load_for_inference()
    with torch.no_grad():
        torch.onnx.export(model, (im,), "no_grad_loaded.onnx")


@torch.inference_mode()
def stage(model, im):
    return export_onnx(model, im, "staged.onnx", opset=18)


def pipeline(model, im):
    with torch.no_grad():
        return stage(model, im)


# onnx-export:
def nested_helpers():
    model, im = load_for_inference()
    return pipeline(model, im)


# onnx-export:
def in_a_thread():
    """The thread's context is its own: inference mode does not follow a thread, so the call
    runs outside it and fails, as it does when run."""
    model, im = load_for_inference()
    with torch.inference_mode():
        worker = threading.Thread(
            target=lambda: torch.onnx.export(model, (im,), "thread.onnx"))
        worker.start()
        worker.join()


# onnx-export:
def inference_mode_off():
    """``inference_mode(False)`` inside inference mode: the call runs outside it."""
    with torch.inference_mode():
        model, im = load_model()
        with torch.inference_mode(False):
            torch.onnx.export(model, (im,), "off.onnx")


class HalfHead(nn.Module):
    """Multiplies in float16 against a float32 weight: only autocast makes the dtypes agree."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        return torch.mm(x.half(), self.weight)


# onnx-export:
def under_autocast():
    with torch.autocast("cpu", dtype=torch.float16):
        torch.onnx.export(HalfHead().eval(), (torch.randn(2, 4),), "half.onnx")


class Projection(nn.Module):
    """Builds a matrix in the default dtype: the input's only under the same default."""

    def forward(self, x):
        return x @ torch.eye(x.shape[-1])


# onnx-export:
def float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.onnx.export(Projection().eval(), (torch.randn(2, 3),), "float64.onnx")
    finally:
        torch.set_default_dtype(previous)


class Finetuned(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.norm(self.linear(x))


@contextlib.contextmanager
def frozen_norm(model):
    """Running statistics frozen while exporting; training mode again afterwards."""
    model.norm.eval()
    try:
        yield model
    finally:
        model.norm.train()


# onnx-export:
def training_with_frozen_norm():
    model = Finetuned().train()  # a batch of 1 in training mode: BatchNorm cannot
    with frozen_norm(model):
        torch.onnx.export(model, (torch.randn(1, 4),), "finetuned.onnx")


if __name__ == "__main__":
    for function in (run, inference_mode_block, no_grad_block,
                     no_grad_loaded, nested_helpers, in_a_thread,
                     inference_mode_off, under_autocast, float64_default,
                     training_with_frozen_norm):
        try:
            function()
            print(function.__name__, "exported")
        except Exception as error:
            print(function.__name__, "failed:", type(error).__name__)
