"""Trying a failed check's fixes (check_service/fix_trials.py) against a stand-in worker: each
candidate's edited text is checked as a job of its own, judged by its result, within the fix
budget; only a fix that works is attached, to the finding it answers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from check_service.fix_trials import try_fixes, with_trials
from check_service.outcomes import Limits
from export_worker.messages import CheckAnswer, JobDone, JobFailed, JobOutcome, JobRequest
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.findings.positions import Range
from exporter.findings.result import CheckResult, StageState, StageStatus, TargetResult
from exporter.findings.rules import Severity
from exporter.source.targets import discover

PATH = Path("/w/m.py")


def _text(x: str, above: str = "") -> str:
    """The file with ``x = <x>`` on its first line and its target ``T`` below."""
    return f"x = {x}\ny = 2\n{above}\n# onnx-export: args=()\ndef T():\n    return x\n"


TEXT = _text("1")
TARGET = discover(PATH, TEXT).targets[0]
FAILURE = Diagnostic("ONNX102", "specialized", Location(PATH, Range.of(2, 1, 2, 2)), target="T")


def _candidate(key: str, text: str, path: Path = PATH) -> FixCandidate:
    return FixCandidate(key, f"set {key}", "onnxlens", (FixEdit(path, Range.of(1, 5, 1, 6),
                                                                text),),
                        answers=("ONNX102", Range.of(2, 1, 2, 2)))


def _checked(stages_pass: bool) -> CheckResult:
    state = StageState.PASSED if stages_pass else StageState.FAILED
    target = TargetResult("T", PATH, Range.of(1, 1, 1, 2), [
        StageStatus(name, state) for name in ("translate", "runtime", "numerics")])
    return CheckResult(targets=[target], files=[PATH])


async def test_each_fix_is_checked_on_its_edited_text_and_only_one_that_works_is_shown():
    submitted: list[JobRequest] = []

    async def submit(request: JobRequest) -> JobOutcome:
        submitted.append(request)
        if request.text == _text("2"):
            return JobFailed("", "timeout", seconds=22.0)
        return JobDone("", CheckAnswer(_checked(request.text == _text("3"))),
                       seconds=4.0, pid=1)

    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FAILURE],
                          fix_candidates=[
                              _candidate("elsewhere", "9", Path("/w/other.py")),
                              _candidate("works", "3"), _candidate("same edit", "3"),
                              _candidate("slow", "2"), _candidate("late", "4")])
    request = JobRequest("check", TARGET, "/w", text=TEXT, timeout=60.0, progress=True)
    trials = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert [(t.candidate.key, t.verdict) for t in trials] == [
        ("elsewhere", "fails"), ("works", "works"), ("slow", "fails"), ("late", "not-tried")]
    assert trials[0].detail == "the edit does not apply: it edits another file"
    assert trials[2].detail.startswith("The check of `T` did not finish within 26 s")
    assert trials[3].detail == "the fix budget (30 s) was spent"
    # the edited text, in a job of its own, with what is left of the budget as its timeout;
    # the same edit under another name is not checked again
    assert [(r.text, r.timeout, r.progress) for r in submitted] == [
        (_text("3"), 30.0, False), (_text("2"), 26.0, False)]
    (shown,) = with_trials(result, trials).diagnostics
    assert [trial.candidate.key for trial in shown.fixes] == ["works"]


async def test_a_fix_whose_check_still_fails_a_stage_does_not_work():
    async def submit(request: JobRequest) -> JobOutcome:
        return JobDone("", CheckAnswer(_checked(False)), seconds=1.0, pid=1)

    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FAILURE],
                          fix_candidates=[_candidate("partial", "5")])
    request = JobRequest("check", TARGET, "/w", text=TEXT, timeout=60.0)
    (trial,) = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert trial.verdict == "fails"
    assert trial.detail == "the translate stage did not pass: it did not run"
    assert with_trials(result, [trial]).diagnostics[0].fixes == ()


@pytest.mark.parametrize(("edit", "where"), [
    ("# a line above the target\n", (6, 5)),
    ("\n\n\n", (8, 5)),
    ("", (5, 5)),
], ids=["one-line", "three-lines", "none"])
async def test_a_trial_checks_the_target_where_the_edit_put_it(edit, where):
    """The worker checks the target it is given: a fix that moves it sends it where it now is."""
    submitted: list[JobRequest] = []

    async def submit(request: JobRequest) -> JobOutcome:
        submitted.append(request)
        return JobDone("", CheckAnswer(_checked(True)), seconds=1.0, pid=1)

    moving = FixCandidate("moves", "move", "onnxlens",
                          (FixEdit(PATH, Range.of(3, 1, 3, 1), edit),),
                          answers=("ONNX102", Range.of(2, 1, 2, 2)))
    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FAILURE],
                          fix_candidates=[moving])
    request = JobRequest("check", TARGET, "/w", text=TEXT, timeout=60.0)
    (trial,) = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert trial.verdict == "works"
    (sent,) = submitted
    assert sent.target.name == "T" and sent.text == _text("1", edit)
    definition = sent.target.definition.start
    assert (definition.line, definition.column) == where
    assert sent.target == discover(PATH, sent.text).targets[0]


async def test_a_fix_that_removes_the_target_fails_without_a_check():
    async def submit(request: JobRequest) -> JobOutcome:
        raise AssertionError("no check for a file without the target")

    removing = FixCandidate("removes", "remove", "onnxlens",
                            (FixEdit(PATH, Range.of(5, 1, 7, 1), ""),),
                            answers=("ONNX102", Range.of(2, 1, 2, 2)))
    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FAILURE],
                          fix_candidates=[removing])
    request = JobRequest("check", TARGET, "/w", text=TEXT, timeout=60.0)
    (trial,) = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert (trial.verdict, trial.detail) == ("fails", "the edited file has no target 'T'")


FALLBACK = Diagnostic("ONNX705", "runs on the CPU", Location(PATH, Range.of(6, 12, 6, 13)),
                      target="T", severity=Severity.WARNING)


def _still(where: Range | None) -> CheckResult:
    """A check whose stages all passed, with no error: the warning left at ``where``."""
    checked = _checked(True)
    if where is not None:
        checked.targets[0].diagnostics.append(replace(FALLBACK, location=Location(PATH, where)))
    return checked


@pytest.mark.parametrize(("edit", "left", "verdict"), [
    ("3", None, "works"),
    ("3", Range.of(6, 12, 6, 13), "fails"),  # the warning it answers is still there
    ("3", Range.of(6, 1, 6, 4), "works"),  # a warning elsewhere on the line is another one
    ("3\n\n", Range.of(8, 12, 8, 13), "fails"),  # the edit moved the warning two lines down
    ("3\n\n", Range.of(6, 12, 6, 13), "works"),
], ids=["gone", "left", "other", "moved-left", "moved-gone"])
async def test_a_fix_for_a_warning_works_only_once_that_warning_is_gone(edit, left, verdict):
    """A runtime's fallback (ONNX705) is a warning: its fix has no error to remove, so it
    works only when the edited check no longer reports that warning where it now is."""
    async def submit(request: JobRequest) -> JobOutcome:
        return JobDone("", CheckAnswer(_still(left)), seconds=1.0, pid=1)

    candidate = FixCandidate("opset", "export at the default opset", "onnxlens",
                             (FixEdit(PATH, Range.of(1, 5, 1, 6), edit),),
                             answers=("ONNX705", FALLBACK.location.range))
    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FALLBACK],
                          fix_candidates=[candidate])
    request = JobRequest("check", TARGET, "/w", text=TEXT, timeout=60.0)
    (trial,) = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert trial.verdict == verdict
    if verdict == "fails":
        assert trial.detail == "ONNX705: runs on the CPU"
    (shown,) = with_trials(result, [trial]).diagnostics
    assert [t.candidate.key for t in shown.fixes] == (["opset"] if verdict == "works" else [])
