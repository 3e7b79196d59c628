"""Trying a failed check's fixes (check_service/fix_trials.py) against a stand-in worker: each
candidate's edited text is checked as a job of its own, judged by its result, within the fix
budget; only a fix that works is attached, to the finding it answers."""

from __future__ import annotations

from pathlib import Path

from check_service.fix_trials import try_fixes, with_trials
from check_service.outcomes import Limits
from export_worker.messages import CheckAnswer, JobDone, JobFailed, JobOutcome, JobRequest
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.findings.positions import Range
from exporter.findings.result import CheckResult, StageState, StageStatus, TargetResult

PATH = Path("/w/m.py")
TEXT = "x = 1\ny = 2\n"
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
        if request.text == "x = 2\ny = 2\n":
            return JobFailed("", "timeout", seconds=22.0)
        return JobDone("", CheckAnswer(_checked(request.text == "x = 3\ny = 2\n")),
                       seconds=4.0, pid=1)

    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FAILURE],
                          fix_candidates=[
                              _candidate("elsewhere", "9", Path("/w/other.py")),
                              _candidate("works", "3"), _candidate("same edit", "3"),
                              _candidate("slow", "2"), _candidate("late", "4")])
    request = JobRequest("check", str(PATH), "/w", "T", text=TEXT, timeout=60.0, progress=True)
    trials = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert [(t.candidate.key, t.verdict) for t in trials] == [
        ("elsewhere", "fails"), ("works", "works"), ("slow", "fails"), ("late", "not-tried")]
    assert trials[0].detail == "the edit does not apply: it edits another file"
    assert trials[2].detail.startswith("The check of `T` did not finish within 26 s")
    assert trials[3].detail == "the fix budget (30 s) was spent"
    # the edited text, in a job of its own, with what is left of the budget as its timeout;
    # the same edit under another name is not checked again
    assert [(r.text, r.timeout, r.progress) for r in submitted] == [
        ("x = 3\ny = 2\n", 30.0, False), ("x = 2\ny = 2\n", 26.0, False)]
    (shown,) = with_trials(result, trials).diagnostics
    assert [trial.candidate.key for trial in shown.fixes] == ["works"]


async def test_a_fix_whose_check_still_fails_a_stage_does_not_work():
    async def submit(request: JobRequest) -> JobOutcome:
        return JobDone("", CheckAnswer(_checked(False)), seconds=1.0, pid=1)

    result = TargetResult("T", PATH, Range.of(1, 1, 1, 2), diagnostics=[FAILURE],
                          fix_candidates=[_candidate("partial", "5")])
    request = JobRequest("check", str(PATH), "/w", "T", text=TEXT, timeout=60.0)
    (trial,) = await try_fixes(request, TEXT, result, submit, Limits(60.0, None), 30.0)
    assert trial.verdict == "fails"
    assert trial.detail == "the translate stage did not pass: it did not run"
    assert with_trials(result, [trial]).diagnostics[0].fixes == ()
