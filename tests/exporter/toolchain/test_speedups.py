"""The speed patches change how much torch does, never what it produces: the same decomposed
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

from exporter.toolchain import shortcuts, speedups, torch_compat
from exporter.toolchain.shortcuts import IN_TORCH


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
    with speedups.tracing(capturing=True) if faster else contextlib.nullcontext():
        program = torch.export.export(model, args, strict=False,
                                      dynamic_shapes=dynamic_shapes or None)
    with speedups.tracing() if faster else contextlib.nullcontext():
        decomposed = torch_compat.decompose(program, registry)
        onnx_program = torch_compat.translate(decomposed, registry)
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


def test_every_speedup_is_on_for_this_torch():
    """A tested torch: every guard holds, nothing waits for a comparison; a patch torch does
    itself (shared provenance since torch 2.15) is not applied."""
    assert {s.name: speedups.why_off(s) for s in speedups.SPEEDUPS} == \
        {s.name: IN_TORCH if s.name in _BUILT_IN else None for s in speedups.SPEEDUPS}


def test_provenance_records_are_shared_on_every_torch():
    """By the patch, or by torch itself where it took the same fix: a node's provenance
    refers to its source's records instead of deep copies of them."""
    with speedups.tracing():
        node = torch.fx.Graph().placeholder("x")
        record = fx_traceback.NodeSource(None)
        node.meta["from_node"] = [record]
        assert fx_traceback.NodeSource(node).from_node[0] is record


@pytest.mark.parametrize("build", [_encoder_layer, _mixed, _data_dependent],
                         ids=["encoder layer", "mixed", "data-dependent"])
def test_faster_tracing_gives_the_same_graph_and_onnx_model(session, build):
    registry = session.registry(None, None)
    plain = _export(build, registry, faster=False)
    faster = _export(build, registry, faster=True)
    assert any(plain["from_node"]) and any(plain["stack_traces"])  # there is something to compare
    for key in plain:
        assert faster[key] == plain[key], key


def _patched() -> dict[str, bool]:
    """Which faster_tracing patches are in place now, by shortcut name."""
    import torch.fx.graph_module as graph_module

    return {
        "shared-provenance": fx_traceback.copy is not copy,
        "lazy-graph-modules": bool(lazy_graph_module._use_lazy_graph_module_flag),
        "onnx-signatures-once": vars(onnx_ir.schemas.OpSignature)["from_op_schema"]
        is not _SIGNATURE,
        "plain-list-attributes": onnx_ir._convenience._infer_attribute_type
        is not _ATTRIBUTE_TYPE,
        "lazy-frame-lines": torch_traceback._extract_symbolized_tb is not _FRAMES,
        "compiled-code-once": graph_module._exec_with_source is not _EXEC,
    }


_SIGNATURE = vars(onnx_ir.schemas.OpSignature)["from_op_schema"]
_ATTRIBUTE_TYPE = onnx_ir._convenience._infer_attribute_type
_FRAMES = torch_traceback._extract_symbolized_tb
_EXEC = __import__("torch.fx.graph_module", fromlist=["_exec_with_source"])._exec_with_source


_BUILT_IN = {s.name for s in speedups.SPEEDUPS if speedups._built_in(s)}


def test_faster_tracing_puts_everything_back():
    with speedups.tracing():
        assert _patched() == {key: key not in _BUILT_IN for key in _patched()}
    assert not any(_patched().values()), _patched()


@pytest.mark.parametrize("name", sorted(_patched()))
def test_each_patch_has_its_own_off_switch(monkeypatch, name):
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, name)
    with speedups.tracing():
        patched = _patched()
    assert patched == {key: key != name and key not in _BUILT_IN for key in patched}


def test_no_lazy_graph_modules_while_capturing():
    """Strict capture (dynamo) reads a graph module's ``_in_spec`` before a lazy module has
    set it: torch.onnx.export succeeds on this model with strict capture."""

    class Padder(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
            return torch.cat([x, torch.zeros(int(n.max()), x.shape[1])])

    with speedups.tracing(capturing=True):
        assert not _patched()["lazy-graph-modules"]
        (attempt_non_strict, attempt_strict) = torch_compat.capture(
            Padder(), (torch.randn(5, 3), torch.tensor([2, 4])), {}, None)
    assert attempt_non_strict.error is not None and attempt_strict.program is not None


def test_graph_modules_compiled_from_the_same_code_run_as_torchs():
    model, args, _ = _encoder_layer()
    with speedups.tracing():
        program = torch.export.export(model, args, strict=False)
        first, second = program.module(), program.module()  # the second reuses the code
        assert first.code == second.code
        for module in (first, second):
            torch.testing.assert_close(module(*args), model(*args))
