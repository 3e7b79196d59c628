"""Which values of the exported graph are drawn from random numbers.

A model that draws random numbers in its forward (``torch.randn_like`` noise, a VAE's
reparameterization, dropout in training) is translated into ONNX operators that draw their own
(``RandomNormalLike``, ``Dropout`` in training mode): ONNX Runtime's values cannot equal
PyTorch's, however right the translation is. torch records which operators draw: the
``nondeterministic_seeded`` tag. An output that depends on such a node is compared by shape
only, and the search for the first diverging value passes over such nodes.

Not random, although tagged: an operator whose ``train``/``training`` argument is false (dropout
and recurrent layers in eval mode) or whose dropout probability is 0 (attention kernels).

Only an output that is random on both sides is spared: where the ONNX model computes it
without drawing (a translation that leaves the randomness out, as attention's dropout), its
values are compared, and differ, as any other wrong translation's.
"""

from __future__ import annotations

from typing import Any

import onnx
import torch

from exporter.pipeline.intermediates import output_nodes

#: arguments that, when false, make a tagged operator deterministic
_TRAINING_ARGUMENTS = ("train", "training")
#: arguments that, when 0, make a tagged operator deterministic
_DROPOUT_ARGUMENTS = ("dropout_p", "dropout")
#: the ONNX operators that draw random numbers (``Dropout`` only with ``training_mode``)
_ONNX_RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform",
                              "RandomUniformLike", "Multinomial", "Bernoulli"})


def draws_random_numbers(node: torch.fx.Node) -> bool:
    """Whether ``node`` itself draws random numbers (not what it depends on)."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    arguments = _arguments(node, target)
    if any(name in arguments and not arguments[name] for name in _TRAINING_ARGUMENTS):
        return False
    zero_probability = [name for name in _DROPOUT_ARGUMENTS if name in arguments]
    if target._schema.name.endswith("dropout") and "p" in arguments:
        zero_probability.append("p")
    return not any(_is_zero(arguments[name]) for name in zero_probability)


def random_sources(program: torch.export.ExportedProgram) -> dict[torch.fx.Node, torch.fx.Node]:
    """Each node whose value depends on random numbers, with the first node (in graph order)
    that draws them."""
    order = {node: index for index, node in enumerate(program.graph.nodes)}
    sources: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in program.graph.nodes:  # graph order is a topological order
        if draws_random_numbers(node):
            sources[node] = node
            continue
        upstream = [sources[n] for n in node.all_input_nodes if n in sources]
        if upstream:
            sources[node] = min(upstream, key=order.__getitem__)
    return sources


def random_outputs(program: torch.export.ExportedProgram) -> dict[int, torch.fx.Node]:
    """The outputs (by index among the ONNX graph's outputs: `output_nodes`) that
    depend on random numbers, with the first node that draws them."""
    sources = random_sources(program)
    if not sources:
        return {}
    return {index: sources[node] for index, node in enumerate(output_nodes(program))
            if node is not None and node in sources}


def onnx_random_values(model: onnx.ModelProto) -> set[str]:
    """The names of the values of the model's main graph that depend on random numbers an
    operator of the model draws (in a subgraph or a local function included)."""
    functions = {(function.domain, function.name): function for function in model.functions}
    random: set[str] = set()
    constants = _constant_booleans(model.graph)
    for node in model.graph.node:  # nodes are in topological order
        if (any(name in random for name in node.input)
                or _draws(node, constants, functions, set())):
            random.update(name for name in node.output if name)
    return random


def _draws(node: onnx.NodeProto, constants: dict[str, bool],
           functions: dict[tuple[str, str], onnx.FunctionProto],
           visited: set[tuple[str, str]]) -> bool:
    """Whether ``node`` itself draws random numbers, or an operator of its subgraphs or of
    the local function it calls does."""
    if node.domain in ("", "ai.onnx") and node.op_type in _ONNX_RANDOM_OPS:
        return True
    if node.domain in ("", "ai.onnx") and node.op_type == "Dropout":
        mode = node.input[2] if len(node.input) > 2 else ""
        return bool(mode) and constants.get(mode, True)
    key = (node.domain, node.op_type)
    if key in functions and key not in visited:
        visited.add(key)
        body = functions[key].node
        if any(_draws(inner, {}, functions, visited) for inner in body):
            return True
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for graph in graphs:
            if any(_draws(inner, _constant_booleans(graph), functions, visited)
                   for inner in graph.node):
                return True
    return False


def _constant_booleans(graph: onnx.GraphProto) -> dict[str, bool]:
    """The graph's one-element boolean constants (initializers and ``Constant`` nodes), by
    name: a ``Dropout``'s ``training_mode``."""
    named = [(tensor.name, tensor) for tensor in graph.initializer]
    named += [(node.output[0], attribute.t) for node in graph.node
              if node.op_type == "Constant" and node.output
              for attribute in node.attribute if attribute.name == "value"]
    found: dict[str, bool] = {}
    for name, tensor in named:
        if tensor.data_type != onnx.TensorProto.BOOL \
                or tensor.data_location == onnx.TensorProto.EXTERNAL:
            continue
        values = onnx.numpy_helper.to_array(tensor).reshape(-1)
        if values.size == 1:
            found[name] = bool(values[0])
    return found


def _arguments(node: torch.fx.Node, target: torch._ops.OpOverload) -> dict[str, Any]:
    """The node's arguments by name, defaults filled in."""
    values: dict[str, Any] = {}
    for position, argument in enumerate(target._schema.arguments):
        if position < len(node.args) and not argument.kwarg_only:
            values[argument.name] = node.args[position]
        elif argument.name in node.kwargs:
            values[argument.name] = node.kwargs[argument.name]
        elif argument.has_default_value():
            values[argument.name] = argument.default_value
    return values


def _is_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0
