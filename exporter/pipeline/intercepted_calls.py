"""A function's own ``torch.onnx.export`` call as a target (docs/export-calls.md): the module
is imported and the function run with ``torch.onnx.export`` replaced; the call made from the
target's line is caught with its arguments, bound as ``torch.onnx.export`` binds them, and the
function is stopped there. Every other call returns None without exporting or writing
anything, so nothing lands in any call's file argument.

What the call's arguments mean is the installed torch's: the example inputs are split as
``torch/onnx/_internal/exporter/_compat.py`` splits them (a trailing dict is the keyword
inputs) and ``dynamic_axes`` is converted by torch's own converter, as ``export_compat`` does.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch


@dataclass(frozen=True)
class InterceptedCall:
    """A ``torch.onnx.export`` call's arguments, every parameter bound (defaults included)."""

    arguments: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.arguments[name]


class _Reached(BaseException):
    """Unwinds the user's function from the intercepted call (a BaseException, so that the
    user's ``except Exception`` does not swallow it)."""

    def __init__(self, call: InterceptedCall) -> None:
        super().__init__()
        self.call = call


@contextmanager
def intercepting(path: Path, function: str, line: int) -> Iterator[None]:
    """While the block runs, ``torch.onnx.export`` is replaced (the module attribute, and so
    the names modules bind it to while the block runs: a ``from torch.onnx import export``
    of the user's module too). The call made from ``line`` of ``function`` in ``path``
    unwinds to :func:`call_reaching`; every other call exports nothing and returns None."""
    original = torch.onnx.export
    signature = inspect.signature(original)
    filename = str(path)

    def replacement(*args: Any, **kwargs: Any) -> None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and not (frame.f_code.co_filename == filename
                                         and frame.f_code.co_name == function):
            frame = frame.f_back
        if frame is not None and frame.f_lineno == line:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            raise _Reached(InterceptedCall(dict(bound.arguments)))
        return None

    torch.onnx.export = replacement
    try:
        yield
    finally:
        torch.onnx.export = original


def call_reaching(function: Any) -> InterceptedCall | None:
    """Run ``function()`` (inside :func:`intercepting`) until it makes the intercepted call;
    None when it returns without making it."""
    try:
        function()
    except _Reached as reached:
        return reached.call
    return None


def export_inputs(call: InterceptedCall) -> tuple[tuple, dict[str, Any]]:
    """The example inputs, split as torch.onnx.export splits them."""
    from torch.onnx._internal.exporter import _compat

    args = call["args"]
    if isinstance(args, torch.Tensor):
        args = (args,)
    args, kwargs = _compat._get_torch_export_args(tuple(args), call["kwargs"])
    return args, dict(kwargs or {})


def converted_dynamic_shapes(call: InterceptedCall, model: torch.nn.Module, args: tuple,
                             kwargs: dict[str, Any]) -> tuple[Any, tuple, dict[str, Any]]:
    """``dynamic_shapes``, or what torch makes of ``dynamic_axes`` when only that is given
    (with the inputs reordered as torch reorders them). Raises what torch raises."""
    if call["dynamic_shapes"] is not None or call["dynamic_axes"] is None:
        return call["dynamic_shapes"], args, kwargs
    import warnings

    from torch.onnx._internal.exporter import _dynamic_shapes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ONNX602 says it statically
        shapes, args, converted_kwargs = _dynamic_shapes.from_dynamic_axes_to_dynamic_shapes(
            model, args, kwargs, dynamic_axes=call["dynamic_axes"],
            input_names=call["input_names"], output_names=set(call["output_names"] or ()))
    return shapes, args, dict(converted_kwargs or {})
