"""Every use of torch's private ONNX exporter API lives here, behind a version guard.

The private pieces let a session build the torchlib registry once and translate stage by
stage (so that *every* unsupported operator can be found). When torch's internals move, the
fallbacks keep onnxlens working through the public ``torch.onnx.export`` at the cost of speed
and of finding only the first translation problem.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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

try:  # pragma: no branch - what the cached decomposition replaces, by name
    from torch._export import utils as _export_utils
    from torch.export import decomp_utils as _decomp_utils
    from torch.export import exported_program as _exported_program
    from torch.onnx._internal.exporter import _decomp

    CACHED_DECOMPOSITION = PRIVATE_API and all((
        hasattr(_export_utils, "_materialize_cpp_cia_ops"),
        hasattr(_decomp, "create_onnx_friendly_decomposition_table"),
        *(hasattr(module, "_collect_all_valid_cia_ops")
          for module in (_export_utils, _decomp_utils, _exported_program)),
    ))
except ImportError:  # pragma: no cover - depends on the installed torch
    CACHED_DECOMPOSITION = False

# ONNX-friendly decomposition tables by everything they are computed from (see _table).
_TABLES: dict[tuple[Any, ...], dict[Any, Callable]] = {}
_build_table: Callable[[set[Any]], dict[Any, Callable]] = (
    _decomp.create_onnx_friendly_decomposition_table if CACHED_DECOMPOSITION else dict)


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
    """torch.onnx's decomposition of a captured program, without its per-call rebuilds.

    Per call, torch walks every registered operator twice to find the CompositeImplicitAutograd
    ops (re-materializing the C++ ones once per namespace) and rebuilds the decomposition table
    (≈0.1 s together). Here the walk runs once per call, materializing once, and the table is
    reused while nothing it is computed from changed (custom ops a user module registers
    change the key). Same result; torch's own code does the decomposition."""
    if not CACHED_DECOMPOSITION:
        return _core._prepare_exported_program_for_export(program, registry=registry)
    cia_ops = _valid_cia_ops()
    with ExitStack() as stack:
        for module in (_decomp_utils, _exported_program):
            stack.enter_context(_replaced(module, "_collect_all_valid_cia_ops",
                                          lambda: set(cia_ops)))
        stack.enter_context(_replaced(_decomp, "create_onnx_friendly_decomposition_table",
                                      lambda onnx_ops: _table(onnx_ops, cia_ops)))
        return _core._prepare_exported_program_for_export(program, registry=registry)


def _valid_cia_ops() -> set[Any]:
    """``_collect_all_valid_cia_ops``, materializing the C++ CIA ops once, not per namespace."""
    _export_utils._materialize_cpp_cia_ops()
    with _replaced(_export_utils, "_materialize_cpp_cia_ops", lambda: None):
        return set(_export_utils._collect_all_valid_cia_ops())


def _table(onnx_ops: set[Any], cia_ops: set[Any]) -> dict[Any, Callable]:
    """The ONNX-friendly decomposition table, built once per registry and operator set."""
    key = (frozenset(onnx_ops), frozenset(cia_ops),
           tuple(torch._decomp.decomposition_table.items()))
    if key not in _TABLES:
        if len(_TABLES) >= 4:  # a few registries (opsets, translation tables) at a time
            _TABLES.clear()
        _TABLES[key] = _build_table(onnx_ops)
    return _TABLES[key]


@contextmanager
def _replaced(module: Any, name: str, replacement: Callable) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


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
