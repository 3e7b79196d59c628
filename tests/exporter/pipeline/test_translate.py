"""The translate stage's stack traces: each decomposed node keeps the user's line."""

from __future__ import annotations

from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, metadata
from exporter.source.traces import parse_stack_trace

MODEL = '''\
import torch


# onnx-export: args=(torch.randn(2, 8),)
class Regions(torch.nn.Module):
    @torch.inference_mode()
    def helper(self, x):
        y = torch.tanh(x)
        return torch.sigmoid(y)

    @torch.no_grad()
    def forward(self, x):
        a = torch.relu(x)
        b = self.helper(a)
        return torch.cos(b)
'''


def test_each_node_of_a_no_grad_region_keeps_its_own_line(session, tmp_path):
    """Issue 38: the decomposition re-traces a no_grad / inference_mode region as generated
    code; each node is followed through torch's line map to the captured node it ran, not
    given one trace for the whole region (nor the trace of a node of the same name)."""
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    found = session.discover(model)
    context, result = session.run_target(found.targets[0], tmp_path)
    assert result.diagnostics == []
    lines = {}
    for node in context.translated.model_proto.graph.node:
        frames = parse_stack_trace(metadata(node).get(STACK_TRACE_KEY))
        lines[node.op_type] = [(frame.function, frame.line) for frame in frames
                               if frame.path == model]
    assert lines == {"Relu": [("forward", 13)],
                     "Tanh": [("forward", 14), ("helper", 8)],
                     "Sigmoid": [("forward", 14), ("helper", 9)],
                     "Cos": [("forward", 15)]}
