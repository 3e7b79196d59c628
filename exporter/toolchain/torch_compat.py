"""Every private torch / onnxscript API the pipeline needs, behind one small interface.

Each *capability* is probed on its own at warm-up (``ExportSession.probe_toolchain``; not at
import: the names exist, their signatures are the ones written against, and a tiny
behavioural probe passes) and falls back on its own, so a torch
whose internals moved keeps everything that still works. The fallbacks use public APIs (and
a private setting only where it is still there) and never add an error ``torch.onnx.export``
would not raise (``tests/exporter/toolchain/test_torch_compat.py`` checks every fixture with all of
them). What a user loses with each is said in ``CAPABILITIES`` and in one message
(``ToolchainStatus.message`` in ``exporter.toolchain.status``).

``ONNXLENS_CAPABILITIES_OFF=name,...`` (or ``all``) forces capabilities off, to test the
fallbacks (``tests/exporter/toolchain/test_torch_compat.py``) or to step around a broken one.

The speed patches of torch's internals are elsewhere: ``exporter.toolchain.speedups``.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from exporter.toolchain import installed_torch

TORCH_VERSION = installed_torch.VERSION
TORCH_TESTED = installed_torch.TESTED
ENVIRONMENT_VARIABLE = "ONNXLENS_CAPABILITIES_OFF"


@dataclass(frozen=True)
class Capability:
    """A private API the pipeline uses, and what the user loses when it falls back."""

    name: str
    uses: str
    without: str


CAPABILITIES: dict[str, Capability] = {c.name: c for c in (
    Capability("capture-strategies", "torch.onnx's capture strategies and their settings",
               "capture calls torch.export.export (non-strict, then strict) without "
               "torch.onnx's own settings"),
    Capability("string-dims", "torch.onnx's conversion of string dims (`{0: \"batch\"}`)",
               "string dims are converted to Dim.DYNAMIC by onnxlens"),
    Capability("staged-translation", "torch.onnx's registry, decomposition, translation and "
               "model passes, stage by stage",
               "the public torch.onnx.export translates: only the first operator without a "
               "translation is found, and each check is slower"),
    Capability("draft-report", "draft export's list of capture problems",
               "a failed capture is reported once, from torch's first error"),
    Capability("pytree", "torch.utils._pytree to walk nested inputs and outputs",
               "inputs and outputs are walked through tuples, lists and dicts only"),
    Capability("operator-schema", "an operator's schema (`OpOverload._schema`)",
               "quick fixes for ONNX201 write translation stubs without argument names"),
    Capability("dynamic-axis-names", "torch.onnx's renaming of dynamic ONNX dims to the "
               "names given in `dynamic_shapes`",
               "dynamic ONNX dims keep torch's symbol names (s0, s1, ...)"),
    Capability("shape-guards", "the capture's shape environments: each guard on a size and "
               "the user line that added it (`ShapeEnv.guards`)",
               "a narrowed range (ONNX107) is located by a second, draft capture, or at the "
               "pragma"),
    Capability("export-flag", "torch.onnx's flag that `torch.onnx.is_in_onnx_export()` reads "
               "(`_flags._is_onnx_exporting`), set while capture traces the model",
               "`torch.onnx.is_in_onnx_export()` answers False in the model while onnxlens "
               "captures it: a model that takes another path during the export is checked on "
               "its eager path"),
    Capability("user-frames", "torch.fx's stack-trace anchors "
               "(`torch.fx.proxy._STACK_TRACE_ANCHORS`: a non-strict capture's node stack "
               "traces keep every frame of the workspace's code, not only `forward`s) and its "
               "line map of generated code (`GraphModule._lineno_map`)",
               "a problem inside a helper function or method (one not named `forward`), or in "
               "a `no_grad`, `inference_mode` or `autocast` region, is located at a `forward` "
               "line that calls it"),
)}


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    reason: str = ""


def _forced_off() -> frozenset[str]:
    names = {n.strip() for n in os.environ.get(ENVIRONMENT_VARIABLE, "").split(",") if n.strip()}
    return frozenset(CAPABILITIES) if "all" in names else frozenset(names & CAPABILITIES.keys())


def unknown_names() -> list[str]:
    names = [n.strip() for n in os.environ.get(ENVIRONMENT_VARIABLE, "").split(",") if n.strip()]
    return [n for n in names if n != "all" and n not in CAPABILITIES]


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


# -- static probes: names and signatures, at import ------------------------------------------

def _probe_capture_strategies() -> None:
    from torch.onnx._internal.exporter import _capture_strategies

    strategies = _capture_strategies.CAPTURE_STRATEGIES
    _expect(len(strategies) > 0, "no capture strategies")
    for strategy in strategies:
        _expect(_parameters(strategy.__call__)[1:5] == ["model", "args", "kwargs",
                                                        "dynamic_shapes"],
                f"{strategy.__name__}.__call__ takes other arguments")
        _expect("verbose" in _parameters(strategy.__init__), f"{strategy.__name__}() changed")


def _probe_string_dims() -> None:
    from torch.onnx._internal.exporter import _dynamic_shapes

    converted, changed = _dynamic_shapes.convert_str_to_export_dim(({0: "batch"}, [None, "n"]))
    _expect(changed and converted[0][0] == torch.export.Dim.DYNAMIC
            and converted[1][1] == torch.export.Dim.DYNAMIC and converted[1][0] is None,
            "convert_str_to_export_dim converts differently")


def _probe_staged_translation() -> None:
    from torch.onnx._internal._lazy_import import onnxscript_apis
    from torch.onnx._internal.exporter import (
        _constants,
        _core,
        _dispatching,
        _ir_passes,
        _registration,
    )

    _expect(_parameters(_core._prepare_exported_program_for_export)[:2]
            == ["exported_program", "registry"], "_prepare_exported_program_for_export changed")
    _expect(_parameters(_core._exported_program_to_onnx_program)[:2]
            == ["exported_program", "registry"], "_exported_program_to_onnx_program changed")
    _expect("opset_version" in _parameters(_registration.ONNXRegistry.from_torchlib),
            "ONNXRegistry.from_torchlib changed")
    _expect(_parameters(_dispatching.dispatch) == ["node", "registry"], "dispatch changed")
    _expect(_parameters(_ir_passes.rename_inputs) == ["model", "new_names"]
            and _parameters(_ir_passes.rename_outputs) == ["model", "new_names"],
            "_ir_passes.rename_inputs/outputs changed")
    _expect(_parameters(onnxscript_apis.convert_version) == ["model", "target_version"],
            "convert_version changed")
    _expect(isinstance(_constants.TORCHLIB_OPSET, int), "TORCHLIB_OPSET is missing")
    _expect(hasattr(torch.onnx.ONNXProgram, "optimize"), "ONNXProgram.optimize is missing")


def _probe_draft_report() -> None:
    from torch.export._draft_export import DraftExportReport

    _expect({"failures"} <= set(_parameters(DraftExportReport.__init__)),
            "DraftExportReport changed")


def _probe_pytree() -> None:
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(((1, [2]), {"a": 3}))
    _expect(leaves == [1, 2, 3] and _pytree.tree_unflatten(leaves, spec) == ((1, [2]), {"a": 3}),
            "tree_flatten flattens differently")
    _expect(_pytree.tree_map(lambda x: x * 2, ([1], {"a": 2})) == ([2], {"a": 4}),
            "tree_map maps differently")


def _probe_operator_schema() -> None:
    arguments = torch.ops.aten.add.Tensor._schema.arguments
    _expect([a.name for a in arguments][:2] == ["self", "other"], "schemas changed")


def _probe_dynamic_axis_names() -> None:
    _expect(_parameters(torch.onnx.ONNXProgram._rename_dynamic_axes)[1:] == ["dynamic_shapes"],
            "ONNXProgram._rename_dynamic_axes changed")


def _probe_shape_guards() -> None:
    from torch._guards import TracingContext
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    _expect(_parameters(ShapeEnv._log_guard) == ["self", "prefix", "g", "forcing_spec"],
            "ShapeEnv._log_guard changed")
    _expect(callable(TracingContext.extract_stack), "TracingContext.extract_stack is missing")
    env = ShapeEnv()
    _expect(isinstance(env.var_to_sources, dict), "ShapeEnv.var_to_sources changed")


def _probe_user_frames() -> None:
    import traceback

    from torch.fx import proxy

    _expect(isinstance(getattr(proxy, "_STACK_TRACE_ANCHORS", None), set),
            "torch.fx.proxy._STACK_TRACE_ANCHORS is missing")
    tracer = proxy.TracerBase()
    tracer._record_forward_stack_traces_only = True
    stack = traceback.StackSummary.from_list([("/onnxlens-probe/model.py", 2, "helper", "x")])
    with _anchoring(lambda filename: filename == "/onnxlens-probe/model.py"):
        kept = tracer._filter_traceback_frames(stack)
    _expect([frame.name for frame in kept] == ["helper"],
            "TracerBase._filter_traceback_frames no longer keeps the anchors' frames")
    graph = torch.fx.Graph()
    called = graph.call_function(_calling_frame, (graph.placeholder("x"),))
    graph.output(called)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    filename, line = module(None)
    _expect(_generated_file(module) == filename and _generated_node(module, line) is called,
            "GraphModule._lineno_map no longer maps a line of the generated code to its node")


def _probe_export_flag() -> None:
    from torch.onnx._internal.exporter import _flags

    _expect(isinstance(getattr(_flags, "_is_onnx_exporting", None), bool),
            "torch.onnx's _flags._is_onnx_exporting is missing")
    with _exporting_flag(_flags):
        _expect(torch.onnx.is_in_onnx_export(), "is_in_onnx_export() no longer reads the flag")
    _expect(not torch.onnx.is_in_onnx_export(), "the flag stays set")


@contextmanager
def _exporting_flag(flags: Any) -> Iterator[None]:
    before = flags._is_onnx_exporting
    flags._is_onnx_exporting = True
    try:
        yield
    finally:
        flags._is_onnx_exporting = before


@contextmanager
def onnx_exporting() -> Iterator[None]:
    """What torch.onnx.export sets while it exports: ``torch.onnx.is_in_onnx_export()`` answers
    True in the model's code that capture traces (a model may take an export-only path there,
    as torch.onnx.ops.symbolic's documentation shows), and False in its eager runs."""
    if not available("export-flag"):
        yield
        return
    from torch.onnx._internal.exporter import _flags

    with _exporting_flag(_flags):
        yield


