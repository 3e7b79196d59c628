"""The VS Code extension declares every server setting, under the name the server reads and
with the server's default, and nothing the server would reject."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields

from exporter.config.options import Options
from tests.conftest import REPO

CLIENT_ONLY = {"onnxlens.interpreter", "onnxlens.trace.server"}


def _vscode_key(name: str) -> str:
    if name == "sarifOutputDirectory":
        return "onnxlens.sarif.outputDirectory"
    return f"onnxlens.{name}"


def _default(field) -> object:
    return field.default_factory() if field.default is MISSING else field.default


def test_every_server_setting_is_declared_with_the_server_default():
    manifest = json.loads((REPO / "vscode-extension" / "package.json").read_text())
    properties = manifest["contributes"]["configuration"]["properties"]
    for field in fields(Options):
        key = _vscode_key(field.name)
        assert key in properties, f"{key} is missing from the extension's settings"
        assert properties[key]["default"] == _default(field), key
    declared = set(properties) - CLIENT_ONLY
    assert declared == {_vscode_key(f.name) for f in fields(Options)}


def test_the_interpreter_is_restricted_in_untrusted_workspaces():
    manifest = json.loads((REPO / "vscode-extension" / "package.json").read_text())
    untrusted = manifest["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    assert untrusted["restrictedConfigurations"] == ["onnxlens.interpreter"]
