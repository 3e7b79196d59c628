"""Every intermediate value of a check in both runtimes, from one run each.

torch's own ``verify_onnx_program(compare_intermediates=True)`` builds a new ONNX Runtime
session for every FX node, so on a real model (Longformer, RT-DETR) it outlives any time
limit. Here the ONNX model gets every value that an FX node of the same name computes as an
extra graph output, ONNX Runtime runs it once, and torch.fx's Interpreter runs the exported
program once, keeping each node's value: the same pairs, compared in graph order.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch

from exporter.pipeline import ort_runner
from exporter.toolchain import torch_compat


@dataclass(frozen=True)
class Intermediate:
    """One FX node's value in PyTorch (``expected``) and in ONNX Runtime (``actual``)."""

    node: torch.fx.Node
    expected: np.ndarray
    actual: np.ndarray


def output_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node | None]:
    """The program's nodes that compute the ONNX model's outputs, in their order (they may be
    renamed: ``output_names``): each user output but a constant (a size of a dynamic
    dimension is an output of its own; ``None`` is none); None for an output no node
    computes."""
    signature = torch.export.graph_signature
    nodes = {node.name: node for node in program.graph.nodes}
    return [nodes.get(spec.arg.name) for spec in program.graph_signature.output_specs
            if spec.kind == signature.OutputKind.USER_OUTPUT
            and not isinstance(spec.arg, signature.ConstantArgument)]


def operation(node: torch.fx.Node) -> tuple[str, str]:
    """The operator an FX node's value comes from, and the node named for a message. A
    ``getitem`` taking one output of a multi-output operator (a batch norm's, an LSTM's) is
    named as that operator's output: ``<built-in function getitem>`` tells a user nothing."""
    source = node.args[0] if node.target is operator.getitem and node.args else None
    if isinstance(source, torch.fx.Node) and source.op == "call_function":
        return str(source.target), f"output {node.args[1]} of FX node `{source.name}`"
    return str(node.target), f"FX node `{node.name}`"


def intermediates(program: torch.export.ExportedProgram, proto: onnx.ModelProto,
                  weights: dict[str, np.ndarray], args: tuple, kwargs: dict[str, Any],
                  with_outputs: bool = False) -> Iterator[Intermediate]:
    """The values of the FX nodes that the ONNX model also computes, in graph order
    (``with_outputs``: the graph's outputs among them)."""
    module = program.module()
    expected = _torch_values(module, args, kwargs)
    # value_info may name values no node computes any more (a quantizer's rewiring keeps
    # the old entries): asking for one makes the model invalid
    computed = {value for node in proto.graph.node for value in node.output}
    typed = {info.name: info for info in proto.graph.value_info if info.name in computed}
    outputs = {output.name for output in proto.graph.output}
    names = [name for name in expected
             if name in typed or (with_outputs and name in outputs)]
    if not names:
        return
    extended = onnx.ModelProto()
    extended.CopyFrom(proto)
    extended.graph.output.extend(typed[name] for name in names if name not in outputs)
    session = ort_runner.create_session(extended, None, weights)
    wanted = [output.name for output in session.get_outputs()]
    values = dict(zip(wanted, ort_runner.run(session, ort_runner.flat_inputs(args, kwargs,
                                                                         program))))
    nodes = {node.name: node for node in module.graph.nodes}
    for name in names:
        if name in values:
            yield Intermediate(nodes[name], expected[name], np.asarray(values[name]))


def _torch_values(module: torch.fx.GraphModule, args: tuple,
                  kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each call_function node's tensor value, by node name, in graph order."""
    found: dict[str, np.ndarray] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            if node.op == "call_function" and isinstance(result, torch.Tensor):
                found[node.name] = ort_runner.to_numpy(result)
            return result

    flat = torch_compat.tree_leaves((args, kwargs))
    with torch.no_grad():
        Recording(module).run(*[value for value in flat if value is not None])
    return found
