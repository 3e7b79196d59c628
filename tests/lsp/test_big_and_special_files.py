"""Files that stopped the server (issue "nothing lost, round 3", items 5 and 7): a FIFO named
``*.py`` in the workspace hung ``diagnosticMode: workspace`` for ever, and a 4.5 MB document
with 2,000 targets held every request, even ``onnxlens/status``, for minutes. A real server
over stdio."""

from __future__ import annotations

import asyncio
import os
import re

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from exporter.source.text import MAX_SOURCE_BYTES
from tests.lsp.conftest import (
    SERVER,
    command,
    diagnostics_for,
    open_file,
    server_status,
    session,
    uri_of,
)

CLEAN_MODEL = """import torch


# onnx-export: args=(torch.randn(2, 3),)
class Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2
"""


def big_document(targets: int = 2000, padding: int = 2150) -> str:
    """The issue's file: 4.5 MB, 2,000 targets."""
    parts = ["import torch\n\n"]
    for index in range(targets):
        parts.append(f"# onnx-export: args=(torch.randn(2, 3),)\n"
                     f"class Model{index}(torch.nn.Module):\n"
                     f'    """{"x" * padding}"""\n\n'
                     f"    def forward(self, x):\n"
                     f"        return x * {index}\n\n\n")
    return "".join(parts)


# -- item 5: a FIFO, a device, a huge file in the workspace -------------------------------

@pytest_lsp.fixture(config=SERVER)
async def special_workspace(lsp_client: LanguageClient, tmp_path):
    os.mkfifo(tmp_path / "a_fifo.py")  # sorted first: the walk blocked on it
    with open(tmp_path / "huge.py", "wb") as huge:  # sparse: takes no disk space
        huge.truncate(MAX_SOURCE_BYTES + 1024 * 1024)
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "model.py").write_text(CLEAN_MODEL)
    async with session(lsp_client, tmp_path, settings={"diagnosticMode": "workspace"}):
        yield


async def test_the_workspace_mode_names_a_fifo_a_device_and_a_huge_file(
        special_workspace: LanguageClient):
    client, root = special_workspace, special_workspace.workspace_root  # type: ignore[attr-defined]
    # the workspace check runs meanwhile; a hang guard, not a timing assertion: before the
    # fix this request was never answered
    status = await asyncio.wait_for(server_status(client), 120)
    assert status["trusted"] is True

    found = {}
    for name in ("a_fifo.py", "huge.py", "zero.py"):
        # a symlink's uri, not the file it points to (resolving it names /dev/zero)
        uri = (root / name).absolute().as_uri() if name == "zero.py" else uri_of(root / name)
        diagnostics = await diagnostics_for(client, uri, timeout=180)
        found[name] = [(str(d.code), d.message.splitlines()[0]) for d in diagnostics]
    assert found == {
        "a_fifo.py": [("ONNX002", "The file cannot be read: it is a FIFO, and onnxlens "
                                  "reads only regular files; it is not checked.")],
        "huge.py": [("ONNX002", "The file cannot be read: it is 11.0 MB, and onnxlens reads "
                                "Python files of at most 10.0 MB; it is not checked.")],
        "zero.py": [("ONNX002", "The file cannot be read: it is a character device, and "
                                "onnxlens reads only regular files; it is not checked.")],
    }
    # and the rest of the workspace is checked; the server still answers
    assert await diagnostics_for(client, uri_of(root / "model.py"), timeout=180) == []
    assert (await asyncio.wait_for(server_status(client), 120))["checking"] == []


# -- item 7: a big document -------------------------------------------------------------------

@pytest_lsp.fixture(config=SERVER)
async def untrusted_big(lsp_client: LanguageClient, tmp_path):
    """Untrusted: nothing is checked, only the targets are found (CodeLens, hover)."""
    (tmp_path / "big.py").write_text(big_document())
    async with session(lsp_client, tmp_path, trusted=False):
        yield


async def test_requests_are_answered_while_the_targets_of_a_big_document_are_found(
        untrusted_big: LanguageClient):
    client = untrusted_big
    path = client.workspace_root / "big.py"  # type: ignore[attr-defined]
    uri = open_file(client, path)
    # sent now, before the status request (a coroutine would send it only when it runs)
    lens = asyncio.wrap_future(client.protocol.send_request(
        types.TEXT_DOCUMENT_CODE_LENS,
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))))
    status = await server_status(client)
    # answered while the CodeLens request was still finding the 2,000 targets (before: only
    # once the CodeLens was done, 80 to 175 s later)
    assert not lens.done()
    assert status["trusted"] is False
    lenses = await lens
    assert len(lenses) == 4 * 2000
    assert lenses[0].command.title == "ONNX · not checked (workspace not trusted)"
    assert lenses[-4].range.start.line == path.read_text().splitlines().index(
        "class Model1999(torch.nn.Module):")


@pytest_lsp.fixture(config=SERVER)
async def logging_client(lsp_client: LanguageClient, tmp_path):
    (tmp_path / "model.py").write_text(CLEAN_MODEL)
    async with session(lsp_client, tmp_path, settings={"logLevel": "debug"}):
        yield


async def test_the_targets_are_found_once_per_document_version(logging_client: LanguageClient):
    """The check, CodeLens, hover and the commands share what was found for a version."""
    client = logging_client
    path = client.workspace_root / "model.py"  # type: ignore[attr-defined]
    uri = open_file(client, path)
    document = types.TextDocumentIdentifier(uri=uri)
    assert await diagnostics_for(client, uri) == []  # the check of version 1

    def discoveries(version: int) -> int:
        return sum(bool(re.fullmatch(rf"found 1 target\(s\) in model\.py v{version} in "
                                     r"\d+\.\d\d s", m.message))
                   for m in client.log_messages)

    for _ in range(2):
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=document))
        assert lenses[0].command.title.startswith("✓ ONNX")
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=document, position=types.Position(line=4, character=8)))
        assert hover is not None and "`Doubler`" in hover.contents.value
        report = await command(client, "onnxlens.showReport", uri)
        assert "`Doubler`** — ✓ exports" in report["markdown"]
    assert discoveries(1) == 1

    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(
            text=CLEAN_MODEL + "# edited\n")]))
    for _ in range(2):
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=document))
        # the title, Export, Save, Run and Graph (the workspace is trusted)
        assert [lens.command.title for lens in lenses][1:] == ["Export", "Save", "Run", "Graph"]
    assert discoveries(2) == 1
    assert discoveries(1) == 1
