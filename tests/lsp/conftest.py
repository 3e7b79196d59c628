"""A real onnxlens server over stdio, driven by pytest-lsp with the capabilities of real
clients (VS Code and Neovim)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.conftest import FIXTURES, REPO

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "lsp_server"],
                            server_env={**os.environ, "PYTHONPATH": str(REPO)})
CLIENTS = ["visual-studio-code", "neovim"]


def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


def initialize_params(client_name: str, root: Path, **options: Any) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=client_capabilities(client_name),
        workspace_folders=[types.WorkspaceFolder(uri=uri_of(root), name=root.name)],
        root_uri=uri_of(root),
        initialization_options={"trusted": True, **options},
    )


def handle_refreshes(client: LanguageClient) -> None:
    """Answer the refresh requests the real clients' capabilities invite."""
    client.code_lens_refreshes = 0  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params: None) -> None:
        client.code_lens_refreshes += 1  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def session(client: LanguageClient, root: Path, client_name: str = "visual-studio-code",
                  **options: Any) -> AsyncIterator[LanguageClient]:
    """A session with the server ``client`` talks to, in the workspace ``root``
    (``client.workspace_root``), started as ``client_name`` starts one; ``options`` are the
    initializationOptions (``trusted`` unless they say otherwise). Shut down at the end."""
    handle_refreshes(client)
    client.workspace_root = root  # type: ignore[attr-defined]
    result = await client.initialize_session(initialize_params(client_name, root, **options))
    client.position_encoding = result.capabilities.position_encoding or "utf-16"
    try:
        yield client
    finally:
        await client.shutdown_session()


@contextlib.asynccontextmanager
async def served(root: Path, client_name: str = "visual-studio-code", *,
                 config: ClientServerConfig = SERVER,
                 **options: Any) -> AsyncIterator[LanguageClient]:
    """A server of its own (``config``) and a ``session`` with it; stopped at the end."""
    client = await config.start()
    try:
        async with session(client, root, client_name, **options):
            yield client
    finally:
        await client.stop()


@pytest_lsp.fixture(config=SERVER, params=CLIENTS, scope="module")
async def client(lsp_client: LanguageClient, request):
    # the verdicts are under test here: no fix is tried after them (their trials would run
    # on beside the module's later tests); tests/lsp/test_features.py tries fixes on a
    # server of its own
    async with session(lsp_client, FIXTURES, request.param,
                       settings={"fixBudgetSeconds": 0}):
        yield


def open_file(client: LanguageClient, path: Path, text: str | None = None,
              version: int = 1) -> str:
    uri = uri_of(path)
    client.diagnostics.pop(uri, None)  # wait for what this opening publishes
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version,
                                             text=path.read_text() if text is None else text)))
    return uri


def close_file(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


async def wait_for(predicate: Callable[[], Any], timeout: float = 90.0,
                   what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


async def diagnostics_for(client: LanguageClient, uri: str,
                          expect: Callable[[list[types.Diagnostic]], bool] | None = None,
                          timeout: float = 90.0) -> list[types.Diagnostic]:
    """Wait until the client holds a check's diagnostics for ``uri`` (matching ``expect``):
    not those published early, while the check still runs (``data.early``)."""

    def ready() -> Any:
        if uri not in client.diagnostics:
            return None
        found = list(client.diagnostics[uri])
        if any(isinstance(d.data, dict) and d.data.get("early") for d in found):
            return None
        return (found,) if expect is None or expect(found) else None

    (found,) = await wait_for(ready, timeout, f"diagnostics of {uri}")
    return found


def units(text: str, encoding: str) -> int:
    """The length of ``text`` in the negotiated position encoding."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def spans(diagnostics: list[types.Diagnostic]) -> list[tuple[str, int, int, int, int, int]]:
    """(rule, start line, start char, end line, end char, severity) with 1-based lines."""
    return sorted((str(d.code), d.range.start.line + 1, d.range.start.character,
                   d.range.end.line + 1, d.range.end.character, int(d.severity or 0))
                  for d in diagnostics)


@pytest.fixture
def fixture_path() -> Callable[[str], Path]:
    return lambda name: FIXTURES / name


def apply_edits(text: str, edits: list[types.TextEdit], encoding: str) -> str:
    """Apply LSP text edits (in the negotiated encoding) as an editor would."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        before = sum(len(line) for line in lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        count = 0
        for index, char in enumerate(line):
            if count >= position.character:
                return before + index
            count += units(char, encoding)
        return before + len(line.rstrip("\n"))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                       reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
        lines = text.splitlines(keepends=True)
    return text


def change_and_save(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.diagnostics.pop(uri, None)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


async def command(client: LanguageClient, name: str, *arguments: Any) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(arguments)))


def plain(value: Any) -> Any:
    """pygls hands untyped results over as named tuples; turn them back into dicts."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


async def server_status(client: LanguageClient) -> dict[str, Any]:
    return plain(await client.protocol.send_request_async("onnxlens/status", {}))


def record_publishes(client: LanguageClient) -> list[types.PublishDiagnosticsParams]:
    """Keep every publishDiagnostics (with its version), not only the latest per file."""
    publishes: list[types.PublishDiagnosticsParams] = []
    features = client.protocol.fm.features
    original = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def recording(params: types.PublishDiagnosticsParams) -> None:
        publishes.append(params)
        original(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = recording
    return publishes


def child_processes(pid: int) -> list[int]:
    children = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children += [int(c) for c in handle.read().split()]
    except OSError:
        pass
    return children
