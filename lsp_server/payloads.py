"""What the server sends the editor beyond LSP's own types: onnxlens's notifications and the
answers of its commands, typed once here, with one JSON form (``to_json``: a field that is
None is left out, as the client's optional fields expect).

The VS Code extension's TypeScript interfaces (``vscode-extension/src/payloads.ts``) are
checked against JSON samples of these types: ``tests/lsp/test_payloads.py`` makes the samples
with the functions the handlers use and keeps ``vscode-extension/test/unit/payloads/``
current, and the extension's type check assigns each sample to its interface.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def to_json(payload: Any) -> Any:
    """``payload`` as JSON data: dataclasses field by field, None fields left out."""
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return {f.name: to_json(value) for f in dataclasses.fields(payload)
                if (value := getattr(payload, f.name)) is not None}
    if isinstance(payload, dict):
        return {key: to_json(value) for key, value in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [to_json(value) for value in payload]
    return payload


@dataclass(frozen=True)
class ServerState:
    """``onnxlens/state``: what the status item shows."""

    trusted: bool
    workerState: str  # stopped, starting, ready, missing, down
    checking: list[str]  # the documents being checked


@dataclass(frozen=True)
class TargetCount:
    ok: bool
    problems: int


@dataclass(frozen=True)
class ExportAnswer:
    """``onnxlens.export``: the document checked now, each target's verdict."""

    uri: str
    version: int | None
    targets: dict[str, TargetCount]


@dataclass(frozen=True)
class WorkspaceChecked:
    """``onnxlens.checkWorkspace``: what the workspace check found."""

    files: int
    targets: int
    problems: int


@dataclass(frozen=True)
class ReportAnswer:
    """``onnxlens.showReport``: the targets' reports, for a reader."""

    markdown: str


@dataclass(frozen=True)
class SarifWritten:
    """``onnxlens.writeSarif``: where the log went, or why it was not written."""

    path: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class WorkerRestarted:
    """``onnxlens.restartWorker``: the new worker's process."""

    pid: int


@dataclass(frozen=True)
class JobCommandAnswer:
    """``onnxlens.saveModel`` and ``onnxlens.runModel``: what the job did, or why not."""

    diagnostics: list[str] | None = None  # the check's messages
    saved: bool | None = None  # save
    written: list[str] | None = None  # save: the files written
    #: run: the run report, as ``exporter.reports.run.run_report_json`` writes it
    report: dict[str, Any] | None = None
    markdown: str | None = None  # run: the report for a reader
    error: str | None = None


@dataclass(frozen=True)
class Position:
    line: int  # 0-based, as LSP positions
    character: int  # in the negotiated position encoding


@dataclass(frozen=True)
class SourceRange:
    start: Position
    end: Position


@dataclass(frozen=True)
class SourceLocation:
    uri: str
    range: SourceRange


@dataclass(frozen=True)
class GraphNode:
    """A node of the shown graph and the source lines that produced it."""

    graphId: str
    nodeId: str
    opType: str
    location: SourceLocation
    callers: list[SourceLocation]


@dataclass(frozen=True)
class GraphShown:
    """``onnxlens.showGraph``'s answer and ``onnxlens/graphChanged``: the viewer's page, the
    selected node and every node's source."""

    url: str
    uri: str
    target: str
    graphId: str
    selectedNode: str | None
    selectedGraph: str | None
    nodes: dict[str, GraphNode]


@dataclass(frozen=True)
class GraphNotShown:
    """Why there is no graph (the export stopped before ONNX, the job failed, Model Explorer
    is missing)."""

    error: str
    uri: str
    target: str


@dataclass(frozen=True)
class NodeRef:
    key: str
    nodeId: str
    graphId: str
    opType: str


@dataclass(frozen=True)
class NodesAt:
    """``onnxlens.graphNodesAt``: the nodes of the document's last graph a line produced."""

    uri: str
    target: str | None  # None: the document has no graph yet
    nodes: list[NodeRef]
    graphId: str | None = None


@dataclass(frozen=True)
class Cancelled:
    """A command the user cancelled (its progress)."""

    cancelled: bool = True
