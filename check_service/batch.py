"""``onnxlens check`` on the worker: every target in its own fork, ``jobs`` at a time.

Targets are found in this process (``exporter.source.targets`` reads the source, it imports
nothing); each one is checked by a job of the warm worker, so a crash, an ``os._exit``, a
native endless loop or a memory hog costs that target only (``check_service.outcomes``).
A file's results are handed on as soon as it and every file before it are done: the report
streams in a stable order, whatever order the jobs finish in.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from check_service.file_check import (
    FileCheck,
    OnProgress,
    Submit,
    check_targets,
    with_fixes_tried,
)
from check_service.files import file_targets
from export_worker.client import WorkerClient, WorkerUnavailable
from export_worker.messages import JobOutcome, JobRequest, Ready
from exporter.config.options import Options
from exporter.config.schema import COMMAND_LINE_LOAD_SECONDS
from exporter.findings.result import CheckResult, TargetResult
from exporter.source.targets import Target


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``: a split of the targets for CI matrices that
    every machine computes alike, by a hash of each target's path relative to the workspace
    and its name (a file's own diagnostics, by its path alone)."""

    index: int
    count: int

    def holds(self, workspace: Path, path: Path, target: str) -> bool:
        try:
            relative = path.relative_to(workspace).as_posix()
        except ValueError:
            relative = path.as_posix()
        return zlib.crc32(f"{relative}::{target}".encode()) % self.count == self.index - 1


@dataclass(frozen=True)
class BatchOptions:
    workspace: Path
    settings: Options  # the limits, export options and fix budget of every job
    jobs: int
    shard: Shard | None = None
    #: files of which only these targets are checked (``onnxlens check FILE::TARGET``)
    only: Mapping[Path, frozenset[str]] = field(default_factory=dict)


@dataclass
class BatchResult:
    result: CheckResult
    ready: Ready | None  # None: interrupted while the worker warmed up
    unfinished: int = 0  # targets not checked: the run was interrupted (SIGINT, SIGTERM)


#: gets each file's result, its suppression comments applied
FileDone = Callable[[CheckResult], None]


def check_files(files: list[Path], options: BatchOptions,
                on_file: FileDone = lambda result: None,
                python: str = sys.executable) -> BatchResult:
    """Check ``files``; ``on_file`` gets each file's result (and its targets) in order, as
    soon as it can; what it changes in the result is what the returned result holds.
    Raises ``WorkerUnavailable`` when the worker cannot start (``.missing``: no toolchain)."""
    return asyncio.run(_check_files(files, options, on_file, python))


@dataclass
class _File:
    check: FileCheck
    verdicts: dict[str, TargetResult] = field(default_factory=dict)  # by target, as they come
    result: CheckResult | None = None  # once its check ended

    @property
    def targets(self) -> list[Target]:
        return self.check.found.targets

    def so_far(self) -> CheckResult:
        """The result of the targets checked so far (an interrupted run)."""
        return self.check.result([self.verdicts[t.name] for t in self.targets
                                  if t.name in self.verdicts])


async def _check_files(files: list[Path], options: BatchOptions,
                       on_file: FileDone, python: str) -> BatchResult:
    with _interruptions() as stop:
        return await _check_files_until(files, options, on_file, python, stop)