def _calling_frame(_: Any) -> tuple[str, int]:
    """The file and line of the caller: the behavioural probe's generated code."""
    import sys

    caller = sys._getframe(1)
    return caller.f_code.co_filename, caller.f_lineno


_STATIC_PROBES: dict[str, Callable[[], None]] = {
    "capture-strategies": _probe_capture_strategies,
    "string-dims": _probe_string_dims,
    "staged-translation": _probe_staged_translation,
    "draft-report": _probe_draft_report,
    "pytree": _probe_pytree,
    "operator-schema": _probe_operator_schema,
    "dynamic-axis-names": _probe_dynamic_axis_names,
    "shape-guards": _probe_shape_guards,
    "user-frames": _probe_user_frames,
    "export-flag": _probe_export_flag,
}


def _run_probe(probe: Callable[[], None]) -> ProbeResult:
    try:
        probe()
    except Exception as error:  # any failure of a probe means: fall back
        return ProbeResult(False, f"{type(error).__name__}: {error}")
    return ProbeResult(True)


# Each capability's probe result, filled by run_static_probes (at warm-up: ExportSession's
# probe_toolchain), not at import; a capability asked for before that runs them then.
_PROBED: dict[str, ProbeResult] = {}


def run_static_probes() -> dict[str, ProbeResult]:
    """Probe each capability's private API once in this process (the signature and attribute
    checks above; ``probe_pipeline`` then tries them on a model)."""
    if not _PROBED:
        _PROBED.update({name: _run_probe(probe) for name, probe in _STATIC_PROBES.items()})
    return _PROBED


