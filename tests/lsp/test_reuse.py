"""A check's result is reused only while nothing it depends on changed: the document text, the
settings, and the content of the workspace modules it imports. A check that reads a data file
is always run again."""

from __future__ import annotations

import textwrap

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from exporter import shortcuts
from tests.lsp.conftest import (
    SERVER,
    open_file,
    record_publishes,
    server_status,
    session,
    uri_of,
    wait_for,
)

MODEL = textwrap.dedent("""\
    from pathlib import Path

    import torch

    from helper import scale


    # onnx-export: args=(torch.rand(2, 3),)
    class Scaled(torch.nn.Module):
        def forward(self, x):
            return scale(x)


    # onnx-export: args=(torch.rand(2, 3),)
    def from_data():
        factor = float(Path(__file__).with_name("factor.txt").read_text())
        return torch.nn.Hardtanh(-factor, factor)
""")
HELPER = "import torch\n\n\ndef scale(x):\n    return {body}\n"


def _write_workspace(root) -> None:
    (root / "model.py").write_text(MODEL)
    (root / "helper.py").write_text(HELPER.format(body="torch.sigmoid(x) * 2"))
    (root / "factor.txt").write_text("2.0")


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path):
    _write_workspace(tmp_path)
    async with session(lsp_client, tmp_path):
        yield


async def _published(client: LanguageClient, publishes: list, uri: str, action) -> list[str]:
    """Do ``action`` and wait for the next check result of ``uri`` (not what a check
    published early, ``data.early``); its rules."""
    before = len(publishes)
    action()
    await wait_for(lambda: any(p.uri == uri and not any(
        isinstance(d.data, dict) and d.data.get("early") for d in p.diagnostics)
        for p in publishes[before:]), what=f"diagnostics of {uri}")
    return sorted(str(d.code) for d in client.diagnostics.get(uri, []))


def _save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


async def _counts(client: LanguageClient) -> tuple[int, int]:
    results = (await server_status(client))["results"]
    return results["checked"], results["reused"]


async def test_results_are_reused_only_while_their_inputs_are_unchanged(client: LanguageClient):
    root = client.workspace_root
    publishes = record_publishes(client)
    uri = uri_of(root / "model.py")

    assert await _published(client, publishes, uri, lambda: open_file(client, root / "model.py")) \
        == []
    assert await _counts(client) == (2, 0)  # two targets, both run

    # Saved again unchanged: the target that imports only modules is reused, the one that
    # reads factor.txt runs again.
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts(client) == (3, 1)

    # The imported module changed on disk: the same document is checked again and the new
    # problem is found.
    (root / "helper.py").write_text(HELPER.format(body="torch.special.i0(x)"))
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == ["ONNX201"]
    assert await _counts(client) == (5, 1)

    # A setting that reaches the check (the opset) is part of what must be unchanged.
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"onnxlens": {"opset": 20}}))
    await _published(client, publishes, uri, lambda: _save(client, uri))
    assert await _counts(client) == (7, 1)

    # Unchanged again: reused, with the helper's problem still reported.
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == ["ONNX201"]
    assert await _counts(client) == (8, 2)


NO_REUSE = pytest_lsp.ClientServerConfig(
    server_command=SERVER.server_command,
    server_env={**(SERVER.server_env or {}), shortcuts.ENVIRONMENT_VARIABLE: "result-reuse"})


@pytest_lsp.fixture(config=NO_REUSE)
async def client_without_reuse(lsp_client: LanguageClient, tmp_path):
    _write_workspace(tmp_path)
    async with session(lsp_client, tmp_path):
        yield


async def test_result_reuse_has_an_off_switch(client_without_reuse: LanguageClient):
    client = client_without_reuse
    root = client.workspace_root
    publishes = record_publishes(client)
    uri = uri_of(root / "model.py")
    assert await _published(client, publishes, uri, lambda: open_file(client, root / "model.py")) \
        == []
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts(client) == (4, 0)  # saved unchanged: both targets run again
