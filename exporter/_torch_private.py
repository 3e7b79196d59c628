"""Every use of torch's private ONNX exporter API lives here, behind a version guard.

The private pieces let a session build the torchlib registry once and translate stage by
stage (so that *every* unsupported operator can be found). When torch's internals move, the
fallbacks keep onnxlens working through the public ``torch.onnx.export`` at the cost of speed
and of finding only the first translation problem.
"""

from __future__ import annotations

import copy
import traceback
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from exporter import shortcuts

TESTED_TORCH = ("2.13",)


def _version_ok() -> bool:
    version = torch.__version__.split("+")[0]
    return any(version.startswith(tested) for tested in TESTED_TORCH)


try:  # pragma: no branch - the guard itself is tested
    from torch.onnx._internal._lazy_import import onnxscript_apis
    from torch.onnx._internal.exporter import (
        _capture_strategies,
        _constants,
        _core,
        _dispatching,
        _dynamic_shapes,
        _ir_passes,
        _registration,
    )

    PRIVATE_API = _version_ok() and all((
        hasattr(_core, "_prepare_exported_program_for_export"),
        hasattr(_core, "_exported_program_to_onnx_program"),
        hasattr(_capture_strategies, "CAPTURE_STRATEGIES"),
        hasattr(_constants, "TORCHLIB_OPSET"),
        hasattr(_ir_passes, "rename_inputs"),
        hasattr(onnxscript_apis, "convert_version"),
        hasattr(onnxscript_apis, "optimize"),
    ))
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
        hasattr(_exported_program, "_split_decomp_table_to_cia_and_python_decomp"),
        hasattr(torch._ops, "Callable"),
        hasattr(getattr(torch._ops, "OperatorBase", None), "py_impl"),
        *(hasattr(module, "_collect_all_valid_cia_ops")
          for module in (_export_utils, _decomp_utils, _exported_program)),
    ))
except ImportError:  # pragma: no cover - depends on the installed torch
    CACHED_DECOMPOSITION = False

try:  # pragma: no branch - what faster_tracing replaces, by name
    import onnx_ir
    import torch.fx._lazy_graph_module as _lazy_graph_module
    import torch.fx.graph_module as _graph_module
    import torch.fx.traceback as _fx_traceback
    import torch.utils._traceback as _torch_traceback

    FASTER_TRACING = PRIVATE_API and all((
        getattr(_fx_traceback, "copy", None) is copy,
        hasattr(_fx_traceback, "NodeSource"),
        hasattr(_lazy_graph_module, "_use_lazy_graph_module"),
        hasattr(onnx_ir.schemas.OpSignature, "from_op_schema"),
        hasattr(onnx_ir._convenience, "_infer_attribute_type"),
        hasattr(_torch_traceback, "_extract_symbolized_tb"),
        hasattr(_graph_module, "_exec_with_source"),
        hasattr(getattr(_graph_module, "_loader", None), "cache"),
    ))
except ImportError:  # pragma: no cover - depends on the installed torch
    FASTER_TRACING = False

# Decompositions by everything they are computed from (see _decomposition), the CIA operators
# by the registrations they come from (see _valid_cia_ops), and torch's functions they replace.
_TABLES: dict[tuple[Any, ...], _Decomposition] = {}
_CIA_OPS: dict[str, Any] = {}
if CACHED_DECOMPOSITION:
    _operator_py_impl = torch._ops.OperatorBase.py_impl
    _build_table = _decomp.create_onnx_friendly_decomposition_table
    _split = _exported_program._split_decomp_table_to_cia_and_python_decomp


def build_registry(opset: int) -> Any:
    """The torchlib registry for ``opset`` (≈1 s to build, so sessions keep it)."""
    if not PRIVATE_API:
        return None
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


def default_opset() -> int:
    """The opset ``torch.onnx.export`` produces when none is asked for."""
    from torch.onnx import _constants as _public_constants

    return int(_public_constants.ONNX_DEFAULT_OPSET)


def registry_opset(opset: int) -> int:
    """The opset torch.onnx.export builds its registry for: torchlib's own below it (the
    model is converted down afterwards)."""
    return max(opset, int(_constants.TORCHLIB_OPSET)) if PRIVATE_API else opset


@dataclass(frozen=True)
class CaptureAttempt:
    """One capture strategy's outcome: ``program`` on success, else ``error``."""

    strategy: str
    program: torch.export.ExportedProgram | None
    error: Exception | None


