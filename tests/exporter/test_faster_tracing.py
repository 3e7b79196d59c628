"""faster_tracing changes how much torch does, never what it produces: the same decomposed
graph (code, stack traces, provenance) and the same ONNX model, byte for byte."""

from __future__ import annotations

import contextlib
import copy

import onnx_ir
import pytest
import torch
import torch.fx._lazy_graph_module as lazy_graph_module
import torch.fx.traceback as fx_traceback
import torch.utils._traceback as torch_traceback
from torch.onnx._internal.fx.passes import type_promotion

from exporter import _torch_private


class Mixed(torch.nn.Module):
    """Dict and list inputs, a convolution with batch norm, type promotion (int * float)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.norm = torch.nn.BatchNorm2d(2)
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, image: torch.Tensor, named: dict, listed: list) -> torch.Tensor:
        pooled = torch.flatten(torch.relu(self.norm(self.conv(image))), 1)[:, :8]
        return torch.sigmoid(self.linear(pooled + named["x"])) * listed[0].sum(-1, keepdim=True)


def _encoder_layer() -> tuple[torch.nn.Module, tuple, tuple]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0).eval()
    return layer, (torch.randn(2, 5, 16),), ({0: torch.export.Dim("batch")},)


def _mixed() -> tuple[torch.nn.Module, tuple, tuple]:
    torch.manual_seed(0)
    batch = torch.export.Dim("batch")
    args = (torch.rand(3, 1, 6, 6), {"x": torch.rand(3, 8)},
            [torch.randint(0, 5, (3, 4))])
    return Mixed().eval(), args, ({0: batch}, {"x": {0: batch}}, [{0: batch}])


class DataDependent(torch.nn.Module):
    """A size known only from the data (an unbacked symbol), then type promotion on it."""

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        picked = x[x > 0]
        return (picked * counts.sum() + 1).sum() + x.mean()


def _data_dependent() -> tuple[torch.nn.Module, tuple, tuple]:
    torch.manual_seed(0)
    return DataDependent().eval(), (torch.randn(4, 3), torch.arange(3)), ()


def _export(build, registry, faster: bool) -> dict:
    model, args, dynamic_shapes = build()
    with _torch_private.faster_tracing() if faster else contextlib.nullcontext():
        program = torch.export.export(model, args, strict=False,
                                      dynamic_shapes=dynamic_shapes or None)
        decomposed = _torch_private.decompose(program, registry)
        onnx_program = _torch_private.translate(decomposed, registry)
    nodes = list(decomposed.graph.nodes)
    return {
        "code": decomposed.graph_module.code,
        "stack_traces": [node.meta.get("stack_trace") for node in nodes],
        "original_aten": [str(node.meta.get("original_aten")) for node in nodes],
        "from_node": [[_provenance(source.to_dict()) for source in node.meta.get("from_node", [])]
                      for node in nodes],
        "onnx": onnx_program.model_proto.SerializeToString(),
    }


def _provenance(record: dict) -> dict:
    """A from_node record without graph_id (an id() of a graph object, new in every run)."""
    return {**{key: value for key, value in record.items() if key != "graph_id"},
            "from_node": [_provenance(inner) for inner in record["from_node"]]}


def test_faster_tracing_is_available_for_this_torch():
    assert _torch_private.FASTER_TRACING


@pytest.mark.parametrize("build", [_encoder_layer, _mixed, _data_dependent],
                         ids=["encoder layer", "mixed", "data-dependent"])
def test_faster_tracing_gives_the_same_graph_and_onnx_model(session, build):
    registry = session.registry(None, None)
    plain = _export(build, registry, faster=False)
    faster = _export(build, registry, faster=True)
    assert any(plain["from_node"]) and any(plain["stack_traces"])  # there is something to compare
    for key in plain:
        assert faster[key] == plain[key], key


def test_faster_tracing_puts_everything_back():
    signature = vars(onnx_ir.schemas.OpSignature)["from_op_schema"]
    run_node = type_promotion._TypePromotionInterpreter.run_node
    frames = torch_traceback._extract_symbolized_tb
    with _torch_private.faster_tracing():
        assert fx_traceback.copy is not copy
        assert lazy_graph_module._use_lazy_graph_module_flag
        assert type_promotion._TypePromotionInterpreter.run_node is not run_node
        assert torch_traceback._extract_symbolized_tb is not frames
    assert fx_traceback.copy is copy
    assert not lazy_graph_module._use_lazy_graph_module_flag
    assert vars(onnx_ir.schemas.OpSignature)["from_op_schema"] is signature
    assert type_promotion._TypePromotionInterpreter.run_node is run_node
    assert torch_traceback._extract_symbolized_tb is frames


def test_graph_modules_compiled_from_the_same_code_run_as_torchs():
    model, args, _ = _encoder_layer()
    with _torch_private.faster_tracing():
        program = torch.export.export(model, args, strict=False)
        first, second = program.module(), program.module()  # the second reuses the code
        assert first.code == second.code
        for module in (first, second):
            torch.testing.assert_close(module(*args), model(*args))
