"""Run the stages of docs/architecture.md §3 for one target. No stage raises past this module."""

from __future__ import annotations

import logging
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, merge_duplicates, sort_key
from exporter.findings.result import StageState, StageStatus, TargetResult
from exporter.pipeline import after_verdict
from exporter.pipeline.context import CheckContext
from exporter.pipeline.fix_candidates import fix_candidates
from exporter.pipeline.model_code_limit import ModelCodeLimit
from exporter.pipeline.stages import (
    capture,
    deploy,
    dynamic,
    load,
    numerics,
    runtime,
    translate,
    validate,
)
from exporter.pipeline.stages.base import StageFailed, StageSkipped
from exporter.pipeline.timers import Alarm, interrupting
from exporter.source.traces import exception_frames, is_user_frame
from exporter.toolchain import speedups, torch_compat


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[CheckContext], None]
    # Returns why the stage cannot run, or "" when it can.
    blocked: Callable[[CheckContext], str]
    # Runs under speedups.tracing (the stages that trace; not the user's import).
    traces: bool = True


def _needs(product: Callable[[CheckContext], object],
           reason: str) -> Callable[[CheckContext], str]:
    """Blocked (with ``reason``) while the stage's input ``product`` does not exist."""
    return lambda ctx: "" if product(ctx) is not None else reason


def _needs_weights(product: Callable[[CheckContext], object],
                   reason: str) -> Callable[[CheckContext], str]:
    """As ``_needs``, for a stage that runs the model: it needs real weights and a valid model."""
    def blocked(ctx: CheckContext) -> str:
        if ctx.weightless:
            return 'weights="none": this stage needs real weights'
        if ctx.validated is not None and not ctx.validated.valid:
            return "the ONNX model is invalid (see the validate stage)"
        return _needs(product, reason)(ctx)

    return blocked


STAGES: tuple[Stage, ...] = (
    Stage("load", load.run, lambda ctx: "", traces=False),
    Stage("capture", capture.run, _needs(lambda c: c.loaded, "the target could not be loaded")),
    Stage("translate", translate.run, _needs(lambda c: c.captured, "capture failed")),
    Stage("validate", validate.run, _needs(lambda c: c.translated, "translation failed")),
    Stage("runtime", runtime.run, _needs_weights(lambda c: c.translated, "translation failed")),
    Stage("numerics", numerics.run, _needs_weights(lambda c: c.ran, "ONNX Runtime did not run")),
    Stage("dynamic", dynamic.run, _needs_weights(lambda c: c.ran, "ONNX Runtime did not run")),
    Stage("deploy", deploy.run, deploy.blocked, traces=False),
)


class CheckTimeout(BaseException):
    """Raised by the timer into whatever runs when the time limit passes (a BaseException, so
    that no stage's error handling mistakes it for a problem of the model)."""


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[Alarm]:
    """Interrupt Python code (e.g. an endless loop in ``forward``) after ``seconds``: the
    check's wall-clock limit (exporter/pipeline/timers.py; the language server's worker kills
    native code that never returns to Python)."""
    if not seconds:
        yield Alarm(None)
        return
    with interrupting(seconds, CheckTimeout) as alarm:
        yield alarm


