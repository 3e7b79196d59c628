"""Stage 4: ``onnx.checker`` and strict shape inference, mapped to the nodes' source lines.

Both read the graph with its large weights as typed inputs (``weights_apart.checkable``):
neither needs their values, and the proto stays small."""

from __future__ import annotations

import re

import onnx

from exporter.context import CheckContext
from exporter.diagnostics import Location
from exporter.onnx_nodes import STACK_TRACE_KEY, find_nodes, metadata, names_in_message
from exporter.stages.base import StageFailed
from exporter.weights_apart import checkable


def run(ctx: CheckContext) -> None:
    checked = checkable(ctx.model_proto)
    if ctx.model_bytes is None:  # past protobuf's limit: the checker takes the proto
        model: onnx.ModelProto | bytes = checked
    elif checked is ctx.model_proto:  # no weights apart: already serialized
        model = ctx.model_bytes
    else:
        model = checked.SerializeToString()
    failed = False
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as error:
        report_at_node(ctx, "ONNX301", "onnx.checker rejected the model", str(error))
        failed = True
    try:
        _infer_shapes(model, checked)
    except onnx.shape_inference.InferenceError as error:
        report_at_node(ctx, "ONNX302", "ONNX shape inference failed", str(error))
        failed = True
    if failed:
        ctx.invalid_model = True
        raise StageFailed


def _infer_shapes(model: onnx.ModelProto | bytes, proto: onnx.ModelProto) -> None:
    """Strict shape inference from the nodes alone. The model is tried as it is first (no
    copy of its weights); value_info only gives inference more to compare against, so only a
    failure is confirmed on a copy without it, and that copy's verdict is the one reported."""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        onnx.shape_inference.infer_shapes(_without_value_info(proto), check_type=True,
                                          strict_mode=True)


def _without_value_info(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Infer from the nodes alone: the exporter annotates some unused outputs (e.g. batch
    norm's saved statistics in eval mode) with shapes that never materialize, and comparing
    against those would report problems that ONNX Runtime never meets."""
    bare = onnx.ModelProto()
    bare.CopyFrom(proto)
    del bare.graph.value_info[:]
    return bare


def report_at_node(
    ctx: CheckContext, rule: str, headline: str, message: str, fallback: Location | None = None
) -> None:
    """Report ``message`` at the source line of every node it names (or at the target)."""
    proto = ctx.model_proto
    name, op_type = names_in_message(message)
    nodes = find_nodes(proto, name, op_type) if proto is not None else []
    detail = _short(message)
    reported = False
    for node in nodes:
        where = ctx.map_stack_trace(metadata(node).get(STACK_TRACE_KEY), hint=node.op_type)
        if where is None:
            continue
        ctx.report(rule, f"{headline} at ONNX node `{node.name}` ({node.op_type}): {detail}",
                   where, data={"onnx_node": node.name, "op_type": node.op_type})
        reported = True
    if not reported:
        ctx.report(rule, f"{headline}: {detail}", fallback)


_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : (\w+) : ")


def _short(message: str, limit: int = 300) -> str:
    text = " ".join(line.strip() for line in message.splitlines() if line.strip())
    text = _ORT_PREFIX.sub(lambda m: f"{m[1]}: ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
