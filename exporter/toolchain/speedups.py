"""The speed patches of torch's internals: each a named ``Speedup`` with its own guard and
off switch (``exporter.toolchain.shortcuts``), none of them changing what a check finds.

A patch replaces a function inside torch, onnxscript or onnx_ir with one that computes the
same result with less work. Its guard checks what the replacement relies on (the signature
and behaviour of what it replaces), not only that a name exists. On a torch whose series is
not tested (``exporter.versions``), a patch whose guard holds is kept only when the probe
model exports to byte-identical ONNX with and without it (``verify_on_untested_torch``, at
warm-up); until then it is off.

The capabilities the pipeline needs (and their fallbacks) are in
``exporter.toolchain.torch_compat``.
"""

from __future__ import annotations

import collections.abc
import copy
import inspect
import traceback
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from exporter.toolchain import installed_torch, shortcuts
from exporter.toolchain.shortcuts import IN_TORCH


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


@dataclass(frozen=True)
class Speedup:
    """A patch: ``guard`` says why it cannot apply (None: it can), ``patch`` applies it."""

    name: str  # its off switch in exporter.toolchain.shortcuts
    stage: str  # "tracing" (capture and translation) or "decomposition"
    guard: Callable[[], str | None]
    patch: Callable[[], typing.ContextManager[None]]
    #: True where torch itself already does what the patch does (a later release took the
    #: same fix): nothing to patch, and nothing lost
    in_torch: Callable[[], bool] = lambda: False


def _guarded(check: Callable[[], bool], why: str) -> Callable[[], str | None]:
    def guard() -> str | None:
        try:
            return None if check() else why
        except Exception as error:  # a name that is gone, a signature that moved
            return f"{why} ({type(error).__name__}: {error})"
    return guard


# -- what the patches replace -----------------------------------------------------------------
# Imported without failing: a guard reports what is missing.

def _module(name: str) -> Any:
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        return None


_fx_traceback = _module("torch.fx.traceback")
_lazy_graph_module = _module("torch.fx._lazy_graph_module")
_graph_module = _module("torch.fx.graph_module")
_torch_traceback = _module("torch.utils._traceback")
_export_utils = _module("torch._export.utils")
_decomp_utils = _module("torch.export.decomp_utils")
_exported_program = _module("torch.export.exported_program")
_decomp = _module("torch.onnx._internal.exporter._decomp")
_onnx_ir_convenience = _module("onnx_ir._convenience")
_onnx_ir_schemas = _module("onnx_ir.schemas")


def _original(module: Any, path: str) -> Any:
    """What a patch replaces, as torch has it at import (before any patch is applied)."""
    value = module
    for name in path.split("."):
        value = getattr(value, name, None)
    return value


_ORIGINAL: dict[str, Any] = {
    "build_table": _original(_decomp, "create_onnx_friendly_decomposition_table"),
    "split": _original(_exported_program, "_split_decomp_table_to_cia_and_python_decomp"),
    "py_impl": _original(torch._ops, "OperatorBase.py_impl"),
    "from_op_schema": _original(_onnx_ir_schemas, "OpSignature.from_op_schema"),
    "infer_attribute_type": _original(_onnx_ir_convenience, "_infer_attribute_type"),
}
_OPERATOR_PY_IMPL = _ORIGINAL["py_impl"]
# Decompositions by everything they are computed from (see _decomposition), the CIA operators
# by the registrations they come from (see _valid_cia_ops).
_TABLES: dict[tuple[Any, ...], _Decomposition] = {}
_CIA_OPS: dict[str, Any] = {}


# -- decomposition ----------------------------------------------------------------------------

@contextmanager
def _cached_decomposition() -> Iterator[None]:
    """torch.onnx's decomposition without its per-call rebuilds.

    Per call, torch walks every registered operator twice to find the CompositeImplicitAutograd
    (CIA) ops, re-materializing the C++ ones once per namespace, then rebuilds and splits the
    decomposition table (≈0.1 s together). Here the CIA ops are found again only when the
    dispatcher's CIA registrations changed (a user module can register custom ops), and the
    table and its split are reused while nothing they are computed from changed. Same result;
    torch's own code does the decomposition (a test compares the graphs)."""
    cia_ops = _valid_cia_ops()
    chosen: list[_Decomposition] = []

    def table(onnx_ops: set[Any]) -> dict[Any, Callable]:
        chosen.append(_decomposition(onnx_ops, cia_ops))
        return chosen[-1].table

    def split(table: dict[Any, Callable]) -> tuple[dict[Any, Callable], dict[Any, Callable]]:
        if not chosen or table.keys() != chosen[-1].table.keys():
            return _ORIGINAL["split"](table)
        return chosen[-1].split()

    with ExitStack() as stack:
        for module in (_decomp_utils, _exported_program):
            stack.enter_context(_replaced(module, "_collect_all_valid_cia_ops",
                                          lambda: set(cia_ops)))
        stack.enter_context(_replaced(_decomp, "create_onnx_friendly_decomposition_table", table))
        stack.enter_context(_replaced(_exported_program,
                                      "_split_decomp_table_to_cia_and_python_decomp", split))
        yield