_STRATEGY_NAMES = {"TorchExportNonStrictStrategy": "non-strict",
                   "TorchExportStrictStrategy": "strict",
                   "TorchExportDraftExportStrategy": "draft"}


def capture(model: torch.nn.Module, args: tuple, kwargs: dict[str, Any],
            dynamic_shapes: Any) -> list[CaptureAttempt]:
    """torch.onnx.export's capture: its strategies in its order (non-strict torch.export,
    then strict), each with the settings torch.onnx gives it, until one succeeds."""
    attempts: list[CaptureAttempt] = []
    if not PRIVATE_API:
        for strict in (False, True):
            try:
                program = torch.export.export(model, args, kwargs,
                                              dynamic_shapes=dynamic_shapes, strict=strict)
            except Exception as error:
                attempts.append(CaptureAttempt("strict" if strict else "non-strict", None, error))
                continue
            attempts.append(CaptureAttempt("strict" if strict else "non-strict", program, None))
            break
        return attempts
    for strategy_class in _capture_strategies.CAPTURE_STRATEGIES:
        result = strategy_class(verbose=False)(model, args, kwargs,
                                               dynamic_shapes=dynamic_shapes)
        name = _STRATEGY_NAMES.get(strategy_class.__name__, strategy_class.__name__)
        if result.exported_program is not None:
            attempts.append(CaptureAttempt(name, result.exported_program, None))
            break
        attempts.append(CaptureAttempt(name, None, result.exception))
    return attempts


def finish_model(onnx_program: Any, opset: int, *, optimize: bool,
                 input_names: list[str] | None, output_names: list[str] | None) -> None:
    """What torch.onnx.export does to the translated model, in its order: convert it to the
    requested opset, optimize it (its default), rename inputs and outputs."""
    onnx_program.model = onnxscript_apis.convert_version(onnx_program.model, opset)
    if optimize:
        onnx_program.optimize()
    if input_names:
        _ir_passes.rename_inputs(onnx_program.model, [str(name) for name in input_names])
    if output_names:
        _ir_passes.rename_outputs(onnx_program.model, [str(name) for name in output_names])


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
    (CIA) ops, re-materializing the C++ ones once per namespace, then rebuilds and splits the
    decomposition table (≈0.1 s together). Here the CIA ops are found again only when the
    dispatcher's CIA registrations changed (a user module can register custom ops), and the
    table and its split are reused while nothing they are computed from changed. Same result;
    torch's own code does the decomposition (a test compares the graphs)."""
    cached = CACHED_DECOMPOSITION and shortcuts.enabled("cached-decomposition")
    short_py_impl = CACHED_DECOMPOSITION and shortcuts.enabled("short-py-impl")
    if not cached:
        with ExitStack() as stack:
            if short_py_impl:
                stack.enter_context(_short_py_impl())
            return _core._prepare_exported_program_for_export(program, registry=registry)
    cia_ops = _valid_cia_ops()
    chosen: list[_Decomposition] = []

    def table(onnx_ops: set[Any]) -> dict[Any, Callable]:
        chosen.append(_decomposition(onnx_ops, cia_ops))
        return chosen[-1].table

    def split(table: dict[Any, Callable]) -> tuple[dict[Any, Callable], dict[Any, Callable]]:
        if not chosen or table.keys() != chosen[-1].table.keys():
            return _split(table)
        return chosen[-1].split()

    with ExitStack() as stack:
        for module in (_decomp_utils, _exported_program):
            stack.enter_context(_replaced(module, "_collect_all_valid_cia_ops",
                                          lambda: set(cia_ops)))
        stack.enter_context(_replaced(_decomp, "create_onnx_friendly_decomposition_table", table))
        stack.enter_context(_replaced(_exported_program,
                                      "_split_decomp_table_to_cia_and_python_decomp", split))
        if short_py_impl:
            stack.enter_context(_short_py_impl())
        return _core._prepare_exported_program_for_export(program, registry=registry)


@contextmanager
def _short_py_impl() -> Iterator[None]:
    """Overriding the CIA kernels registers ≈11,000 Python kernels by dispatch key per
    decomposition through `py_impl`, which evaluates `Callable[_P, _T]` annotations three
    times per call and checks for classes and transforms first. Dispatch keys take the short
    way; other `py_impl` calls find typing's cached aliases."""
    with _replaced(torch._ops, "Callable", typing.Callable), \
            _replaced(torch._ops.OperatorBase, "py_impl", _py_impl):
        yield


