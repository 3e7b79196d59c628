"""Which FX node a dropout or normalization in training mode computes, read from the module
path torch records on each node of a real export; and the operator named for a node that
takes one output of a multi-output operator (exporter/pipeline/intermediates.py)."""

from __future__ import annotations

import torch
from torch import nn

from exporter.pipeline.intermediates import operation
from exporter.pipeline.training_modules import training_note


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.2)
        self.instance = nn.InstanceNorm1d(4)

    def forward(self, x):
        return self.instance(self.drop(self.norm(x)).unsqueeze(0)).squeeze(0)


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([_Block()])

    def forward(self, x):
        return torch.relu(self.layers[0](x))


def _notes(model: nn.Module) -> dict[str, str | None]:
    program = torch.export.export(model, (torch.randn(3, 4),)).run_decompositions()
    return {str(node.target): training_note(model, node)
            for node in program.graph.nodes if node.op == "call_function"}


def test_a_dropout_and_a_batch_norm_in_training_mode_are_named_by_their_path():
    notes = _notes(_Model().train())
    dropout = next(note for op, note in notes.items() if "dropout" in op)
    assert dropout is not None and dropout.startswith(
        "`layers.0.drop` (Dropout) is in training mode, so the ONNX model drops values")
    assert any(note is not None and note.startswith("`layers.0.norm` (BatchNorm1d) is in "
                                                    "training mode")
               for op, note in notes.items() if "batch_norm" in op)
    assert notes["aten.relu.default"] is None  # computed by no such module


def test_modules_in_eval_mode_and_other_modules_get_no_note():
    model = _Model().eval()
    assert all(note is None for note in _notes(model).values())
    model.layers[0].instance.train()  # an instance norm computes the same in ONNX
    assert all(note is None for note in _notes(model).values())
    # a batch norm without running statistics normalizes with the batch's in either mode
    model = _Model().train()
    model.layers[0].norm = nn.BatchNorm1d(4, track_running_stats=False)
    model.layers[0].drop.eval()
    assert all(note is None for note in _notes(model).values())


def test_a_getitem_of_a_multi_output_operator_is_named_as_that_operators_output():
    program = torch.export.export(_Model().train(), (torch.randn(3, 4),)).run_decompositions()
    named = {node.name: operation(node) for node in program.graph.nodes
             if node.op == "call_function"}
    getitems = [(op, where) for name, (op, where) in named.items() if name.startswith("getitem")]
    assert any(op.startswith("aten._native_batch_norm_legit_functional")
               and where.startswith("output 0 of FX node `_native_batch_norm_legit_functional")
               for op, where in getitems)
    assert named["relu"] == ("aten.relu.default", "FX node `relu`")