def probe_results() -> dict[str, ProbeResult]:
    """Each capability's state now: forced off, failed its probe, or working."""
    forced = _forced_off()
    probed = run_static_probes()
    return {name: ProbeResult(False, f"turned off by {ENVIRONMENT_VARIABLE}") if name in forced
            else probed[name] for name in CAPABILITIES}


def available(name: str) -> bool:
    if name not in CAPABILITIES:
        raise KeyError(f"unknown capability {name!r}")
    return name not in _forced_off() and run_static_probes()[name].ok


def mark_broken(name: str, reason: str) -> None:
    """A behavioural probe (``probe_pipeline``) found ``name`` not working as written for."""
    run_static_probes()[name] = ProbeResult(False, reason)


# -- capture ---------------------------------------------------------------------------------

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
    if not available("capture-strategies"):
        with onnx_exporting():
            return _public_capture(model, args, kwargs, dynamic_shapes)
    from torch.onnx._internal.exporter import _capture_strategies

    attempts: list[CaptureAttempt] = []
    for strategy_class in _capture_strategies.CAPTURE_STRATEGIES:
        with onnx_exporting():
            result = strategy_class(verbose=False)(model, args, kwargs,
                                                   dynamic_shapes=dynamic_shapes)
        name = _STRATEGY_NAMES.get(strategy_class.__name__, strategy_class.__name__)
        if result.exported_program is not None:
            attempts.append(CaptureAttempt(name, result.exported_program, None))
            break
        attempts.append(CaptureAttempt(name, None, result.exception))
    return attempts


