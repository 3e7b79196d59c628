"""A session builds the torchlib registry once, re-imports edited modules, and keeps working
through the public torch.onnx API when the private one is unavailable."""

from __future__ import annotations

import logging
import textwrap

import pytest
import torch

from exporter.pipeline.session import ExportSession
from exporter.toolchain import torch_compat

MODEL = textwrap.dedent("""
    import torch


    # onnx-export: args=(torch.rand(2, 3) + 0.5,)
    class Edited(torch.nn.Module):
        def forward(self, x):
            return {body}
""")


def _rules(result):
    return sorted(d.rule for d in result.diagnostics)


def test_registry_is_built_once_and_edits_are_seen(tmp_path, monkeypatch):
    builds = []
    original = torch_compat.build_registry

    def counting(opset=None):
        builds.append(opset)
        return original(opset)

    monkeypatch.setattr(torch_compat, "build_registry", counting)
    session = ExportSession()
    model = tmp_path / "model.py"
    model.write_text(MODEL.format(body="torch.special.i0(x)"))
    assert _rules(session.check_file(model, tmp_path)) == ["ONNX201"]
    model.write_text(MODEL.format(body="torch.sigmoid(x)"))
    assert _rules(session.check_file(model, tmp_path)) == []
    # one registry, for torch.onnx.export's default opset; the second check reused it
    assert builds == [torch.onnx._constants.ONNX_DEFAULT_OPSET]


def test_custom_translation_table_does_not_leak_into_the_shared_registry(session):
    base = session.registry(None, None)
    custom = session.registry(None, {torch.ops.aten.special_i0.default: lambda x: x})
    assert custom is not base
    assert custom.is_registered(torch.ops.aten.special_i0.default)
    assert not base.is_registered(torch.ops.aten.special_i0.default)


#: loggers of several parts of torch that write to the console while a check exports
TORCH_LOGGERS = ("torch.onnx", "torch._dynamo", "torch.export",
                 "torch.fx.experimental.symbolic_shapes", "torch._subclasses.fake_tensor")


@pytest.mark.parametrize("name", TORCH_LOGGERS)
def test_a_session_keeps_torchs_log_lines_off_the_console(session, capfd, name):
    """torch's console handlers are silenced, whatever their class (torch 2.15's is no
    logging.StreamHandler); the records still reach the loggers (draft export reads them)."""
    capfd.readouterr()
    logging.getLogger(name).warning("a torch warning that onnxlens reports otherwise")
    out, err = capfd.readouterr()
    assert "a torch warning" not in out + err


def test_every_capability_works_on_this_torch():
    """A tested torch (both CI legs): every private capability passes its probe."""
    assert torch_compat.TORCH_TESTED
    assert {name: r.ok for name, r in torch_compat.probe_results().items()} == \
        dict.fromkeys(torch_compat.CAPABILITIES, True)


def test_public_api_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv(torch_compat.ENVIRONMENT_VARIABLE, "staged-translation")
    session = ExportSession()
    model = tmp_path / "model.py"
    model.write_text(MODEL.format(body="torch.sigmoid(x) * 2"))
    (target,) = session.check_file(model, tmp_path).targets
    assert target.diagnostics == []
    assert [s.state.value for s in target.stages][:6] == ["passed"] * 6
    model.write_text(MODEL.format(body="torch.special.i0(x)"))
    result = session.check_file(model, tmp_path)
    assert [(d.rule, d.location.range.start.line) for d in result.diagnostics] == [
        ("ONNX202", 8)]
