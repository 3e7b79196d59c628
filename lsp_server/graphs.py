"""The graph view of issue 29 (docs/graph.md): a target's checked graph in Google's Model
Explorer, its nodes mapped to the user's source lines, for the editor.

``GraphViews`` runs one graph job per request (``JobRequest(kind="graph")``: the target's
check, then its ONNX model and the files of ``exporter/pipeline/graph_files.py``, each job in
a directory of its own under one temporary directory the server owns), keeps ONE Model
Explorer server per language server (``export_worker/graph_viewer.py``; started with the first
graph, reused for the later ones, which are other URLs of the same server: it reads a model by
the path the page names), and remembers each document's last graph for ``graphNodesAt``.

A client that shows the graph in a panel of its own says so (``initializationOptions:
{"graphPanel": true}``, the VS Code extension); the server then re-renders the graph it showed
after each check of that document (``onnxlens/graphChanged``) until the client says the panel
closed (``onnxlens/graphClosed``). Other clients get the page in the browser
(``window/showDocument`` with ``external: true``).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from export_worker.graph_viewer import (
    Viewer,
    ViewerError,
    missing_packages,
    missing_packages_message,
    page_url,
    start_viewer,
)
from export_worker.messages import GraphAnswer, JobDone, JobError, JobKind, JobOutcome, JobRequest
from exporter.findings.positions import Location
from exporter.reports.graph_view import GraphFiles, NodeSource, nodes_at, read_sidecar
from exporter.source.targets import Target
from lsp_server.convert import PositionConverter, path_of, path_uri
from lsp_server.discovery import TargetDiscovery
from lsp_server.payloads import (
    GraphNode,
    GraphNotShown,
    GraphShown,
    NodeRef,
    NodesAt,
    Position,
    SourceLocation,
    SourceRange,
    to_json,
)
from lsp_server.supervisor import WorkerSupervisor

log = logging.getLogger(__name__)

GRAPH_CHANGED = "onnxlens/graphChanged"
GRAPH_CLOSED = "onnxlens/graphClosed"


class GraphHost(Protocol):
    """What the graph view uses of the session (OnnxLensServer is one)."""

    @property
    def trusted(self) -> bool: ...
    def job_request(self, kind: JobKind, target: Target, text: str,
                    **extra: Any) -> JobRequest: ...
    def document_text(self, uri: str) -> str: ...
    def positions(self) -> PositionConverter: ...
    @property
    def worker(self) -> WorkerSupervisor: ...
    @property
    def discovery(self) -> TargetDiscovery: ...
    def notify(self, method: str, params: Any) -> None: ...


@dataclass(frozen=True)
class ShownGraph:
    """A document's last graph: its files (in ``directory``) and where each node came from."""

    uri: str
    target: str
    directory: Path
    workspace: Path
    files: GraphFiles
    nodes: dict[str, NodeSource]  # exporter.reports.graph_view.read_sidecar


def graph_payload(shown: ShownGraph, url: str, positions: PositionConverter) -> GraphShown:
    """What ``onnxlens.showGraph`` answers and ``onnxlens/graphChanged`` carries: the page, the
    selected node and every node's source as LSP locations (0-based lines, columns in the
    negotiated encoding)."""
    files = shown.files
    return GraphShown(
        url, shown.uri, shown.target, files.graph_id, files.selected_node, files.selected_graph,
        {key: GraphNode(node.graph_id, node.node_id, node.op_type,
                        _location(node.location, positions),
                        [_location(caller, positions) for caller in node.callers])
         for key, node in shown.nodes.items()})


