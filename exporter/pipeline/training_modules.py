"""Dropout and normalization modules left in training mode: ``torch.onnx.export`` exports each
module in the mode it is in (the TorchScript exporter switched the model to eval mode by
default, ``training=TrainingMode.EVAL``), so an export script written for it, which never
called ``model.eval()``, now exports random dropout and batch statistics. The messages on what
such a module computes (ONNX504, ONNX501, ONNX502) say so."""

from __future__ import annotations

import torch
from torch import nn

#: the modules whose result depends on their mode: dropout, and a batch normalization that
#: keeps running statistics (an instance normalization uses each input's own in training mode,
#: as ONNX's does, so its mode changes nothing in the ONNX model's values)
_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
            nn.FeatureAlphaDropout)
_BATCH_NORMALIZATION = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)

_EVAL = ("Call `model.eval()` before exporting a model for inference (the TorchScript "
         "exporter did it by default; torch.onnx.export exports each module in the mode it "
         "is in).")


def training_note(model: nn.Module, node: torch.fx.Node) -> str | None:
    """What a message on ``node``'s value adds when a dropout or normalization module in
    training mode computes it (torch records the module path of each node)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    path = list(stack.values())[-1][0]
    try:
        module = model.get_submodule(path) if path else model
    except AttributeError:
        return None
    keeps_statistics = isinstance(module, _BATCH_NORMALIZATION) and module.track_running_stats
    if not (module.training and (isinstance(module, _DROPOUT) or keeps_statistics)):
        return None
    named = f"`{path}` ({type(module).__name__})" if path else type(module).__name__
    if isinstance(module, _DROPOUT):
        return f"{named} is in training mode, so the ONNX model drops values at random. {_EVAL}"
    return (f"{named} is in training mode: it normalizes with the batch's own statistics, "
            f"which the ONNX model computes otherwise. {_EVAL}")
