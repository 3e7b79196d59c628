"""NNAPI and CoreML judged on the graph ONNX Runtime hands them (exporter/pipeline/
mobile_partitions.py): after its basic optimizations, each node left out traced back to the
exported node it came from. Which nodes each target leaves out, and where they are reported,
is in test_deploy and test_fixture_diagnostics (the fixture's Positions, Tokens, Picked,
Shuffled); that ONNX Runtime's own checker says the same is the corpus's judgement."""

from __future__ import annotations

import onnx
import torch

from exporter.pipeline import mobile_partitions, ort_runner
from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, exported_origin, metadata


class Projection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(x).relu()


def _exported() -> onnx.ModelProto:
    return torch.onnx.export(Projection(), (torch.randn(2, 4, 8),), dynamo=True).model_proto


def test_onnx_runtime_fuses_and_adds_nodes_that_carry_no_stack_trace():
    """What the tracing back is for: the optimized graph has a node fused from an exported
    one, named after it, and nodes of the optimizer's own; none keeps its metadata."""
    exported = _exported()
    optimized = ort_runner.basic_optimized(exported)
    names = {node.name for node in exported.graph.node}
    fused = [node for node in optimized.graph.node if "/" in node.name]
    assert fused and all(node.name.split("/")[0] in names for node in fused)
    assert any(node.name not in names and "/" not in node.name
               for node in optimized.graph.node)
    assert not any(metadata(node).get(STACK_TRACE_KEY) for node in optimized.graph.node)


def test_each_node_left_out_is_the_exported_node_it_came_from():
    """Every node of the optimized graph: the exported node of its name, the one it was fused
    from (with the stack trace to locate it by), else none (it stands for itself)."""
    exported = _exported()
    optimized = ort_runner.basic_optimized(exported)
    by_name = {node.name: node for node in exported.graph.node}
    for node in optimized.graph.node:
        origin = exported_origin(node.name, by_name)
        stem = node.name.split("/")[0]
        if stem in by_name:
            assert origin is by_name[stem]
            assert metadata(origin).get(STACK_TRACE_KEY)
        else:
            assert origin is None


def test_the_partitions_are_of_the_optimized_graph():
    """The node counts are the optimized graph's (what ONNX Runtime's checker counts), and a
    fused node CoreML takes is not left out."""
    exported = _exported()
    optimized = ort_runner.basic_optimized(exported)
    found = mobile_partitions.partition(exported, optimized, "coreml")
    assert found.nodes == len(optimized.graph.node) != len(exported.graph.node)
    assert found.fallen_back == () and found.supported == found.nodes
