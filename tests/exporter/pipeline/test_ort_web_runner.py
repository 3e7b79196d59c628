"""ONNX Runtime Web under Node.js (exporter/pipeline/ort_web_runner.py), for real
(tools/ort-web/install.sh, which scripts/test.sh runs): a model whose weights a check keeps
apart runs there with them as its external data, and computes what PyTorch does."""

from __future__ import annotations

import numpy as np
import torch

from exporter.pipeline import ort_web_runner
from exporter.pipeline.weights_apart import split_weights


class Projection(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(64, 64)
        self.second = torch.nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x).relu())


def test_a_model_with_its_weights_apart_runs_in_onnx_runtime_web():
    model = Projection().eval()
    example = torch.randn(3, 64)
    program = torch.onnx.export(model, (example,), dynamo=True, verbose=False)
    split = split_weights(program.model)
    assert split.weights  # the 64×64 weights are apart: the path this test is about
    name = split.proto.graph.input[0].name
    ran = ort_web_runner.run(split.proto, split.weights, {name: example.numpy()})
    assert ran.failed_step is None, ran.message
    (output,) = ran.outputs
    with torch.no_grad():
        np.testing.assert_allclose(output, model(example).numpy(), rtol=1e-4, atol=1e-5)