def run_pipeline(ctx: CheckContext,
                 stage_done: Callable[[TargetResult], None] | None = None,
                 if_stopped: Callable[[TargetResult], None] | None = None) -> TargetResult:
    """Every stage in order; ``stage_done`` gets the result so far after each (the language
    server shows what capture and translate found before the check ends); ``if_stopped``, the
    result that stands should the check be stopped from outside from now on, once the export
    is known to fail (the worker kills a check that native code keeps past its time limit,
    and the verdict survives it)."""
    result = TargetResult(ctx.target.name, ctx.target.path, ctx.target.definition)
    started = time.perf_counter()
    if stage_done is not None or if_stopped is not None:
        ctx.early = _early_reporter(ctx, result, stage_done, if_stopped, started)
    try:
        # the default limit bounds the model's own code (the load stage), not the exporter's
        with _time_limit(ctx.load_timeout or ctx.timeout) as alarm:
            limit = ModelCodeLimit(alarm, ctx.load_timeout, ctx.timeout, started,
                                   ctx.limit_lifted)
            for stage in STAGES:
                with limit.counting() if stage.name == "load" else nullcontext():
                    result.stages.append(_run_stage(stage, ctx))
                if stage.name == "load":
                    limit.lift()
                if stage_done is not None:
                    stage_done(TargetResult(
                        result.name, result.path, result.definition, list(result.stages),
                        sorted(merge_duplicates(ctx.diagnostics), key=sort_key)))
    except CheckTimeout as timeout:
        _stopped(ctx, result, timeout, time.perf_counter() - started, limit.in_force)
    result.diagnostics = sorted(merge_duplicates(ctx.diagnostics), key=sort_key)
    result.summary = ctx.summary.copy()
    result.fix_candidates = fix_candidates(ctx, result.diagnostics)
    return result


def _stopped(ctx: CheckContext, result: TargetResult, timeout: CheckTimeout,
             seconds: float, limit: float | None) -> None:
    """The check reached its time limit: ONNX901, unless the export was already known to fail
    (``ctx.known_failure``): then the verdict stands, and only what the check would have
    found after it is missing (the stage stopped says so); a timeout never replaces an
    answer the exporter gives."""
    stage = STAGES[len(result.stages)]
    if ctx.known_failure is not None:
        result.stages[:] = _stages_stopped_after_the_verdict(ctx, result.stages, seconds)
        if not any(d.severity == "error" for d in ctx.diagnostics):
            ctx.diagnostics += ctx.known_failure  # the draft export's list never came
        return
    result.stages.append(StageStatus(stage.name, StageState.FAILED, seconds, "timed out"))
    result.stages += [StageStatus(later.name, StageState.SKIPPED, 0.0, "timed out")
                      for later in STAGES[len(result.stages):]]
    ctx.report("ONNX901", f"The check of `{ctx.target.name}` did not finish within "
               f"{limit or 0:g} s and was stopped in the {stage.name} stage "
               "(an endless loop, or a model too slow to check?).",
               ctx.map_frames(exception_frames(timeout)))


def _stages_stopped_after_the_verdict(ctx: CheckContext, stages: list[StageStatus],
                                      seconds: float) -> list[StageStatus]:
    """``stages`` (those that ended), then the one running, stopped at the time limit after
    the export was known to fail, and the later ones, skipped."""
    stage = STAGES[len(stages)]
    limit = f" ({ctx.timeout:g} s)" if ctx.timeout else ""
    why = (f"stopped at the time limit{limit} after the export was known to fail at capture: "
           "the findings after that point may be incomplete")
    state = StageState.FAILED if stage.name == "capture" else StageState.SKIPPED
    return [*stages, StageStatus(stage.name, state, seconds, why),
            *(StageStatus(later.name, StageState.SKIPPED, 0.0, why)
              for later in STAGES[len(stages) + 1:])]


def _early_reporter(ctx: CheckContext, result: TargetResult,
                    stage_done: Callable[[TargetResult], None] | None,
                    if_stopped: Callable[[TargetResult], None] | None,
                    started: float) -> Callable[[str, list[Diagnostic]], None]:
    """``ctx.early``: the result so far with ``stage`` failed (it is known to fail) and the
    findings given, before the stage ends; ``stage_done`` shows it as it shows a stage's end,
    ``if_stopped`` gets the verdict as a check stopped now would end with it."""
    def report(stage: str, diagnostics: list[Diagnostic]) -> None:
        found = sorted(merge_duplicates(diagnostics), key=sort_key)
        if stage_done is not None:
            running = StageStatus(stage, StageState.FAILED, 0.0, "its complete findings follow")
            stage_done(TargetResult(result.name, result.path, result.definition,
                                    [*result.stages, running], found))
        if if_stopped is not None:
            stages = _stages_stopped_after_the_verdict(ctx, result.stages,
                                                       time.perf_counter() - started)
            stopped = TargetResult(result.name, result.path, result.definition, stages, found,
                                   summary=ctx.summary.copy())
            stopped.fix_candidates = fix_candidates(ctx, found)
            if_stopped(stopped)

    return report