def _py_impl(self: Any, key: Any) -> Callable[[Callable], Callable]:
    """``OperatorBase.py_impl``, with torch's own checks for a dispatch key and no
    annotations to evaluate."""
    if type(key) is not torch._C.DispatchKey or key == torch._C.DispatchKey.Python:
        return _operator_py_impl(self, key)

    def register(function: Callable) -> Callable:
        if key in self.py_kernels:
            raise RuntimeError(
                f"Trying to override a python impl for {key} on operator {self.name()}")
        self.py_kernels[key] = function
        self._dispatch_cache.clear()
        return function

    return register


def _registrations() -> tuple[Any, ...]:
    """What the CIA operator set is computed from: the dispatcher's CIA registrations and the
    operators materialized in each ``torch.ops`` namespace but aten (torch caches aten's CIA
    operators itself; aten's namespace grows as a check touches operators)."""
    cpp = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    namespaces = [(name, len(getattr(getattr(torch.ops, name), "_dir", ())))
                  for name in torch.ops._dir if name != "aten"]
    return tuple(cpp), tuple(namespaces)


def _valid_cia_ops() -> frozenset[Any]:
    """``_collect_all_valid_cia_ops``, again only when the registrations changed, and then
    materializing the C++ CIA ops once, not once per namespace."""
    if _CIA_OPS.get("key") != _registrations():
        _export_utils._materialize_cpp_cia_ops()
        with _replaced(_export_utils, "_materialize_cpp_cia_ops", lambda: None):
            _CIA_OPS["ops"] = frozenset(_export_utils._collect_all_valid_cia_ops())
        _CIA_OPS["key"] = _registrations()
    return _CIA_OPS["ops"]


@dataclass
class _Decomposition:
    """The ONNX-friendly decomposition table, and its split into CIA overrides and Python
    decompositions (computed on first use)."""

    table: dict[Any, Callable]
    parts: tuple[dict[Any, Callable], dict[Any, Callable]] | None = None

    def split(self) -> tuple[dict[Any, Callable], dict[Any, Callable]]:
        if self.parts is None:
            self.parts = _split(dict(self.table))
        return dict(self.parts[0]), dict(self.parts[1])


def _decomposition(onnx_ops: set[Any], cia_ops: frozenset[Any]) -> _Decomposition:
    """Built once per registry and operator set."""
    key = (frozenset(onnx_ops), cia_ops, tuple(torch._decomp.decomposition_table.items()))
    if key not in _TABLES:
        if len(_TABLES) >= 4:  # a few registries (opsets, translation tables) at a time
            _TABLES.clear()
        _TABLES[key] = _Decomposition(_build_table(onnx_ops))
    return _TABLES[key]


@contextmanager
def _replaced(module: Any, name: str, replacement: Any) -> Iterator[None]:
    # vars(): a class's own descriptor (a classmethod), not the bound method getattr returns
    original = vars(module)[name] if name in vars(module) else getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


