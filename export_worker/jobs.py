"""What a forked job process does: one job (check, save, run or graph) on one target.

Runs only inside the export worker (it imports torch through ``exporter``). Each job runs in
a fresh fork of the warm worker, so user modules start from scratch and a crash, a hang or a
memory blow-up takes down only that process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from export_worker.inputs import InputRecorder
from export_worker.messages import (
    CheckAnswer,
    GraphAnswer,
    JobAnswer,
    JobError,
    JobRequest,
    RunAnswer,
    SaveAnswer,
)
from exporter.findings.result import CheckResult, TargetResult
from exporter.pipeline.context import CheckContext
from exporter.pipeline.session import ExportSession
from exporter.source.notebooks import module_of_cells
from exporter.source.text import Sources

#: the stages whose findings a check with ``progress`` reports as soon as they end
EARLY_STAGES = ("capture", "translate")


def run_job(session: ExportSession, request: JobRequest,
            progress: Callable[[CheckResult], None] | None = None,
            if_stopped: Callable[[CheckResult], None] | None = None,
            limit_lifted: Callable[[], None] | None = None) -> JobAnswer:
    """``progress`` gets what capture and translate found as they end; ``if_stopped`` the
    result that stands if the job is killed from then on (the export is known to fail);
    ``limit_lifted`` is called when the model's own code ran to its end or the exporter
    works inside it (the worker then kills the job at ``request.timeout``, no longer at
    ``request.load_timeout``)."""
    target = request.target
    path = target.path
    # the editor's text of the file, unsaved changes included: what the check reads of it
    sources = Sources.with_unsaved(path, request.text) if request.text is not None \
        else Sources()
    # What a check reads decides whether the server may reuse its result (lsp_server.reuse).
    recorder = InputRecorder(path if request.text is not None else None) \
        if request.record_inputs else None
    session.options = request.settings
    # stops Python code where it runs (ONNX901 at that line); native code is stopped by the
    # worker a moment later
    session.timeout, session.load_timeout = request.timeout, request.load_timeout
    if request.notebook_cells:  # what locates a finding by its cell (recent_notebook)
        module_of_cells([(cell.number, cell.text) for cell in request.notebook_cells])

    def stage_done(partial: TargetResult) -> None:
        if progress is not None and partial.stages[-1].name in EARLY_STAGES \
                and partial.diagnostics:
            progress(CheckResult(targets=[partial], files=[path]))

    def verdict_known(stopped: TargetResult) -> None:
        if if_stopped is not None:
            if_stopped(CheckResult(targets=[stopped], files=[path]))

    context, target_result = session.run_target(
        target, Path(request.workspace), stage_done if progress is not None else None, sources,
        verdict_known if if_stopped is not None else None, limit_lifted)
    result = CheckResult(targets=[target_result], files=[path])
    if request.kind == "check":
        return CheckAnswer(result, recorder.inputs() if recorder is not None else None)
    if request.kind == "save":
        return _save(context, result, request)
    if request.kind == "graph":
        return _graph(context, result, request)
    return _run(context, target_result, request)


def _save(context: CheckContext, result: CheckResult,
          request: JobRequest) -> SaveAnswer | JobError:
    from exporter.pipeline.artifacts import DEFAULT_EXTERNAL_DATA_THRESHOLD, save_model
    from exporter.reports.writing import UnsafePathError

    errors = [d for d in result.diagnostics if d.severity == "error"]
    if context.translated is None or context.weightless:
        return SaveAnswer(saved=False, diagnostics=errors,
                          error='weights="none" models have no weights to save'
                          if context.weightless else "the export failed; the file was not "
                          "written")
    if request.output is None:
        return JobError("no output path", internal=True)
    model = context.translated.onnx_program.model_proto
    if request.strip_source_metadata:
        from exporter.pipeline.source_metadata import strip_source_metadata

        model = strip_source_metadata(model)
    try:
        written = save_model(model, Path(request.output),
                             request.threshold or DEFAULT_EXTERNAL_DATA_THRESHOLD)
    except (UnsafePathError, FileNotFoundError) as error:
        return SaveAnswer(saved=False, diagnostics=errors, error=f"{request.output}: {error}")
    return SaveAnswer(saved=True, written=[str(p) for p in written], diagnostics=errors)


def _graph(context: CheckContext, result: CheckResult,
           request: JobRequest) -> GraphAnswer | JobError:
    """The check's result and its graph's files (docs/graph.md), in ``request.output``."""
    from exporter.pipeline.graph_files import write_graph_files

    if request.output is None:
        return JobError("no output directory", internal=True)
    if context.weightless:
        return GraphAnswer(result, error='the graph of a weights="none" model is not shown; '
                           "check it with its weights")
    graph = write_graph_files(context, result.diagnostics, Path(request.output))
    if graph is None:
        return GraphAnswer(result, error="the export stopped before there was an ONNX graph "
                           "to show")
    return GraphAnswer(result, graph=graph)


def _run(context: CheckContext, target_result: TargetResult, request: JobRequest) -> RunAnswer:
    from exporter.pipeline.run_report import build_run_report
    from exporter.reports.run import format_run_report

    try:
        report = build_run_report(context, target_result,
                                  Path(request.model) if request.model else None,
                                  request.repeat)
    except Exception as error:
        return RunAnswer(error=f"cannot run {context.target.name}: {error}",
                         diagnostics=list(target_result.diagnostics))
    return RunAnswer(report, format_run_report(report))
