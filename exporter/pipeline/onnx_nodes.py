"""From ONNX node names (in checker, shape-inference and ONNX Runtime messages) back to the
stack trace the exporter stored in each node's metadata."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import onnx

from exporter.findings.result import TensorSummary
from exporter.reports.graph_view import FX_NODE_KEY, STACK_TRACE_KEY

__all__ = ["FX_NODE_KEY", "STACK_TRACE_KEY", "find_nodes", "metadata", "names_in_message",
           "op_histogram", "value_infos"]

_NAME_PATTERNS = [
    re.compile(r"node with name '([^']*)'"),
    re.compile(r"Node \((\S+?)\) Op"),
    re.compile(r"[Nn]ode name:\s*([^\s,)]+)"),
    re.compile(r"Name:\s*'?([^'\s]+)'?"),
    re.compile(r"running (\w+) node\. Name:'([^']*)'"),
]
_OP_PATTERNS = [
    re.compile(r"implementation for (\w+)\("),
    re.compile(r"Op \((\w+)\)"),
    re.compile(r"op_type:\s*(\w+)"),
    re.compile(r"OpType:\s*(\w+)"),
    re.compile(r"running (\w+) node"),
    # an operator no kernel or function is registered for ("my_domain:Gelu2(-1) is not a
    # registered function/op", at session creation)
    re.compile(r"(\w+)\(-?\d+\) is not a registered function/op"),
]
_INLINED = re.compile(r"^_inlfunc_(.+?)_n\d+$")


def metadata(node: onnx.NodeProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in node.metadata_props}


def exported_origin(name: str, exported: dict[str, onnx.NodeProto]) -> onnx.NodeProto | None:
    """The exported node a node of ONNX Runtime's optimized graph named ``name`` is, or was
    fused from (ONNX Runtime names a fused node after it: ``node_MatMul_3/MatMulAddFusion``);
    None for a node its optimizer made up."""
    return exported.get(name) or exported.get(name.split("/", 1)[0])


def names_in_message(message: str) -> tuple[str | None, str | None]:
    """The (node name, op type) an error message talks about, where it says."""
    name = op_type = None
    for pattern in _NAME_PATTERNS:
        match = pattern.search(message)
        if match:
            name = match.group(match.lastindex or 1)
            break
    for pattern in _OP_PATTERNS:
        match = pattern.search(message)
        if match:
            op_type = match.group(1)
            break
    return name or None, op_type


def find_nodes(
    model: onnx.ModelProto, name: str | None, op_type: str | None
) -> list[onnx.NodeProto]:
    """Graph nodes matching a name from a message, following ONNX Runtime's inlining names."""
    nodes = list(model.graph.node)
    if name:
        exact = [node for node in nodes if node.name == name]
        if exact:
            return exact
        inlined = _INLINED.match(name)
        if inlined:
            function = inlined.group(1)
            called = [node for node in nodes if node.op_type == function]
            if called:
                return called
    if op_type:
        direct = [node for node in nodes if node.op_type == op_type]
        if direct:
            return direct
        functions = {f.name for f in model.functions if any(n.op_type == op_type for n in f.node)}
        return [node for node in nodes if node.op_type in functions]
    return []


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    return dict(Counter(node.op_type for node in model.graph.node).most_common())


def value_infos(values: Any) -> list[TensorSummary]:
    """Name, dtype and shape (symbolic dims as strings) of ONNX graph inputs or outputs."""
    infos = []
    for value in values:
        tensor = value.type.tensor_type
        dims: list[int | str] = [
            dim.dim_param if dim.HasField("dim_param") else dim.dim_value
            for dim in tensor.shape.dim
        ]
        dtype = (onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
                 if tensor.elem_type else "?")
        infos.append(TensorSummary(value.name, dtype, tuple(dims)))
    return infos
