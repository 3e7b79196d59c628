"""`workspace/executeCommand`: export, save, run, report, graph, SARIF, worker restart."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args, get_type_hints

from lsprotocol import types
from lsprotocol.converters import get_converter

from export_worker.messages import (
    JobDone,
    JobError,
    JobKind,
    JobOutcome,
    JobRequest,
    RunAnswer,
    SaveAnswer,
)
from exporter.reports.run import run_report_json
from exporter.source.targets import Target
from lsp_server import features
from lsp_server.payloads import (
    Cancelled,
    ExportAnswer,
    GraphNotShown,
    JobCommandAnswer,
    ReportAnswer,
    SarifWritten,
    TargetCount,
    WorkerRestarted,
    WorkspaceChecked,
    to_json,
)
from lsp_server.progress import with_progress
from lsp_server.server import OnnxLensServer


def _answered(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """pygls runs ``workspace/executeCommand`` as a generator step that catches only
    ``Exception``: a command whose work is cancelled (from its progress, or a check a newer
    edit replaced) would leave the request unanswered and the client waiting for ever. It
    answers ``{"cancelled": true}`` instead."""

    @functools.wraps(handler)
    async def answering(ls: OnnxLensServer, *args: Any) -> Any:
        try:
            return await handler(ls, *args)
        except asyncio.CancelledError:
            return to_json(Cancelled())

    return answering


# -- each command's arguments, in the order the client sends them --------------------------

_Arguments = TypeVar("_Arguments")


@dataclass(frozen=True)
class DocumentArguments:
    uri: str


@dataclass(frozen=True)
class TargetArguments:
    uri: str
    target: str | None = None  # None: the document's first target


@dataclass(frozen=True)
class SaveArguments(TargetArguments):
    output: str | None = None  # None: <target>.onnx beside the file


@dataclass(frozen=True)
class RunArguments(TargetArguments):
    repeat: int = 20


@dataclass(frozen=True)
class LineArguments:
    uri: str
    line: int  # 0-based, as LSP positions


@dataclass(frozen=True)
class SarifArguments:
    path: str | None = None  # None: the sarif.outputDirectory setting's, else the root's


def parsed(args: tuple[Any, ...], kind: type[_Arguments]) -> _Arguments:
    """A command's arguments as ``kind``: the values the client sent (a list of them, or
    that list as the one argument), in the order of ``kind``'s fields; one missing, one too
    many, or one of another type is an error that names it."""
    values = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
    fields = dataclasses.fields(kind)  # type: ignore[arg-type]  # each is a dataclass
    hints = get_type_hints(kind)
    names = ", ".join(f.name for f in fields)
    if len(values) > len(fields):
        raise ValueError(f"expected at most {len(fields)} arguments ({names}), "
                         f"got {len(values)}")
    for index, field in enumerate(fields):
        if index >= len(values):
            if field.default is dataclasses.MISSING:
                raise ValueError(f"expected the arguments {names}; {field.name} is missing")
            continue
        allowed = tuple(t for t in get_args(hints[field.name]) or (hints[field.name],))
        value = values[index]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise ValueError(f"argument {index + 1} ({field.name}) must be {wanted}, not "
                             f"{type(value).__name__}")
    return kind(*values)


async def _target_of(ls: OnnxLensServer, given: TargetArguments) -> Target:
    targets = await ls.discovery.targets(given.uri)
    chosen = next((t for t in targets if given.target is None or t.name == given.target),
                  None)
    if chosen is None:
        raise ValueError(f"no export target {given.target!r} in {given.uri}")
    return chosen


def _job(ls: OnnxLensServer, uri: str, target: Target, kind: JobKind,
         **extra: Any) -> JobRequest:
    return ls.job_request(kind, target, ls.document_text(uri), **extra)


def _require_trust(ls: OnnxLensServer) -> None:
    if not ls.trusted:
        raise PermissionError("the workspace is not trusted: onnxlens runs no model code")


@_answered
async def export_command(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    _require_trust(ls)
    uri = parsed(args, DocumentArguments).uri
    task = ls.request_check(uri)
    if task is not None:
        await task
    state = ls.checker.state(uri)
    return to_json(ExportAnswer(uri, state.version, {
        name: TargetCount(result.ok, len(result.diagnostics))
        for name, result in state.targets.items()}))


@_answered
async def check_workspace_command(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    """Check every target in the workspace in the background (lowest priority), with
    progress the user can cancel; ``{files, targets, problems}`` when all are done."""
    _require_trust(ls)
    checked: WorkspaceChecked = await with_progress(
        ls.progress_reporter, "Checking the workspace", ls.check_workspace)
    return to_json(checked)


@_answered
async def save_command(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    _require_trust(ls)
    given = parsed(args, SaveArguments)
    target = await _target_of(ls, given)
    if given.output is not None:
        output = _output_path(ls.root_for(target.path), given.output)
        if isinstance(output, str):
            return to_json(JobCommandAnswer(error=output))
    else:
        output = target.path.with_name(f"{target.name}.onnx")
    answer = await with_progress(
        ls.progress_reporter, f"Saving {target.name} to {output.name}",
        lambda: ls.worker.submit(_job(ls, given.uri, target, "save", output=str(output))))
    return to_json(_job_answer(answer))


@_answered
async def run_command(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    _require_trust(ls)
    given = parsed(args, RunArguments)
    target = await _target_of(ls, given)
    answer = await with_progress(
        ls.progress_reporter, f"Running {target.name} in ONNX Runtime",
        lambda: ls.worker.submit(_job(ls, given.uri, target, "run", repeat=given.repeat)))
    return to_json(_job_answer(answer))


@_answered
async def show_graph_command(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    """``[uri, target?]``: the target's graph in Model Explorer (lsp_server/graphs.py):
    ``{url, uri, target, graphId, selectedNode, selectedGraph, nodes}`` or ``{error}``. A
    client without a graph panel of its own gets the page in the browser."""
    _require_trust(ls)
    given = parsed(args, TargetArguments)
    target = await _target_of(ls, given)
    shown = await with_progress(ls.progress_reporter, f"Graph of {target.name}",
                                lambda: ls.graphs.show(given.uri, target))
    if ls.graphs.panel_client:
        return to_json(shown)
    if isinstance(shown, GraphNotShown):
        ls.tell(f"onnxlens: {shown.error}", types.MessageType.Error)
    elif ls.support.show_document:
        await ls.window_show_document_async(types.ShowDocumentParams(uri=shown.url,
                                                                     external=True))
    else:
        ls.tell(f"onnxlens: the graph of {target.name} is at {shown.url}",
                types.MessageType.Info)
    return to_json(shown)


def graph_nodes_at(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    """``[uri, line]`` (``line`` 0-based, as LSP positions): the nodes of the document's last
    graph that the line produced, its own first, then those of the calls it makes:
    ``{uri, target, graphId, nodes: [{key, nodeId, graphId, opType}]}``; no nodes when the
    document has no graph yet."""
    _require_trust(ls)
    given = parsed(args, LineArguments)
    return to_json(ls.graphs.nodes_at(given.uri, given.line + 1))


def _job_answer(outcome: JobOutcome) -> JobCommandAnswer:
    """A save or run job's answer as the command's result (what the client shows)."""
    if not isinstance(outcome, JobDone):
        return JobCommandAnswer(error=f"the job failed ({outcome.failure}): {outcome.detail}")
    answer = outcome.answer
    if isinstance(answer, RunAnswer):
        return JobCommandAnswer(
            [d.message for d in answer.diagnostics],
            report=run_report_json(answer.report) if answer.report is not None else None,
            markdown=answer.markdown if answer.report is not None else None, error=answer.error)
    if isinstance(answer, SaveAnswer):
        return JobCommandAnswer([d.message for d in answer.diagnostics], saved=answer.saved,
                                written=answer.written, error=answer.error)
    error = answer.error if isinstance(answer, JobError) else "the job answered another kind"
    return JobCommandAnswer([], saved=False, written=[], error=error)


async def show_report(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    given = parsed(args, TargetArguments)
    uri = given.uri
    state = ls.checker.state(uri)
    names = [given.target] if given.target is not None \
        else [t.name for t in await ls.discovery.targets(uri)]
    parts = [features.report_markdown(name, state.targets.get(name), state.checking)
             for name in names]
    return to_json(ReportAnswer("\n".join(parts)))


def write_sarif_command(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    _require_trust(ls)
    given = parsed(args, SarifArguments)
    root = ls.root or Path.cwd()
    if given.path is not None:
        destination = _output_path(root, given.path)
        if isinstance(destination, str):
            return to_json(SarifWritten(error=destination))
    elif ls.settings.sarifOutputDirectory:
        destination = Path(ls.settings.sarifOutputDirectory) / "onnxlens.sarif"
    else:
        destination = root / "onnxlens.sarif"
    if not destination.is_absolute():
        destination = root / destination
    return to_json(SarifWritten(str(ls.write_sarif(destination))))


def _output_path(root: Path, given: str) -> Path | str:
    """Where a command writes the path ``given``: an absolute path as it is; a relative one
    inside the workspace, as a user reads it (``../x.sarif`` is refused: the message)."""
    output = Path(given)
    if output.is_absolute():
        return output
    output = root / output
    if not output.resolve().is_relative_to(root.resolve()):
        return (f"{given} is outside the workspace ({root}): a relative path is written "
                "inside it; give an absolute path to write elsewhere")
    return output


@_answered
async def restart_worker(ls: OnnxLensServer, *args: Any) -> dict[str, Any]:
    _require_trust(ls)
    ready = await ls.worker.restart()
    return to_json(WorkerRestarted(ready.pid))


async def apply_edit(ls: OnnxLensServer, *args: Any) -> bool:
    """For clients without code action literals: apply the action's workspace edit."""
    if len(args) != 1 or not isinstance(args[0], dict):
        raise ValueError("expected a WorkspaceEdit as the one argument")
    edit = get_converter().structure(args[0], types.WorkspaceEdit)
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit))
    return bool(result.applied)


def register(server: OnnxLensServer) -> None:
    server.command("onnxlens.export")(export_command)
    server.command("onnxlens.checkWorkspace")(check_workspace_command)
    server.command("onnxlens.saveModel")(save_command)
    server.command("onnxlens.runModel")(run_command)
    server.command("onnxlens.showReport")(show_report)
    server.command("onnxlens.showGraph")(show_graph_command)
    server.command("onnxlens.graphNodesAt")(graph_nodes_at)
    server.command("onnxlens.writeSarif")(write_sarif_command)
    server.command("onnxlens.restartWorker")(restart_worker)
    server.command("onnxlens.applyEdit")(apply_edit)
