"""The target's example inputs: fresh copies for each run, and the same inputs at another size.

A model may change its inputs in place (``x.add_(1)``, ExportDB's ``user_input_mutation``):
every run (eager PyTorch, ONNX Runtime, the comparison of intermediates) gets its own copy of
the inputs as the user wrote them, as a user calling the model and the exported model would.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from exporter.toolchain import torch_compat


def as_torch_splits(args: tuple, kwargs: dict[str, Any] | None
                    ) -> tuple[tuple, dict[str, Any]]:
    """``args`` and ``kwargs`` as torch.onnx.export splits them: without keyword inputs, a
    dict last in ``args`` is the keyword inputs (torch/onnx/_internal/exporter/_compat.py).
    A pragma's ``args`` mean what they mean to torch.onnx.export."""
    from torch.onnx._internal.exporter import _compat

    split_args, split_kwargs = _compat._get_torch_export_args(tuple(args), kwargs)
    return tuple(split_args), dict(split_kwargs or {})


def fresh_copy(args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Deep copies of ``args`` and ``kwargs`` (tensors cloned, containers rebuilt)."""
    try:
        copied_args, copied_kwargs = copy.deepcopy((args, kwargs))
    except Exception:  # an input that cannot be deep-copied: clone what pytree reaches
        copied_args, copied_kwargs = torch_compat.tree_map(
            lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf,
            (args, kwargs))
    return tuple(copied_args), dict(copied_kwargs)


def resized(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``tensor`` at ``shape`` (the same rank), made of the example's own values: each
    resized axis repeats the example's values along it (and cuts them off where the new size
    is smaller). Token ids stay in the vocabulary, a mask keeps its pattern, positions stay
    positions of the example: the model sees inputs of the kind the user wrote, not random
    values that may be invalid for it (an all-ones attention mask made random 0/1 changes
    what the model computes)."""
    result = tensor
    for axis, size in enumerate(shape):
        current = result.shape[axis]
        if size == current:
            continue
        if current == 0:
            raise ValueError(f"cannot resize axis {axis} of an empty example input")
        repeats = -(-size // current)  # ceil
        tiling = [1] * result.dim()
        tiling[axis] = repeats
        result = result.repeat(*tiling).narrow(axis, 0, size)
    return result.clone()
