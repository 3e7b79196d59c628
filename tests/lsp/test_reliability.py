"""A crash, a hang or a memory blow-up in a model never takes the server down: each test
asserts the diagnostic, that the server still answers, and that the next check succeeds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.conftest import REPO, process_exists
from tests.lsp.conftest import (
    SERVER,
    change_and_save,
    close_file,
    diagnostics_for,
    open_file,
    server_status,
    session,
    spans,
    wait_for,
)

LSP_FIXTURES = Path(__file__).parent / "fixtures"
TIMEOUT = 6
LIVENESS = 8  # seconds a worker may take to answer before it is replaced
RELIABILITY_SERVER = ClientServerConfig(
    server_command=SERVER.server_command,
    server_env={**SERVER.server_env, "ONNXLENS_WORKER_LIVENESS_SECONDS": str(LIVENESS)})


@pytest_lsp.fixture(config=RELIABILITY_SERVER, scope="module")
async def client(lsp_client: LanguageClient):
    async with session(lsp_client, REPO,
                       settings={"timeoutSeconds": TIMEOUT, "memoryLimitMB": 1536}):
        yield


async def _job_pid(client: LanguageClient) -> int:
    async def running() -> int | None:
        jobs = (await server_status(client))["worker"].get("jobs") or []
        return jobs[0]["pid"] if jobs else None

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pid = await running()
        if pid:
            return pid
    raise AssertionError("no check process appeared")


async def _still_answers(client: LanguageClient) -> None:
    status = await server_status(client)
    assert status["trusted"] is True


async def test_killing_the_check_process_twenty_times(client: LanguageClient):
    path = LSP_FIXTURES / "slow" / "model.py"
    text = path.read_text()
    uri = open_file(client, path, text)
    try:
        for attempt in range(20):
            if attempt:
                change_and_save(client, uri, text + f"\n# edit {attempt}\n", attempt + 1)
            os.kill(await _job_pid(client), signal.SIGKILL)
            found = await diagnostics_for(client, uri, lambda d: len(d) == 1)
            assert [(d.code, d.range.start.line + 1) for d in found] == [("ONNX902", 7)]
            assert "killed by signal SIGKILL" in found[0].message
            await _still_answers(client)
        change_and_save(client, uri, text, 30)
        assert await diagnostics_for(client, uri, timeout=120) == []
    finally:
        close_file(client, uri)


async def test_a_check_whose_worker_died_runs_again(client: LanguageClient):
    """The worker's death says nothing about the model: the check runs once more in a new
    worker (it used to get ONNX902, blaming the model, and was not checked again)."""
    path = LSP_FIXTURES / "slow" / "model.py"
    # A text not checked before: the previous test's clean result would be reused.
    uri = open_file(client, path, path.read_text() + "\n# the worker dies\n")
    try:
        await _job_pid(client)
        worker = (await server_status(client))["worker"]["pid"]
        os.kill(worker, signal.SIGKILL)
        assert await diagnostics_for(client, uri, timeout=120) == []
        await wait_for(lambda: not process_exists(worker), 10, "the old worker to go")
        assert (await server_status(client))["worker"]["pid"] != worker
    finally:
        close_file(client, uri)


async def test_a_worker_that_dies_twice_under_a_check_gets_onnx902_not_blaming_the_model(
        client: LanguageClient):
    path = LSP_FIXTURES / "slow" / "model.py"
    uri = open_file(client, path, path.read_text() + "\n# the worker dies twice\n")
    try:
        for _ in range(2):
            await _job_pid(client)
            os.kill((await server_status(client))["worker"]["pid"], signal.SIGKILL)
        (diagnostic,) = await diagnostics_for(client, uri, lambda d: len(d) == 1, timeout=120)
        assert (diagnostic.code, diagnostic.range.start.line + 1) == ("ONNX902", 7)
        assert "`Slow` was not checked: the export worker was killed by SIGKILL, twice" \
            in diagnostic.message
        assert "says nothing about the model" in diagnostic.message
        change_and_save(client, uri, path.read_text(), 2)
        assert await diagnostics_for(client, uri, timeout=120) == []
    finally:
        close_file(client, uri)


async def test_a_stopped_worker_is_replaced_and_every_request_answered(client: LanguageClient):
    """A worker stopped with SIGSTOP used to leave the check without diagnostics and
    onnxlens/status without an answer until a manual restart."""
    path = LSP_FIXTURES / "slow" / "model.py"
    uri = open_file(client, path, path.read_text() + "\n# the worker stops\n")
    try:
        await _job_pid(client)
        worker = (await server_status(client))["worker"]["pid"]
        os.kill(worker, signal.SIGSTOP)
        status = await server_status(client)  # answered while the worker is stopped
        assert status["worker"]["ready"] is False
        # replaced after LIVENESS seconds without an answer; the check runs again
        assert await diagnostics_for(client, uri, timeout=LIVENESS + 120) == []
        await wait_for(lambda: not process_exists(worker), 10, "the stopped worker to go")
        assert (await server_status(client))["worker"]["ready"] is True
    finally:
        close_file(client, uri)


async def test_endless_loop_times_out(client: LanguageClient):
    uri = open_file(client, LSP_FIXTURES / "forever" / "model.py")
    try:
        pid = await _job_pid(client)
        started = time.monotonic()
        found = await diagnostics_for(client, uri, lambda d: len(d) == 1, timeout=TIMEOUT + 30)
        elapsed = time.monotonic() - started
        # stopped in Python, so located where the loop ran (the worker kills native code)
        (diagnostic,) = found
        assert diagnostic.code == "ONNX901" and diagnostic.range.start.line + 1 in (7, 8)
        assert f"within {TIMEOUT:g} s" in diagnostic.message
        assert elapsed < TIMEOUT + 2
        await wait_for(lambda: not process_exists(pid), 5, "the looping process to go")
        await _still_answers(client)
    finally:
        close_file(client, uri)


async def test_unbounded_allocation_hits_the_memory_limit(client: LanguageClient):
    uri = open_file(client, LSP_FIXTURES / "hog" / "model.py")
    try:
        found = await diagnostics_for(client, uri, lambda d: len(d) == 1, timeout=60)
        assert spans(found) == [("ONNX903", 5, 6, 5, 9, 1)]
        assert "1536 MB" in found[0].message
        await _still_answers(client)
    finally:
        close_file(client, uri)


async def test_exit_at_import(client: LanguageClient):
    uri = open_file(client, LSP_FIXTURES / "exits" / "model.py")
    try:
        (diagnostic,) = await diagnostics_for(client, uri, lambda d: len(d) == 1)
        assert diagnostic.code == "ONNX902" and "exited with status 3" in diagnostic.message
        await _still_answers(client)
    finally:
        close_file(client, uri)


async def test_syntax_error_and_undecodable_file(client: LanguageClient):
    syntax = open_file(client, LSP_FIXTURES / "syntax" / "model.py")
    latin_path = LSP_FIXTURES / "latin1" / "model.py"
    latin = open_file(client, latin_path, latin_path.read_bytes().decode("utf-8", "replace"))
    try:
        (error,) = await diagnostics_for(client, syntax, lambda d: len(d) == 1)
        assert (error.code, error.range.start.line + 1, error.range.start.character) == (
            "ONNX002", 6, 24)
        (unreadable,) = await diagnostics_for(client, latin, lambda d: len(d) == 1)
        assert (unreadable.code, unreadable.range.start.line + 1) == ("ONNX002", 4)
        assert "can't decode byte 0xe9" in unreadable.message
    finally:
        close_file(client, syntax)
        close_file(client, latin)
    clean = open_file(client, REPO / "tests" / "exporter" / "fixtures" / "clean" / "factory.py")
    try:
        assert await diagnostics_for(client, clean) == []
    finally:
        close_file(client, clean)


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


@pytest.mark.parametrize("shut_down, code", [(True, 0), (False, 1)])
def test_exit_code_follows_the_protocol(tmp_path, shut_down, code):
    """LSP: `exit` after `shutdown` exits 0, without it 1 (it exited 0 either way)."""
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"capabilities": {}, "rootUri": tmp_path.as_uri(),
                            "initializationOptions": {"trusted": False}}},
                {"jsonrpc": "2.0", "method": "initialized", "params": {}}]
    if shut_down:
        messages.append({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    messages.append({"jsonrpc": "2.0", "method": "exit"})
    done = subprocess.run(SERVER.server_command, input=b"".join(map(_frame, messages)),
                          env=SERVER.server_env, capture_output=True, timeout=60)
    assert done.returncode == code, done.stderr.decode()[-2000:]


async def test_an_error_response_names_the_error_without_the_servers_traceback(
        client: LanguageClient, tmp_path):
    """pygls put the server's Python traceback into the response (issue "nothing lost")."""
    with pytest.raises(Exception) as failed:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="onnxlens.writeSarif", arguments=[str(tmp_path)]))
    assert f"{tmp_path} is a directory; give a file name inside it" in str(failed.value)
    assert not getattr(failed.value, "data", None)
    assert sorted(tmp_path.iterdir()) == []  # nothing written, no temporary file left


