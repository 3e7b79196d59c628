"""200 random edit/save/close sequences across two files: no crash, and the last publish for
each file matches its last version (or is empty once the file is closed)."""

from __future__ import annotations

import asyncio

import pytest_lsp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.conftest import REPO
from tests.lsp.conftest import (
    SERVER,
    close_file,
    handle_refreshes,
    initialize_params,
    open_file,
    record_publishes,
    wait_for,
)


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient):
    handle_refreshes(lsp_client)
    lsp_client.publishes = record_publishes(lsp_client)
    params = initialize_params("visual-studio-code", REPO)
    params.capabilities.text_document.publish_diagnostics.version_support = True
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


TEMPLATE = """import torch


# onnx-export: args=(torch.rand(2, 3) + 0.5,)
class Edited(torch.nn.Module):
    def forward(self, x):
{padding}        y = torch.special.i0(x)
        return {body}
"""


def version_text(version: int, bad: bool) -> str:
    """Every version's diagnostics differ: the i0 call moves down one line per version."""
    return TEMPLATE.format(padding="        # edit\n" * version,
                           body="torch.digamma(y)" if bad else "y")


def expected(version: int, bad: bool) -> list[tuple[str, int]]:
    line = 7 + version
    return [("ONNX201", line)] + ([("ONNX201", line + 1)] if bad else [])

operations = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["good", "bad", "save", "close"])),
    min_size=1, max_size=6)


async def test_random_edit_save_close_sequences(client: LanguageClient, tmp_path_factory):
    workspace = tmp_path_factory.mktemp("random")
    paths = [workspace / "first.py", workspace / "second.py"]
    for path in paths:
        path.write_text(version_text(0, False))
    uris = [path.resolve().as_uri() for path in paths]
    state = {"versions": [0, 0], "open": [False, False], "text": ["", ""],
             "bad": [False, False], "content_version": [0, 0]}
    loop = asyncio.get_running_loop()

    def run(coroutine):  # hypothesis drives a sync function; the client lives on our loop
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    async def one_sequence(steps):
        for index, action in steps:
            uri = uris[index]
            if action == "close":
                if state["open"][index]:
                    close_file(client, uri)
                    state["open"][index] = False
                continue
            if not state["open"][index]:
                state["versions"][index] += 1
                state["text"][index] = paths[index].read_text()
                state["bad"][index] = "digamma" in state["text"][index]
                state["content_version"][index] = state["text"][index].count("# edit")
                open_file(client, paths[index], state["text"][index], state["versions"][index])
                state["open"][index] = True
            if action in ("good", "bad"):
                state["versions"][index] += 1
                state["bad"][index] = action == "bad"
                state["content_version"][index] = state["versions"][index]
                state["text"][index] = version_text(state["versions"][index], action == "bad")
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(
                        uri=uri, version=state["versions"][index]),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(
                        text=state["text"][index])]))
            else:
                client.text_document_did_save(types.DidSaveTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=uri)))
        # Settle: save every open file, then the last publish must match its last version.
        marks = len(client.publishes)
        for index, uri in enumerate(uris):
            if state["open"][index]:
                client.text_document_did_save(types.DidSaveTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=uri)))
        for index, uri in enumerate(uris):
            if state["open"][index]:
                version = state["versions"][index]
                wanted = expected(state["content_version"][index], state["bad"][index])

                def settled(uri=uri, version=version, wanted=wanted):
                    mine = [p for p in client.publishes[marks:] if p.uri == uri]
                    return mine and mine[-1].version == version and sorted(
                        (d.code, d.range.start.line + 1) for d in mine[-1].diagnostics) == wanted

                try:
                    await wait_for(settled, 60, f"{uri} to settle at version {version}")
                except AssertionError as error:
                    seen = [(p.version, [(d.code, d.range.start.line + 1) for d in p.diagnostics])
                            for p in client.publishes if p.uri == uri][-5:]
                    raise AssertionError(f"{error}; wanted {wanted}; last publishes {seen}; "
                                         f"text:\n{state['text'][index]}") from None
            else:
                def cleared(uri=uri):
                    last = [p for p in client.publishes if p.uri == uri]
                    return not last or list(last[-1].diagnostics) == []

                await wait_for(cleared, 30, f"{uri} to be cleared after closing")

    @settings(max_examples=200, deadline=None, derandomize=True, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(operations)
    def sequences(steps):
        run(one_sequence(steps))

    await loop.run_in_executor(None, sequences)
    for index, uri in enumerate(uris):
        if state["open"][index]:
            close_file(client, uri)
