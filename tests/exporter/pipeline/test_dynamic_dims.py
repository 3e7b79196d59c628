"""The dynamic dimensions of a target (exporter/pipeline/dynamic_dims.py): for an
ExportedProgram an export call exports as it is, those the user gave torch.export.export,
read from the program (tests/exporter/fixtures/exported_programs is judged by the corpus)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.export import Dim

from exporter.pipeline.dynamic_dims import DeclaredDim, declared_in_program, valid_ranges


class _Masked(nn.Module):
    def forward(self, x, scale, mask):
        return (x * mask.unsqueeze(-1)).sum(1) * scale


def test_a_programs_symbolic_axes_are_its_declared_dimensions():
    x, mask = torch.randn(2, 5, 4), torch.ones(2, 5)
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=3)
    program = torch.export.export(
        _Masked(), (x, 2.0), {"mask": mask},
        dynamic_shapes={"x": {0: batch, 1: seq}, "scale": None, "mask": {0: batch, 1: seq}})
    declared = declared_in_program(program, (x, 2.0), {"mask": mask})
    # flat tensor inputs (the float is none); one symbol, one name: resized together
    assert declared == {
        0: {0: DeclaredDim("x.shape[0]", 2, 64, named=True, takes_one=True),
            1: DeclaredDim("x.shape[1]", 3, math.inf, named=True, takes_one=False)},
        1: {0: DeclaredDim("x.shape[0]", 2, 64, named=True, takes_one=True),
            1: DeclaredDim("x.shape[1]", 3, math.inf, named=True, takes_one=False)}}


def test_a_static_program_declares_nothing():
    x = torch.randn(2, 3)
    assert declared_in_program(torch.export.export(nn.ReLU(), (x,)), (x,), {}) == {}


class _WithConstants(nn.Module):
    def forward(self, x, scale, bias=None, mask=None):
        return (x * mask.unsqueeze(-1)).sum(1) * scale


def test_the_valid_ranges_pair_placeholders_past_constant_inputs():
    """A float and a None among the inputs are user inputs of the program without a
    placeholder of theirs: the tensors after them are still paired (ONNX107 was not looked
    for on such a target)."""
    x, mask = torch.randn(2, 12, 4), torch.ones(2, 12)
    seq = Dim("seq", min=10, max=40)
    program = torch.export.export(_WithConstants(), (x, 2.0, None), {"mask": mask},
                                  dynamic_shapes={"x": {1: seq}, "scale": None, "bias": None,
                                                  "mask": {1: seq}})
    ranges = valid_ranges(program, (x, 2.0, None), {"mask": mask})
    assert sorted(ranges) == [0, 1]
    assert ranges[0][0] == 2 and ranges[1][0] == 2  # the batch, fixed
    assert (ranges[0][1].low, ranges[0][1].high) == (10, 40)
    assert ranges[1][1].symbol == ranges[0][1].symbol
