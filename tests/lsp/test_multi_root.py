"""A multi-root workspace: each folder's files are checked with that folder's settings (its
``[tool.onnxlens]`` and the editor's settings scoped to it), and a folder added later brings
its own (lsp_server/server.py, ``settings_for``; docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from tests.lsp.conftest import SERVER, diagnostics_for, handle_refreshes, open_file, uri_of

MODEL = """\
import torch


# onnx-export: args=(torch.randn(3),)
class Branch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x
"""


def _folder(root: Path, name: str, pyproject: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(MODEL)
    if pyproject:
        (folder / "pyproject.toml").write_text(pyproject)
    return folder


@pytest_lsp.fixture(config=SERVER)
async def multi_root(lsp_client: LanguageClient, tmp_path):
    first = _folder(tmp_path, "first")
    second = _folder(tmp_path, "second", '[tool.onnxlens]\nignore = ["ONNX101"]\n')
    _folder(tmp_path, "third", '[tool.onnxlens]\nseverity = { ONNX101 = "info" }\n')
    # the editor's settings: the first folder's own lower ONNX101 to a warning
    lsp_client.set_configuration({"severity": {"ONNX101": "warning"}}, section="onnxlens",
                                 scope_uri=uri_of(first))
    lsp_client.set_configuration({}, section="onnxlens")
    handle_refreshes(lsp_client)
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        workspace_folders=[types.WorkspaceFolder(uri=uri_of(folder), name=folder.name)
                           for folder in (first, second)],
        initialization_options={"trusted": True, "settings": {"fixBudgetSeconds": 0}}))
    lsp_client.tmp_path = tmp_path  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


def _rules(diagnostics: list[types.Diagnostic]) -> list[tuple[str, int, types.DiagnosticSeverity]]:
    return [(str(d.code), d.range.start.line + 1, d.severity) for d in diagnostics
            if d.severity is not None]


async def test_each_folders_files_are_checked_with_that_folders_settings(
        multi_root: LanguageClient):
    root = multi_root.tmp_path  # type: ignore[attr-defined]
    first = open_file(multi_root, root / "first" / "model.py")
    second = open_file(multi_root, root / "second" / "model.py")
    # the editor's settings for the first folder: a warning, not an error
    found = await diagnostics_for(multi_root, first, lambda d: bool(d))
    assert _rules(found) == [("ONNX101", 7, types.DiagnosticSeverity.Warning)]
    # the second folder's pyproject.toml ignores the rule: nothing is shown there
    assert await diagnostics_for(multi_root, second) == []


async def test_a_folder_added_later_brings_its_own_settings(multi_root: LanguageClient):
    """Its file, open before the folder was added, is checked again with the folder's
    settings (the session's until then: the first folder's)."""
    root = multi_root.tmp_path  # type: ignore[attr-defined]
    third = root / "third"
    uri = open_file(multi_root, third / "model.py")
    found = await diagnostics_for(multi_root, uri, lambda d: bool(d))
    assert _rules(found) == [("ONNX101", 7, types.DiagnosticSeverity.Warning)]
    multi_root.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(
            added=[types.WorkspaceFolder(uri=uri_of(third), name="third")], removed=[])))
    found = await diagnostics_for(
        multi_root, uri, lambda d: bool(d) and d[0].severity != types.DiagnosticSeverity.Warning)
    assert _rules(found) == [("ONNX101", 7, types.DiagnosticSeverity.Information)]