@contextlib.contextmanager
def _interruptions() -> Iterator[asyncio.Event]:
    """An event set by SIGINT or SIGTERM for the whole run, the worker's warm-up included (a
    SIGTERM then ended the run with no message and no report)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for number in signals:
        loop.add_signal_handler(number, stop.set)
    try:
        yield stop
    finally:
        for number in signals:
            loop.remove_signal_handler(number)


async def _check_files_until(files: list[Path], options: BatchOptions, on_file: FileDone,
                             python: str, stop: asyncio.Event) -> BatchResult:
    client = WorkerClient(python=python, spare=False)
    await client.start()
    try:
        # while the worker warms up
        entries = [entry for entry in (_file(path, options) for path in files)
                   if options.shard is None or _keep_shard(entry, options)]
        ready = await _unless_interrupted(client.wait_ready(), stop)
        if ready is None:
            found = sum(len(entry.targets) for entry in entries)
            return BatchResult(CheckResult(), None, unfinished=found)
        in_order = _InOrder(entries, on_file)
        submit = _slot_limited(client, options.jobs)

        async def run(entry: _File) -> None:
            await _check_file(entry, submit)
            in_order.hand_on_finished()

        in_order.hand_on_finished()  # files without targets before the first job
        unfinished = await _until_done_or_interrupted([
            asyncio.ensure_future(run(entry)) for entry in entries], stop)
        in_order.hand_on_finished()
        if unfinished:  # what was checked still reaches the report
            in_order.hand_on_the_rest()
    finally:
        await client.stop()
    result = CheckResult()
    for entry in entries:
        if entry.result is not None:
            result.extend(entry.result)
    left = sum(t.name not in entry.verdicts for entry in entries for t in entry.targets)
    return BatchResult(result, ready, left)


@dataclass
class _InOrder:
    """Hands each file's result on in the files' order, as soon as it and every file before
    it are done (the report streams in a stable order, whatever order the jobs end in)."""

    entries: list[_File]
    on_file: FileDone
    handed_on: int = 0

    def hand_on_finished(self) -> None:
        while self.handed_on < len(self.entries) \
                and (result := self.entries[self.handed_on].result) is not None:
            self.on_file(result)
            self.handed_on += 1

    def hand_on_the_rest(self) -> None:
        """An interrupted run: the files not done yet, with the targets checked so far."""
        for entry in self.entries[self.handed_on:]:
            entry.result = entry.result or entry.so_far()
            self.on_file(entry.result)
        self.handed_on = len(self.entries)


def _slot_limited(client: WorkerClient, jobs: int) -> Submit:
    """Runs each job in ``client``'s worker, at most ``jobs`` at once."""
    slots = asyncio.Semaphore(max(1, jobs))

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        async with slots:
            return await client.submit(request)

    return submit


async def _check_file(entry: _File, submit: Submit) -> None:
    """The file's verdict (each target's kept as it comes), then its fixes tried."""
    def on_verdict(checked: TargetResult) -> None:
        entry.verdicts[checked.name] = checked

    verdict = await check_targets(entry.check, submit, on_verdict=on_verdict)
    tried = await with_fixes_tried(entry.check, verdict, submit)
    entry.result = entry.check.result(tried or verdict)


async def _unless_interrupted(ready: Awaitable[Ready], stop: asyncio.Event) -> Ready | None:
    """The worker's ``Ready``, or None when ``stop`` is set first."""
    waited = asyncio.ensure_future(ready)
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waited, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if waited.done():
        return waited.result()
    waited.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waited
    return None


async def _until_done_or_interrupted(tasks: list[asyncio.Future[None]],
                                     stop: asyncio.Event) -> bool:
    """Wait for ``tasks``; once ``stop`` is set (SIGINT, SIGTERM) cancel the rest (their
    processes are killed) and return True, so that the report of what finished is still
    written. When one fails (stdout closed under the text report, or a bug) the rest are
    cancelled before it is raised."""
    jobs = asyncio.gather(*tasks)
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    waiting: set[asyncio.Future[Any]] = {jobs, stopped}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    interrupted = not jobs.done()
    failed = jobs.done() and jobs.exception() is not None
    if interrupted:
        jobs.cancel()  # and so every task
    elif failed:
        for task in tasks:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if interrupted:
        with contextlib.suppress(asyncio.CancelledError):
            await jobs  # retrieved, so that asyncio does not log it as never retrieved
    if failed:
        jobs.result()
    return interrupted


def _keep_shard(entry: _File, options: BatchOptions) -> bool:
    """Leave in ``entry`` what the shard holds; whether anything is left."""
    shard, workspace = options.shard, options.workspace.resolve()
    assert shard is not None
    found = entry.check.found
    found.targets = [t for t in found.targets if shard.holds(workspace, found.path, t.name)]
    if not shard.holds(workspace, found.path, ""):
        found.diagnostics = []
    entry.result = None if found.targets else entry.check.result([])
    return bool(found.targets or found.diagnostics)


def _file(path: Path, options: BatchOptions) -> _File:
    """``path`` read and its targets found (those ``only`` names, if it names any); a file
    with no target to check already has its result."""
    found = file_targets(path, options.only.get(path.resolve()))
    entry = _File(FileCheck(found, options.workspace, options.settings,
                            load_default=COMMAND_LINE_LOAD_SECONDS))
    if not found.targets:
        entry.result = entry.check.result([])
    return entry


__all__ = ["BatchOptions", "BatchResult", "Shard", "WorkerUnavailable", "check_files"]
