"""One version of one file checked, the same way for the CLI and the server: a job per target
(what capture and translate found handed on early), the verdict with the file's suppression
comments applied, then the fixes its failures proposed tried (docs/fixes.md).

Where a job runs is the front end's: ``Submit`` is the CLI's slot-limited worker client or the
server's queue with result reuse.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from check_service.files import FileTargets
from check_service.fix_trials import try_fixes, with_trials
from check_service.outcomes import JobCancelled, target_result
from check_service.requests import job_limits, job_request
from export_worker.messages import JobKind, JobOutcome, JobRequest
from exporter.config.options import Options
from exporter.config.schema import DEFAULT_LOAD_SECONDS
from exporter.findings.result import CheckResult, TargetResult
from exporter.source.notebooks import CellSource
from exporter.source.suppressions import apply_suppressions
from exporter.source.targets import Target
from exporter.source.text import source_lines, split_lines

#: what a job found so far (capture, translate), for a check that shows findings early
OnProgress = Callable[[CheckResult], None]
#: runs one job of ``target`` (the front end's worker, slots and reuse)
Submit = Callable[[Target, JobRequest, OnProgress | None], Awaitable[JobOutcome]]


@dataclass(frozen=True)
class FileCheck:
    """One file as it was read (``found``) and the settings every job of its check runs with
    (its limits, export options and fix budget)."""

    found: FileTargets
    workspace: Path
    settings: Options
    unsaved: bool = False  # the text is the editor's: each job carries it
    notebook_cells: Sequence[CellSource] = ()
    record_inputs: bool = False  # for the server's result reuse (export_worker/inputs.py)
    #: the seconds the model's own code has when no timeout is set (``job_limits``)
    load_default: float = DEFAULT_LOAD_SECONDS
    #: other files' lines, for suppression comments of findings located in them
    lines_of: Callable[[Path], Sequence[str]] = source_lines

    @property
    def path(self) -> Path:
        return self.found.path

    def request(self, kind: JobKind, target: Target, **fields: Any) -> JobRequest:
        """A ``kind`` job on ``target`` as this check sees the file."""
        return job_request(kind, target, self.workspace, self.settings,
                           text=self.found.text if self.unsaved else None,
                           notebook_cells=self.notebook_cells, load_default=self.load_default,
                           **fields)

    def result(self, targets: Sequence[TargetResult]) -> CheckResult:
        """The file's result with its suppression comments applied: those of the text that
        was checked (later edits bring their own check). A suppression is said to silence
        nothing (ONNX006) only in a file one of whose targets was checked: not in what a
        check found early, or an interrupted run checked, before any of them was."""
        # copies: the suppressions filter the copies' findings, and the same verdicts are
        # shown again after the fix trials (filtered twice, a suppression silenced nothing)
        result = CheckResult(targets=[replace(t, diagnostics=list(t.diagnostics))
                                      for t in targets],
                             file_diagnostics=list(self.found.diagnostics), files=[self.path])
        names = {t.name for t in targets}
        text = tuple(split_lines(self.found.text))
        result.file_diagnostics += apply_suppressions(
            result, [t for t in self.found.targets if t.name in names],
            lambda file: text if file == self.path else self.lines_of(file))
        return result


async def check_targets(check: FileCheck, submit: Submit,
                        on_early: OnProgress | None = None,
                        on_verdict: Callable[[TargetResult], None] | None = None,
                        ) -> list[TargetResult]:
    """Every target's verdict, in the file's order; ``on_early`` gets the file's result so
    far each time a target's capture or translate found something, ``on_verdict`` each
    target's verdict as it comes (what an interrupted run still reports). A job the worker
    cancelled cancels the check."""
    early: dict[str, TargetResult] = {}

    def found_early(target: Target) -> OnProgress | None:
        if on_early is None:
            return None

        def handed_on(found_so_far: CheckResult) -> None:
            (early[target.name],) = found_so_far.targets
            on_early(check.result(list(early.values())))
        return handed_on

    async def verdict(target: Target) -> TargetResult:
        request = check.request("check", target, record_inputs=check.record_inputs,
                                progress=on_early is not None)
        outcome = await submit(target, request, found_early(target))
        try:
            checked = target_result(target, outcome, job_limits(check.settings, check.load_default))
        except JobCancelled:
            raise asyncio.CancelledError from None
        if on_verdict is not None:
            on_verdict(checked)
        return checked

    return list(await asyncio.gather(*(verdict(target) for target in check.found.targets)))


async def with_fixes_tried(check: FileCheck, results: Sequence[TargetResult],
                           submit: Submit) -> list[TargetResult] | None:
    """``results`` with the fixes their failures proposed tried within the fix budget, each
    in a job of its own; None when there was nothing to try."""
    budget = check.settings.fixBudgetSeconds
    failing = [(target, result) for target, result in zip(check.found.targets, results)
               if result.fix_candidates]
    if budget <= 0 or not failing:
        return None

    async def tried(target: Target, checked: TargetResult) -> TargetResult:
        async def trial(request: JobRequest) -> JobOutcome:
            return await submit(target, request, None)

        request = check.request("check", target, record_inputs=check.record_inputs)
        limits = job_limits(check.settings, check.load_default)
        return with_trials(checked, await try_fixes(request, check.found.text, checked, trial,
                                                    limits, budget))

    done = {r.name: r for r in await asyncio.gather(*(tried(t, r) for t, r in failing))}
    return [done.get(result.name, result) for result in results]