@dataclass(frozen=True)
class ShapeGuard:
    """A bound a capture put on sizes (``s77 > 6``), with the symbols' sources and example
    values, and the stack of the code that added it (outermost first, torch's frames left
    out)."""

    expression: Any  # a sympy relation over the sizes' symbols
    sources: dict[str, str]  # symbol name -> torch's source: ``L['x'].size()[0]``
    hints: dict[str, int]  # symbol name -> its size in the example inputs
    stack: tuple[tuple[str, int, str], ...]  # (path, line, function)


@contextmanager
def recording_shape_guards() -> Iterator[list[ShapeGuard]]:
    """While the block runs, every bound torch's shape environments put on a size is
    recorded with the stack that added it; the list yielded is filled when the block ends.
    torch.onnx's capture defers guards to runtime asserts and re-exports with the suggested
    ranges after a constraint violation, so the program it keeps no longer names the line
    that narrowed a range; the moment the guard is added does."""
    found: list[ShapeGuard] = []
    if not available("shape-guards"):
        yield found
        return
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    added: list[tuple[Any, Any, tuple[tuple[str, int, str], ...]]] = []
    original = ShapeEnv._log_guard

    def recording(self: Any, prefix: str, g: Any, forcing_spec: bool) -> None:
        if isinstance(g, sympy.core.relational.Relational) \
                and not isinstance(g, (sympy.Eq, sympy.Ne)):
            added.append((self, g, _adding_stack()))
        original(self, prefix, g, forcing_spec)

    ShapeEnv._log_guard = recording
    try:
        yield found
    finally:
        ShapeEnv._log_guard = original
        found.extend(ShapeGuard(g, *_symbols_of(environment), stack)
                     for environment, g, stack in added)


def _symbols_of(environment: Any) -> tuple[dict[str, str], dict[str, int]]:
    sources = {str(symbol): _source_name(items[0])
               for symbol, items in environment.var_to_sources.items() if items}
    values = getattr(environment, "backed_var_to_val", None) or environment.var_to_val
    hints = {str(symbol): int(value) for symbol, value in values.items()
             if getattr(value, "is_integer", False)}
    return sources, hints


