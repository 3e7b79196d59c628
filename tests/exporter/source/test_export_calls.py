"""The ``torch.onnx.export(...)`` calls of a file and their legacy arguments, found without
running anything (exporter/source/export_calls.py, rules ONNX601-ONNX604)."""

from __future__ import annotations

import ast
import textwrap
import warnings
from pathlib import Path

import pytest

from exporter.findings.fixes import QuickFix
from exporter.source.edits import apply_edits
from exporter.source.export_calls import TORCHLIB_OPSET, dynamic_shapes_for, export_calls
from exporter.source.targets import discover
from exporter.source.text import split_lines

ENCODER = '''
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 8)

    def forward(self, tokens, mask):
        return self.linear(tokens) * mask
'''

LEGACY = ENCODER + '''

def export():
    model = Encoder().eval()
    tokens, mask = torch.randn(2, 5, 16), torch.ones(2, 5, 1)
    torch.onnx.export(
        model,
        (tokens, mask),
        "encoder.onnx",
        input_names=["input_ids", "attention_mask"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": [0, 1]},
        opset_version=13,
        do_constant_folding=True,
    )
'''

REWRITTEN = ("{'tokens': {0: 'batch', 1: 'seq'}, "
             "'mask': {0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC}}")


def _findings(source: str) -> list[tuple[str, int, int, int, int]]:
    found = discover(Path("script.py"), textwrap.dedent(source)).diagnostics
    return [(d.rule, d.location.range.start.line, d.location.range.start.column,
             d.location.range.end.line, d.location.range.end.column) for d in found]


def _apply(source: str, fix: QuickFix) -> str:
    return apply_edits(source, fix.edits)


def test_each_legacy_argument_is_flagged_where_it_is_written():
    assert _findings(LEGACY) == [
        ("ONNX602", 23, 9, 23, 85),  # dynamic_axes=...
        ("ONNX603", 24, 9, 24, 25),  # opset_version=13
        ("ONNX604", 25, 9, 25, 33),  # do_constant_folding=True
    ]
    messages = {d.rule: d.message for d in discover(Path("s.py"), LEGACY).diagnostics}
    assert messages["ONNX603"].startswith("`opset_version=13` is below opset 18")
    assert messages["ONNX604"].startswith("`do_constant_folding` is ignored by the "
                                          "torch.export-based exporter")
    assert messages["ONNX602"].endswith(f"Give `dynamic_shapes`, keyed by `forward`'s parameter "
                                        f"names: `{REWRITTEN}`.")


def test_dynamo_false_is_the_one_finding_and_its_fix_removes_only_it():
    source = LEGACY.replace("do_constant_folding=True,", "do_constant_folding=True,\n        "
                                                         "dynamo=False,")
    [finding] = discover(Path("s.py"), source).diagnostics
    assert finding.rule == "ONNX601"  # the TorchScript exporter honours the rest
    fixed = _apply(source, finding.quick_fixes[0])
    assert fixed == source.replace(",\n        dynamo=False,", ",")
    assert "dynamo" not in fixed
    ast.parse(fixed)


def test_the_fixes_give_code_that_parses_and_says_the_same():
    source = LEGACY
    for finding in discover(Path("s.py"), source).diagnostics:
        # the last quick fix marks the call's function (tested below); before it, the rewrite
        *rewrites, marking = finding.quick_fixes
        assert marking.title.startswith("Check this call")
        for rewrite in rewrites:
            fixed = _apply(source, rewrite)
            tree = ast.parse(fixed)
            [call] = export_calls(Path("s.py"), tree, split_lines(fixed))
            if finding.rule == "ONNX602":
                assert "dynamic_axes" not in call.keywords
                assert call.keywords["dynamic_shapes"].source == REWRITTEN
            else:
                assert "do_constant_folding" not in call.keywords
                assert set(call.keywords) == {"input_names", "dynamic_axes", "opset_version"}


@pytest.mark.parametrize("header, callee", [
    ("import torch as t", "t.onnx.export"),
    ("from torch import onnx", "onnx.export"),
    ("from torch.onnx import export as to_onnx", "to_onnx"),
])
def test_calls_are_found_under_any_imported_name(header, callee):
    source = f"{header}\n\ndef run(model, x):\n    {callee}(model, (x,), opset_version=11)\n"
    assert _findings(source) == [("ONNX603", 4, len(callee) + 19, 4, len(callee) + 35)]


