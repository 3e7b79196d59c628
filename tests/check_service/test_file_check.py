"""One file's check (check_service/file_check.py) against a stand-in worker: one job per
target carrying the check's settings, what capture found handed on early with the file's
suppressions, the verdict in the file's order, the fixes tried after it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from check_service.file_check import FileCheck, OnProgress, check_targets, with_fixes_tried
from check_service.files import file_targets
from export_worker.messages import CheckAnswer, JobDone, JobFailed, JobOutcome, JobRequest
from exporter.config.options import Options
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.findings.positions import Range
from exporter.findings.result import CheckResult, StageState, StageStatus, TargetResult
from exporter.source.targets import Target

SOURCE = """\
import torch


# onnx-export: args=(torch.randn(2),)
class First(torch.nn.Module):
    def forward(self, x):
        return x.nonzero()  # onnxlens: ignore[ONNX104]


# onnx-export: args=(torch.randn(2),)
class Second(torch.nn.Module):
    def forward(self, x):
        return x.item()
"""


def _found(tmp_path: Path, text: str = SOURCE) -> FileCheck:
    path = tmp_path / "model.py"
    path.write_text(text)
    return FileCheck(file_targets(path), tmp_path, replace(Options(), timeoutSeconds=42.0,
                                                           fixBudgetSeconds=0.0))


def _finding(target: Target, rule: str, line: int) -> Diagnostic:
    return Diagnostic(rule, f"{rule} in {target.name}",
                      Location(target.path, Range.of(line, 9, line, 20)), target=target.name)


def _result(target: Target, *diagnostics: Diagnostic, **fields: object) -> CheckResult:
    stage = StageStatus("translate", StageState.FAILED if diagnostics else StageState.PASSED)
    return CheckResult(targets=[TargetResult(target.name, target.path, target.definition,
                                             [stage], list(diagnostics), **fields)],  # type: ignore[arg-type]
                       files=[target.path])


async def test_one_job_per_target_with_the_checks_settings_verdicts_in_the_files_order(tmp_path):
    check = _found(tmp_path)
    first, second = check.found.targets
    submitted: list[JobRequest] = []
    second_done = asyncio.Event()

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        submitted.append(request)
        if target.name == "First":  # ends after Second
            await second_done.wait()
            return JobDone("", CheckAnswer(_result(target, _finding(target, "ONNX104", 7))),
                           seconds=1.0, pid=1)
        second_done.set()
        return JobDone("", CheckAnswer(_result(target, _finding(target, "ONNX101", 13))),
                       seconds=1.0, pid=1)

    verdicts: list[str] = []
    results = await check_targets(check, submit, on_verdict=lambda r: verdicts.append(r.name))
    assert verdicts == ["Second", "First"]
    assert [r.name for r in results] == ["First", "Second"]
    assert [(r.kind, r.target, r.timeout, r.text, r.progress) for r in submitted] == [
        ("check", first, 42.0, None, False), ("check", second, 42.0, None, False)]
    # the suppression comment on line 7 silences First's finding; Second's stays
    shown = check.result(results)
    assert [(d.rule, d.location.range.start.line) for d in shown.diagnostics] == [
        ("ONNX101", 13)]


async def test_what_capture_found_is_handed_on_early_with_the_suppressions_applied(tmp_path):
    check = _found(tmp_path)
    check = replace(check, unsaved=True)
    early: list[list[tuple[str, int]]] = []
    release = asyncio.Event()

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        assert on_progress is not None and request.progress and request.text == SOURCE
        line = 7 if target.name == "First" else 13
        found = _result(target, _finding(target, "ONNX104" if line == 7 else "ONNX101", line))
        on_progress(found)
        if target.name == "Second":
            release.set()
        await release.wait()
        return JobDone("", CheckAnswer(found), seconds=1.0, pid=1)

    await check_targets(check, submit, on_early=lambda result: early.append(
        [(d.rule, d.location.range.start.line) for d in result.diagnostics]))
    # First's finding is suppressed even while only it was found; each hand-on holds all
    # targets found so far
    assert early == [[], [("ONNX101", 13)]]


async def test_a_job_the_worker_cancelled_cancels_the_check(tmp_path):
    check = _found(tmp_path)

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        return JobFailed("", "cancelled")

    with pytest.raises(asyncio.CancelledError):
        await check_targets(check, submit)


async def test_a_job_that_ran_out_of_time_names_the_checks_own_limit(tmp_path):
    check = _found(tmp_path)

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        return JobFailed("", "timeout", seconds=42.0)

    results = await check_targets(check, submit)
    assert [d.rule for r in results for d in r.diagnostics] == ["ONNX901", "ONNX901"]
    assert "did not finish within 42 s" in results[0].diagnostics[0].message


def _second_with_a_fix(tmp_path: Path, *first_findings: tuple[str, int]
                       ) -> tuple[FileCheck, list[TargetResult]]:
    """A check with a fix budget whose verdict is: First with ``first_findings``, Second
    failing (ONNX101) with a fix to try."""
    check = _found(tmp_path)
    check = replace(check, settings=replace(check.settings, fixBudgetSeconds=30.0))
    first, second = check.found.targets
    finding = _finding(second, "ONNX101", 13)
    fix = FixCandidate("use-tensor", "return the tensor", "onnxlens",
                       (FixEdit(second.path, Range.of(13, 16, 13, 24), "x"),),
                       answers=("ONNX101", finding.location.range))
    found = [_finding(first, rule, line) for rule, line in first_findings]
    return check, [_result(first, *found).targets[0],
                   _result(second, finding, fix_candidates=[fix]).targets[0]]


async def test_fixes_are_tried_on_the_checked_text_only_for_failing_targets_within_the_budget(
        tmp_path):
    check, verdict = _second_with_a_fix(tmp_path)
    tried: list[JobRequest] = []

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        tried.append(request)
        stages = [StageStatus(name, StageState.PASSED)
                  for name in ("translate", "runtime", "numerics")]
        passed = CheckResult(targets=[TargetResult(target.name, target.path, target.definition,
                                                   stages)], files=[target.path])
        return JobDone("", CheckAnswer(passed), seconds=2.0, pid=1)

    results = await with_fixes_tried(check, verdict, submit)
    assert results is not None
    assert [(r.target.name, r.text is not None and "return x\n" in r.text) for r in tried] == [
        ("Second", True)]
    assert [t.candidate.key for t in results[1].diagnostics[0].fixes] == ["use-tensor"]
    assert results[0] is verdict[0]
    # no budget: nothing is tried
    tried.clear()
    no_budget = replace(check, settings=replace(check.settings, fixBudgetSeconds=0.0))
    assert await with_fixes_tried(no_budget, verdict, submit) is None and tried == []


async def test_the_verdict_shown_again_after_the_fix_trials_keeps_its_suppressions_used(
        tmp_path):
    """The verdict was shown, then shown again with the fixes that work: the second showing
    said the suppression that silenced First's finding "silenced nothing" (ONNX006), as the
    first showing had removed the finding from the verdict itself."""
    check, verdict = _second_with_a_fix(tmp_path, ("ONNX104", 7))

    async def submit(target: Target, request: JobRequest,
                     on_progress: OnProgress | None) -> JobOutcome:
        return JobFailed("", "timeout", seconds=2.0)

    def shown(result: CheckResult) -> list[tuple[str, int]]:
        return [(d.rule, d.location.range.start.line) for d in result.diagnostics]

    assert shown(check.result(verdict)) == [("ONNX101", 13)]
    tried = await with_fixes_tried(check, verdict, submit)
    assert tried is not None
    assert shown(check.result(tried)) == [("ONNX101", 13)]