def _source_name(source: Any) -> str:
    name = source.name  # a property in recent torch, a method before
    return str(name() if callable(name) else name)


_TORCH_DIRECTORY = os.path.dirname(torch.__file__) + os.sep


def _adding_stack() -> tuple[tuple[str, int, str], ...]:
    """The user's stack where a guard is added: the frames dynamo traces (strict capture),
    else the Python stack (non-strict capture runs the user's code), torch's frames left out."""
    import traceback

    from torch._guards import TracingContext

    frames = list(TracingContext.extract_stack() or ()) or list(
        traceback.StackSummary.extract(traceback.walk_stack(None), lookup_lines=False))[::-1]
    return tuple((frame.filename, int(frame.lineno or 0), frame.name) for frame in frames
                 if not frame.filename.startswith(_TORCH_DIRECTORY))


def _public_capture(model: torch.nn.Module, args: tuple, kwargs: dict[str, Any],
                    dynamic_shapes: Any) -> list[CaptureAttempt]:
    """torch.onnx's strategies rebuilt from what is there: torch.export non-strict then
    strict, with 0/1 dimensions kept dynamic where torch has the setting, and the
    dynamic_shapes refined from torch's suggested fixes when a dimension was specialized."""
    attempts: list[CaptureAttempt] = []
    for strict in (False, True):
        name = "strict" if strict else "non-strict"
        try:
            with _size_oblivious():
                program = _export_refined(model, args, kwargs, dynamic_shapes, strict)
        except Exception as error:
            attempts.append(CaptureAttempt(name, None, error))
            continue
        attempts.append(CaptureAttempt(name, program, None))
        break
    return attempts


def _size_oblivious() -> Any:
    config = getattr(getattr(torch.fx, "experimental", None), "_config", None)
    if config is None or not hasattr(config, "backed_size_oblivious"):
        return nullcontext()
    return config.patch(backed_size_oblivious=True)


def _export_refined(model: torch.nn.Module, args: tuple, kwargs: dict[str, Any],
                    dynamic_shapes: Any, strict: bool) -> torch.export.ExportedProgram:
    try:
        return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                   strict=strict)
    except Exception as error:
        refine = getattr(torch.export.dynamic_shapes,
                         "refine_dynamic_shapes_from_suggested_fixes", None)
        if refine is None or dynamic_shapes is None or not hasattr(error, "msg"):
            raise
        try:
            refined = refine(error.msg, dynamic_shapes)
        except Exception:
            raise error from None
        return torch.export.export(model, args, kwargs, dynamic_shapes=refined, strict=strict)


def dynamic_shapes_for_export(dynamic_shapes: Any) -> Any:
    """torch.onnx-style string dims (``{0: "batch"}``) as ``Dim.DYNAMIC``, as
    torch.onnx.export converts them before it calls torch.export."""
    if dynamic_shapes is None:
        return None
    if available("string-dims"):
        from torch.onnx._internal.exporter import _dynamic_shapes

        return _dynamic_shapes.convert_str_to_export_dim(dynamic_shapes)[0]
    return _strings_to_dynamic(dynamic_shapes) if _has_strings(dynamic_shapes) else dynamic_shapes


def _strings_to_dynamic(spec: Any) -> Any:
    """Every string among the axes of a dynamic_shapes spec becomes ``Dim.DYNAMIC``: an
    axis dict's values and an axis sequence's items (a spec's dict keys are names, not
    dims). An axis sequence becomes a list, as torch.onnx makes it."""
    if isinstance(spec, str):
        return torch.export.Dim.DYNAMIC
    if isinstance(spec, dict):
        return {key: _strings_to_dynamic(value) for key, value in spec.items()}
    if isinstance(spec, (list, tuple)):
        items = [_strings_to_dynamic(value) for value in spec]
        axes = not any(isinstance(value, (dict, list, tuple)) for value in spec)
        return items if axes or isinstance(spec, list) else tuple(items)
    return spec


