"""Stage 8: check the exported model on the runtimes the user deploys to besides ONNX
Runtime's CPU provider (``runtimes``, docs/runtimes.md): does it load there, run, and match
PyTorch; every node a runtime cannot take is reported at the line it was exported from."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx
import torch

from exporter.config.runtimes import REFERENCE_RUNTIME
from exporter.findings.diagnostics import FindingData
from exporter.findings.result import RuntimeRun
from exporter.pipeline import mobile_partitions, openvino_runner, ort_runner, ort_web_runner
from exporter.pipeline.comparing import differences, report_at_output, tolerances
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.locating import short_message
from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, find_nodes, metadata, names_in_message
from exporter.pipeline.stages.base import StageFailed, StageSkipped
from exporter.source.traces import Mapped

#: what ONNX Runtime says of an operator it has no kernel for (with these input types)
_NO_KERNEL = "Could not find an implementation"
#: ONNX Runtime's execution provider of each runtime run through onnxruntime
_PROVIDERS = {"cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
#: each runtime as the messages name it
_NAMES = {"openvino-cpu": "OpenVINO (CPU)", "ort-web": "ONNX Runtime Web (WebAssembly)",
          "nnapi": "NNAPI", "coreml": "CoreML", "cuda": "ONNX Runtime's CUDA provider",
          "tensorrt": "ONNX Runtime's TensorRT provider"}


def requested(ctx: CheckContext) -> list[str]:
    """The runtimes this stage checks (the reference is every check's runtime stage)."""
    return [name for name in ctx.options.runtimes or () if name != REFERENCE_RUNTIME]


def blocked(ctx: CheckContext) -> str:
    if not requested(ctx):
        return "no runtime named besides ort-cpu (`runtimes`, docs/runtimes.md)"
    if ctx.known_failure is not None:
        return "the export fails"
    if ctx.weightless:
        return 'weights="none": this stage needs real weights'
    if ctx.translated is None:
        return "translation failed"
    if ctx.validated is not None and not ctx.validated.valid:
        return "the ONNX model is invalid (see the validate stage)"
    return ""


def run(ctx: CheckContext) -> None:
    failed, ran = False, False
    fallbacks: list[_Fallback] = []
    for runtime in requested(ctx):
        started = time.perf_counter()
        if runtime == "openvino-cpu":
            outcome = _openvino(ctx)
        elif runtime == "ort-web":
            outcome = _ort_web(ctx)
        elif runtime in ("nnapi", "coreml"):
            outcome = _mobile(ctx, runtime, fallbacks)
        else:
            outcome = _ort_provider(ctx, runtime, fallbacks)
        ctx.summary.runtimes.append(replace(outcome, seconds=time.perf_counter() - started))
        failed = failed or outcome.state in ("fails", "differs")
        ran = ran or outcome.state != "not run here"
    _report_fallbacks(ctx, fallbacks)
    if failed:
        raise StageFailed
    if not ran:
        raise StageSkipped("no runtime named could run here (ONNX704)")


def _ort_provider(ctx: CheckContext, runtime: str, fallbacks: list[_Fallback]) -> RuntimeRun:
    """An execution provider of ONNX Runtime (CUDA, TensorRT), where this onnxruntime has it:
    a session preferring it, the nodes ONNX Runtime placed on the CPU instead (ONNX705), a run
    compared with PyTorch."""
    import onnxruntime as ort

    provider = _PROVIDERS[runtime]
    if provider not in ort.get_available_providers():
        return _not_run_here(ctx, runtime, f"this machine's onnxruntime has no {provider} (it "
                             "needs a GPU and onnxruntime-gpu)")
    translated, loaded = ctx.need_translated(), ctx.need_loaded()
    model, name = translated.model_proto, _NAMES[runtime]
    try:
        session = ort_runner.create_session(model, translated.model_bytes, translated.weights,
                                            providers=(provider, ort_runner.CPU))
        outputs = ort_runner.run(session, ort_runner.flat_inputs(
            *fresh_copy(loaded.args, loaded.kwargs)))
    except Exception as error:
        detail = _report_failure(ctx, "ONNX702", _failed(name, "run"), str(error),
                                 _nodes_named_by_onnx_runtime(model, str(error)))
        return RuntimeRun(runtime, "fails", detail=detail)
    placed = ort_runner.node_providers(session)
    nodes = {node.name: node for node in model.graph.node}
    on_cpu = [node for node, where in placed.items() if where != provider]
    share = f"{name} takes {len(placed) - len(on_cpu)} of {len(placed)} nodes"
    fallbacks += [_Fallback(name, nodes[node], "ONNX Runtime placed it on the CPU", share)
                  for node in on_cpu if node in nodes]
    matched = _compare(ctx, name, loaded.eager_outputs, outputs)
    state = "differs" if not matched else "falls back" if on_cpu else "matches"
    return RuntimeRun(runtime, state, nodes=len(placed), unsupported=tuple(on_cpu))


def _not_run_here(ctx: CheckContext, runtime: str, why: str) -> RuntimeRun:
    ctx.report("ONNX704", f"Not checked on {_NAMES[runtime]}: {why}. Nothing was proven for "
               "it.", ctx.option_location("runtimes"))
    return RuntimeRun(runtime, "not run here", detail=why)


def _openvino(ctx: CheckContext) -> RuntimeRun:
    runtime = "openvino-cpu"
    missing = openvino_runner.unavailable()
    if missing is not None:
        return _not_run_here(ctx, runtime, missing)
    translated, loaded = ctx.need_translated(), ctx.need_loaded()
    model = translated.model_proto
    feeds = _feeds(model, loaded.args, loaded.kwargs)
    outcome = openvino_runner.run(model, translated.weights, feeds)
    node_names = [node.name for node in model.graph.node]
    name = _NAMES[runtime]
    if outcome.unconverted:
        for node_name in outcome.unconverted:
            _report_at_node(ctx, "ONNX701", node_name, lambda node: (
                f"{name} cannot convert ONNX node {node}: it has no conversion rule for this "
                "operator, so the model does not load there."))
        return RuntimeRun(runtime, "fails", nodes=outcome.nodes,
                          unsupported=outcome.unconverted, detail="unconverted operators")
    if outcome.failed_step is not None:
        detail = _report_failure(ctx, "ONNX702", _failed(name, outcome.failed_step),
                                 outcome.message,
                                 openvino_runner.nodes_in_message(outcome.message, node_names))
        return RuntimeRun(runtime, "fails", nodes=outcome.nodes, detail=detail)
    matched = _compare(ctx, name, loaded.eager_outputs, outcome.outputs)
    return RuntimeRun(runtime, "matches" if matched else "differs", nodes=outcome.nodes)


def _ort_web(ctx: CheckContext) -> RuntimeRun:
    runtime = "ort-web"
    missing = ort_web_runner.unavailable()
    if missing is not None:
        return _not_run_here(ctx, runtime, missing)
    translated, loaded = ctx.need_translated(), ctx.need_loaded()
    model = translated.model_proto
    outcome = ort_web_runner.run(model, translated.weights,
                                 _feeds(model, loaded.args, loaded.kwargs))
    name = _NAMES[runtime]
    if outcome.failed_step is not None:
        named = _nodes_named_by_onnx_runtime(model, outcome.message)
        no_kernel = _NO_KERNEL in outcome.message
        if no_kernel:
            detail = _report_failure(ctx, "ONNX701", lambda node, detail: (
                f"{name} has no kernel for "
                + (f"ONNX node {node}" if node else "a node of the model")
                + f" with its input types, so the model does not load there: {detail}"),
                outcome.message, named)
        else:
            detail = _report_failure(ctx, "ONNX702", _failed(name, outcome.failed_step),
                                     outcome.message, named)
        return RuntimeRun(runtime, "fails", unsupported=tuple(named) if no_kernel else (),
                          detail=detail)
    matched = _compare(ctx, name, loaded.eager_outputs, outcome.outputs)
    return RuntimeRun(runtime, "matches" if matched else "differs")


def _nodes_named_by_onnx_runtime(model: onnx.ModelProto, message: str) -> list[str]:
    """The ONNX nodes a message of ONNX Runtime (or ONNX Runtime Web) names, as the runtime
    stage finds them (exporter/pipeline/onnx_nodes.py)."""
    node, op_type = names_in_message(message)
    return [found.name for found in find_nodes(model, node, op_type)]


def _failed(runtime: str, step: str) -> Callable[[str, str], str]:
    return lambda node, detail: (f"{runtime} failed to {step} the model"
                                 + (f" at ONNX node {node}" if node else "") + f": {detail}")


def _report_failure(ctx: CheckContext, rule: str, at_node: Callable[[str, str], str],
                    message: str, node_names: list[str]) -> str:
    """The runtime's ``message`` at each node it names (``at_node(node, detail)`` says it),
    else on the target (``at_node("", detail)``); returns the message as shown."""
    detail = short_message(message)
    for node_name in node_names:
        _report_at_node(ctx, rule, node_name, lambda node: at_node(node, detail))
    if not node_names:
        ctx.report(rule, at_node("", detail))
    return detail


@dataclass(frozen=True)
class _Fallback:
    runtime: str  # its name in messages
    node: onnx.NodeProto
    why: str
    share: str  # how much of the graph the runtime takes


def _mobile(ctx: CheckContext, runtime: str, fallbacks: list[_Fallback]) -> RuntimeRun:
    """NNAPI or CoreML, judged from ONNX Runtime's operator table (neither runs here)."""
    model = ctx.need_translated().model_proto
    found = mobile_partitions.partition(model, runtime)
    nodes = {node.name: node for node in model.graph.node}
    share = (f"{_NAMES[runtime]} takes {found.supported} of {found.nodes} nodes, in "
             f"{found.partitions} partition(s), by ONNX Runtime's operator table: it does not "
             "run here")
    fallbacks += [_Fallback(_NAMES[runtime], nodes[name], why, share)
                  for name, why in found.fallen_back if name in nodes]
    return RuntimeRun(runtime, "falls back" if found.fallen_back else "supported",
                      nodes=found.nodes, unsupported=tuple(n for n, _ in found.fallen_back),
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


def _feeds(model: onnx.ModelProto, args: tuple, kwargs: dict[str, Any]
           ) -> dict[str, np.ndarray]:
    """The example inputs by graph input name (as torch.onnx flattens them)."""
    inputs = [value for value in ort_runner.flat_inputs(*fresh_copy(args, kwargs))
              if isinstance(value, torch.Tensor)]
    initializers = {tensor.name for tensor in model.graph.initializer}
    names = [value.name for value in model.graph.input if value.name not in initializers]
    return {name: ort_runner.to_numpy(tensor) for name, tensor in zip(names, inputs)}


def _compare(ctx: CheckContext, runtime: str, eager: object,
             outputs: list[np.ndarray]) -> bool:
    expected_all = [ort_runner.to_numpy(t) for t in ort_runner.flat_outputs(eager)
                    if isinstance(t, torch.Tensor)]
    graph = ctx.need_translated().model_proto.graph
    matched = True
    for index, (expected, actual) in enumerate(zip(expected_all, outputs)):
        output = graph.output[index].name
        if expected.shape != actual.shape:
            report_at_output(ctx, "ONNX703", index, f"Output `{output}` has shape "
                             f"{list(actual.shape)} on {runtime} but {list(expected.shape)} "
                             "in PyTorch.")
            matched = False
            continue
        atol, rtol = tolerances(ctx, expected.dtype)
        if np.allclose(actual.astype(np.float64), expected.astype(np.float64), atol=atol,
                       rtol=rtol, equal_nan=True):
            continue
        max_abs, max_rel = differences(expected, actual)
        errors = (f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (atol {atol:g}, "
                  f"rtol {rtol:g})" if max_abs > atol else "where both are finite they match")
        report_at_output(ctx, "ONNX703", index, f"Output `{output}` differs from PyTorch on "
                         f"{runtime}{_where(expected, actual, atol, rtol, runtime)}; {errors}.",
                         data=FindingData(output=output, max_abs=max_abs, max_rel=max_rel,
                                          atol=atol, rtol=rtol))
        matched = False
    return matched


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


def _report_at_node(ctx: CheckContext, rule: str, node_name: str,
                    message: Callable[[str], str]) -> None:
    """``message`` (given the node as "`name` (OpType)") at the line node ``node_name`` was
    exported from, as the exporter recorded it."""
    node = next((n for n in ctx.need_translated().model_proto.graph.node
                 if n.name == node_name), None)
    op_type = node.op_type if node is not None else "?"
    where = (ctx.map_stack_trace(metadata(node).get(STACK_TRACE_KEY), hint=op_type)
             if node is not None else None)
    ctx.report(rule, message(f"`{node_name}` ({op_type})"), where,
               data=FindingData(onnx_node=node_name, op_type=op_type))
