"""The session's export worker: started while the workspace is trusted, started again when it
stops, and what its start tells the user."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from lsprotocol import types

from export_worker.client import ProgressHandler, WorkerClient, WorkerUnavailable
from export_worker.messages import JobFailed, JobOutcome, JobRequest, Ready, WorkerStatus
from exporter.versions import install_hint

MAX_REVIVE_DELAY = 30.0  # seconds between attempts to start a worker that keeps dying


class WorkerHost(Protocol):
    """What the supervisor uses of the session (OnnxLensServer is one)."""

    @property
    def trusted(self) -> bool: ...
    @property
    def shut_down(self) -> bool: ...
    def log(self, message: str, level: str = "info") -> None: ...
    def tell(self, message: str,
             kind: types.MessageType = types.MessageType.Warning) -> None: ...
    def notify_state(self) -> None: ...


class WorkerSupervisor:
    def __init__(self, host: WorkerHost) -> None:
        self._host = host
        self._client = WorkerClient(on_output=self._output, on_state=self._state_changed)
        self.state = "stopped"  # the client's status bar shows it (onnxlens/state)
        self._restart_lock = asyncio.Lock()
        self._told_toolchain: str | None = None
        self._revive_delay = 0.0
        self._background: set[asyncio.Future[Any]] = set()

    @property
    def pid(self) -> int | None:
        return self._client.pid

    @property
    def started(self) -> bool:
        """Started at least once (it may be warming up, or down)."""
        return self._client.ready is not None

    def identity(self) -> str:
        """The worker process: results are reused only from the same one
        (lsp_server/reuse.py)."""
        return f"{self._client.pid}/{self._client.restarts}"

    async def start(self) -> None:
        if not self._host.trusted:
            return
        await self._client.start()
        self._spawn(self._report_start())

    async def stop(self) -> None:
        """Stop the worker until ``start``: its state is "stopped" (not "down", which a
        worker that died has, and which brings a new one)."""
        await self._client.stop()
        self.state = "stopped"

    async def restart(self) -> Ready:
        await self._client.restart()
        return await self._client.wait_ready()

    async def status(self) -> WorkerStatus | None:
        return await self._client.status()

    async def submit(self, request: JobRequest,
                     on_progress: ProgressHandler | None = None) -> JobOutcome:
        try:
            return await self._client.submit(request, on_progress)
        except WorkerUnavailable as error:
            return JobFailed("", "worker-lost", str(error))

    def _spawn(self, work: Any) -> None:
        """Run a coroutine in the background, keeping a reference until it is done."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _output(self, line: str) -> None:
        self._host.log(f"worker: {line}", "debug")

    def _state_changed(self, state: str) -> None:
        self.state = state
        self._host.notify_state()
        self._host.log(f"export worker {state}", "info" if state != "down" else "warning")
        if state == "ready":
            self._revive_delay = 0.0
        if state == "down" and self._host.trusted:
            self._spawn(self._revive())

    async def _revive(self) -> None:
        """Start the worker again: at once the first time, then after 1, 2, 4 ... 30 s while
        it keeps dying before it is ready (a broken environment must not spin). A check
        requested meanwhile does not wait: it starts a new worker (WorkerClient.submit)."""
        delay, self._revive_delay = self._revive_delay, min(max(1.0, self._revive_delay * 2),
                                                            MAX_REVIVE_DELAY)
        if delay:
            self._host.log(f"the export worker keeps stopping before it is ready; starting "
                           f"a new one in {delay:g} s (or at the next check)", "warning")
        await asyncio.sleep(delay)
        async with self._restart_lock:
            if self._client.process is None and self._host.trusted \
                    and not self._host.shut_down:
                await self._client.start()

    async def _report_start(self) -> None:
        try:
            ready = await self._client.wait_ready()
            self._host.log(f"export worker ready in {ready.seconds} s (pid {ready.pid})")
        except WorkerUnavailable as error:
            self._host.tell(f"onnxlens cannot check models: {error}. Install torch, onnx, "
                            "onnxscript and onnxruntime into the interpreter that runs the "
                            f"server ({install_hint()}).", types.MessageType.Error)
            return
        # an untested torch, or a capability that fell back: said once per worker start
        for warning in ready.warnings:
            self._host.log(warning, "warning")
        message = ready.toolchain.message
        if message and message != self._told_toolchain:
            self._told_toolchain = message
            self._host.log(message, "warning")
            self._host.tell(message, types.MessageType.Info)
