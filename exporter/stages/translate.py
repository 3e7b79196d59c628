"""Stage 3: translate the captured graph to ONNX. Every operator without a translation is
reported (not only the first), each at every source line that uses it."""

from __future__ import annotations

import re
from typing import Any

from exporter import _torch_private
from exporter.context import CheckContext
from exporter.onnx_nodes import op_histogram, value_infos
from exporter.stages.base import StageFailed
from exporter.weights_apart import PROTOBUF_LIMIT, split_weights

_FAILED_NODE = re.compile(r"Error when translating node %(\w+)")


def _op_name(target: Any) -> str:
    return str(getattr(target, "name", lambda: target)() if callable(getattr(target, "name", None))
               else target)


def run(ctx: CheckContext) -> None:
    registry = ctx.session.registry(ctx.option("opset", ctx.settings.opset),
                                    ctx.option("custom_translation_table"))
    if registry is None:
        _translate_publicly(ctx)
        return
    try:
        decomposed = _torch_private.decompose(ctx.exported_program, registry)
    except Exception as error:
        ctx.report("ONNX202", f"Decomposing the graph for ONNX failed: {type(error).__name__}: "
                   f"{str(error).splitlines()[0] if str(error) else ''}")
        raise StageFailed from error
    ctx.decomposed_program = decomposed

    missing = _torch_private.unsupported_nodes(decomposed, registry)
    for node in missing:
        op = _op_name(node.target)
        original = node.meta.get("original_aten")
        original_name = _op_name(original) if original is not None else op
        via = f" (it decomposes to `{op}`)" if original_name != op else ""
        ctx.report(
            "ONNX201",
            f"`{original_name}` has no ONNX translation{via}; the export fails here.",
            ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
            data={"operator": original_name, "decomposed_operator": op,
                  **_overload_data(original if original is not None else node.target)},
        )
    if missing:
        raise StageFailed

    try:
        ctx.onnx_program = _torch_private.translate(decomposed, registry)
    except Exception as error:
        _report_node_error(ctx, error)
        raise StageFailed from error
    _rename_io(ctx)
    _torch_private.rename_dynamic_axes(ctx.onnx_program, ctx.dynamic_shapes)
    _finish(ctx)


def _overload_data(overload: Any) -> dict[str, Any]:
    """What a translation stub needs: ``torch.ops.aten.i0.default`` and its argument names."""
    schema = getattr(overload, "_schema", None)
    if schema is None:
        return {}
    return {"overload": f"torch.ops.{overload}",
            "arguments": [argument.name for argument in schema.arguments]}


def _translate_publicly(ctx: CheckContext) -> None:
    try:
        ctx.onnx_program = _torch_private.public_export(
            ctx.exported_program, (), {}, optimize=False,
            custom_translation_table=ctx.option("custom_translation_table"),
        )
    except Exception as error:
        _report_node_error(ctx, error)
        raise StageFailed from error
    _finish(ctx)


def _report_node_error(ctx: CheckContext, error: BaseException) -> None:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    node = _failed_node(ctx, chain)
    root = chain[-1]
    reason = f"{type(root).__name__}: {str(root).splitlines()[0] if str(root) else ''}".rstrip(": ")
    if node is None:
        ctx.report("ONNX202", f"Translating the graph to ONNX failed: {reason}")
        return
    op = _op_name(node.target)
    ctx.report("ONNX202", f"Translating `{op}` to ONNX failed: {reason}",
               ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
               data={"operator": op})


def _failed_node(ctx: CheckContext, chain: list[BaseException]) -> Any:
    """The FX node an exporter error names (``Error when translating node %name``). Without
    the decomposed graph (public-API fallback), match the operator's last name token."""
    graph = (ctx.decomposed_program or ctx.exported_program).graph
    nodes = [n for n in graph.nodes if n.op == "call_function"]
    for link in chain:
        match = _FAILED_NODE.search(str(link))
        if not match:
            continue
        exact = next((n for n in nodes if n.name == match[1]), None)
        if exact is not None:
            return exact
        token = match[1].rsplit("_", 1)[-1]
        similar = [n for n in nodes if n.name.rsplit("_", 1)[-1] == token]
        if similar:
            return similar[0]
    return None


def _rename_io(ctx: CheckContext) -> None:
    graph = ctx.onnx_program.model.graph
    for key, values in (("input_names", graph.inputs), ("output_names", graph.outputs)):
        names = ctx.option(key)
        if not names:
            continue
        for value, name in zip(values, names):
            value.name = str(name)


def _finish(ctx: CheckContext) -> None:
    model = ctx.onnx_program.model
    split = split_weights(model, with_data=not ctx.weightless)
    ctx.model_proto, ctx.weights = split.proto, split.weights
    proto = ctx.model_proto
    ctx.summary.update(
        nodes=len(proto.graph.node),
        opset=next((o.version for o in proto.opset_import if o.domain == ""), None),
        inputs=value_infos(proto.graph.input[: len(model.graph.inputs)]),
        outputs=value_infos(proto.graph.output),
        operators=op_histogram(proto),
        initializer_bytes=sum(
            (v.const_value.nbytes if v.const_value is not None else 0)
            for v in model.graph.initializers.values()
        ) if not ctx.weightless else None,
    )
    if proto.ByteSize() < PROTOBUF_LIMIT:
        ctx.model_bytes = proto.SerializeToString()
