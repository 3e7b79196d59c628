"""Every use of torch's private ONNX exporter API lives here, behind a version guard.

The private pieces let a session build the torchlib registry once and translate stage by
stage (so that *every* unsupported operator can be found). When torch's internals move, the
fallbacks keep onnxlens working through the public ``torch.onnx.export`` at the cost of speed
and of finding only the first translation problem.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

TESTED_TORCH = ("2.13",)


def _version_ok() -> bool:
    version = torch.__version__.split("+")[0]
    return any(version.startswith(tested) for tested in TESTED_TORCH)


try:  # pragma: no branch - the guard itself is tested
    from torch.onnx._internal.exporter import (
        _core,
        _dispatching,
        _dynamic_shapes,
        _registration,
        _verification,
    )

    PRIVATE_API = _version_ok() and all(
        hasattr(_core, name)
        for name in ("_prepare_exported_program_for_export", "_exported_program_to_onnx_program")
    )
except ImportError:  # pragma: no cover - depends on the installed torch
    PRIVATE_API = False


def build_registry(opset: int | None = None) -> Any:
    """The torchlib registry (≈1 s to build, so sessions keep it)."""
    if not PRIVATE_API:
        return None
    if opset is None:
        return _registration.ONNXRegistry.from_torchlib()
    return _registration.ONNXRegistry.from_torchlib(opset_version=opset)


def registry_with(base: Any, table: dict[Callable, Callable]) -> Any:
    """A copy of ``base`` with a custom translation table registered on top."""
    if base is None:
        return None
    registry = copy.copy(base)
    registry.functions = {key: list(value) for key, value in base.functions.items()}
    for torch_op, onnx_function in table.items():
        registry.register_op(torch_op, onnx_function, is_complex=False)
    return registry


def dynamic_shapes_for_export(dynamic_shapes: Any) -> Any:
    """Convert torch.onnx-style string dims (``{0: "batch"}``) into ``Dim.DYNAMIC``."""
    if dynamic_shapes is None:
        return None
    if PRIVATE_API:
        converted, _ = _dynamic_shapes.convert_str_to_export_dim(dynamic_shapes)
        return converted
    return dynamic_shapes


def draft_report_files(report: Any) -> dict[int, str]:
    """Draft reports name files by index into torch's process-wide intern table; the
    report's own table only holds files first seen during that export."""
    files = dict(getattr(report, "str_to_filename", {}) or {})
    try:
        from torch._logging.structured import INTERN_TABLE

        files.update({index: name for name, index in INTERN_TABLE.items()})
    except ImportError:  # pragma: no cover - depends on the installed torch
        pass
    return files


def rename_dynamic_axes(onnx_program: Any, dynamic_shapes: Any) -> None:
    """Give symbolic ONNX dims the user's names (``{0: "batch"}``), as torch.onnx.export does."""
    if dynamic_shapes is None or not PRIVATE_API:
        return
    if _dynamic_shapes.convert_str_to_export_dim(dynamic_shapes)[1]:
        onnx_program._rename_dynamic_axes(dynamic_shapes)


def decompose(program: torch.export.ExportedProgram, registry: Any) -> torch.export.ExportedProgram:
    return _core._prepare_exported_program_for_export(program, registry=registry)


def unsupported_nodes(program: torch.export.ExportedProgram, registry: Any) -> list[torch.fx.Node]:
    """Every call_function node that has no ONNX translation in ``registry``."""
    missing = []
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        onnx_function, _ = _dispatching.dispatch(node, registry)
        if onnx_function is None:
            missing.append(node)
    return missing


def translate(program: torch.export.ExportedProgram, registry: Any) -> torch.onnx.ONNXProgram:
    """Translate an already decomposed program."""
    return _core._exported_program_to_onnx_program(program, registry=registry)


def public_export(model: torch.nn.Module, args: tuple, kwargs: dict, **options: Any) -> Any:
    """Fallback when the private API is unavailable."""
    return torch.onnx.export(model, args, kwargs=kwargs, dynamo=True, verbose=False, **options)


def compare_intermediates(onnx_program: Any, args: tuple, kwargs: dict) -> list[Any]:
    """Per FX node comparison between PyTorch and ONNX Runtime, in graph order."""
    return _verification.verify_onnx_program(
        onnx_program, args=args, kwargs=kwargs, compare_intermediates=True
    )