def _decomposition_guard() -> bool:
    return (_parameters(_ORIGINAL["build_table"]) == ["onnx_registered_ops"]
            and _parameters(_ORIGINAL["split"]) == ["decomp_table"]
            and _parameters(_export_utils._materialize_cpp_cia_ops) == []
            and all(_parameters(module._collect_all_valid_cia_ops) == []
                    for module in (_export_utils, _decomp_utils, _exported_program)))


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
        return _OPERATOR_PY_IMPL(self, key)

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
            self.parts = _ORIGINAL["split"](dict(self.table))
        return dict(self.parts[0]), dict(self.parts[1])


def _decomposition(onnx_ops: set[Any], cia_ops: frozenset[Any]) -> _Decomposition:
    """Built once per registry and operator set."""
    key = (frozenset(onnx_ops), cia_ops, tuple(torch._decomp.decomposition_table.items()))
    if key not in _TABLES:
        if len(_TABLES) >= 4:  # a few registries (opsets, translation tables) at a time
            _TABLES.clear()
        _TABLES[key] = _Decomposition(_ORIGINAL["build_table"](onnx_ops))
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



# -- tracing: what each patch replaces it with (see SPEEDUPS for why each is the same) --------

_SIGNATURES: dict[tuple[str, str, int], Any] = {}
_LIST_TYPES: tuple[tuple[type, Any], ...] = ()
if _onnx_ir_schemas is not None:
    import onnx_ir

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
        signature = _SIGNATURES[key] = _ORIGINAL["from_op_schema"](schema)
    return signature


def _attribute_type(value: Any) -> Any:
    """onnx_ir's ``_infer_attribute_type``, with plain non-empty lists and tuples first."""
    if type(value) in (list, tuple) and value:
        for kind, attribute_type in _LIST_TYPES:
            if all(isinstance(item, kind) for item in value):
                return attribute_type
    return _ORIGINAL["infer_attribute_type"](value)


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


def _provenance_shared_by_torch() -> bool:
    """torch shares the provenance records itself (since 2.15 ``NodeSource`` copies only the
    outer list): asked of torch's own class, not of its version."""
    graph = torch.fx.Graph()
    node = graph.placeholder("x")
    record = _fx_traceback.NodeSource(None)
    node.meta["from_node"] = [record]
    return _fx_traceback.NodeSource(node).from_node[0] is record


def _sharing_copy() -> types.SimpleNamespace:
    return types.SimpleNamespace(deepcopy=list, copy=copy.copy)


def _attribute_types_agree() -> bool:
    samples = ([1, 2], (3,), [1.5, 2.5], ["a", "b"], [True, False])
    return all(_attribute_type(value) == _ORIGINAL["infer_attribute_type"](value)
               for value in samples)


