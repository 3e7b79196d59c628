"""Stage 3: translate the captured graph to ONNX. Every operator without a translation is
reported (not only the first), each at every source line that uses it."""

from __future__ import annotations

import operator
import re
import types
from dataclasses import replace
from typing import Any

import onnx_ir as ir

from exporter.findings.diagnostics import FindingData, Related
from exporter.pipeline.context import CheckContext, Translated
from exporter.pipeline.onnx_nodes import op_histogram, value_infos
from exporter.pipeline.stages.base import StageFailed
from exporter.pipeline.weights_apart import PROTOBUF_LIMIT, SplitModel, split_weights
from exporter.source.traces import exception_frames, is_user_frame, parse_stack_trace
from exporter.toolchain import shortcuts, torch_compat

_FAILED_NODE = re.compile(r"Error when translating node %(\w+)")


def _op_name(target: Any) -> str:
    """An FX node's target as the user wrote it: ``aten::digamma``; a Python function on
    sizes (``round(x.shape[0] / 2)``) as ``round()``, ``math.ceil``, ``operator.floordiv``,
    ``torch.sym_float``, not ``<built-in function round>`` or a function's address."""
    if callable(getattr(target, "name", None)):  # an operator overload, a higher-order op
        return str(target.name())
    if isinstance(target, types.BuiltinFunctionType | types.FunctionType):
        module = {"builtins": "", "_operator": "operator"}.get(target.__module__ or "",
                                                              target.__module__ or "")
        return f"{module}.{target.__qualname__}" if module else f"{target.__qualname__}()"
    return str(target)


def run(ctx: CheckContext) -> None:
    """torch.onnx.export's steps 2 and 3 (decompose, translate), then what it does to the
    model (opset conversion, optimization, names), with every missing translation found."""
    opset = requested_opset(ctx)
    captured = ctx.need_captured()
    registry = ctx.registries.get(opset, ctx.options.custom_translation_table)
    if registry is None:
        _translate_publicly(ctx, opset)
        return
    try:
        decomposed = torch_compat.decompose(captured.program, registry)
    except Exception as error:
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        node = _node_in_traceback(error)
        if node is None:
            ctx.report("ONNX202", f"Decomposing the graph for ONNX failed: {reason}")
        else:
            op = _op_name(node.target)
            ctx.report("ONNX202", f"Decomposing the graph for ONNX failed at `{op}`: {reason}",
                       ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
                       data=FindingData(operator=op))
        raise StageFailed from error
    restore_user_stacks(decomposed, captured.program)
    ctx.decomposed = decomposed

    missing = torch_compat.unsupported_nodes(decomposed, registry)
    for node in missing:
        op = _op_name(node.target)
        original = node.meta.get("original_aten")
        original_name = _op_name(original) if original is not None else op
        via = f" (it decomposes to `{op}`)" if original_name != op else ""
        ctx.report(
            "ONNX201",
            f"`{original_name}` has no ONNX translation{via}; the export fails here.",
            ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
            data=_overload_data(original if original is not None else node.target,
                                FindingData(operator=original_name, decomposed_operator=op)),
        )
    if missing:
        raise StageFailed

    try:
        onnx_program = torch_compat.translate(decomposed, registry)
    except Exception as error:
        _report_node_error(ctx, error)
        raise StageFailed from error
    try:
        # weights="none": the optimizer folds constants, which needs their values
        torch_compat.finish_model(onnx_program, opset,
                                    optimize=ctx.defaults.optimize and not ctx.weightless,
                                    input_names=ctx.options.input_names,
                                    output_names=ctx.options.output_names)
    except Exception as error:
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        clash = ctx.options.name_clash()
        ctx.report("ONNX202", "Finishing the ONNX model (opset conversion, optimization, "
                   f"input and output names) failed: {reason.rstrip(': ')}",
                   hint=f"Give each input and output a name of its own: {clash[1]}."
                   if clash else None)
        raise StageFailed from error
    torch_compat.rename_dynamic_axes(onnx_program, ctx.need_loaded().dynamic_shapes)
    ctx.translated = _finish(ctx, onnx_program)
    _report_opset(ctx, opset)


def restore_user_stacks(decomposed: Any, captured: Any) -> None:
    """Give each decomposed node whose stack trace is generated code the user's trace of the
    captured node it came from. torch.onnx's decomposition re-traces the graph: a region under
    ``torch.no_grad()``, ``torch.inference_mode()`` or ``torch.autocast()`` (a decorator on
    ``forward`` or on a helper, say) is a higher-order-operator subgraph in the captured
    program, and its inlined nodes get the frames of the subgraph's generated code
    (``<eval_with_key>``) as their only stack. Each such frame's line is the code of one node
    of a captured subgraph (torch's line map of generated code), and that node's trace is the
    user's; failing that, the trace of the node named in ``from_node``. What ONNX Runtime and
    the later stages report is then located through these traces (the ONNX nodes'
    ``pkg.torch.onnx.stack_trace`` metadata is written from them)."""
    index: dict[str, str] | None = None
    bodies: _Bodies | None = None
    for node in decomposed.graph.nodes:
        if node.op != "call_function" or not _generated(node.meta.get("stack_trace")):
            continue
        bodies = bodies if bodies is not None else _Bodies(captured)
        trace = bodies.trace_of(node)
        if trace is None:
            index = index if index is not None else _user_stacks(captured)
            trace = next((index[name] for name in _provenance(node) if name in index), None)
        if trace is not None:
            node.meta["stack_trace"] = trace