def is_dim_hint(value: Any) -> bool:
    """``Dim.AUTO``, ``Dim.DYNAMIC`` or ``Dim.STATIC`` (torch's private ``_DimHint``)."""
    return isinstance(value, type(torch.export.Dim.DYNAMIC))


def dim_hint_name(value: Any) -> str:
    for name in ("AUTO", "DYNAMIC", "STATIC"):
        if value == getattr(torch.export.Dim, name, None):
            return name
    return getattr(getattr(value, "type", None), "name", "AUTO")


@dataclass(frozen=True)
class DraftFailure:
    """One problem a draft export found: torch's failure kind, its data, files by index."""

    kind: str
    data: dict[str, Any]


def draft_failures(program: Any) -> tuple[list[DraftFailure], dict[int, str]] | None:
    """A draft export's problems and the file names its stacks refer to by index; None when
    the report cannot be read (then the caller reports torch's first error)."""
    if not available("draft-report"):
        return None
    try:
        report = program._report
        failures = [DraftFailure(getattr(f.failure_type, "name", str(f.failure_type)),
                                 f.data if isinstance(f.data, dict) else {})
                    for f in report.failures]
    except AttributeError:
        return None
    return failures, _draft_report_files(report)


def _draft_report_files(report: Any) -> dict[int, str]:
    """Draft reports name files by index into torch's process-wide intern table; the
    report's own table only holds files first seen during that export."""
    files = dict(getattr(report, "str_to_filename", {}) or {})
    try:
        from torch._logging.structured import INTERN_TABLE

        files.update({index: name for name, index in INTERN_TABLE.items()})
    except ImportError:
        pass
    return files


# -- the user's frames in node stack traces -----------------------------------------------------

@contextmanager
def keeping_user_frames(is_user: Callable[[str], bool]) -> Iterator[None]:
    """While the block runs, the stack traces a non-strict capture records on its nodes
    (``node.meta["stack_trace"]``) keep every frame whose file ``is_user`` accepts, besides
    torch's own choice. torch.export's tracer (make_fx, ``_record_forward_stack_traces_only``)
    keeps only the frames of functions named ``forward`` (and registered anchors): a helper
    method or function the failing line sits in, decorated or not, was missing from the trace,
    and the problem landed on the ``forward`` line calling it. The frames on the stack when
    the block starts (a script of the workspace that runs a check) are not the model's and
    stay out."""
    if not available("user-frames"):
        yield
        return
    import sys

    outer: set[tuple[str, str]] = set()
    frame: Any = sys._getframe(1)
    while frame is not None:
        outer.add((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    with _anchoring(is_user, exclude=outer):
        yield


@contextmanager
def _anchoring(is_user: Callable[[str], bool],
               exclude: set[tuple[str, str]] | None = None) -> Iterator[None]:
    """torch.fx.proxy's anchor set replaced by one that also holds every (file, function)
    of a file ``is_user`` accepts (decided once per file); anchors torch registers meanwhile
    (``annotate_fn``) are kept when the original set is put back."""
    from torch.fx import proxy

    original: set[tuple[str, str]] = proxy._STACK_TRACE_ANCHORS
    decided: dict[str, bool] = {}
    excluded = exclude or set()

    class UserAnchors(set[tuple[str, str]]):
        def __contains__(self, key: object) -> bool:
            if super().__contains__(key):
                return True
            if not isinstance(key, tuple) or len(key) != 2 or key in excluded:
                return False
            filename = str(key[0])
            if filename not in decided:
                decided[filename] = bool(is_user(filename))
            return decided[filename]

    anchors = UserAnchors(original)
    proxy._STACK_TRACE_ANCHORS = anchors
    try:
        yield
    finally:
        proxy._STACK_TRACE_ANCHORS = original
        original.update(anchors)


def generated_code_file(module: torch.fx.GraphModule) -> str | None:
    """The file name torch.fx compiled ``module``'s code under (``<eval_with_key>.N``): what
    a frame of a trace that ran the module names."""
    return _generated_file(module) if available("user-frames") else None


def generated_code_node(module: torch.fx.GraphModule, line: int) -> torch.fx.Node | None:
    """The node of ``module`` whose generated code is at ``line`` of its file, as torch
    answers it for dynamo's retracing (``GraphModule._lineno_map``, counted from the first
    line of ``forward``); None when torch does not say."""
    return _generated_node(module, line) if available("user-frames") else None


def _generated_file(module: torch.fx.GraphModule) -> str | None:
    code = getattr(getattr(type(module), "forward", None), "__code__", None)
    return code.co_filename if code is not None else None


def _generated_node(module: torch.fx.GraphModule, line: int) -> torch.fx.Node | None:
    lines = getattr(module, "_lineno_map", None)
    code = getattr(getattr(type(module), "forward", None), "__code__", None)
    if not isinstance(lines, dict) or code is None:
        return None
    index = lines.get(line - code.co_firstlineno)
    nodes = list(module.graph.nodes)
    return nodes[index] if isinstance(index, int) and 0 <= index < len(nodes) else None


# -- walking nested values --------------------------------------------------------------------

def tree_leaves(value: Any) -> list[Any]:
    if available("pytree"):
        from torch.utils import _pytree

        return list(_pytree.tree_flatten(value)[0])
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in tree_leaves(item)]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in tree_leaves(item)]
    return [value]