def _run_stage(stage: Stage, ctx: CheckContext) -> StageStatus:
    reason = stage.blocked(ctx)
    if reason:
        return StageStatus(stage.name, StageState.SKIPPED, 0.0, reason)
    # after the verdict, the stages on the draft export's graph share its search's budget
    deadline = ctx.after_verdict_deadline if stage.name not in ("load", "capture") else None
    if deadline is not None and time.process_time() >= deadline:
        return StageStatus(stage.name, StageState.SKIPPED, 0.0,
                           after_verdict.why_stopped(ctx.after_verdict_budget))
    before = len(ctx.diagnostics)
    started = time.perf_counter()
    state, reason = StageState.PASSED, ""
    try:
        with _quiet(), (speedups.tracing(capturing=stage.name == "capture")
                        if stage.traces else nullcontext()), \
                (_user_frames_kept(ctx) if stage.traces else nullcontext()), \
                _call_context(ctx), after_verdict.spending(deadline):
            stage.run(ctx)
    except StageFailed as failed:
        state, reason = StageState.FAILED, str(failed)
    except StageSkipped as skipped:
        state, reason = StageState.SKIPPED, str(skipped)
    except after_verdict.BudgetSpent:
        state, reason = StageState.SKIPPED, after_verdict.why_stopped(ctx.after_verdict_budget)
    except Exception as error:
        logging.getLogger(__name__).debug("stage %s crashed", stage.name, exc_info=True)
        summary = traceback.format_exception_only(type(error), error)[-1].strip()
        ctx.report("ONNX999", f"onnxlens failed in the {stage.name} stage: {summary}")
        state = StageState.FAILED
    new = ctx.diagnostics[before:]
    if state == StageState.PASSED and any(d.severity == "error" for d in new):
        state = StageState.FAILED
    return StageStatus(stage.name, state, time.perf_counter() - started, reason)


def _call_context(ctx: CheckContext) -> AbstractContextManager[None]:
    """An export call's stages run in the context the call was made in (grad and inference
    mode, autocast, default dtype and device), as the plain exporter runs inside its caller's
    (exporter/pipeline/call_context.py); the load stage enters it itself."""
    loaded = ctx.loaded
    if loaded is None or loaded.call_context is None:
        return nullcontext()
    return loaded.call_context.entered()


def _user_frames_kept(ctx: CheckContext) -> AbstractContextManager[None]:
    """Every capture of a tracing stage records each frame of the workspace's code in its
    nodes' stack traces, not only the ``forward``s torch keeps: a problem in a helper (under
    any decorators) is located at its own line, the callers as the chain (docs/checks.md)."""
    workspace = ctx.workspace
    return torch_compat.keeping_user_frames(
        lambda filename: is_user_frame(Path(filename), workspace))


class _quiet:
    """Keep torch's warnings out of our output (each stage reports what matters).

    sys.stdout and sys.stderr stay the process's own: the user's code may need real streams
    (``faulthandler.enable()``, ``sys.stdout.reconfigure()``, ``sys.stdout.buffer``, a
    subprocess given ``sys.stdout``), as under the plain exporter. Where the output goes is
    the process's business: the worker sends a job's to its stderr, the CLI's ``save`` and
    ``run`` point stdout at stderr while the user's code runs (docs/architecture.md §4)."""

    def __enter__(self) -> None:
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: Any) -> None:
        self._warnings.__exit__(*exc)