class _Bodies:
    """The captured program's graph modules by the file their generated code was compiled
    under, to follow a re-traced node's generated frames to the captured nodes they ran."""

    def __init__(self, program: Any) -> None:
        import torch

        self.root = program.graph_module
        self.roots = {node.name: node for node in self.root.graph.nodes}
        self.by_file: dict[str, list[Any]] = {}
        for _, module in self.root.named_modules():
            if isinstance(module, torch.fx.GraphModule):
                filename = torch_compat.generated_code_file(module)
                if filename is not None:
                    self.by_file.setdefault(filename, []).append(module)

    def trace_of(self, node: Any) -> str | None:
        """The user's trace of the captured node the innermost generated frame of ``node``'s
        trace ran; None when a frame is not the code of one known subgraph (or of several
        whose nodes there have different traces)."""
        expected = [body for name in _provenance(node) if name in self.roots
                    for body in _subgraphs(self.roots[name], self.root)]
        found: str | None = None
        for frame in parse_stack_trace(node.meta.get("stack_trace")):
            candidates = self.by_file.get(str(frame.path), [])
            if len(candidates) > 1:  # the same code compiled once for several subgraphs:
                # the one the higher-order operator of the previous frame (or of from_node) ran
                candidates = [m for m in candidates
                              if any(m is e for e in expected)] or candidates
            ran = [(ran_node, module) for module in candidates
                   if (ran_node := torch_compat.generated_code_node(module, frame.line))
                   is not None]
            traces = {str(ran_node.meta.get("stack_trace") or "") for ran_node, _ in ran}
            if len(traces) != 1:
                return found
            trace = traces.pop()
            if trace and not _generated(trace):
                found = trace
            expected = [body for ran_node, module in ran for body in _subgraphs(ran_node, module)]
        return found


def _subgraphs(node: Any, owner: Any) -> list[Any]:
    """The subgraph modules a higher-order operator's node runs (its ``get_attr`` arguments)."""
    import torch

    if not isinstance(node.target, torch._ops.HigherOrderOperator):
        return []
    found = []
    for argument in node.args:
        if isinstance(argument, torch.fx.Node) and argument.op == "get_attr":
            try:
                found.append(operator.attrgetter(str(argument.target))(owner))
            except AttributeError:
                continue
    return found


def _generated(stack_trace: str | None) -> bool:
    """No frame of the trace is in a real file (``File "<eval_with_key>.54"`` only)."""
    frames = parse_stack_trace(stack_trace)
    return not any(not str(frame.path).startswith("<") for frame in frames)


def _user_stacks(program: Any) -> dict[str, str]:
    """FX node name -> its stack trace, over the captured graph and its subgraphs; a
    higher-order operator's node (no trace of its own) gets the first trace of its body."""
    import torch

    index: dict[str, str] = {}
    bodies: dict[str, str] = {}
    for module_name, module in program.graph_module.named_modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            trace = node.meta.get("stack_trace")
            if trace and not _generated(trace):
                index.setdefault(node.name, trace)
                if module_name:
                    bodies.setdefault(module_name.rpartition(".")[2], trace)
    for node in program.graph.nodes:
        if node.name in index or not isinstance(node.target, torch._ops.HigherOrderOperator):
            continue
        for argument in node.args:
            body = getattr(argument, "target", None)
            if isinstance(argument, torch.fx.Node) and argument.op == "get_attr" \
                    and body in bodies:
                index[node.name] = bodies[str(body)]
                break
    return index


def _provenance(node: Any) -> list[str]:
    """The names of the nodes ``node`` was made from (``meta["from_node"]``), nearest first."""
    names: list[str] = []
    queue = list(node.meta.get("from_node") or [])
    while queue:
        source = queue.pop(0)
        name = getattr(source, "name", None)
        if isinstance(name, str) and name not in names:
            names.append(name)
        queue.extend(getattr(source, "from_node", None) or [])
    return names


def requested_opset(ctx: CheckContext) -> int:
    """The pragma's opset, else the project's, else torch.onnx.export's default."""
    opset = ctx.options.opset
    return int(opset) if opset is not None else torch_compat.default_opset()


def _report_opset(ctx: CheckContext, requested: int) -> None:
    """torch.onnx.export keeps another opset when it cannot convert to the requested one,
    and says so only in a log message."""
    produced = ctx.summary.opset
    if produced is None or produced == requested:
        return
    ctx.report("ONNX203", f"The exported model uses opset {produced}, not the requested opset "
               f"{requested}: torch.onnx.export could not convert the model to it and kept "
               f"opset {produced}.", ctx.option_location("opset"))


