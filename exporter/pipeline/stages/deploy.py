"""Stage 8: check the exported model on the runtimes the user deploys to besides ONNX
Runtime's CPU provider (``runtimes``), and at the precisions named besides float32
(``precision``: converted by ONNX Runtime's tools, then checked on ONNX Runtime's CPU provider
and each runtime named; docs/runtimes.md): does it load there, run, and match PyTorch; every
node a runtime cannot take, and the first value a precision loses, is reported at the line it
was exported from."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from exporter.config.runtimes import REFERENCE_PRECISION, REFERENCE_RUNTIME
from exporter.findings.diagnostics import Diagnostic, FindingData
from exporter.findings.positions import Range
from exporter.findings.result import RuntimeRun
from exporter.pipeline import (
    mobile_partitions,
    openvino_runner,
    ort_runner,
    ort_web_runner,
    precision_variants,
)
from exporter.pipeline.comparing import (
    differences,
    random_outputs_of,
    report_at_output,
    spared_nodes,
    tolerances,
)
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.intermediates import intermediates, operation
from exporter.pipeline.locating import short_message
from exporter.pipeline.onnx_nodes import (
    STACK_TRACE_KEY,
    exported_origin,
    find_nodes,
    metadata,
    names_in_message,
)
from exporter.pipeline.stages.base import StageFailed, StageSkipped
from exporter.source.traces import Mapped

#: what ONNX Runtime says of an operator it has no kernel for (with these input types)
_NO_KERNEL = "Could not find an implementation"
#: ONNX Runtime's execution provider of each runtime run through onnxruntime
_PROVIDERS = {"ort-cpu": ort_runner.CPU, "cuda": "CUDAExecutionProvider",
              "tensorrt": "TensorrtExecutionProvider"}
#: runtimes judged from operator tables: a precision variant is run, not read from a table
_STATIC = ("nnapi", "coreml")
#: float16's largest finite value
_FLOAT16_MAX = float(np.finfo(np.float16).max)
#: below this magnitude a value counts as zero when its error is weighed against it
_TINY = 1e-12
#: nodes kept at float32, one at a time, before a precision's fix is given up
_FIX_ROUNDS = 3
#: each runtime as the messages name it
_NAMES = {"ort-cpu": "ONNX Runtime (CPU)", "openvino-cpu": "OpenVINO (CPU)",
          "ort-web": "ONNX Runtime Web (WebAssembly)", "nnapi": "NNAPI", "coreml": "CoreML",
          "cuda": "ONNX Runtime's CUDA provider",
          "tensorrt": "ONNX Runtime's TensorRT provider"}


def requested(ctx: CheckContext) -> list[str]:
    """The runtimes this stage checks (the reference is every check's runtime stage)."""
    return [name for name in ctx.options.runtimes or () if name != REFERENCE_RUNTIME]


def precisions(ctx: CheckContext) -> list[str]:
    """The precisions this stage converts the model to (float32 is every check's)."""
    return [name for name in ctx.options.precision or () if name != REFERENCE_PRECISION]


def blocked(ctx: CheckContext) -> str:
    if not requested(ctx) and not precisions(ctx):
        return ("no runtime named besides ort-cpu (`runtimes`) and no precision besides fp32 "
                "(`precision`, docs/runtimes.md)")
    if ctx.known_failure is not None:
        return "the export fails"
    if ctx.weightless:
        return 'weights="none": this stage needs real weights'
    if ctx.translated is None:
        return "translation failed"
    if ctx.validated is not None and not ctx.validated.valid:
        return "the ONNX model is invalid (see the validate stage)"
    return ""


@dataclass(frozen=True)
class _Model:
    """What a runtime is handed: the export itself, or a precision variant of it."""

    proto: onnx.ModelProto
    weights: dict[str, np.ndarray]  # its in-memory initializers (weights_apart)
    serialized: bytes | None
    precision: str

    def on(self, runtime: str) -> str:
        """"OpenVINO (CPU)", or "OpenVINO (CPU) at fp16" for a variant."""
        return _NAMES[runtime] + ("" if self.precision == REFERENCE_PRECISION
                                  else f" at {self.precision}")

    @cached_property
    def partitioned(self) -> onnx.ModelProto:
        """The graph ONNX Runtime partitions among its providers (after its basic
        optimizations); the model itself when ONNX Runtime refuses it (the runtime stage
        reports why)."""
        try:
            return ort_runner.basic_optimized(self.proto, self.serialized, self.weights)
        except Exception:
            logging.getLogger(__name__).debug("basic optimization failed", exc_info=True)
            return self.proto


def run(ctx: CheckContext) -> None:
    translated = ctx.need_translated()
    exported = _Model(translated.model_proto, translated.weights, translated.model_bytes,
                      REFERENCE_PRECISION)
    fallbacks: list[_Fallback] = []
    first = len(ctx.diagnostics)
    runs = [_timed(ctx, runtime, exported, fallbacks) for runtime in requested(ctx)]
    for precision in precisions(ctx):
        runs += _at_precision(ctx, precision, fallbacks)
    ctx.summary.runtimes += runs
    ctx.diagnostics[first:] = _one_per_output(ctx.diagnostics[first:])
    _report_fallbacks(ctx, fallbacks)
    if any(run.state in ("fails", "differs") for run in runs):
        raise StageFailed
    if all(run.state == "not run here" for run in runs):
        raise StageSkipped("no runtime named could run here (ONNX704)")


def _one_per_output(found: list[Diagnostic]) -> list[Diagnostic]:
    """One ONNX703 (or ONNX706) per output and place, saying what each runtime computed
    there: two findings at one place would be merged, keeping the first runtime's message."""
    kept: dict[tuple[str, Path, Range], Diagnostic] = {}
    others = []
    for diagnostic in found:
        known = kept.get(diagnostic.key)
        if diagnostic.rule not in ("ONNX703", "ONNX706"):
            others.append(diagnostic)
        elif known is None:
            kept[diagnostic.key] = diagnostic
        elif diagnostic.message not in known.message:
            kept[diagnostic.key] = replace(known, message=_and_on(known.message,
                                                                  diagnostic.message))
    return [*others, *kept.values()]


def _and_on(first: str, then: str) -> str:
    """"Output `y` is off by 3 on A." and "Output `y` is off by 3 on B." as "Output `y` is off
    by 3 on A, and on B." (from the last " on " the two share); else both sentences."""
    same = next((i for i, (a, b) in enumerate(zip(first, then)) if a != b),
                min(len(first), len(then)))
    cut = first[:same].rfind(" on ")
    if cut < 0:
        return f"{first} {then}"
    return f"{first.removesuffix('.')}, and on {then[cut + len(' on '):]}"


def _timed(ctx: CheckContext, runtime: str, model: _Model,
           fallbacks: list[_Fallback]) -> RuntimeRun:
    started = time.perf_counter()
    if runtime == "openvino-cpu":
        outcome = _openvino(ctx, model)
    elif runtime == "ort-web":
        outcome = _ort_web(ctx, model)
    elif runtime in _STATIC:
        outcome = _mobile(runtime, model, fallbacks)
    else:
        outcome = _ort_provider(ctx, runtime, model, fallbacks)
    return replace(outcome, seconds=time.perf_counter() - started, precision=model.precision)


def _at_precision(ctx: CheckContext, precision: str,
                  fallbacks: list[_Fallback]) -> list[RuntimeRun]:
    """The model converted to ``precision``, checked on ONNX Runtime's CPU provider and on
    each runtime named that runs here (the conversion's time counts in ort-cpu's row); where
    it loses, the first value it loses is located and keeping it at float32 is tried."""
    runtimes = [REFERENCE_RUNTIME, *(r for r in requested(ctx) if r not in _STATIC)]
    started = time.perf_counter()
    try:
        model = _variant(ctx, precision)
    except precision_variants.ConversionFailed as error:
        detail = short_message(str(error))
        ctx.report("ONNX702", f"The model could not be converted to {precision}: {detail}.")
        return [RuntimeRun(runtime, "fails", precision=precision,
                           detail=f"not converted to {precision}") for runtime in runtimes]
    converting = time.perf_counter() - started
    runs = [_timed(ctx, runtime, model, fallbacks) for runtime in runtimes]
    runs[0] = replace(runs[0], seconds=runs[0].seconds + converting)
    differing = [run.runtime for run in runs if run.state == "differs"]
    if differing:
        _locate_loss(ctx, model, differing)
    return runs


def _variant(ctx: CheckContext, precision: str, keep: tuple[str, ...] = ()) -> _Model:
    translated = ctx.need_translated()
    proto = precision_variants.convert(
        translated.model_proto, translated.weights, precision,
        _feeds(ctx, translated.model_proto), keep)
    return _Model(proto, {}, None, precision)


@dataclass(frozen=True)
class _Loss:
    """The first FX node whose value a precision variant loses, what it loses, and the last
    value compared before it that was within the budget (None: none was)."""

    node: torch.fx.Node
    loss: str
    last_good: str | None


def _locate_loss(ctx: CheckContext, model: _Model, differing: list[str]) -> None:
    """ONNX707 at the line of the first intermediate value ``model`` loses (in ONNX Runtime,
    against PyTorch's at float32), with the fix when keeping it at float32 is proven."""
    found = _first_loss(ctx, model)
    if found is None:
        return
    operator, named = operation(found.node)
    fix = _proven_fix(ctx, model.precision, found, differing)
    ctx.report("ONNX707", f"At {model.precision} the values first go wrong at `{operator}` "
               f"({named}): its value {found.loss}; every value computed "
               f"before it is within the budget.{fix}",
               ctx.map_stack_trace(found.node.meta.get("stack_trace"), hint=operator),
               data=FindingData(fx_node=found.node.name, operator=operator))


def _first_loss(ctx: CheckContext, model: _Model) -> _Loss | None:
    """The first FX node whose value ``model`` loses in ONNX Runtime."""
    translated, loaded = ctx.need_translated(), ctx.need_loaded()
    program = translated.onnx_program.exported_program
    if program is None:
        return None
    last_good = None
    try:
        skipped = spared_nodes(ctx)
        for pair in intermediates(program, model.proto, model.weights,
                                  *fresh_copy(loaded.args, loaded.kwargs), with_outputs=True):
            if pair.expected.shape != pair.actual.shape or pair.node.name in skipped:
                continue
            loss = precision_loss(pair.expected, pair.actual, model.precision)
            if loss is not None:
                return _Loss(pair.node, loss, last_good)
            last_good = pair.node.name
    except Exception:  # the search is a help on top of ONNX706: never a failure of its own
        logging.getLogger(__name__).debug("comparing intermediates failed", exc_info=True)
    return None


def _proven_fix(ctx: CheckContext, precision: str, found: _Loss, differing: list[str]) -> str:
    """The sentence giving the nodes to keep at float32, when converting again with them kept
    makes the model match on every runtime in ``differing``; else "". The nodes that compute
    the lost value from the last good one are kept (int8: their inputs then stay unquantized
    too), and more while the variant still loses, at most ``_FIX_ROUNDS`` times."""
    graph = ctx.need_translated().model_proto.graph
    keep: list[str] = []
    for _ in range(_FIX_ROUNDS):
        # the same value still lost: a step back, to the nodes feeding those kept (int8
        # quantizes a value where it is made)
        more = ([name for name in _computing(graph, found) if name not in keep]
                or _feeding(graph, keep))
        if not more:
            return ""
        keep += more
        try:
            candidate = _variant(ctx, precision, tuple(keep))
        except precision_variants.ConversionFailed:
            return ""
        if all(_matches_quietly(ctx, runtime, candidate) for runtime in differing):
            names = ", ".join(f'"{name}"' for name in keep)
            where = " and ".join(_NAMES[runtime] for runtime in differing)
            return (f" Tried: keeping ONNX node{'s' if len(keep) > 1 else ''} {names} at "
                    f"float32 makes the model match on {where} (convert with "
                    f"`{precision_variants.KEEP_ARGUMENT[precision]}=[{names}]`, "
                    f"{precision_variants.TOOL[precision]}).")
        next_loss = _first_loss(ctx, candidate)
        if next_loss is None:
            return ""
        found = next_loss
    return ""


def _feeding(graph: onnx.GraphProto, kept: list[str]) -> list[str]:
    """The nodes, not in ``kept``, that compute an input of a node in ``kept``."""
    inputs = {value for node in graph.node if node.name in kept for value in node.input}
    return [node.name for node in graph.node
            if node.name not in kept and inputs & set(node.output)]


def _computing(graph: onnx.GraphProto, found: _Loss) -> list[str]:
    """The ONNX nodes of the export that compute the lost value from the last good one (or
    from the inputs), in graph order."""
    made_by = {value: index for index, node in enumerate(graph.node) for value in node.output}
    end = made_by.get(found.node.name)
    if end is None:
        return []
    start = made_by.get(found.last_good, -1) + 1 if found.last_good else 0
    needed = set(graph.node[end].input)
    chosen = [end]
    for index in range(end - 1, start - 1, -1):
        if needed & set(graph.node[index].output):
            chosen.append(index)
            needed |= set(graph.node[index].input)
    return [graph.node[index].name for index in sorted(chosen)]


def _matches_quietly(ctx: CheckContext, runtime: str, model: _Model) -> bool:
    """Whether ``model`` runs on ``runtime`` and every output is within its precision's
    budget (a fix's proof: nothing is reported)."""
    loaded = ctx.need_loaded()
    feeds = _feeds(ctx, model.proto)
    outputs: list[np.ndarray] | None = None
    try:
        if runtime == "openvino-cpu":
            converted = openvino_runner.run(model.proto, model.weights, feeds)
            if converted.failed_step is None and not converted.unconverted:
                outputs = converted.outputs
        elif runtime == "ort-web":
            ran = ort_web_runner.run(model.proto, model.weights, feeds)
            outputs = ran.outputs if ran.failed_step is None else None
        else:
            provider = _PROVIDERS[runtime]
            session = ort_runner.create_session(model.proto, model.serialized, model.weights,
                                                providers=(provider,))
            outputs = ort_runner.run(session, _example_inputs(ctx))
    except Exception:
        return False
    expected = _expected(loaded.eager_outputs)
    random = random_outputs_of(ctx)
    return outputs is not None and len(outputs) == len(expected) and all(
        e.shape == a.shape and (index in random or precision_loss(e, a, model.precision) is None)
        for index, (e, a) in enumerate(zip(expected, outputs)))


def _ort_provider(ctx: CheckContext, runtime: str, model: _Model,
                  fallbacks: list[_Fallback]) -> RuntimeRun:
    """ONNX Runtime on an execution provider this onnxruntime has (CPU; CUDA, TensorRT where
    a GPU is): a session preferring it, the nodes ONNX Runtime placed on the CPU instead
    (ONNX705), a run compared with PyTorch."""
    import onnxruntime as ort

    provider = _PROVIDERS[runtime]
    if provider not in ort.get_available_providers():
        return _not_run_here(ctx, runtime, f"this machine's onnxruntime has no {provider} (it "
                             "needs a GPU and onnxruntime-gpu)")
    loaded, name = ctx.need_loaded(), model.on(runtime)
    providers = (provider,) if provider == ort_runner.CPU else (provider, ort_runner.CPU)
    try:
        session = ort_runner.create_session(model.proto, model.serialized, model.weights,
                                            providers=providers)
        outputs = ort_runner.run(session, _example_inputs(ctx))
    except Exception as error:
        return _onnx_runtime_failed(ctx, runtime, model, "run", str(error))
    placed = ort_runner.node_providers(session) if len(providers) > 1 else {}
    nodes = {node.name: node for node in model.proto.graph.node}
    on_cpu = [node for node, where in placed.items() if where != provider]
    share = f"{name} takes {len(placed) - len(on_cpu)} of {len(placed)} nodes"
    fallbacks += [_Fallback(name, exported_origin(node, nodes) or onnx.helper.make_node(
        "made by ONNX Runtime's optimizer", [], [], name=node),
        "ONNX Runtime placed it on the CPU", share) for node in on_cpu]
    matched = _compare(ctx, name, loaded.eager_outputs, outputs, model)
    state = "differs" if not matched else "falls back" if on_cpu else "matches"
    return RuntimeRun(runtime, state, nodes=len(placed) or None, unsupported=tuple(on_cpu))


def _onnx_runtime_failed(ctx: CheckContext, runtime: str, model: _Model, step: str,
                         message: str) -> RuntimeRun:
    """ONNX Runtime (or ONNX Runtime Web) refused the model: a kernel missing for a node's
    input types (ONNX701), or another failure (ONNX702), at the nodes its message names."""
    named = _nodes_named_by_onnx_runtime(model.proto, message)
    name = model.on(runtime)
    no_kernel = _NO_KERNEL in message
    if no_kernel:
        detail = _report_failure(ctx, "ONNX701", model, lambda node, detail: (
            f"{name} has no kernel for "
            + (f"ONNX node {node}" if node else "a node of the model")
            + f" with its input types, so the model does not load there: {detail}"),
            message, named)
    else:
        detail = _report_failure(ctx, "ONNX702", model, _failed(name, step), message, named)
    return RuntimeRun(runtime, "fails", unsupported=tuple(named) if no_kernel else (),
                      detail=detail)


def _not_run_here(ctx: CheckContext, runtime: str, why: str) -> RuntimeRun:
    ctx.report("ONNX704", f"Not checked on {_NAMES[runtime]}: {why}. Nothing was proven for "
               "it.", ctx.option_location("runtimes"))
    return RuntimeRun(runtime, "not run here", detail=why)


def _openvino(ctx: CheckContext, model: _Model) -> RuntimeRun:
    runtime = "openvino-cpu"
    missing = openvino_runner.unavailable()
    if missing is not None:
        return _not_run_here(ctx, runtime, missing)
    loaded = ctx.need_loaded()
    feeds = _feeds(ctx, model.proto)
    outcome = openvino_runner.run(model.proto, model.weights, feeds)
    node_names = [node.name for node in model.proto.graph.node]
    name = model.on(runtime)
    if outcome.unconverted:
        for node_name in outcome.unconverted:
            _report_at_node(ctx, "ONNX701", model, node_name, lambda node: (
                f"{name} cannot convert ONNX node {node}: it has no conversion rule for this "
                "operator, so the model does not load there."))
        return RuntimeRun(runtime, "fails", nodes=outcome.nodes,
                          unsupported=outcome.unconverted, detail="unconverted operators")
    if outcome.failed_step is not None:
        detail = _report_failure(ctx, "ONNX702", model, _failed(name, outcome.failed_step),
                                 outcome.message,
                                 openvino_runner.nodes_in_message(outcome.message, node_names))
        return RuntimeRun(runtime, "fails", nodes=outcome.nodes, detail=detail)
    matched = _compare(ctx, name, loaded.eager_outputs, outcome.outputs, model)
    return RuntimeRun(runtime, "matches" if matched else "differs", nodes=outcome.nodes)


def _ort_web(ctx: CheckContext, model: _Model) -> RuntimeRun:
    runtime = "ort-web"
    missing = ort_web_runner.unavailable()
    if missing is not None:
        return _not_run_here(ctx, runtime, missing)
    loaded = ctx.need_loaded()
    outcome = ort_web_runner.run(model.proto, model.weights,
                                 _feeds(ctx, model.proto))
    if outcome.failed_step is not None:
        return _onnx_runtime_failed(ctx, runtime, model, outcome.failed_step, outcome.message)
    matched = _compare(ctx, model.on(runtime), loaded.eager_outputs, outcome.outputs, model)
    return RuntimeRun(runtime, "matches" if matched else "differs")


def _nodes_named_by_onnx_runtime(model: onnx.ModelProto, message: str) -> list[str]:
    """The ONNX nodes a message of ONNX Runtime (or ONNX Runtime Web) names, as the runtime
    stage finds them (exporter/pipeline/onnx_nodes.py)."""
    node, op_type = names_in_message(message)
    return [found.name for found in find_nodes(model, node, op_type)]


def _failed(runtime: str, step: str) -> Callable[[str, str], str]:
    return lambda node, detail: (f"{runtime} failed to {step} the model"
                                 + (f" at ONNX node {node}" if node else "") + f": {detail}")


def _report_failure(ctx: CheckContext, rule: str, model: _Model,
                    at_node: Callable[[str, str], str], message: str,
                    node_names: list[str]) -> str:
    """The runtime's ``message`` at each node it names (``at_node(node, detail)`` says it),
    else on the target (``at_node("", detail)``); returns the message as shown."""
    detail = short_message(message)
    for node_name in node_names:
        _report_at_node(ctx, rule, model, node_name, lambda node: at_node(node, detail))
    if not node_names:
        ctx.report(rule, at_node("", detail))
    return detail


@dataclass(frozen=True)
class _Fallback:
    runtime: str  # its name in messages
    node: onnx.NodeProto
    why: str
    share: str  # how much of the graph the runtime takes


def _mobile(runtime: str, model: _Model, fallbacks: list[_Fallback]) -> RuntimeRun:
    """NNAPI or CoreML, judged from ONNX Runtime's operator table (neither runs here)."""
    found = mobile_partitions.partition(model.proto, model.partitioned, runtime)
    share = (f"{_NAMES[runtime]} takes {found.supported} of {found.nodes} nodes, in "
             f"{found.partitions} partition(s), by ONNX Runtime's operator table: it does not "
             "run here")
    fallbacks += [_Fallback(_NAMES[runtime], node, why, share) for node, why in found.fallen_back]
    return RuntimeRun(runtime, "falls back" if found.fallen_back else "supported",
                      nodes=found.nodes, unsupported=tuple(n.name for n, _ in found.fallen_back),
                      detail="ONNX Runtime's operator table (static; it does not run here)",
                      partitions=found.partitions)


def _report_fallbacks(ctx: CheckContext, fallbacks: list[_Fallback]) -> None:
    """One ONNX705 per source line: every node of it some runtime leaves to the CPU."""
    by_line: dict[tuple[str, object], list[tuple[_Fallback, Mapped | None]]] = {}
    for fallback in fallbacks:
        where = ctx.map_stack_trace(metadata(fallback.node).get(STACK_TRACE_KEY),
                                    hint=fallback.node.op_type)
        key = (str(where.location.path), where.location.range) if where else ("", None)
        by_line.setdefault(key, []).append((fallback, where))
    for entries in by_line.values():
        runtimes: dict[str, list[_Fallback]] = {}
        for fallback, _ in entries:
            runtimes.setdefault(fallback.runtime, []).append(fallback)
        parts = [f"not on {runtime}, " + ", ".join(
            f"`{f.node.name}` ({f.node.op_type}: {f.why})" for f in found)
            + f" ({found[0].share})" for runtime, found in runtimes.items()]
        ctx.report("ONNX705", "Runs on the CPU: " + "; ".join(parts) + ".", entries[0][1],
                   data=FindingData(onnx_node=entries[0][0].node.name,
                                    op_type=entries[0][0].node.op_type))


def _feeds(ctx: CheckContext, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The example inputs by graph input name (as torch.onnx flattens them)."""
    inputs = _example_inputs(ctx)
    initializers = {tensor.name for tensor in model.graph.initializer}
    names = [value.name for value in model.graph.input if value.name not in initializers]
    return {name: ort_runner.input_array(value) for name, value in zip(names, inputs)}


def _example_inputs(ctx: CheckContext) -> list[Any]:
    loaded = ctx.need_loaded()
    return ort_runner.flat_inputs(*fresh_copy(loaded.args, loaded.kwargs),
                                  ctx.need_captured().program)


def _compare(ctx: CheckContext, runtime: str, eager: object, outputs: list[np.ndarray],
             model: _Model) -> bool:
    """Report each output of ``model`` on ``runtime`` that differs from PyTorch (ONNX703, or
    for a precision variant ONNX706: infinity or NaN, or an error beyond its budget)."""
    expected_all = _expected(eager)
    graph = ctx.need_translated().model_proto.graph
    random = random_outputs_of(ctx)
    matched = True
    for index, (expected, actual) in enumerate(zip(expected_all, outputs)):
        output = graph.output[index].name
        if expected.shape != actual.shape:
            report_at_output(ctx, "ONNX703", index, f"Output `{output}` has shape "
                             f"{list(actual.shape)} on {runtime} but {list(expected.shape)} "
                             "in PyTorch.")
            matched = False
        elif index in random:  # drawn from random numbers: the runtime draws its own
            continue
        elif model.precision != REFERENCE_PRECISION:
            matched = _within_budget(ctx, runtime, index, output, expected, actual,
                                     model.precision) and matched
        else:
            matched = _within_tolerance(ctx, runtime, index, output, expected,
                                        actual) and matched
    return matched


def _expected(eager: object) -> list[np.ndarray]:
    return ort_runner.expected_outputs(eager)


def _within_tolerance(ctx: CheckContext, runtime: str, index: int, output: str,
                      expected: np.ndarray, actual: np.ndarray) -> bool:
    atol, rtol = tolerances(ctx, expected.dtype)
    if np.allclose(actual.astype(np.float64), expected.astype(np.float64), atol=atol,
                   rtol=rtol, equal_nan=True):
        return True
    max_abs, max_rel = differences(expected, actual)
    errors = (f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (atol {atol:g}, "
              f"rtol {rtol:g})" if max_abs > atol else "where both are finite they match")
    report_at_output(ctx, "ONNX703", index, f"Output `{output}` differs from PyTorch on "
                     f"{runtime}{_where(expected, actual, atol, rtol, runtime)}; {errors}.",
                     data=FindingData(output=output, max_abs=max_abs, max_rel=max_rel,
                                      atol=atol, rtol=rtol))
    return False


def _within_budget(ctx: CheckContext, runtime: str, index: int, output: str,
                   expected: np.ndarray, actual: np.ndarray, precision: str) -> bool:
    """A precision variant's output against PyTorch's at float32 (ONNX706)."""
    loss = precision_loss(expected, actual, precision)
    if loss is None:
        return True
    report_at_output(ctx, "ONNX706", index, f"Output `{output}` {loss} on {runtime}.",
                     data=FindingData(output=output))
    return False


def precision_loss(expected: np.ndarray, actual: np.ndarray, precision: str) -> str | None:
    """What a value at ``precision`` lost against PyTorch's at float32 ("holds infinity or
    NaN ...", "is off by ..."), or None when it is within the precision's budget. Integers
    and booleans must match exactly."""
    expected64, actual64 = expected.astype(np.float64), actual.astype(np.float64)
    if expected.dtype.kind != "f":
        if np.array_equal(expected64, actual64):
            return None
        return (f"differs from PyTorch's at {int((expected64 != actual64).sum())} of "
                f"{expected.size} values (integers must match exactly)")
    overflowed = ~np.isfinite(actual64) & np.isfinite(expected64)
    if overflowed.any():
        peak = float(np.abs(expected64[np.isfinite(expected64)]).max(initial=0.0))
        beyond = (f", beyond float16's largest value {_FLOAT16_MAX:g}"
                  if precision == "fp16" and peak > _FLOAT16_MAX else "")
        return (f"holds infinity or NaN at {int(overflowed.sum())} of {expected.size} values "
                f"where PyTorch's are finite (PyTorch's largest magnitude there: {peak:.4g}"
                f"{beyond})")
    both = np.isfinite(expected64) & np.isfinite(actual64)
    if not both.any():
        return None
    scale = float(np.abs(expected64[both]).max())
    error = float(np.abs(expected64[both] - actual64[both]).max())
    budget = precision_variants.BUDGETS[precision]
    if error <= budget * max(scale, _TINY):
        return None
    return (f"is off by up to {error:.3g}, {error / max(scale, _TINY):.1%} of its largest "
            f"magnitude {scale:.3g} (the {precision} budget is {budget:.0%})")


def _where(expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float,
           runtime: str) -> str:
    """How many values differ and the first of them (NaN against a number too, which the
    largest error, over the values finite in both, does not show)."""
    close = np.isclose(actual.astype(np.float64), expected.astype(np.float64), atol=atol,
                       rtol=rtol, equal_nan=True)
    differing = np.argwhere(~close)
    if not len(differing):
        return ""
    first = tuple(int(i) for i in differing[0])
    return (f" at {len(differing)} of {expected.size} values (first at index {list(first)}: "
            f"PyTorch {expected[first]}, {runtime} {actual[first]})")


def _report_at_node(ctx: CheckContext, rule: str, model: _Model, node_name: str,
                    message: Callable[[str], str]) -> None:
    """``message`` (given the node as "`name` (OpType)") at the line node ``node_name`` of
    ``model`` was exported from, as the exporter recorded it (a precision variant keeps the
    export's nodes and their metadata)."""
    node = next((n for n in model.proto.graph.node if n.name == node_name), None)
    op_type = node.op_type if node is not None else "?"
    where = (ctx.map_stack_trace(metadata(node).get(STACK_TRACE_KEY), hint=op_type)
             if node is not None else None)
    ctx.report(rule, message(f"`{node_name}` ({op_type})"), where,
               data=FindingData(onnx_node=node_name, op_type=op_type))
