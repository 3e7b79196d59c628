"""Scheduling: requests on other files are answered while a slow check runs, a check can be
cancelled from the progress UI, and random edit/save/close sequences end consistent."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest_lsp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.conftest import FIXTURES, REPO
from tests.lsp.conftest import (
    SERVER,
    change_and_save,
    close_file,
    diagnostics_for,
    handle_refreshes,
    initialize_params,
    open_file,
    record_publishes,
    server_status,
    wait_for,
)

LSP_FIXTURES = Path(__file__).parent / "fixtures"


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient):
    handle_refreshes(lsp_client)
    lsp_client.publishes = record_publishes(lsp_client)
    params = initialize_params("visual-studio-code", REPO)
    params.capabilities.text_document.publish_diagnostics.version_support = True
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def test_other_files_are_answered_while_a_slow_check_runs(client: LanguageClient):
    other = open_file(client, FIXTURES / "clean" / "factory.py")
    await diagnostics_for(client, other)
    slow = open_file(client, LSP_FIXTURES / "slow" / "model.py")
    events: list[str] = []
    try:
        await wait_for(lambda: slow not in client.diagnostics, 5, "the slow check to start")
        watcher = asyncio.ensure_future(diagnostics_for(client, slow))
        watcher.add_done_callback(lambda _: events.append("slow check published"))
        started = time.monotonic()
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=other),
            position=types.Position(line=13, character=6)))
        events.append("hover answered")
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=other)))
        events.append("code lens answered")
        answered_in = time.monotonic() - started
        assert hover is not None and lenses
        await watcher
        assert events == ["hover answered", "code lens answered", "slow check published"]
        assert answered_in < 1.0
    finally:
        close_file(client, slow)
        close_file(client, other)


async def test_cancel_from_the_progress_ui(client: LanguageClient):
    known = set(client.progress_reports)
    path = LSP_FIXTURES / "slow" / "model.py"
    uri = open_file(client, path)
    try:
        def begun() -> object:
            return next((token for token, reports in client.progress_reports.items()
                         if token not in known and reports
                         and getattr(reports[0], "title", "") == "Checking model.py"), None)

        token = await wait_for(begun, 30, "the check's progress")
        await wait_for(lambda: uri not in client.diagnostics, 1, "nothing published yet")
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        await wait_for(lambda: client.progress_reports[token][-1].kind == "end", 10,
                       "the progress to end")
        assert client.progress_reports[token][-1].message == "Cancelled"
        async def no_jobs() -> bool:
            return not (await server_status(client))["worker"].get("jobs")
        deadline = time.monotonic() + 10
        while not await no_jobs():
            assert time.monotonic() < deadline, "the cancelled check process is still running"
            await asyncio.sleep(0.1)
        await asyncio.sleep(4)  # long enough for the slow check to have finished
        assert uri not in client.diagnostics  # a cancelled check publishes nothing
        change_and_save(client, uri, path.read_text(), 2)
        assert await diagnostics_for(client, uri) == []
    finally:
        close_file(client, uri)


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
