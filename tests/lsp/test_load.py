"""A folder of models opened at once: at most ``maxConcurrentChecks`` check processes, the
document in front of the user first, a closed document's queued check dropped; and the
workspace-wide mode, which checks files nobody opened and stops when cancelled."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.conftest import FIXTURES
from tests.lsp.conftest import (
    close_file,
    command,
    open_file,
    plain,
    record_publishes,
    served,
    server_status,
    uri_of,
    wait_for,
)

MODEL = '''import time

import torch


# onnx-export: args=(torch.randn(2, 3),)
class Model{index}(torch.nn.Module):
    def forward(self, x):
        time.sleep({seconds})
        return x * {index}
'''


def write_models(folder: Path, count: int, seconds: float, start: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(start, start + count):
        path = folder / f"model_{index:02d}.py"
        path.write_text(MODEL.format(index=index, seconds=seconds))
        paths.append(path)
    return paths


def published_order(publishes: list[types.PublishDiagnosticsParams],
                    uris: list[str]) -> list[str]:
    order: list[str] = []
    for publish in publishes:
        if publish.uri in uris and publish.uri not in order:
            order.append(publish.uri)
    return order


async def lens_title(client: LanguageClient, uri: str) -> str:
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return lenses[0].command.title


async def until_in_queue(client: LanguageClient, state: str, count: int) -> None:
    """Wait until at least ``count`` checks are ``running`` or ``waiting`` in the queue."""
    deadline = time.monotonic() + 60
    while (await server_status(client))["queue"][state] < count:
        assert time.monotonic() < deadline, f"never {count} check(s) {state}"
        await asyncio.sleep(0.05)


async def test_twelve_documents_opened_at_once_never_run_more_checks_than_the_bound(tmp_path):
    paths = write_models(tmp_path, 12, 0.2)
    async with served(tmp_path, settings={"maxConcurrentChecks": 2}) as client:
        publishes = record_publishes(client)
        uris = [open_file(client, path) for path in paths]
        most_jobs = 0
        while len(published_order(publishes, uris)) < len(uris):
            status = await server_status(client)
            most_jobs = max(most_jobs, len(status["worker"].get("jobs") or []))
            await asyncio.sleep(0.05)
        status = await server_status(client)
        assert status["queue"]["slots"] == 2
        assert status["queue"]["mostRunning"] == 2  # the bound was reached, never passed
        assert 1 <= most_jobs <= 2  # the worker's check processes, as it counts them
        found = {uri: [(str(d.code), d.message) for d in client.diagnostics[uri]]
                 for uri in uris}
        assert found == {uri: [] for uri in uris}


async def test_the_active_document_is_checked_first_and_a_closed_one_never(tmp_path):
    (blocker,) = write_models(tmp_path, 1, 1.5)
    paths = write_models(tmp_path, 5, 0.1, start=1)
    async with served(tmp_path, settings={"maxConcurrentChecks": 1}) as client:
        publishes = record_publishes(client)
        blocker_uri = open_file(client, blocker)
        await until_in_queue(client, "running", 1)  # the one slot is taken: the rest queue
        uris = [open_file(client, path) for path in paths]
        active, closed = uris[1], uris[3]
        client.protocol.notify("onnxlens/editors", {"active": active, "visible": [active]})
        await until_in_queue(client, "waiting", 5)
        assert await lens_title(client, active) == "ONNX · queued (#1)"
        # the others: the most recently opened first
        assert await lens_title(client, uris[4]) == "ONNX · queued (#2)"
        assert await lens_title(client, uris[0]) == "ONNX · queued (#5)"

        def reported(name: str) -> list[str]:
            return [getattr(report, "message", None) or "" for reports in
                    client.progress_reports.values() if reports
                    and getattr(reports[0], "title", "") == f"Checking {name}"
                    for report in reports[1:]]

        await wait_for(lambda: "queued (#1)" in reported(paths[1].name), 5,
                       "the active document's progress to say it is next")
        close_file(client, closed)
        waited_for = [blocker_uri, *(uri for uri in uris if uri != closed)]
        await wait_for(lambda: len(published_order(publishes, waited_for)) == len(waited_for),
                       what="every open document's diagnostics")
        assert published_order(publishes, [*waited_for, closed]) == \
            [blocker_uri, active, uris[4], uris[2], uris[0]]
        status = await server_status(client)
        assert status["results"]["checked"] == 5  # the blocker and four: not the closed one


async def test_in_a_burst_of_opened_documents_the_active_one_is_checked_first(tmp_path):
    """A folder opened at once, no check running yet: the first documents opened must not
    take the places before the active one is queued. The server reads one didOpen after
    another, and a check waited for the client's answer to its progress before it queued;
    found by bench/run.py --only load, where the active file of 50 took 2.6x a lone check."""
    first, *paths = write_models(tmp_path, 21, 0.1)
    async with served(tmp_path, settings={"maxConcurrentChecks": 1}) as client:
        publishes = record_publishes(client)
        # the server has read its settings and its worker is ready: nothing holds the burst
        first_uri = open_file(client, first)
        await wait_for(lambda: published_order(publishes, [first_uri]) == [first_uri],
                       what="the first document's diagnostics")
        uris = [uri_of(path) for path in paths]
        active = uris[10]
        client.protocol.notify("onnxlens/editors", {"active": active, "visible": [active]})
        for path in paths:
            open_file(client, path)
        await wait_for(lambda: len(published_order(publishes, uris)) == len(uris),
                       what="every document's diagnostics")
        # the active one, then the most recently opened first
        others = [uri for uri in reversed(uris) if uri != active]
        assert published_order(publishes, uris) == [active, *others]


async def test_check_all_targets_publishes_files_never_opened_and_skips_excluded_ones(tmp_path):
    shutil.copy(FIXTURES / "no_translation" / "model.py", tmp_path / "special.py")
    write_models(tmp_path, 1, 0.0)
    write_models(tmp_path / "build", 1, 0.0)  # excluded by default
    async with served(tmp_path) as client:
        summary = await command(client, "onnxlens.checkWorkspace")
        summary = plain(summary)
        assert (summary["files"], summary["targets"], summary["problems"]) == (2, 2, 2)
        special = client.diagnostics[uri_of(tmp_path / "special.py")]
        assert sorted((str(d.code), d.range.start.line + 1) for d in special) == \
            [("ONNX201", 7), ("ONNX201", 8)]
        assert list(client.diagnostics[uri_of(tmp_path / "model_00.py")]) == []
        assert uri_of(tmp_path / "build" / "model_00.py") not in client.diagnostics
        before = (await server_status(client))["results"]
        await command(client, "onnxlens.checkWorkspace")  # unchanged files: reused
        after = (await server_status(client))["results"]
        assert (after["checked"], after["reused"]) == (before["checked"], before["reused"] + 2)


async def test_the_workspace_mode_checks_at_start_and_the_check_stops_when_cancelled(
        tmp_path):
    shutil.copy(FIXTURES / "no_translation" / "model.py", tmp_path / "special.py")
    # nothing opened: the workspace-wide mode checks the file all the same
    async with served(tmp_path, settings={"diagnosticMode": "workspace"}) as client:
        special = uri_of(tmp_path / "special.py")
        await wait_for(lambda: client.diagnostics.get(special), what="the workspace check")
        assert {str(d.code) for d in client.diagnostics[special]} == {"ONNX201"}

    paths = write_models(tmp_path / "slow", 6, 1.0)
    async with served(tmp_path, settings={"maxConcurrentChecks": 1}) as client:
        known = set(client.progress_reports)
        running = asyncio.ensure_future(command(client, "onnxlens.checkWorkspace"))

        def begun() -> object:
            return next((token for token, reports in client.progress_reports.items()
                         if token not in known and reports
                         and getattr(reports[0], "title", "") == "Checking the workspace"),
                        None)

        token = await wait_for(begun, 30, "the workspace check's progress")
        await until_in_queue(client, "running", 1)
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        assert plain(await running) == {"cancelled": True}
        deadline = time.monotonic() + 10
        while (status := await server_status(client))["worker"].get("jobs") or \
                status["queue"]["waiting"]:
            assert time.monotonic() < deadline, "the cancelled workspace check still runs"
            await asyncio.sleep(0.1)
        # no check waits or runs: no further slow check will start
        assert (await server_status(client))["pending"] == {"delayed": 0, "started": 0}
        slow = [uri_of(path) for path in paths]
        assert sum(uri in client.diagnostics for uri in slow) <= 1
