"""Which call of the target's function a transformers setting is added to: the one that
builds the config, else the one that builds the model; timm's: its `create_model(...)`; none
when it is not certain. Where the default opset goes: the pragma, or the export call."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from exporter.pipeline.fix_candidates import config_call, opset_edit, timm_call
from exporter.source.edits import apply_edits
from exporter.source.targets import discover


def _called(source: str) -> str | None:
    call = config_call(ast.parse(source), "build")
    return ast.unparse(call.func) if call is not None else None


@pytest.mark.parametrize(("body", "expected"), [
    ("config = LlamaConfig(hidden_size=64)\n    model = LlamaForCausalLM(config)",
     "LlamaConfig"),
    ("config = AutoConfig.for_model('llama')\n    model = AutoModel.from_config(config)",
     "AutoConfig.for_model"),
    ("config = transformers.AutoConfig.from_pretrained(path)",
     "transformers.AutoConfig.from_pretrained"),
    ("model = AutoModel.from_pretrained(path)", "AutoModel.from_pretrained"),
    ("model = LlamaForCausalLM(config)", None),  # the config comes from elsewhere
    ("a = BertConfig()\n    b = GPT2Config()", None),  # two configs: which one is the model's?
])
def test_the_call_that_takes_the_setting(body, expected):
    assert _called(f"def build():\n    {body}\n") == expected


def test_only_the_targets_function_is_read():
    source = "config = LlamaConfig()\n\ndef build():\n    return model\n"
    assert _called(source) is None


@pytest.mark.parametrize(("body", "expected"), [
    ("model = timm.create_model('vit_tiny_patch16_224').eval()", "timm.create_model"),
    ("model = create_model('resnet18', pretrained=False)", "create_model"),
    ("model = open_clip.create_model('ViT-B-32')", None),  # not timm's
    ("a = timm.create_model('vit_tiny_patch16_224')\n    b = timm.create_model('resnet18')",
     None),  # two models: which one is the target's?
])
def test_the_timm_call_that_takes_exportable(body, expected):
    call = timm_call(ast.parse(f"def build():\n    {body}\n"), "build")
    assert (ast.unparse(call.func) if call is not None else None) == expected


@pytest.mark.parametrize(("source", "edited"), [
    # the pragma's opset=, changed
    ("# onnx-export: args=(x,), opset=23\ndef build():\n    return M()\n",
     "# onnx-export: args=(x,), opset=20\n"),
    # none in the pragma (the project set it): added at its end
    ("# onnx-export: args=(x,)\ndef build():\n    return M()\n",
     "# onnx-export: args=(x,), opset=20\n"),
    ("# onnx-export: args=(x,),  \ndef build():\n    return M()\n",
     "# onnx-export: args=(x,), opset=20  \n"),
    ("# onnx-export:\nclass M(torch.nn.Module):\n    pass\n",
     "# onnx-export: opset=20\n"),
    # an export call's own opset_version=
    ("# onnx-export:\ndef run():\n    torch.onnx.export(M(), (x,), opset_version=23)\n",
     "    torch.onnx.export(M(), (x,), opset_version=20)\n"),
    # ... none, or one computed at run time: no edit
    ("# onnx-export:\ndef run():\n    torch.onnx.export(M(), (x,))\n", None),
    ("# onnx-export:\ndef run():\n    torch.onnx.export(M(), (x,), opset_version=OPSET)\n",
     None),
], ids=["pragma", "added", "trailing-comma", "empty-pragma", "call", "call-none",
        "call-expression"])
def test_the_edit_that_sets_the_default_opset(source, edited):
    source = "import torch\n" + source
    (target,) = discover(Path("/w/m.py"), source).targets
    edit = opset_edit(target, source, 20)
    if edited is None:
        assert edit is None
        return
    assert edit is not None and edited in apply_edits(source, [edit]).splitlines(keepends=True)
