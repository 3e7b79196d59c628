"""Scheduling checks: per document, a newer request cancels the older check; results carry
the version they were computed for, and a result superseded by a newer request is dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from check_service.file_check import FileCheck, Submit, check_targets, with_fixes_tried
from check_service.files import FileTargets
from export_worker.messages import JobOutcome, JobRequest
from exporter.config.options import Options
from exporter.findings.diagnostics import Diagnostic, merge_duplicates
from exporter.findings.result import CheckResult, TargetResult
from exporter.source.targets import Target
from exporter.source.text import decoding_problem
from lsp_server.admission import UNMEASURED_CHECK_MB, CheckQueue, Focus, Priority
from lsp_server.convert import path_of
from lsp_server.discovery import TargetDiscovery
from lsp_server.progress import Progress, ProgressReporter
from lsp_server.reuse import ResultCache, installed_packages
from lsp_server.store import DocumentState
from lsp_server.supervisor import WorkerSupervisor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """One check's view of its document, taken when the check starts: the text and version
    the editor sent, and the settings of that moment (its workspace folder's), which every job
    of the check runs with and its messages and fix budget follow (the limits a failure
    message names are those the job had). Which rules are shown, at which severity, follows
    the settings of the moment it is published."""

    uri: str
    version: int | None
    text: str
    settings: Options
    opened: bool = False  # the document was just opened (lsp_server/admission.py)

    @property
    def path(self) -> Path:
        return path_of(self.uri)


class CheckHost(Protocol):
    """What the scheduler uses of the session (OnnxLensServer is one)."""

    def settings_for(self, path: Path) -> Options: ...
    @property
    def settings_loaded(self) -> asyncio.Event: ...
    @property
    def discovery(self) -> TargetDiscovery: ...
    @property
    def worker(self) -> WorkerSupervisor: ...
    @property
    def progress_reporter(self) -> ProgressReporter: ...
    def is_open(self, uri: str) -> bool: ...
    def is_excluded(self, path: Path) -> bool: ...
    def file_check(self, found: FileTargets, settings: Options) -> FileCheck: ...
    def filter(self, diagnostics: list[Diagnostic], path: Path) -> list[Diagnostic]: ...
    def replace_diagnostics(self, origin: str, version: int | None,
                            diagnostics: list[Diagnostic]) -> None: ...
    def after_check(self) -> None: ...
    def check_ended(self, uri: str) -> None: ...
    def notify_state(self) -> None: ...
    def refresh_code_lens(self) -> None: ...


class Checker:
    def __init__(self, host: CheckHost, focus: Focus) -> None:
        self.host = host
        self.focus = focus
        self.documents: dict[str, DocumentState] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.results = ResultCache()
        self.queue = CheckQueue(self._priority, self._queue_changed)
        #: each target's peak memory in its last check: what its next check is expected to need
        self.expected_mb: dict[tuple[str, str], int] = {}
        self._progress: dict[str, tuple[Progress, str]] = {}  # uri -> (progress, its message)
        self._positions: dict[str, int | None] = {}

    def _priority(self, uri: str) -> Priority:
        return self.focus.priority(uri, self.host.is_open(uri))

    def _queue_changed(self) -> None:
        """A document's place in the queue shows in its CodeLens and its progress."""
        positions = {uri: self.queue.position(uri) for uri in self.tasks}
        if positions != self._positions:
            self._positions = positions
            self.host.refresh_code_lens()
        for uri, (progress, shown) in list(self._progress.items()):
            place = positions.get(uri)
            message = f"queued (#{place})" if place is not None else "checking"
            if message != shown:
                self._progress[uri] = (progress, message)
                self.host.progress_reporter.report(progress, message)

    def state(self, uri: str) -> DocumentState:
        return self.documents.setdefault(uri, DocumentState())

    # -- requests ------------------------------------------------------------------------

    def request(self, uri: str, version: int | None, text: str, *, delay: float = 0.0,
                opened: bool = False) -> asyncio.Task[None] | None:
        """Check the document (after ``delay`` seconds, for typing; ``opened``: it was just
        opened, lsp_server/admission.py); cancels older checks."""
        self.cancel(uri)
        log.debug("check requested: %s v%s (delay %s)", uri, version, delay)
        state = self.state(uri)
        state.requested_version = version
        if delay > 0:
            loop = asyncio.get_running_loop()
            self.timers[uri] = loop.call_later(delay, self._start, uri, version, text, opened)
            return None
        return self._start(uri, version, text, opened)

    def _start(self, uri: str, version: int | None, text: str,
               opened: bool = False) -> asyncio.Task[None]:
        self.timers.pop(uri, None)
        task = asyncio.create_task(self._check(uri, version, text, opened))
        self.tasks[uri] = task
        task.add_done_callback(lambda done: self._forget(uri, done))
        return task

    def _forget(self, uri: str, task: asyncio.Task[None]) -> None:
        if self.tasks.get(uri) is task:
            del self.tasks[uri]
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("check of %s failed", uri, exc_info=error)

    def cancel(self, uri: str) -> None:
        timer = self.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        task = self.tasks.pop(uri, None)
        if task is not None:
            log.debug("check cancelled: %s", uri)
            task.cancel()

    def close(self, uri: str) -> None:
        self.cancel(uri)
        self.documents.pop(uri, None)

    def cancel_all(self) -> None:
        """Cancel every check, started or waiting out its typing delay (shutdown, trust
        withdrawn: a waiting one started later and ran against a stopped worker)."""
        for uri in {*self.tasks, *self.timers}:
            self.cancel(uri)

    def running_check(self, uri: str) -> asyncio.Task[None] | None:
        return self.tasks.get(uri)

    def forget_all_results(self) -> None:
        """No result is reused any more (the trust changed)."""
        self.results.clear()

    def configure(self, slots: int, budget_mb: int) -> None:
        """How many checks may run at once, and the memory they may be expected to take."""
        self.queue.configure(slots, budget_mb)

    def focus_changed(self) -> None:
        """The user looks at other editors: the queued checks take their new order."""
        self.queue.reorder()

    # -- what the client is shown --------------------------------------------------------

    def checking(self) -> list[str]:
        """The documents being checked, sorted."""
        return sorted(uri for uri, state in self.documents.items() if state.checking)

    def queue_position(self, uri: str) -> int | None:
        return self.queue.position(uri)

    def result_counts(self) -> dict[str, int]:
        return {"checked": self.results.checked, "reused": self.results.reused}

    def pending_counts(self) -> dict[str, int]:
        """Checks waiting out their typing delay, and checks started and not ended: with both
        at 0, no check runs or will start until a new request (the tests' proof that nothing
        more is published, without waiting for it)."""
        return {"delayed": len(self.timers), "started": len(self.tasks)}

    def queue_counts(self) -> dict[str, int]:
        queue = self.queue
        return {"slots": queue.slots, "budgetMB": queue.budget_mb,
                "running": len(queue.running),
                "waiting": sum(not t.settling for t in queue.waiting),
                "settling": sum(t.settling for t in queue.waiting),
                "mostRunning": queue.most_running}

    # -- one check -----------------------------------------------------------------------

    async def _check(self, uri: str, version: int | None, text: str, opened: bool) -> None:
        """Check one version of a document: publish what its text shows at once, else run its
        targets (what they find early is published meanwhile), publish the verdict, then try
        the fixes its failures proposed (check_service.file_check)."""
        host = self.host
        state = self.state(uri)
        await host.settings_loaded.wait()
        snapshot = Snapshot(uri, version, text, host.settings_for(path_of(uri)), opened)
        check = await self._discover(snapshot)
        if check is None:
            return
        self._set_checking(state, True)
        host.refresh_code_lens()
        results = await self._run_targets(snapshot, check)
        if state.requested_version != version:
            return  # a newer request superseded this one
        self._publish(snapshot, check.result(results))
        host.check_ended(uri)
        tried = await with_fixes_tried(check, results, self._submitter(snapshot))
        if tried is not None and state.requested_version == version:
            self._publish(snapshot, check.result(tried))

    async def _discover(self, snapshot: Snapshot) -> FileCheck | None:
        """The document's check; None when there is nothing to run, after publishing what
        the file alone shows (excluded: nothing; undecodable; no target: its own findings)."""
        path = snapshot.path
        if self.host.is_excluded(path):  # `exclude`: never checked, nothing shown
            self._publish(snapshot, CheckResult(files=[path]))
            return None
        problem = decoding_problem(path)
        if problem is not None:
            self._publish(snapshot, CheckResult(file_diagnostics=[problem], files=[path]))
            return None
        found = await self.host.discovery.discovered(snapshot.uri, snapshot.version,
                                                     snapshot.text)
        if not found.targets:  # discovered once per version
            self._publish(snapshot, CheckResult(file_diagnostics=found.diagnostics,
                                                files=[path]))
            return None
        return self.host.file_check(FileTargets.of(path, snapshot.text, found),
                                    snapshot.settings)

    def _set_checking(self, state: DocumentState, checking: bool) -> None:
        state.checking = checking
        self.host.notify_state()

    async def _run_targets(self, snapshot: Snapshot, check: FileCheck) -> list[TargetResult]:
        """Every target's result, under the document's progress (an open document's: a file
        nobody opened is checked in the background, under the workspace check's progress);
        the document is no longer checking when it returns or is cancelled."""
        host, uri = self.host, snapshot.uri
        state = self.state(uri)
        # Queued before anything is awaited: a folder opened at once is queued whole before
        # the first check is chosen (lsp_server/admission.py), also while the client answers
        # the progress requests below.
        gathered = asyncio.ensure_future(check_targets(
            check, self._submitter(snapshot), self._early_publisher(snapshot)))
        # cancelled before it was awaited, it ends with an error nobody reads: not a problem
        gathered.add_done_callback(lambda done: done.cancelled() or done.exception())
        progress: Progress | None = None
        try:
            progress = await self._begin_progress(uri, check, gathered)
            results = await gathered
        except asyncio.CancelledError:
            gathered.cancel()
            if progress:
                self._progress.pop(uri, None)
                host.progress_reporter.end(progress, "Cancelled")
            self._set_checking(state, False)
            if self.tasks.get(uri) is asyncio.current_task():
                host.refresh_code_lens()
            raise
        self._set_checking(state, False)
        if progress:
            self._progress.pop(uri, None)
            problems = sum(len(r.diagnostics) for r in results) + len(check.found.diagnostics)
            host.progress_reporter.end(progress, f"{problems} problem(s)")
        return results

    async def _begin_progress(self, uri: str, check: FileCheck,
                              gathered: asyncio.Future[Any]) -> Progress | None:
        """An open document's progress (its message changes only while it waits in the
        queue); the user cancelling it cancels ``gathered``."""
        if not self.host.is_open(uri):
            return None
        progress = await self.host.progress_reporter.begin(
            f"Checking {path_of(uri).name}", f"{len(check.found.targets)} export target(s)")
        if progress:
            self._progress[uri] = (progress, "checking")
            self._queue_changed()
            if progress.cancelled is not None:
                progress.cancelled.add_done_callback(lambda _: gathered.cancel())
        return progress

    def _early_publisher(self, snapshot: Snapshot) -> Callable[[CheckResult], None]:
        """What capture or translate found, shown while the check goes on; never for a
        request a newer one superseded."""
        state = self.state(snapshot.uri)
        current = asyncio.current_task()

        def found_early(found_so_far: CheckResult) -> None:
            if state.requested_version == snapshot.version \
                    and self.tasks.get(snapshot.uri) is current:
                self._publish(snapshot, found_so_far, final=False)

        return found_early

    def _submitter(self, snapshot: Snapshot) -> Submit:
        def submit(target: Target, request: JobRequest,
                   on_progress: Callable[[CheckResult], None] | None) -> Awaitable[JobOutcome]:
            return self._submit(snapshot.uri, target, request, snapshot.opened, on_progress)
        return submit

    async def _submit(self, uri: str, target: Target, request: JobRequest, opened: bool,
                      on_progress: Callable[[CheckResult], None] | None = None
                      ) -> JobOutcome:
        """``request``'s outcome: reused (lsp_server/reuse.py), else run when the queue
        admits it."""
        outcome: JobOutcome | None = self.results.get(request, self.host.worker.identity())
        if outcome is not None:
            log.debug("check reused: %s %s", target.path, target.name)
            return outcome
        installed = installed_packages()
        key = (str(target.path), target.name)
        async with self.queue.slot(uri, self.expected_mb.get(key, UNMEASURED_CHECK_MB),
                                   opened):
            outcome = await self.host.worker.submit(request, on_progress)
        if outcome.peak_rss_mb > 0:
            self.expected_mb[key] = outcome.peak_rss_mb
        # the worker that ran it: a document opened while the worker started queued
        # before the worker had a pid
        self.results.put(request, self.host.worker.identity(), outcome, installed)
        log.debug("check ran: %s %s in %s s", target.path, target.name, outcome.seconds)
        return outcome

    def _publish(self, check: Snapshot, result: CheckResult, final: bool = True) -> None:
        """Show ``result``'s diagnostics, as the current settings select them (and rate
        them); a ``final`` one also becomes the document's state (CodeLens, hover, the
        commands' counts), seen through the same settings. An early one
        with nothing to show is not published: the previous diagnostics stay until the check
        ends."""
        diagnostics = self.host.filter(merge_duplicates(result.diagnostics), check.path)
        if not final:
            if not diagnostics:
                return
            # marked for clients that tell a check's result from what it found so far
            diagnostics = [replace(d, data=replace(d.data, early=True)) for d in diagnostics]
        log.debug("check published: %s v%s%s", check.uri, check.version,
                  "" if final else " (early)")
        if final:
            state = self.state(check.uri)
            # what CodeLens, hover and the commands count: what the Problems panel shows
            state.targets = {t.name: replace(t, diagnostics=self.host.filter(t.diagnostics,
                                                                              check.path))
                             for t in result.targets}
            state.version = check.version
        self.host.replace_diagnostics(check.uri, check.version, diagnostics)
        if final:
            self.host.refresh_code_lens()
            self.host.after_check()