@contextmanager
def faster_tracing(*, capturing: bool = False) -> Iterator[None]:
    """Capture, decompose and translate the same graphs with less bookkeeping (≈15 % of a
    check of a transformer; each patch has its own off switch in ``exporter.shortcuts``, and
    tests compare the results with and without):

    * ``shared-provenance``: every node torch creates while re-tracing records where it came
      from (``meta["from_node"]``) as a *deep copy* of its source node's whole history, so
      each pass copies longer chains. The records are never changed after they are made
      (they cache their own dict form), so sharing them keeps the same content.
    * ``lazy-graph-modules``: graph modules built by tracing compile their Python code only
      when something runs or reads it (torch's ``_LazyGraphModule``, what ``torch.compile``
      uses): several intermediate modules are never run. Not while ``capturing``: strict
      capture (dynamo) reads ``_in_spec`` of a module that a lazy one has not set yet, and
      fails where torch.onnx.export succeeds.
    * ``onnx-signatures-once``: torch's ONNX builder converts an operator's ONNX schema into
      a signature on every call (708 times for a 6-layer transformer); onnxscript itself
      computes it once per operator, as done here.
    * ``plain-list-attributes``: onnx_ir finds an attribute's type by checking it against
      three runtime Protocols (slow ``isinstance`` calls) before it looks at lists; plain
      lists and tuples of ints, floats or strings are answered first (a list is none of
      those Protocols).
    * ``lazy-frame-lines``: each traced node records the Python stack it was created from:
      torch builds a frame summary of every frame (≈65 per node) and reads each frame's
      source line, then keeps the few frames from ``forward`` on. The lines are read when
      the kept frames are formatted instead (Python's own lazy ``FrameSummary``): the same
      text.
    * ``compiled-code-once``: graph modules that are compiled are often compiled again from
      the same code (torch builds the unlifted module of a transformer and compiles the
      same 30 KB of Python five times over): the code object is compiled once per source.

    torch.onnx's type promotion pass is left as it is: a shortcut that reused traced values
    instead of re-running nodes hid failures the pass raises (a Swin model's view of a
    non-contiguous tensor, issue "truth" in the tracker).
    """
    if not FASTER_TRACING:
        yield
        return
    with ExitStack() as stack:
        if shortcuts.enabled("shared-provenance"):
            sharing = types.SimpleNamespace(deepcopy=list, copy=copy.copy)
            stack.enter_context(_replaced(_fx_traceback, "copy", sharing))
        if shortcuts.enabled("lazy-graph-modules") and not capturing:
            stack.enter_context(_lazy_graph_module._use_lazy_graph_module(True))
        if shortcuts.enabled("onnx-signatures-once"):
            stack.enter_context(_replaced(onnx_ir.schemas.OpSignature, "from_op_schema",
                                          _signature_once))
        if shortcuts.enabled("plain-list-attributes"):
            stack.enter_context(_replaced(_onnx_ir_convenience, "_infer_attribute_type",
                                          _attribute_type))
        if shortcuts.enabled("lazy-frame-lines"):
            stack.enter_context(_replaced(_torch_traceback, "_extract_symbolized_tb",
                                          _frames_without_lines))
        if shortcuts.enabled("compiled-code-once"):
            stack.enter_context(_replaced(_graph_module, "_exec_with_source",
                                          _exec_compiled_once))
        yield


_SIGNATURES: dict[tuple[str, str, int], Any] = {}
if FASTER_TRACING:
    from onnx_ir import _convenience as _onnx_ir_convenience

    _from_op_schema = onnx_ir.schemas.OpSignature.from_op_schema
    _infer_attribute_type = _onnx_ir_convenience._infer_attribute_type
    _LIST_TYPES = ((int, onnx_ir.AttributeType.INTS), (float, onnx_ir.AttributeType.FLOATS),
                   (str, onnx_ir.AttributeType.STRINGS))


@classmethod  # type: ignore[misc]
def _signature_once(cls: type, schema: Any) -> Any:
    """The signature of an ONNX schema, computed once per (domain, name, version): the
    schema registry holds one schema for each. Nothing changes a signature after it is
    made: torch's builder copies default attributes before it names them."""
    key = (schema.domain, schema.name, schema.since_version)
    signature = _SIGNATURES.get(key)
    if signature is None:
        signature = _SIGNATURES[key] = _from_op_schema(schema)
    return signature


def _attribute_type(value: Any) -> Any:
    """onnx_ir's ``_infer_attribute_type``, with plain non-empty lists and tuples first."""
    if type(value) in (list, tuple) and value:
        for kind, attribute_type in _LIST_TYPES:
            if all(isinstance(item, kind) for item in value):
                return attribute_type
    return _infer_attribute_type(value)


def _frames_without_lines(frames: list[dict[str, Any]], skip: int) -> traceback.StackSummary:
    """torch's ``_extract_symbolized_tb``, leaving each frame's source line to be read when
    (and if) the frame is formatted."""
    stack = traceback.StackSummary()
    for frame in reversed(frames[skip:]):
        stack.append(traceback.FrameSummary(frame["filename"], frame["line"], frame["name"],
                                            lookup_line=False))
    return stack


_COMPILED: dict[tuple[str, str], types.CodeType] = {}


def _exec_compiled_once(source: str, namespace: dict[str, Any],
                        co_fields: dict[str, Any] | None = None) -> None:
    """torch.fx's ``_exec_with_source``: the source is registered for tracebacks as before;
    its code object is reused when the same source was compiled before (it names the
    earlier registration of the same text)."""
    filename = _graph_module._loader.cache(source, namespace, co_fields)
    key = (source, repr(sorted((co_fields or {}).items())))
    code = _COMPILED.get(key)
    if code is None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        code = _COMPILED[key] = compile(source, filename, "exec", dont_inherit=True)
    exec(code, namespace)  # torch's own generated code, run as torch runs it


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