def _responses(stdout: bytes) -> dict[int, dict]:
    """The responses (by id) in a server's stdout."""
    found = {}
    for chunk in stdout.split(b"Content-Length: ")[1:]:
        _, _, body = chunk.partition(b"\r\n\r\n")
        message = json.loads(body)
        if "id" in message and "method" not in message:
            found[message["id"]] = message
    return found


def test_a_request_with_malformed_params_is_answered(tmp_path):
    """pygls dropped a request it could not read (a hover at line -1): the client waited
    forever (issue "nothing lost")."""
    uri = (tmp_path / "model.py").as_uri()
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"capabilities": {}, "rootUri": tmp_path.as_uri(),
                            "initializationOptions": {"trusted": False}}},
                {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                    "textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                     "text": "x = 1\n"}}},
                {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {
                    "textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}}},
                {"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": {
                    "textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}},
                {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
                {"jsonrpc": "2.0", "method": "exit"}]
    done = subprocess.run(SERVER.server_command, input=b"".join(map(_frame, messages)),
                          env=SERVER.server_env, capture_output=True, timeout=60)
    responses = _responses(done.stdout)
    assert responses[2]["error"] == {
        "code": -32602, "message": "textDocument/hover: the params do not match the protocol"}
    assert "error" not in responses[3] and "error" not in responses[4]  # still serving
    assert done.returncode == 0


def _downs(client: LanguageClient) -> int:
    """How many times the server logged that its worker went down."""
    return sum(m.message == "export worker down" for m in client.log_messages)


async def _kill_the_next_worker(client: LanguageClient, killed: list[int]) -> None:
    """SIGKILL the worker that starts after those in ``killed``, before it is ready, and
    wait until the server saw it go."""
    downs = _downs(client)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        worker = (await server_status(client))["worker"]
        if worker["pid"] and worker["pid"] not in killed and not worker["ready"]:
            os.kill(worker["pid"], signal.SIGKILL)
            killed.append(worker["pid"])
            await wait_for(lambda: _downs(client) > downs, 30, "the worker to go down")
            return
    raise AssertionError("no new worker started")


async def test_a_check_requested_while_the_worker_is_down_runs_in_a_new_one(
        client: LanguageClient):
    """Issue "nothing lost, round 3", item 9: after the worker was killed during a check and
    during its run again, the next edit and save was answered at once with the previous
    ONNX902, without a check, while the server waited to start a new worker (it waits 1, 2,
    4 ... s while workers die before they are ready). The check now starts a new worker
    itself, and the log says that the server waits."""
    path = LSP_FIXTURES / "slow" / "model.py"
    text = path.read_text()
    uri = open_file(client, path, text + "\n# its workers keep dying\n")
    try:
        await _job_pid(client)
        killed = [(await server_status(client))["worker"]["pid"]]
        downs = _downs(client)
        os.kill(killed[0], signal.SIGKILL)
        await wait_for(lambda: _downs(client) > downs, 30, "the worker to go down")
        await _kill_the_next_worker(client, killed)  # the one its run again waits for
        (lost,) = await diagnostics_for(client, uri, lambda d: len(d) == 1, timeout=120)
        assert (lost.code, lost.range.start.line + 1) == ("ONNX902", 7)
        assert "`Slow` was not checked: the export worker was killed by SIGKILL" in lost.message
        for _ in range(2):  # the server waits 1 s, then 2 s, to start another; then 4 s
            await _kill_the_next_worker(client, killed)
        change_and_save(client, uri, text + "\n# edited while no worker runs\n", 2)
        assert await diagnostics_for(client, uri, timeout=120) == []
        assert (await server_status(client))["worker"]["pid"] not in killed
        assert any("keeps stopping before it is ready; starting a new one in" in m.message
                   for m in client.log_messages)
    finally:
        close_file(client, uri)


def _alive_in(path: Path) -> bool:
    """Whether the process whose pid ``path`` holds still runs."""
    return process_exists(int(path.read_text()))


async def test_a_check_ends_with_its_process_and_what_it_started_ends_with_it(
        client: LanguageClient, tmp_path):
    """Item 4: a module that leaves a child and a grandchild in a session of its own
    running (fixtures/lingers) held the job's answer pipe: a false ONNX901 at the timeout,
    a job the worker kept for ever (so it never forked its spare again), and both processes
    outlived the server. The check ends when its process ends, and what it started ends
    with it."""
    model = tmp_path / "model.py"
    model.write_text((LSP_FIXTURES / "lingers" / "model.py").read_text())
    uri = open_file(client, model)
    try:
        assert await diagnostics_for(client, uri, timeout=60) == []
        assert not _alive_in(tmp_path / "child.pid")
        assert not _alive_in(tmp_path / "grandchild.pid")

        async def idle_with_a_spare() -> bool:
            worker = (await server_status(client))["worker"]
            return worker["ready"] and not worker["jobs"] and worker["spare"] is not None

        deadline = time.monotonic() + 60
        while not await idle_with_a_spare():
            assert time.monotonic() < deadline, "the worker kept a job, or no spare"
            await asyncio.sleep(0.2)
    finally:
        close_file(client, uri)