def tree_map(function: Callable[[Any], Any], value: Any) -> Any:
    if available("pytree"):
        from torch.utils import _pytree

        return _pytree.tree_map(function, value)
    if isinstance(value, dict):
        return type(value)((key, tree_map(function, item)) for key, item in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(tree_map(function, item) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(tree_map(function, item) for item in value)
    return function(value)


def argument_names(overload: Any) -> list[str] | None:
    """An ATen overload's argument names, for translation stubs."""
    if not available("operator-schema"):
        return None
    schema = getattr(overload, "_schema", None)
    return None if schema is None else [argument.name for argument in schema.arguments]


# -- translation -----------------------------------------------------------------------------

def default_opset() -> int:
    """The opset ``torch.onnx.export`` produces when none is asked for."""
    from torch.onnx import _constants as _public_constants

    return int(_public_constants.ONNX_DEFAULT_OPSET)


def registry_opset(opset: int) -> int:
    """The opset torch.onnx.export builds its registry for: torchlib's own below it (the
    model is converted down afterwards)."""
    if not available("staged-translation"):
        return opset
    from torch.onnx._internal.exporter import _constants

    return max(opset, int(_constants.TORCHLIB_OPSET))


def build_registry(opset: int) -> Any:
    """The torchlib registry for ``opset`` (≈1 s to build, so sessions keep it); None when
    translation goes through the public API."""
    if not available("staged-translation"):
        return None
    from torch.onnx._internal.exporter import _registration

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


def decompose(program: torch.export.ExportedProgram, registry: Any) -> torch.export.ExportedProgram:
    """torch.onnx's decomposition of a captured program (with the speed patches that are on)."""
    from torch.onnx._internal.exporter import _core

    from exporter.toolchain import speedups

    with speedups.decomposition():
        return _core._prepare_exported_program_for_export(program, registry=registry)


def unsupported_nodes(program: torch.export.ExportedProgram, registry: Any) -> list[torch.fx.Node]:
    """Every call_function node that has no ONNX translation in ``registry``, in the graph and
    in the subgraphs of its control flow (``torch.cond``'s branches, a loop's body)."""
    from torch.onnx._internal.exporter import _dispatching

    return [node for module in program.graph_module.modules()
            if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function"
            and _dispatching.dispatch(node, registry)[0] is None]


def translate(program: torch.export.ExportedProgram, registry: Any) -> torch.onnx.ONNXProgram:
    """Translate an already decomposed program."""
    from torch.onnx._internal.exporter import _core

    return _core._exported_program_to_onnx_program(program, registry=registry)


def finish_model(onnx_program: Any, opset: int, *, optimize: bool,
                 input_names: list[str] | None, output_names: list[str] | None) -> None:
    """What torch.onnx.export does to the translated model, in its order: convert it to the
    requested opset, optimize it (its default), rename inputs and outputs."""
    from torch.onnx._internal._lazy_import import onnxscript_apis
    from torch.onnx._internal.exporter import _ir_passes

    onnx_program.model = onnxscript_apis.convert_version(onnx_program.model, opset)
    if optimize:
        onnx_program.optimize()
    if input_names:
        _ir_passes.rename_inputs(onnx_program.model, [str(name) for name in input_names])
    if output_names:
        _ir_passes.rename_outputs(onnx_program.model, [str(name) for name in output_names])


def rename_dynamic_axes(onnx_program: Any, dynamic_shapes: Any) -> None:
    """Give symbolic ONNX dims the user's names (``{0: "batch"}``), as torch.onnx.export does."""
    if dynamic_shapes is None or not available("dynamic-axis-names"):
        return
    if _has_strings(dynamic_shapes):
        onnx_program._rename_dynamic_axes(dynamic_shapes)


def _has_strings(spec: Any) -> bool:
    if isinstance(spec, str):
        return True
    values = spec.values() if isinstance(spec, dict) else spec
    return isinstance(spec, (dict, list, tuple)) and any(_has_strings(v) for v in values)


def public_export(model: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
    """The public exporter, for translation when the staged private path is unavailable."""
    return torch.onnx.export(model, args, kwargs=kwargs, dynamo=True, verbose=False, **options)


# -- the behavioural probe ---------------------------------------------------------------------

class ProbeModel(torch.nn.Module):
    """A tiny model with a dynamic dimension and a dict input: what the warm-up exports."""

    def __init__(self) -> None:
        super().__init__()
        # tiny, below ATen's parallel grain size: no OpenMP pool is created in the worker
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, extra: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)) + extra["bias"]


def probe_export(registry: Any, opset: int | None = None) -> bytes:
    """Export ``ProbeModel`` through this module as a check does; the serialized model."""
    opset = opset if opset is not None else default_opset()
    torch.manual_seed(0)
    model = ProbeModel().eval()
    example = (torch.zeros(2, 4), {"bias": torch.zeros(2, 4)})
    spec = dynamic_shapes_for_export(({0: "batch"}, {"bias": {0: "batch"}}))
    from exporter.toolchain import speedups

    with speedups.tracing(capturing=True):
        attempts = capture(model, example, {}, spec)
    program = next(a.program for a in attempts if a.program is not None)
    with speedups.tracing():
        if registry is None:
            onnx_program = public_export(program, (), {}, optimize=True, opset_version=opset)
        else:
            onnx_program = translate(decompose(program, registry), registry)
            finish_model(onnx_program, opset, optimize=True, input_names=None,
                         output_names=None)
    import onnx_ir

    return onnx_ir.serde.serialize_model(onnx_program.model).SerializeToString()


def probe_pipeline(registry: Callable[[], Any], opset: int | None = None) -> None:
    """The behavioural probe at warm-up: the tiny model through capture and staged
    translation. A capability that raises here falls back (and the message says so)."""
    try:
        probe_export(registry(), opset)
        return
    except Exception as error:
        reason = f"the warm-up export failed: {type(error).__name__}: {error}"
    attempts = capture(ProbeModel().eval(), (torch.zeros(2, 4), {"bias": torch.zeros(2, 4)}),
                       {}, None)
    if all(attempt.program is None for attempt in attempts):
        mark_broken("capture-strategies", reason)
    else:
        mark_broken("staged-translation", reason)
