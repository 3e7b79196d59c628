"""A job's outcome as the check result of its target: the result the job computed, or, for a
job that has none, the diagnostic at the target that says what happened (ONNX901 timeout,
ONNX903 memory, ONNX902 a process died)."""

from __future__ import annotations

from dataclasses import dataclass

from export_worker.messages import (
    CheckAnswer,
    GraphAnswer,
    JobDone,
    JobError,
    JobFailed,
    JobOutcome,
)
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.result import StageState, StageStatus, TargetResult
from exporter.source.targets import Target


@dataclass(frozen=True)
class Limits:
    """The limits the job ran under, for the messages."""

    timeout_seconds: float | None
    memory_limit_mb: int | None
    #: the model's own code's (the load stage's), when fewer than ``timeout_seconds``
    load_timeout_seconds: float | None = None


class JobCancelled(Exception):
    """The job was cancelled: it has no result to show."""


def target_result(target: Target, outcome: JobOutcome, limits: Limits) -> TargetResult:
    """The target's result: the check's (a check or graph job's), else a finding saying why
    there is none."""
    if isinstance(outcome, JobDone) and isinstance(outcome.answer, (CheckAnswer, GraphAnswer)):
        (result,) = outcome.answer.result.targets
        return result
    if isinstance(outcome, JobFailed) and outcome.failure == "cancelled":
        raise JobCancelled(target.name)
    rule, message = failure_message(target.name, outcome, limits)
    diagnostic = Diagnostic(rule, message, Location(target.path, target.definition),
                            target=target.name)
    reason = outcome.failure if isinstance(outcome, JobFailed) else "error"
    status = StageStatus("check", StageState.FAILED, outcome.seconds, reason)
    return TargetResult(target.name, target.path, target.definition, [status], [diagnostic])


def failure_message(name: str, outcome: JobOutcome, limits: Limits) -> tuple[str, str]:
    """The rule and message for a job without a result."""
    if isinstance(outcome, JobDone):  # the job answered with an error instead of a result
        error = outcome.answer.error if isinstance(outcome.answer, JobError) else None
        return ("ONNX902", f"onnxlens could not check `{name}`: "
                f"{error or 'the job returned no result'}.")
    detail = outcome.detail or "no details"
    if outcome.failure == "timeout":
        seconds = limits.timeout_seconds
        if limits.load_timeout_seconds and seconds and outcome.seconds < seconds:
            seconds = limits.load_timeout_seconds  # stopped in the model's own code
        limit = f"{seconds:g} s" if seconds else "its time limit"
        return ("ONNX901", f"The check of `{name}` did not finish within {limit} and was "
                "stopped (an endless loop, or a model too slow to check?).")
    if outcome.failure == "memory":
        return ("ONNX903", f"The check of `{name}` went past the memory limit of "
                f"{limits.memory_limit_mb} MB and was stopped "
                f"(peak {outcome.peak_rss_mb} MB seen).")
    if outcome.failure == "worker-lost":
        return ("ONNX902", f"`{name}` was not checked: {detail}. This says nothing about "
                "the model; check it again, and see the output log if it keeps happening.")
    return ("ONNX902", f"The process checking `{name}` died: {detail}. The model's code "
            "crashed the process (a segfault, os._exit, a native abort?); onnxlens itself "
            "is still running.")
