"""Stage 4: ``onnx.checker`` and strict shape inference, mapped to the nodes' source lines.

Both read the graph with its large weights as typed inputs (``weights_apart.checkable``):
neither needs their values, and the proto stays small."""

from __future__ import annotations

import re

import onnx

from exporter.pipeline.context import CheckContext, Validated
from exporter.pipeline.locating import report_at_node
from exporter.pipeline.stages.base import StageFailed
from exporter.pipeline.weights_apart import checkable


def _quoted(message: str) -> set[str]:
    """The names a checker message quotes (``'x' has been used as output names ...``)."""
    return set(re.findall(r"'([^']*)'", message))


def run(ctx: CheckContext) -> None:
    translated = ctx.need_translated()
    checked = checkable(translated.model_proto)
    if translated.model_bytes is None:  # past protobuf's limit: the checker takes the proto
        model: onnx.ModelProto | bytes = checked
    elif checked is translated.model_proto:  # no weights apart: already serialized
        model = translated.model_bytes
    else:
        model = checked.SerializeToString()
    failed = False
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as error:
        clash = ctx.options.name_clash()  # the hint when the checker names that name
        named = clash is not None and clash[0] in _quoted(str(error))
        report_at_node(ctx, "ONNX301", "onnx.checker rejected the model", str(error),
                       hint=f"Give each input and output a name of its own: {clash[1]}."
                       if clash is not None and named else None)
        failed = True
    try:
        _infer_shapes(model, checked)
    except onnx.shape_inference.InferenceError as error:
        report_at_node(ctx, "ONNX302", "ONNX shape inference failed", str(error))
        failed = True
    ctx.validated = Validated(valid=not failed)
    if failed:
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
