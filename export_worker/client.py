"""A client's side of the export worker (the CLI's and the language server's): start it,
submit jobs, cancel them, watch that it still answers, and run a job again once when the
worker itself died under it. A job submitted while the worker is down (it died under an
earlier job) starts a new one. The client process never imports torch."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

from export_worker.messages import (
    RESTART_STATUS,
    Cancel,
    DecodeError,
    JobDone,
    JobFailed,
    JobOutcome,
    JobProgress,
    JobRequest,
    Missing,
    Ready,
    Request,
    Shutdown,
    StatusQuery,
    WorkerStatus,
    decode,
    encode,
)
from export_worker.process_tree import kill_tree, tree_cpu_seconds
from exporter.findings.result import CheckResult

log = logging.getLogger(__name__)

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_STREAM_LIMIT = 64 * 1024 * 1024  # results of big models are long JSON lines

#: how often a ready worker is asked for its status, and how long it may take to answer
#: before it is taken for hung (stopped, or stuck in native code) and replaced
HEARTBEAT_SECONDS = 5.0
LIVENESS_SECONDS = float(os.environ.get("ONNXLENS_WORKER_LIVENESS_SECONDS", "20"))
#: how long a worker that does not answer but works (its processes use CPU: importing the
#: packages its jobs used ahead, on a loaded machine) is waited for before it is replaced
BUSY_LIMIT_SECONDS = 300.0
#: past a job's own timeout, how long the client waits for the worker to report it
DEADLINE_GRACE_SECONDS = 30.0


#: receives a ``JobProgress`` result: what a check found so far
ProgressHandler = Callable[[CheckResult], None]


class WorkerUnavailable(Exception):
    """The worker could not start (e.g. torch is missing); the message says why."""


class _Turns:
    """Jobs share the worker, except a job run again because its worker died under it: that
    one runs alone (it waits for the running jobs, and new ones wait for it), so that a
    model that kills its worker loses it alone the second time, not the jobs beside it."""

    def __init__(self) -> None:
        self.sharing = 0
        self.alone = False
        self.waiting_alone = 0
        self._changed = asyncio.Event()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._changed.wait()

    @contextlib.asynccontextmanager
    async def turn(self, alone: bool) -> AsyncIterator[None]:
        if alone:
            self.waiting_alone += 1
            try:
                await self._until(lambda: not self.alone and not self.sharing)
            finally:
                self.waiting_alone -= 1
                self._wake()  # cancelled: the jobs it held back may go
            self.alone = True
        else:
            await self._until(lambda: not self.alone and not self.waiting_alone)
            self.sharing += 1
        try:
            yield
        finally:
            if alone:
                self.alone = False
            else:
                self.sharing -= 1
            self._wake()


class WorkerClient:
    def __init__(self, python: str = sys.executable,
                 on_output: Callable[[str], None] | None = None,
                 on_state: Callable[[str], None] | None = None,
                 spare: bool = True) -> None:
        self.python = python
        self.on_output = on_output or (lambda line: log.debug("worker: %s", line))
        self.on_state = on_state or (lambda state: None)
        self.spare = spare
        self.process: asyncio.subprocess.Process | None = None
        self.ready: asyncio.Future[Ready] | None = None
        self.pending: dict[str, asyncio.Future[JobOutcome]] = {}
        self.progress_handlers: dict[str, ProgressHandler] = {}
        self.status_waiters: dict[str, asyncio.Future[WorkerStatus]] = {}
        self._ids = itertools.count(1)
        self._tasks: list[asyncio.Task[None]] = []
        self._start_lock = asyncio.Lock()
        self._stopping = False
        self._lost_reason: str | None = None
        self._turns = _Turns()
        self.restarts = 0
        # the worker said the toolchain is missing: it exits, and starting it again would
        # only say the same (until the user installs the packages and restarts it)
        self.missing = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        """Start the worker; returns at once (``wait_ready`` waits for its warm-up)."""
        async with self._start_lock:
            if self.running:
                return
            self._stopping = False
            self.missing = False
            self._lost_reason = None
            loop = asyncio.get_running_loop()
            self.ready = loop.create_future()
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT,
                                                               env.get("PYTHONPATH")]))
            arguments = ["-m", "export_worker.process", *([] if self.spare else ["--no-spare"])]
            self.process = await asyncio.create_subprocess_exec(
                self.python, *arguments, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
                limit=_STREAM_LIMIT)
            self.on_state("starting")
            process = self.process
            self._tasks = [asyncio.create_task(self._read_events(process)),
                           asyncio.create_task(self._read_output(process)),
                           asyncio.create_task(self._watch(process))]

    async def wait_ready(self) -> Ready:
        if self.ready is None:
            raise WorkerUnavailable("the export worker was not started")
        return await asyncio.shield(self.ready)

    # -- events ----------------------------------------------------------------------------

    async def _read_events(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            try:
                line = await process.stdout.readline()
            except ValueError:  # a line past the stream limit: not a message
                continue
            if not line:
                break
            try:
                message = decode(line)
            except DecodeError:
                self.on_output(line.decode(errors="replace").rstrip())
                continue
            self._dispatch(message)
        await process.wait()
        self._on_exit(process)

    async def _read_output(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            self.on_output(line.decode(errors="replace").rstrip())

    def _dispatch(self, message: object) -> None:
        ready = self.ready
        if isinstance(message, Ready) and ready and not ready.done():
            ready.set_result(message)
            self.on_state("ready")
        elif isinstance(message, Missing) and ready and not ready.done():
            self.missing = True
            ready.set_exception(WorkerUnavailable(
                f"the export toolchain is missing in {self.python}: {message.detail}"))
            self.on_state("missing")
        elif isinstance(message, WorkerStatus):
            waiter = self.status_waiters.pop(message.id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        elif isinstance(message, JobProgress):
            handler = self.progress_handlers.get(message.id)
            if handler is not None and message.id in self.pending:
                handler(message.result)
        elif isinstance(message, (JobDone, JobFailed)):
            self.progress_handlers.pop(message.id, None)
            future = self.pending.pop(message.id, None)
            if future is not None and not future.done():
                future.set_result(message)

    def _on_exit(self, process: asyncio.subprocess.Process) -> None:
        if process is not self.process:
            return
        detail = self._lost_reason or _ended(process.returncode)
        if self.ready and not self.ready.done():
            self.ready.set_exception(WorkerUnavailable(detail))
        for job_id, future in self.pending.items():
            if not future.done():
                future.set_result(JobFailed(job_id, "worker-lost", detail))
        self.pending.clear()
        self.progress_handlers.clear()
        self.process = None
        if not self._stopping and not self.missing:
            self.on_state("down")

    # -- liveness --------------------------------------------------------------------------

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        """Once ready, ask for the status every few seconds; a worker that does not answer
        within ``LIVENESS_SECONDS`` (stopped, or stuck outside its loop) is killed, so that
        its jobs are run again by a new one."""
        with contextlib.suppress(Exception):
            await self.wait_ready()
        busy_since: float | None = None  # no answer, but working
        while process is self.process and process.returncode is None:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            if process is not self.process or process.returncode is not None:
                return
            cpu_before = tree_cpu_seconds(process.pid)
            if await self._query(process, LIVENESS_SECONDS) is not None \
                    or process.returncode is not None:
                busy_since = None
                continue
            now = asyncio.get_running_loop().time()
            if _worked(process.pid, cpu_before) and \
                    now - (busy_since or now) < BUSY_LIMIT_SECONDS:
                busy_since = busy_since or now - LIVENESS_SECONDS
                log.info("the export worker (pid %s) is busy: no answer for %.0f s, but it "
                         "works", process.pid, now - busy_since)
                continue
            self._lost_reason = (f"the export worker did not answer for "
                                 f"{LIVENESS_SECONDS:g} s and was replaced")
            log.warning("%s (pid %s)", self._lost_reason, process.pid)
            _kill_tree(process.pid)
            return

    async def _query(self, process: asyncio.subprocess.Process,
                     timeout: float) -> WorkerStatus | None:
        query_id = f"status-{next(self._ids)}"
        waiter: asyncio.Future[WorkerStatus] = asyncio.get_running_loop().create_future()
        self.status_waiters[query_id] = waiter
        try:
            await asyncio.wait_for(self._send(StatusQuery(query_id), process), timeout)
            return await asyncio.wait_for(waiter, timeout)
        except (asyncio.TimeoutError, WorkerUnavailable, ConnectionError):
            return None
        finally:
            self.status_waiters.pop(query_id, None)

    async def status(self, timeout: float = 5.0) -> WorkerStatus | None:
        """The worker's processes; None when it is not ready or does not answer in time."""
        process = self.process
        if process is None or self.ready is None or not self.ready.done() \
                or self.ready.exception() is not None:
            return None
        return await self._query(process, timeout)

    # -- jobs ------------------------------------------------------------------------------

    async def _send(self, message: Request,
                    process: asyncio.subprocess.Process | None = None) -> None:
        process = process or self.process
        if process is None or process.stdin is None or process.returncode is not None:
            raise WorkerUnavailable("the export worker is not running")
        process.stdin.write(encode(message))
        await process.stdin.drain()

    async def submit(self, request: JobRequest,
                     on_progress: ProgressHandler | None = None) -> JobOutcome:
        """Run a job; on cancellation of the awaiting task the job process is killed. A job
        whose worker died under it runs once more in a new worker: the worker's death says
        nothing about the model (a second one does); it runs alone then (``_Turns``).
        ``on_progress`` gets each ``JobProgress`` result (``request.progress``) before the
        outcome."""
        async with self._turns.turn(alone=False):
            outcome = await self._submit_once(request, on_progress)
        if isinstance(outcome, JobFailed) and outcome.failure == "worker-lost" \
                and not self._stopping:
            log.info("the worker was lost during %s; running it again", request.target.name)
            try:
                async with self._turns.turn(alone=True):
                    outcome = await self._submit_once(request, on_progress)
            except WorkerUnavailable as error:
                return JobFailed(outcome.id, "worker-lost", str(error))
            if isinstance(outcome, JobFailed) and outcome.failure == "worker-lost":
                outcome = replace(outcome, detail=f"{outcome.detail}, twice")
        return outcome

    async def _submit_once(self, request: JobRequest,
                           on_progress: ProgressHandler | None) -> JobOutcome:
        if self.process is None and self.ready is not None and not self._stopping \
                and not self.missing:  # it died (under an earlier job): a new one
            await self.start()
        await self.wait_ready()
        job_id = f"job-{next(self._ids)}"
        future: asyncio.Future[JobOutcome] = asyncio.get_running_loop().create_future()
        self.pending[job_id] = future
        if on_progress is not None:
            self.progress_handlers[job_id] = on_progress
        deadline = request.timeout + DEADLINE_GRACE_SECONDS if request.timeout else None
        try:
            await self._send(replace(request, id=job_id))
            return await asyncio.wait_for(asyncio.shield(future), deadline)
        except asyncio.TimeoutError:  # the worker did not enforce the job's own timeout
            self.pending.pop(job_id, None)
            self.progress_handlers.pop(job_id, None)
            with contextlib.suppress(WorkerUnavailable, ConnectionError):
                await self._send(Cancel(job_id))
            return JobFailed(job_id, "timeout", "the worker did not stop the job in time",
                             float(deadline or 0))
        except asyncio.CancelledError:
            self.pending.pop(job_id, None)
            self.progress_handlers.pop(job_id, None)
            with contextlib.suppress(WorkerUnavailable, ConnectionError):
                await self._send(Cancel(job_id))
            raise

    # -- stopping --------------------------------------------------------------------------

    async def stop(self) -> None:
        self._stopping = True
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(WorkerUnavailable, ConnectionError, RuntimeError):
            await asyncio.wait_for(self._send(Shutdown(), process), 5)
        try:
            await asyncio.wait_for(process.wait(), timeout=5)
        except asyncio.TimeoutError:
            _kill_tree(process.pid)
            await process.wait()
        for job_id, future in self.pending.items():
            if not future.done():
                future.set_result(JobFailed(job_id, "cancelled", "the worker stopped"))
        self.pending.clear()
        self.progress_handlers.clear()
        for task in self._tasks:
            task.cancel()

    async def restart(self) -> None:
        await self.stop()
        self.restarts += 1
        await self.start()


def _ended(returncode: int | None) -> str:
    if returncode == RESTART_STATUS:
        return ("the export worker was replaced: the installed packages changed, or its warm "
                "imports changed global state")
    if returncode is not None and returncode < 0:
        try:
            return f"the export worker was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            pass
    return f"the export worker exited ({returncode})"


def _kill_tree(pid: int) -> None:
    """SIGKILL the worker and every process below it (a stopped process gets it too): its
    jobs would die with it (PR_SET_PDEATHSIG in export_worker.process), not what they
    started."""
    kill_tree(pid)


def _worked(pid: int, cpu_before: float | None) -> bool:
    """Whether ``pid``'s processes used CPU since ``cpu_before`` (a stopped or blocked worker
    uses none; a worker importing ahead on a loaded machine does)."""
    cpu_now = tree_cpu_seconds(pid)
    return cpu_before is not None and cpu_now is not None and cpu_now > cpu_before + 0.05
