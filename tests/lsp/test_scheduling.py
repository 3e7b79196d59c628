"""Scheduling: requests on other files are answered while a slow check runs, and a check can
be cancelled from the progress UI."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.conftest import FIXTURES, REPO
from tests.lsp.conftest import (
    CLIENTS,
    SERVER,
    change_and_save,
    close_file,
    diagnostics_for,
    open_file,
    record_publishes,
    server_status,
    session,
    wait_for,
)

LSP_FIXTURES = Path(__file__).parent / "fixtures"


@pytest_lsp.fixture(config=SERVER, params=CLIENTS, scope="module")
async def client(lsp_client: LanguageClient, request):
    async with session(lsp_client, REPO, request.param):
        yield


async def test_other_files_are_answered_while_a_slow_check_runs(client: LanguageClient):
    other = open_file(client, FIXTURES / "clean" / "factory.py")
    await diagnostics_for(client, other)
    slow = open_file(client, LSP_FIXTURES / "slow" / "model.py")
    events: list[str] = []
    try:
        await wait_for(lambda: slow not in client.diagnostics, 5, "the slow check to start")
        watcher = asyncio.ensure_future(diagnostics_for(client, slow))
        watcher.add_done_callback(lambda _: events.append("slow check published"))
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=other),
            position=types.Position(line=13, character=6)))
        events.append("hover answered")
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=other)))
        events.append("code lens answered")
        assert hover is not None and lenses
        await watcher
        assert events == ["hover answered", "code lens answered", "slow check published"]
    finally:
        close_file(client, slow)
        close_file(client, other)


async def test_cancel_from_the_progress_ui(client: LanguageClient):
    known = set(client.progress_reports)
    path = LSP_FIXTURES / "slow" / "model.py"
    # A text not checked before: the previous test's result would be reused, not run.
    uri = open_file(client, path, path.read_text() + "\n# cancelled from the progress UI\n")
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
        # the cancelled check's task is gone: nothing of it can publish any more
        assert (await server_status(client))["pending"] == {"delayed": 0, "started": 0}
        assert uri not in client.diagnostics  # a cancelled check publishes nothing
        change_and_save(client, uri, path.read_text(), 2)
        assert await diagnostics_for(client, uri) == []
    finally:
        close_file(client, uri)


async def test_what_capture_and_translate_find_is_shown_before_the_check_ends(
        client: LanguageClient):
    """The mixed fixture: capture finds a data-dependent branch (ONNX101), translate two
    operators without a translation (ONNX201); each is published as its stage ends, while
    the later stages still run, and the check's final publish holds all three. The capture
    fails in every strategy, so torch's first error is published before even the draft
    export that collects the capture's list (issue 42)."""
    publishes = record_publishes(client)
    uri = open_file(client, FIXTURES / "mixed" / "model.py")

    def mine() -> list[list[tuple[str, int]]]:
        return [sorted((str(d.code), d.range.start.line + 1) for d in p.diagnostics)
                for p in publishes if p.uri == uri]

    everything = [("ONNX101", 8), ("ONNX201", 7), ("ONNX201", 10)]
    await wait_for(lambda: len(mine()) >= 4, what="four publishes")
    assert mine()[0] == [("ONNX101", 8)]  # torch's first error, before the draft export
    assert mine()[1] == [("ONNX101", 8)]  # capture's, before translate ran
    assert mine()[2] == everything  # translate's, before validate and the rest
    assert mine()[3] == everything  # the check's result
    close_file(client, uri)
