"""The server's side of the export worker: start it, submit jobs, cancel them, and bring the
worker back when it dies. The server process itself never imports torch."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_STREAM_LIMIT = 64 * 1024 * 1024  # results of big models are long JSON lines


class WorkerUnavailable(Exception):
    """The worker could not start (e.g. torch is missing); the message says why."""


class WorkerClient:
    def __init__(self, python: str = sys.executable,
                 on_output: Callable[[str], None] | None = None,
                 on_state: Callable[[str], None] | None = None) -> None:
        self.python = python
        self.on_output = on_output or (lambda line: log.debug("worker: %s", line))
        self.on_state = on_state or (lambda state: None)
        self.process: asyncio.subprocess.Process | None = None
        self.ready: asyncio.Future[dict[str, Any]] | None = None
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._readers: list[asyncio.Task[None]] = []
        self._stopping = False
        self.restarts = 0
        # the worker said the toolchain is missing: it exits, and starting it again would
        # only say the same (until the user installs the packages and restarts it)
        self.missing = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    async def start(self) -> None:
        """Start the worker; returns at once (``wait_ready`` waits for its warm-up)."""
        if self.process is not None and self.process.returncode is None:
            return
        self._stopping = False
        self.missing = False
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT,
                                                           env.get("PYTHONPATH")]))
        self.process = await asyncio.create_subprocess_exec(
            self.python, "-m", "lsp_server.worker_main", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
            limit=_STREAM_LIMIT)
        self.on_state("starting")
        self._readers = [asyncio.create_task(self._read_events(self.process)),
                         asyncio.create_task(self._read_output(self.process))]

    async def wait_ready(self) -> dict[str, Any]:
        if self.ready is None:
            raise WorkerUnavailable("the export worker was not started")
        return await asyncio.shield(self.ready)

    async def _read_events(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                break
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                self.on_output(line.decode(errors="replace").rstrip())
                continue
            self._dispatch(message)
        await process.wait()
        self._on_exit(process)

    async def _read_output(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            self.on_output(line.decode(errors="replace").rstrip())

    def _dispatch(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        if event == "ready" and self.ready and not self.ready.done():
            self.ready.set_result(message)
            self.on_state("ready")
        elif event == "missing" and self.ready and not self.ready.done():
            self.missing = True
            self.ready.set_exception(WorkerUnavailable(
                f"the export toolchain is missing in {self.python}: {message.get('detail')}"))
            self.on_state("missing")
        elif (future := self.pending.pop(str(message.get("id")), None)) and not future.done():
            future.set_result(message)

    def _on_exit(self, process: asyncio.subprocess.Process) -> None:
        if process is not self.process:
            return
        detail = f"the export worker exited ({process.returncode})"
        if self.ready and not self.ready.done():
            self.ready.set_exception(WorkerUnavailable(detail))
        for future in self.pending.values():
            if not future.done():
                future.set_result({"failure": "crashed", "detail": detail})
        self.pending.clear()
        self.process = None
        if not self._stopping and not self.missing:
            self.on_state("down")

    async def _send(self, message: dict[str, Any]) -> None:
        if self.process is None or self.process.stdin is None:
            raise WorkerUnavailable("the export worker is not running")
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def submit(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run a job; on cancellation of the awaiting task the job process is killed."""
        await self.wait_ready()
        job_id = f"job-{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[job_id] = future
        try:
            await self._send({**request, "id": job_id})
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.pending.pop(job_id, None)
            with contextlib.suppress(WorkerUnavailable, ConnectionError):
                await self._send({"op": "cancel", "job": job_id})
            raise

    async def status(self) -> dict[str, Any]:
        if self.process is None or self.ready is None or not self.ready.done():
            return {"pid": self.pid, "jobs": [], "ready": False}
        job_id = f"status-{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[job_id] = future
        await self._send({"op": "status", "id": job_id})
        answer = await asyncio.wait_for(future, timeout=10)
        return {**answer.get("status", {}), "ready": True}

    async def stop(self) -> None:
        self._stopping = True
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError, ConnectionError, RuntimeError):
            if process.stdin is not None:
                process.stdin.write(b'{"op": "shutdown"}\n')
                await process.stdin.drain()
        try:
            await asyncio.wait_for(process.wait(), timeout=5)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        for future in self.pending.values():
            if not future.done():
                future.set_result({"failure": "cancelled", "detail": "the worker stopped"})
        self.pending.clear()
        for task in self._readers:
            task.cancel()

    async def restart(self) -> None:
        await self.stop()
        self.restarts += 1
        await self.start()
