"""Helpers of another file that call torch.onnx.export for their caller, as an installed
package's do (timm's ``onnx_export``): no target of their own (helper_exports.py)."""

import inspect

import torch


def onnx_export(model, output_file, example_input, dynamic_size=False, use_dynamo=True):
    """timm's ``timm.utils.onnx.onnx_export``, reduced: eval mode, the eager output first,
    dynamic axes named by position, ``dynamic_shapes`` when this torch takes them."""
    model.eval()
    with torch.inference_mode():
        model(example_input)
    axes = {0: "batch", 2: "height", 3: "width"} if dynamic_size else {0: "batch"}
    if use_dynamo and "dynamic_shapes" in inspect.signature(torch.onnx.export).parameters:
        torch.onnx.export(model, (example_input,), output_file, input_names=["input0"],
                          output_names=["output0"], dynamo=True, dynamic_shapes=(axes,))
    else:
        raise AssertionError("Dynamo ONNX export requires PyTorch >= 2.1")


class Exporter:
    """An exporter object whose method makes the call."""

    def __init__(self, opset):
        self.opset = opset

    def export(self, model, example, path):
        with torch.no_grad():
            return torch.onnx.export(model, example, path, dynamo=True,
                                     opset_version=self.opset)
