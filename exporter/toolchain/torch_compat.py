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
from collections.abc import Callable
from contextlib import nullcontext
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


_STATIC_PROBES: dict[str, Callable[[], None]] = {
    "capture-strategies": _probe_capture_strategies,
    "string-dims": _probe_string_dims,
    "staged-translation": _probe_staged_translation,
    "draft-report": _probe_draft_report,
    "pytree": _probe_pytree,
    "operator-schema": _probe_operator_schema,
    "dynamic-axis-names": _probe_dynamic_axis_names,
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
        return _public_capture(model, args, kwargs, dynamic_shapes)
    from torch.onnx._internal.exporter import _capture_strategies

    attempts: list[CaptureAttempt] = []
    for strategy_class in _capture_strategies.CAPTURE_STRATEGIES:
        result = strategy_class(verbose=False)(model, args, kwargs,
                                               dynamic_shapes=dynamic_shapes)
        name = _STRATEGY_NAMES.get(strategy_class.__name__, strategy_class.__name__)
        if result.exported_program is not None:
            attempts.append(CaptureAttempt(name, result.exported_program, None))
            break
        attempts.append(CaptureAttempt(name, None, result.exception))
    return attempts


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
    """Every call_function node that has no ONNX translation in ``registry``."""
    from torch.onnx._internal.exporter import _dispatching

    return [node for node in program.graph.nodes if node.op == "call_function"
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
