"""Scripts that look at ``torch.onnx.export`` (or at ``ONNXProgram.save``, ``onnx.save_model``,
which the check replaces too) before calling it, as timm's ``onnx_export`` asks the signature for
``dynamic_shapes``: under the check they see what they see without it, take the same branch and
reach the call (tests/exporter/pipeline/test_export_call_targets.py)."""

import functools
import inspect
import logging

import onnx
import torch
from torch import nn
from torch.onnx import export as to_onnx


class Pool(nn.Module):
    def forward(self, images):
        return torch.nn.functional.adaptive_avg_pool2d(images, 1).flatten(1)


IMAGES = torch.randn(2, 3, 16, 16)


# onnx-export:
def by_signature():
    parameters = inspect.signature(torch.onnx.export).parameters
    if "dynamic_shapes" in parameters:
        torch.onnx.export(Pool(), (IMAGES,), "pool.onnx", dynamo=True,
                          dynamic_shapes=({0: "batch", 2: "height", 3: "width"},))
    else:
        raise AssertionError("this torch cannot export dynamic image sizes")


# onnx-export:
def by_argspec():
    spec = inspect.getfullargspec(to_onnx)
    options = {"dynamo": True} if "dynamo" in spec.kwonlyargs + spec.args else {}
    assert options, f"no `dynamo` among {spec}"
    to_onnx(Pool(), (IMAGES[:1],), "single.onnx", **options)


def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        logging.getLogger(__name__).info("calling %s.%s", torch.onnx.export.__module__,
                                         torch.onnx.export.__qualname__)
        assert torch.onnx.export.__module__ == "torch.onnx", torch.onnx.export.__module__
        assert "ONNX" in (torch.onnx.export.__doc__ or ""), "no docstring"
        return function(*args, **kwargs)
    return wrapper


# onnx-export:
@logged
@logged
def by_name():
    torch.onnx.export(Pool(), (IMAGES,), "named.onnx", dynamo=True, input_names=["images"])


class Exporter:
    def __init__(self, model):
        self.model = model
        self.keeps_data_apart = "external_data" in inspect.signature(
            torch.onnx.ONNXProgram.save).parameters

    def program(self):
        return torch.onnx.export(self.model, (IMAGES,), dynamo=True)

    def save(self, path):
        program = self.program()
        if not self.keeps_data_apart:
            raise RuntimeError("ONNXProgram.save takes no external_data here")
        program.save(path, external_data=False)
        return program


# onnx-export:
def by_method():
    exporter = Exporter(Pool())
    exporter.save("first.onnx")
    torch.onnx.export(exporter.model, (IMAGES * 2,), "second.onnx", dynamo=True)


# onnx-export:
def by_saver():
    program = torch.onnx.export(Pool(), (IMAGES,), dynamo=True)
    parameters = inspect.signature(onnx.save_model).parameters
    assert "save_as_external_data" in parameters, list(parameters)
    onnx.save_model(program.model_proto, "saved.onnx", save_as_external_data=False)
    torch.onnx.export(Pool(), (IMAGES[:, :2],), "narrow.onnx", dynamo=True)