class GraphViews:
    def __init__(self, host: GraphHost) -> None:
        self._host = host
        self._directory: Path | None = None
        self._jobs = 0
        self._viewer: Viewer | None = None
        self._viewer_lock = asyncio.Lock()
        self._shown: dict[str, ShownGraph] = {}
        #: the client shows graphs in a panel of its own (initializationOptions.graphPanel)
        self.panel_client = False
        self._open: tuple[str, str] | None = None  # (uri, target) shown in the client's panel
        self._rerender: asyncio.Task[None] | None = None

    @property
    def viewer_pid(self) -> int | None:
        viewer = self._viewer
        return viewer.process.pid if viewer is not None and viewer.process.poll() is None \
            else None

    @property
    def rendering_again(self) -> bool:
        """Whether the graph open in the client's panel is being rendered again after a
        check (an ``onnxlens/graphChanged`` is on its way)."""
        return self._rerender is not None and not self._rerender.done()

    async def show(self, uri: str, target: Target) -> GraphShown | GraphNotShown:
        """One graph job for ``target`` and its page; ``{"error": ...}`` when there is no graph
        (the export stopped before ONNX, the job failed, Model Explorer is missing)."""
        if not self._host.trusted:
            raise PermissionError("the workspace is not trusted: onnxlens runs no model code")
        missing = missing_packages()
        if missing:
            return GraphNotShown(missing_packages_message(missing), uri, target.name)
        directory = self._job_directory()
        host = self._host
        request = host.job_request("graph", target, host.document_text(uri),
                                   output=str(directory))
        try:
            outcome = await host.worker.submit(request)
            shown = _shown_graph(uri, target, directory, request, outcome)
            if isinstance(shown, str):
                shutil.rmtree(directory, ignore_errors=True)
                return GraphNotShown(shown, uri, target.name)
            url = await self._page(shown.files)
        except ViewerError as error:
            shutil.rmtree(directory, ignore_errors=True)
            return GraphNotShown(str(error), uri, target.name)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        previous = self._shown.get(uri)
        self._shown[uri] = shown
        if previous is not None:  # the page read its model already: its files may go
            shutil.rmtree(previous.directory, ignore_errors=True)
        if self.panel_client:
            self._open = (uri, target.name)
        return graph_payload(shown, url, host.positions())

    def nodes_at(self, uri: str, line: int) -> NodesAt:
        """The nodes of ``uri``'s last graph that 1-based ``line`` produced."""
        shown = self._shown.get(uri)
        if shown is None:
            return NodesAt(uri, None, [])
        keys = nodes_at(shown.nodes, path_of(uri), line)
        return NodesAt(uri, shown.target, [
            NodeRef(key, shown.nodes[key].node_id, shown.nodes[key].graph_id,
                    shown.nodes[key].op_type) for key in keys], shown.files.graph_id)

    def closed(self) -> None:
        """The client's panel closed: no more re-rendering."""
        self._open = None
        if self._rerender is not None:
            self._rerender.cancel()

    def checked(self, uri: str) -> None:
        """A check of ``uri`` ended: the graph open in the client's panel is rendered again
        (the newest check wins; an older re-render still running is cancelled)."""
        if self._open is None or self._open[0] != uri or not self._host.trusted:
            return
        if self._rerender is not None:
            self._rerender.cancel()
        self._rerender = asyncio.ensure_future(self._render_again(*self._open))

    async def _render_again(self, uri: str, name: str) -> None:
        try:
            targets = await self._host.discovery.targets(uri)
            target = next((t for t in targets if t.name == name), None)
            if target is None:
                payload: GraphShown | GraphNotShown = GraphNotShown(
                    f"no export target {name!r} any more", uri, name)
            else:
                payload = await self.show(uri, target)
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("re-rendering the graph of %s failed", name)
            return
        if self._open == (uri, name):
            self._host.notify(GRAPH_CHANGED, to_json(payload))

    async def close(self) -> None:
        """Stop the viewer and remove every graph's files (shutdown, trust withdrawn)."""
        self.closed()
        viewer, self._viewer = self._viewer, None
        if viewer is not None:
            await asyncio.to_thread(viewer.stop)
        self._remove_files()

    def close_now(self) -> None:
        """The same, without an event loop (the server's process is ending)."""
        viewer, self._viewer = self._viewer, None
        if viewer is not None:
            viewer.stop()
        self._remove_files()

    def _remove_files(self) -> None:
        self._shown.clear()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None

    def _job_directory(self) -> Path:
        if self._directory is None or not self._directory.is_dir():
            self._directory = Path(tempfile.mkdtemp(prefix="onnxlens-graphs-"))
        self._jobs += 1
        return self._directory / str(self._jobs)

    async def _page(self, files: GraphFiles) -> str:
        """The page of ``files`` on the running viewer, started (again) when there is none."""
        model, node_data = Path(files.model), [Path(p) for p in files.node_data]
        async with self._viewer_lock:
            viewer = self._viewer
            if viewer is not None and viewer.process.poll() is not None:
                log.warning("Model Explorer stopped (exit status %s): %s",
                            viewer.process.returncode, viewer.output_tail())
                await asyncio.to_thread(viewer.stop)
                viewer = self._viewer = None
            if viewer is not None and viewer.serve_under != self._directory:
                await asyncio.to_thread(viewer.stop)  # it serves only its own directory
                viewer = self._viewer = None
            if viewer is None:
                viewer = self._viewer = await asyncio.to_thread(
                    start_viewer, model, node_data, files.selected_node,
                    selected_graph=files.selected_graph, serve_under=self._directory)
        return page_url(viewer.host, viewer.port, model, node_data, files.selected_node,
                        files.selected_graph, viewer.token)


def _shown_graph(uri: str, target: Target, directory: Path, request: JobRequest,
                 outcome: JobOutcome) -> ShownGraph | str:
    """The job's graph, or why there is none."""
    if not isinstance(outcome, JobDone):
        return f"the graph job failed ({outcome.failure}): {outcome.detail}"
    answer = outcome.answer
    if not isinstance(answer, GraphAnswer):
        error = answer.error if isinstance(answer, JobError) else "the job wrote no graph"
        return f"no graph of {target.name}: {error}"
    if answer.graph is None:
        reason = answer.error or "the job wrote no graph"
        errors = [d for d in answer.result.diagnostics if d.severity == "error"]
        if errors:
            reason += f" ({errors[0].rule}: {errors[0].message})"
        return f"no graph of {target.name}: {reason}"
    workspace = Path(request.workspace)
    nodes = read_sidecar(Path(answer.graph.nodes), workspace)
    return ShownGraph(uri, target.name, directory, workspace, answer.graph, nodes)


def _location(location: Location, positions: PositionConverter) -> SourceLocation:
    range_ = positions.range(location.path, location.range)
    return SourceLocation(path_uri(location.path), SourceRange(
        Position(range_.start.line, range_.start.character),
        Position(range_.end.line, range_.end.character)))