def _node_in_traceback(error: BaseException) -> Any:
    """The FX node a graph pass was working on when it raised (torch's passes, e.g. type
    promotion, run node by node with the node in a local named ``node``), innermost first."""
    import torch

    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    for frame in reversed(frames):
        node = frame.f_locals.get("node")
        if isinstance(node, torch.fx.Node) and node.meta.get("stack_trace"):
            return node
    return None


def _overload_data(overload: Any, data: FindingData) -> FindingData:
    """``data`` with what a translation stub needs: ``torch.ops.aten.i0.default`` and its
    argument names."""
    names = torch_compat.argument_names(overload)
    if names is None:
        return data
    return replace(data, overload=f"torch.ops.{overload}", arguments=list(names))


def _translate_publicly(ctx: CheckContext, opset: int) -> None:
    try:
        onnx_program = torch_compat.public_export(
            ctx.need_captured().program, (), {},
            # weights="none": the optimizer folds constants, which needs their values
            optimize=ctx.defaults.optimize and not ctx.weightless, opset_version=opset,
            custom_translation_table=ctx.options.custom_translation_table,
            input_names=ctx.options.input_names, output_names=ctx.options.output_names,
        )
    except Exception as error:
        _report_node_error(ctx, error)
        raise StageFailed from error
    ctx.translated = _finish(ctx, onnx_program)


def _report_node_error(ctx: CheckContext, error: BaseException) -> None:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    node = _failed_node(ctx, chain)
    root = chain[-1]
    reason = f"{type(root).__name__}: {str(root).splitlines()[0] if str(root) else ''}".rstrip(": ")
    raised = _raised_in_workspace(ctx, chain)
    constants = _constant_outputs(ctx.need_captured().program)
    if node is None and constants:
        listed = ", ".join(f"{value!r} as output {index}" for index, value in constants)
        ctx.report("ONNX202", f"`{ctx.target.symbol}` returns a constant, {listed} (its "
                   "outputs flattened, counted from 1): torch.onnx translates an output only "
                   f"when it is a tensor or the size of a dynamic dimension ({reason}).",
                   hint="Return it as a tensor (`torch.tensor(...)`), or leave it out of the "
                        "outputs; a size is a constant when its dimension is not dynamic.")
        return
    if node is None:
        ctx.report("ONNX202", f"Translating the graph to ONNX failed: {reason}", raised)
        return
    op = _op_name(node.target)
    ctx.report("ONNX202", f"Translating `{op}` to ONNX failed: {reason}",
               ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
               data=FindingData(operator=op),
               related=(Related(raised.location, "raised here, in the translation function"),)
               if raised is not None else ())


def _raised_in_workspace(ctx: CheckContext, chain: list[BaseException]) -> Any:
    """Where in the user's files the error was raised: a translation of their own
    (``custom_translation_table``) that failed."""
    for link in reversed(chain):
        frames = [f for f in exception_frames(link) if is_user_frame(f.path, ctx.workspace)]
        if frames:
            return ctx.map_frames(frames)
    return None


def _constant_outputs(program: Any) -> list[tuple[int, object]]:
    """The model's outputs that export made constants, numbered from 1 in the flattened
    outputs, ``None`` left out (torch.onnx drops it): the translation of any other fails."""
    from torch.export.graph_signature import ConstantArgument, OutputKind

    user = [spec.arg for spec in program.graph_signature.output_specs
            if spec.kind == OutputKind.USER_OUTPUT]
    return [(index, argument.value) for index, argument in enumerate(user, start=1)
            if isinstance(argument, ConstantArgument) and argument.value is not None]


def _failed_node(ctx: CheckContext, chain: list[BaseException]) -> Any:
    """The FX node an exporter error names (``Error when translating node %name``). Without
    the decomposed graph (public-API fallback), match the operator's last name token."""
    graph = (ctx.decomposed or ctx.need_captured().program).graph
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


def _finish(ctx: CheckContext, onnx_program: Any) -> Translated:
    """The product: the model apart from its large weights, serialized once; its summary."""
    model = onnx_program.model
    if ctx.weightless or shortcuts.enabled("weights-apart"):
        split = split_weights(model, with_data=not ctx.weightless)
    else:  # every weight inside the protobuf, as the saved model holds them
        split = SplitModel(ir.serde.serialize_model(model))
    proto = split.proto
    summary = ctx.summary
    summary.nodes = len(proto.graph.node)
    summary.opset = next((o.version for o in proto.opset_import if o.domain == ""), None)
    summary.inputs = value_infos(proto.graph.input[: len(model.graph.inputs)])
    summary.outputs = value_infos(proto.graph.output)
    summary.operators = op_histogram(proto)
    summary.initializer_bytes = sum(
        (v.const_value.nbytes if v.const_value is not None else 0)
        for v in model.graph.initializers.values()
    ) if not ctx.weightless else None
    serialized = proto.SerializeToString() if proto.ByteSize() < PROTOBUF_LIMIT else None
    return Translated(onnx_program, proto, split.weights, serialized)