@pytest.mark.parametrize("call", [
    "torch.export.export(model, (x,))",  # not the ONNX exporter
    "torch.onnx.export(model, (x,), dynamo=use_dynamo, opset_version=11)",  # decided at run time
    "torch.onnx.export(model, (x,), opset_version=18, dynamic_shapes={'x': {0: 'b'}})",
    "exporter.export(model, (x,), opset_version=11)",  # some other export
])
def test_what_is_not_flagged(call):
    assert _findings(f"import torch\n\ndef run(model, x):\n    {call}\n") == []


def test_ignored_arguments_name_what_happens_instead():
    source = ("import torch\n\ndef run(model, x):\n    torch.onnx.export(model, (x,), "
              "dynamic_shapes=({0: 'b'},), dynamic_axes={'x': [0]}, export_params=False)\n")
    found = discover(Path("s.py"), source).diagnostics
    assert [(d.rule, d.message.split(":")[0]) for d in found] == [
        ("ONNX604", "`dynamic_axes` is ignored"),
        ("ONNX604", "`export_params` is ignored"),
    ]


@pytest.mark.parametrize("change", [
    ('input_names=["input_ids", "attention_mask"]', 'input_names=names'),  # not literal
    ("(tokens, mask),", "inputs,"),  # how many inputs is not known
    ("model = Encoder().eval()", "model = build()"),  # which class is not known
    ('input_names=["input_ids", "attention_mask"]', 'input_names=["input_ids"]'),  # 1 of 2
])
def test_no_rewrite_unless_it_is_certain(change):
    source = LEGACY.replace(*change)
    tree = ast.parse(source)
    [call] = export_calls(Path("s.py"), tree, split_lines(source))
    assert dynamic_shapes_for(tree, call) is None
    assert "ONNX602" in {d.rule for d in discover(Path("s.py"), source).diagnostics}


@pytest.mark.every_torch
def test_the_rewrite_exports_the_same_graph_as_dynamic_axes():
    """The quick fix is faithful: the installed torch exports the same input and output
    shapes (the same named and dynamic dimensions) from the rewritten call."""
    import torch

    namespace: dict = {}
    exec(compile(ENCODER, "encoder.py", "exec"), namespace)
    model = namespace["Encoder"]().eval()
    example = (torch.randn(2, 5, 16), torch.ones(2, 5, 1))
    tree = ast.parse(LEGACY)
    [call] = export_calls(Path("s.py"), tree, split_lines(LEGACY))
    dynamic_shapes = eval(dynamic_shapes_for(tree, call), {"torch": torch})

    def shapes(program) -> list[list[object]]:
        values = [*program.model_proto.graph.input, *program.model_proto.graph.output]
        return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                for v in values]

    names = ["input_ids", "attention_mask"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        legacy = torch.onnx.export(model, example, input_names=names, dynamo=True,
                                   dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                                 "attention_mask": [0, 1]})
        rewritten = torch.onnx.export(model, example, input_names=names, dynamo=True,
                                      dynamic_shapes=dynamic_shapes)
    assert shapes(rewritten) == shapes(legacy)
    assert shapes(legacy)[0][:2] == ["batch", "seq"]


@pytest.mark.every_torch
def test_the_torchlib_opset_is_the_installed_torchs():
    from torch.onnx._internal.exporter import _constants

    assert _constants.TORCHLIB_OPSET == TORCHLIB_OPSET


def test_check_this_call_marks_the_function_once():
    finding = discover(Path("s.py"), LEGACY).diagnostics[0]
    check = finding.quick_fixes[-1]
    assert check.title == "Check this call: mark `export` with `# onnx-export:`"
    marked = _apply(LEGACY, check)
    assert "\n# onnx-export:\ndef export():\n" in marked
    after = discover(Path("s.py"), marked)
    assert [t.name for t in after.targets] == ["export@19"]  # the call is now a target
    assert all(not fix.title.startswith("Check this call") for d in after.diagnostics
               for fix in d.quick_fixes)


def test_check_this_call_is_offered_where_the_function_can_be_called_as_it_is():
    """A function whose parameters all have defaults can be marked; one that needs an
    argument cannot (a check could not call it)."""
    source = ("import torch\n\n\ndef main(output='m.onnx', *, opset=17):\n"
              "    torch.onnx.export(m, (x,), output, dynamo=False)\n\n\n"
              "def export_to(output):\n"
              "    torch.onnx.export(m, (x,), output, dynamo=False)\n")
    found = discover(Path("s.py"), source).diagnostics
    offered = {d.location.range.start.line: [f.title for f in d.quick_fixes] for d in found}
    assert "Check this call: mark `main` with `# onnx-export:`" in offered[5]
    assert not any(title.startswith("Check this call") for title in offered[9])
