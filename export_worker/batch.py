"""``onnxlens check`` on the worker: every target in its own fork, ``jobs`` at a time.

Targets are found in this process (``exporter.source.targets`` reads the source, it imports
nothing); each one is checked by a job of the warm worker, so a crash, an ``os._exit``, a
native endless loop or a memory hog costs that target only (``export_worker.outcomes``).
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

from export_worker.client import WorkerClient, WorkerUnavailable
from export_worker.fix_trials import try_fixes, with_trials
from export_worker.messages import JobOutcome, JobRequest, Ready
from export_worker.outcomes import Limits, target_result
from exporter.config.options import ExportOptions
from exporter.findings.result import CheckResult, TargetResult
from exporter.source.targets import Target, discover
from exporter.source.text import decoding_problem, read_source


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
    settings: ExportOptions
    timeout: float | None  # seconds per target; None: no limit
    memory_limit_mb: int | None
    jobs: int
    shard: Shard | None = None
    fix_budget: float = 0.0  # seconds per failing target to try fixes (docs/fixes.md)
    #: files of which only these targets are checked (``onnxlens check FILE::TARGET``)
    only: Mapping[Path, frozenset[str]] = field(default_factory=dict)


@dataclass
class BatchResult:
    result: CheckResult
    ready: Ready | None  # None: interrupted while the worker warmed up
    targets: list[Target]  # what was found, for the report's suppressions
    unfinished: int = 0  # targets not checked: the run was interrupted (SIGINT, SIGTERM)


FileDone = Callable[[CheckResult, list[Target]], None]


def check_files(files: list[Path], options: BatchOptions,
                on_file: FileDone = lambda result, targets: None,
                python: str = sys.executable) -> BatchResult:
    """Check ``files``; ``on_file`` gets each file's result (and its targets) in order, as
    soon as it can; what it changes in the result is what the returned result holds.
    Raises ``WorkerUnavailable`` when the worker cannot start (``.missing``: no toolchain)."""
    return asyncio.run(_check_files(files, options, on_file, python))


@dataclass
class _File:
    path: Path
    result: CheckResult
    targets: list[Target]
    done: list[TargetResult | None]

    @property
    def finished(self) -> bool:
        return all(result is not None for result in self.done)


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
        entries = [entry for entry in (_discover(path, options.only) for path in files)
                   if options.shard is None or _keep_shard(entry, options)]
        ready = await _unless_interrupted(client.wait_ready(), stop)
        if ready is None:
            found = [t for entry in entries for t in entry.targets]
            return BatchResult(CheckResult(), None, found, unfinished=len(found))
        limits = Limits(options.timeout, options.memory_limit_mb)
        slots = asyncio.Semaphore(max(1, options.jobs))
        emitted = 0

        def emit_finished() -> None:
            nonlocal emitted
            while emitted < len(entries) and entries[emitted].finished:
                entry = entries[emitted]
                entry.result.targets = [r for r in entry.done if r is not None]
                on_file(entry.result, entry.targets)
                emitted += 1

        async def run(entry: _File, index: int) -> None:
            target = entry.targets[index]
            request = JobRequest("check", str(target.path), str(options.workspace),
                                 target.name, settings=options.settings,
                                 timeout=options.timeout,
                                 memory_limit_mb=options.memory_limit_mb)
            async with slots:
                outcome = await client.submit(request)
            checked = target_result(target, outcome, limits)
            if checked.fix_candidates and options.fix_budget > 0:
                checked = await _with_fixes_tried(client, slots, request, checked, limits,
                                                  options.fix_budget)
            entry.done[index] = checked
            emit_finished()

        emit_finished()  # files without targets before the first job
        unfinished = await _until_done_or_interrupted([
            asyncio.ensure_future(run(entry, index))
            for entry in entries for index in range(len(entry.targets))], stop)
        emit_finished()
        if unfinished:  # what was checked still reaches the report
            for entry in entries[emitted:]:
                entry.result.targets = [r for r in entry.done if r is not None]
                on_file(entry.result, [t for t, r in zip(entry.targets, entry.done) if r])
    finally:
        await client.stop()
    result = CheckResult()
    for entry in entries:
        result.extend(entry.result)
    left = sum(result is None for entry in entries for result in entry.done)
    return BatchResult(result, ready, [t for entry in entries for t in entry.targets], left)


async def _with_fixes_tried(client: WorkerClient, slots: asyncio.Semaphore,
                            request: JobRequest, checked: TargetResult, limits: Limits,
                            budget: float) -> TargetResult:
    """``checked`` with the fixes its check proposed tried, each in a job of its own that
    waits for a slot as the checks do (docs/fixes.md)."""

    async def submit(trial: JobRequest) -> JobOutcome:
        async with slots:
            return await client.submit(trial)

    text = read_source(checked.path)
    return with_trials(checked, await try_fixes(request, text, checked, submit, limits, budget))


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
    entry.targets = [t for t in entry.targets if shard.holds(workspace, entry.path, t.name)]
    entry.done = [None] * len(entry.targets)
    if not shard.holds(workspace, entry.path, ""):
        entry.result.file_diagnostics = []
    return bool(entry.targets or entry.result.file_diagnostics)


def _discover(path: Path, only: Mapping[Path, frozenset[str]]) -> _File:
    path = path.resolve()
    result = CheckResult(files=[path])
    problem = decoding_problem(path)
    if problem is not None:
        result.file_diagnostics.append(problem)
        return _File(path, result, [], [])
    found = discover(path, read_source(path))
    result.file_diagnostics.extend(found.diagnostics)
    targets = [t for t in found.targets if path not in only or t.name in only[path]]
    return _File(path, result, targets, [None] * len(targets))


__all__ = ["BatchOptions", "BatchResult", "Shard", "WorkerUnavailable", "check_files"]