SPEEDUPS: tuple[Speedup, ...] = (
    # Every node torch creates while re-tracing records where it came from
    # (``meta["from_node"]``) as a deep copy of its source node's whole history, so each pass
    # copies longer chains. The records are never changed after they are made (they cache
    # their own dict form), so sharing them keeps the same content.
    Speedup("shared-provenance", "tracing",
            _guarded(lambda: _fx_traceback.copy is copy
                     and "deepcopy" in _fx_traceback.NodeSource.__init__.__code__.co_names,
                     "torch.fx.traceback no longer deep-copies provenance with `copy`"),
            lambda: _replaced(_fx_traceback, "copy", _sharing_copy()),
            in_torch=_provenance_shared_by_torch),
    # Graph modules built by tracing compile their Python code only when something runs or
    # reads it (torch's ``_LazyGraphModule``, what ``torch.compile`` uses). Not while
    # capturing: strict capture (dynamo) reads ``_in_spec`` of a module a lazy one has not set.
    Speedup("lazy-graph-modules", "translation",
            _guarded(lambda: _parameters(_lazy_graph_module._use_lazy_graph_module)
                     == ["should_use"], "torch.fx has no _use_lazy_graph_module(should_use)"),
            lambda: _lazy_graph_module._use_lazy_graph_module(True)),
    # torch's ONNX builder converts an operator's ONNX schema into a signature on every call
    # (708 times for a 6-layer transformer); onnxscript computes it once per operator.
    Speedup("onnx-signatures-once", "tracing",
            _guarded(lambda: _parameters(_ORIGINAL["from_op_schema"]) == ["op_schema"],
                     "onnx_ir's OpSignature.from_op_schema changed"),
            lambda: _replaced(_onnx_ir_schemas.OpSignature, "from_op_schema", _signature_once)),
    # onnx_ir checks an attribute against three runtime Protocols (slow isinstance calls)
    # before it looks at lists; plain lists of ints, floats or strings are answered first.
    Speedup("plain-list-attributes", "tracing",
            _guarded(lambda: _parameters(_ORIGINAL["infer_attribute_type"]) == ["attr"]
                     and _attribute_types_agree(),
                     "onnx_ir's _infer_attribute_type answers differently"),
            lambda: _replaced(_onnx_ir_convenience, "_infer_attribute_type", _attribute_type)),
    # Each traced node records the stack it was created from: torch reads the source line of
    # every frame (≈65 per node), then keeps the few from ``forward`` on. The lines are read
    # when kept frames are formatted instead (Python's lazy ``FrameSummary``): the same text.
    Speedup("lazy-frame-lines", "tracing",
            _guarded(lambda: _parameters(_torch_traceback._extract_symbolized_tb)
                     == ["tb", "skip"], "torch.utils._traceback._extract_symbolized_tb changed"),
            lambda: _replaced(_torch_traceback, "_extract_symbolized_tb", _frames_without_lines)),
    # torch builds the unlifted module of a transformer and compiles the same 30 KB of Python
    # five times over: the code object is compiled once per source.
    Speedup("compiled-code-once", "tracing",
            _guarded(lambda: _parameters(_graph_module._exec_with_source)
                     == ["src", "globals", "co_fields"]
                     and _parameters(_graph_module._loader.cache)
                     == ["src", "globals", "co_fields"],
                     "torch.fx's _exec_with_source or its source loader changed"),
            lambda: _replaced(_graph_module, "_exec_with_source", _exec_compiled_once)),
    Speedup("cached-decomposition", "decomposition",
            _guarded(_decomposition_guard, "torch's decomposition table functions changed"),
            _cached_decomposition),
    Speedup("short-py-impl", "decomposition",
            _guarded(lambda: _parameters(_OPERATOR_PY_IMPL) == ["self", "k"]
                     and torch._ops.Callable in (collections.abc.Callable, typing.Callable),
                     "torch's OperatorBase.py_impl changed"),
            _short_py_impl),
)
# torch.onnx's type promotion pass is left as it is: a shortcut that reused traced values
# instead of re-running nodes hid failures the pass raises (a Swin model's view of a
# non-contiguous tensor, issue "truth" in the tracker).

# name -> why it is off although its switch is on (None: verified); only on untested torch
_UNVERIFIED: dict[str, str] = (
    {} if installed_torch.TESTED else
    {s.name: f"not yet compared on torch {installed_torch.VERSION}" for s in SPEEDUPS})


def why_off(speedup: Speedup) -> str | None:
    """None when ``speedup`` is on; else why not."""
    if not shortcuts.enabled(speedup.name):
        return f"turned off by {shortcuts.ENVIRONMENT_VARIABLE}"
    if _built_in(speedup):
        return IN_TORCH
    return speedup.guard() or _UNVERIFIED.get(speedup.name)


def _built_in(speedup: Speedup) -> bool:
    try:
        return bool(speedup.in_torch())
    except Exception:  # a name that is gone: the patch's own guard decides
        return False


def active(name: str) -> bool:
    return why_off(next(s for s in SPEEDUPS if s.name == name)) is None


@contextmanager
def _applied(stages: tuple[str, ...]) -> Iterator[None]:
    with ExitStack() as stack:
        for speedup in SPEEDUPS:
            if speedup.stage in stages and why_off(speedup) is None:
                stack.enter_context(speedup.patch())
        yield


def tracing(*, capturing: bool = False) -> typing.ContextManager[None]:
    """The tracing patches that are on, around capture (``capturing``) or translation."""
    return _applied(("tracing",) if capturing else ("tracing", "translation"))


def decomposition() -> typing.ContextManager[None]:
    """The decomposition patches that are on, around torch.onnx's decomposition."""
    return _applied(("decomposition",))


def verify_on_untested_torch(export: Callable[[], bytes]) -> None:
    """On a torch of an untested series, keep each patch whose guard holds only when
    ``export`` (the probe model, exported as a check does) gives byte-identical ONNX with
    that patch alone on and with every patch off."""
    candidates = [s.name for s in SPEEDUPS if s.name in _UNVERIFIED and s.guard() is None]
    if not candidates:
        return
    for name in candidates:
        _UNVERIFIED[name] = "being compared"
    reference = export()
    verdicts: dict[str, str] = {}
    for name in candidates:
        del _UNVERIFIED[name]  # this one alone on
        try:
            same = export() == reference
            verdicts[name] = "" if same else (
                f"the probe model exports to other ONNX with it on torch "
                f"{installed_torch.VERSION}")
        except Exception as error:
            verdicts[name] = f"the probe export failed with it: {type(error).__name__}: {error}"
        _UNVERIFIED[name] = "being compared"
    for name, why in verdicts.items():
        if why:
            _UNVERIFIED[name] = why
        else:
            del _UNVERIFIED[name]
