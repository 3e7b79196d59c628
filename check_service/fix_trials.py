"""Trying the fixes a failed check proposed (docs/fixes.md), for both front ends.

Each candidate is an edit of the target's file. A trial checks the edited text as the editor's
unsaved text is checked: one more check job, in a fresh fork of the warm worker, so nothing of
a trial reaches the verdict or another trial. The trials start after the verdict was handed on
and stop when their checks have run for the fix budget. A candidate *works* when its check
exports, runs in ONNX Runtime and matches eager PyTorch (at the other sizes too, with declared
dynamic dimensions) with no error left, and the finding it answers is gone (a warning, such as
a runtime's fallback, too); only those are attached to the finding they answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from check_service.outcomes import Limits, failure_message
from export_worker.messages import CheckAnswer, JobDone, JobOutcome, JobRequest
from exporter.findings.fixes import FixCandidate, FixEdit, FixTrial
from exporter.findings.positions import Range
from exporter.findings.result import StageState, TargetResult
from exporter.findings.rules import Severity
from exporter.source.edits import EditConflict, apply_edits
from exporter.source.targets import Target, discover

Submit = Callable[[JobRequest], Awaitable[JobOutcome]]

#: a trial is not started with less time than this left of the budget: it could not finish
MIN_TRIAL_SECONDS = 5.0
#: the stages a fix must pass: the model exported, ran in ONNX Runtime and matched PyTorch
_MUST_PASS = ("translate", "runtime", "numerics")


async def try_fixes(checked: JobRequest, text: str, result: TargetResult, submit: Submit,
                    limits: Limits, budget_seconds: float) -> list[FixTrial]:
    """Try ``result``'s candidates in order, each as ``checked`` (the request that gave
    ``result``) with its edits made to ``text``, until their checks have run for
    ``budget_seconds`` in all (time a trial waits for a free slot does not count: a batch of
    many targets would spend the budget waiting)."""
    spent = 0.0
    trials: list[FixTrial] = []
    tried: set[str] = set()
    for candidate in result.fix_candidates:
        left = budget_seconds - spent
        if left < MIN_TRIAL_SECONDS:
            trials.append(FixTrial(candidate, "not-tried", detail=(
                f"the fix budget ({budget_seconds:g} s) was spent")))
            continue
        try:
            if any(edit.path != result.path for edit in candidate.edits):
                raise EditConflict("it edits another file")
            edited = apply_edits(text, candidate.edits)
        except EditConflict as error:
            trials.append(FixTrial(candidate, "fails", detail=f"the edit does not apply: {error}"))
            continue
        if edited in tried:  # the same edit under another name: tried already
            continue
        tried.add(edited)
        target = _target_in(edited, checked.target)
        if target is None:
            trials.append(FixTrial(candidate, "fails", detail=(
                f"the edited file has no target {result.name!r}")))
            continue
        timeout = min(checked.timeout, left) if checked.timeout else left
        outcome = await submit(replace(checked, target=target, text=edited, timeout=timeout,
                                       progress=False, id=""))
        spent += outcome.seconds
        trials.append(judge(candidate, result.name, outcome,
                            Limits(timeout, limits.memory_limit_mb), outcome.seconds))
    return trials


def _target_in(edited: str, target: Target) -> Target | None:
    """``target`` as found in the edited text (an edit may move it, or change its pragma)."""
    found = discover(target.path, edited)
    return next((t for t in found.targets if t.name == target.name), None)


def judge(candidate: FixCandidate, target: str, outcome: JobOutcome, limits: Limits,
          seconds: float) -> FixTrial:
    """A trial's verdict from its check: works only with every stage that matters passed and
    no error at all."""
    if not isinstance(outcome, JobDone) or not isinstance(outcome.answer, CheckAnswer):
        return FixTrial(candidate, "fails", seconds, failure_message(target, outcome, limits)[1])
    checked = next((t for t in outcome.answer.result.targets
                    if t.name == target), None)
    if checked is None:
        return FixTrial(candidate, "fails", seconds, f"the edited file has no target {target!r}")
    errors = [d for d in checked.diagnostics if d.severity == Severity.ERROR]
    if errors:
        first = errors[0]
        return FixTrial(candidate, "fails", seconds, f"{first.rule}: {first.message}")
    if candidate.answers is not None:
        rule, answered = candidate.answers
        where = moved(answered, candidate.edits)
        left = next((d for d in checked.diagnostics
                     if d.rule == rule and d.location.range == where), None)
        if left is not None:
            return FixTrial(candidate, "fails", seconds, f"{left.rule}: {left.message}")
    for name in _MUST_PASS:
        stage = checked.stage(name)
        if stage is None or stage.state != StageState.PASSED:
            why = stage.reason if stage is not None and stage.reason else "it did not run"
            return FixTrial(candidate, "fails", seconds, f"the {name} stage did not pass: {why}")
    return FixTrial(candidate, "works", seconds)


def moved(range_: Range, edits: tuple[FixEdit, ...]) -> Range:
    """Where ``range_`` is once ``edits`` are made: the lines edits above it add or remove."""
    shift = sum(edit.text.count("\n") - (edit.range.end.line - edit.range.start.line)
                for edit in edits if edit.range.end.line < range_.start.line)
    return Range.of(range_.start.line + shift, range_.start.column,
                    range_.end.line + shift, range_.end.column)


def with_trials(result: TargetResult, trials: list[FixTrial]) -> TargetResult:
    """``result`` holding ``trials``, each fix that works attached to the finding it answers
    (else to the target's first error)."""
    diagnostics = list(result.diagnostics)
    for trial in trials:
        if not trial.works:
            continue
        index = _answered(result, trial.candidate)
        if index is not None:
            diagnostic = diagnostics[index]
            diagnostics[index] = replace(diagnostic, fixes=(*diagnostic.fixes, trial))
    return replace(result, diagnostics=diagnostics, fix_trials=list(trials))


def _answered(result: TargetResult, candidate: FixCandidate) -> int | None:
    if candidate.answers is not None:
        rule, range_ = candidate.answers
        for index, found in enumerate(result.diagnostics):
            if found.rule == rule and found.location.range == range_:
                return index
    errors = [i for i, d in enumerate(result.diagnostics) if d.severity == Severity.ERROR]
    return errors[0] if errors else None
