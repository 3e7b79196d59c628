"""The exported ONNX graph as Model Explorer shows it, mapped to the user's source: each node's
line (from the exporter's ``pkg.torch.onnx.stack_trace`` metadata), the nodes a line produced,
the node-data overlays that mark failing nodes, and the mapping as JSON for the editor.

Model Explorer's ONNX adapter (``model-explorer-onnx``) names what it shows so:

* the main graph's id is the ONNX graph's name (``main_graph`` for torch's exporter;
  ``<main>`` when the graph has none);
* a node's id is its ONNX name, except in an ``If``'s branches, which the adapter embeds in the
  graph of the ``If``: there the id is ``<if node>/<then_branch|else_branch>/<name>``, nested
  Ifs prefixing again;
* the bodies of the main graph's other nodes with graphs (``Loop``, ``Scan``) are graphs of
  their own, with the id ``<node>/<attribute>``, and so are model-local functions
  (``[function]<domain>::<name>``, ``::<overload>`` when there is one); a node in such a body
  keeps its ONNX name. Deeper bodies are not shown.

A ``NodeSource`` carries both ids. ``node_sources`` keys them by a name unique in the model:
the node id in the main graph, ``<graph id>/<node id>`` in any other graph (so
``node_loop/body/node_add``, ``[function]pkg.custom::f/node_mul``). Function bodies carry the
exporter's metadata too (their nodes were traced from the user's code) and are included.

Imports no torch and, until a model is read, no onnx: the front ends may use the overlays and
the sidecar mapping.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporter.findings.diagnostics import Location
from exporter.findings.positions import Range
from exporter.findings.rules import Severity
from exporter.reports.writing import write_text_atomically
from exporter.source.traces import is_user_frame, map_frames, parse_stack_trace

if TYPE_CHECKING:
    import onnx

    from exporter.findings.result import RuntimeRun

# The exporter's node metadata (torch.onnx's "ONNX metadata" page; the pipeline reads them too)
STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"
FX_NODE_KEY = "pkg.torch.onnx.fx_node"

_UNNAMED_GRAPH = "<main>"  # the adapter's id for a main graph without a name
_EMPTY_GRAPH_NAME = "unnamed_graph"  # the web app's id for a graph whose id is ""


@dataclass(frozen=True)
class NodeSource:
    """Where one ONNX node came from: the innermost workspace frame of its stack trace."""

    graph_id: str  # Model Explorer's graph id
    node_id: str  # Model Explorer's node id in that graph
    name: str  # the node's ONNX name
    op_type: str
    location: Location
    # the outer workspace frames (the call chain), innermost first
    callers: tuple[Location, ...] = ()


#: the files of a graph (exporter/pipeline/graph_files.py writes them, docs/graph.md)
MODEL_FILE = "model.onnx"
NODES_FILE = "nodes.json"
MARKS_FILE = "marks.json"
ERRORS_FILE = "errors.json"
RUNTIMES_FILE = "runtimes.json"
#: what marks a directory as one a graph wrote: only such a directory's files are replaced
MARKER_FILE = ".onnxlens-graph"
MARKER_TEXT = "This directory was written by `onnxlens graph`; it replaces these files.\n"
#: every file a graph writes (besides the model's external data, ``model.onnx.data``)
GRAPH_FILES = (MODEL_FILE, NODES_FILE, MARKS_FILE, ERRORS_FILE, RUNTIMES_FILE, MARKER_FILE)


@dataclass(frozen=True)
class GraphFiles:
    """The files of one target's graph (exporter/pipeline/graph_files.py writes them): the
    model, the node → source mapping (``sidecar``) and Model Explorer's node data, the marks
    last (they colour the nodes); the node to select and its graph when not the main one."""

    model: str
    nodes: str
    node_data: list[str]
    graph_id: str
    selected_node: str | None = None
    selected_graph: str | None = None


@dataclass(frozen=True)
class Mark:
    """A node to colour and label in Model Explorer, e.g. ``ONNX402: no kernel for Erf``."""

    node_id: str
    label: str
    severity: Severity = Severity.ERROR
    graph_id: str | None = None  # None: the overlay's graph

    @classmethod
    def at(cls, source: NodeSource, label: str, severity: Severity = Severity.ERROR) -> Mark:
        return cls(source.node_id, label, severity, source.graph_id)


# Light backgrounds the node's dark label stays readable on.
SEVERITY_COLORS: Mapping[Severity, str] = {
    Severity.ERROR: "#f28b82",
    Severity.WARNING: "#fdd663",
    Severity.INFO: "#8ab4f8",
}
_ERROR_GRADIENT = ({"stop": 0, "bgColor": "#e6f4ea"}, {"stop": 1, "bgColor": "#f28b82"})
#: a node every runtime named runs
RUNS_EVERYWHERE_COLOR = "#ceead6"


def main_graph_id(model: onnx.ModelProto) -> str:
    """The id Model Explorer gives the model's main graph."""
    graph = model.graph
    if not graph.HasField("name"):
        return _UNNAMED_GRAPH
    return graph.name or _EMPTY_GRAPH_NAME


def node_sources(model: onnx.ModelProto, workspace: Path) -> dict[str, NodeSource]:
    """Every node whose stack trace reaches the workspace, by a name unique in the model (the
    module's docstring); nodes without a name (Model Explorer invents theirs) are left out."""
    main = main_graph_id(model)
    sources: dict[str, NodeSource] = {}
    for graph_id, node_id, node in _shown_nodes(model):
        source = _node_source(graph_id, node_id, node, workspace)
        if source is not None:
            key = node_id if graph_id == main else f"{graph_id}/{node_id}"
            sources[key] = source
    return sources


def nodes_at(sources: Mapping[str, NodeSource], path: Path, line: int) -> list[str]:
    """The keys of the nodes ``path:line`` produced: first those whose own line it is, then those
    it produced through a call (a line ``y = self.block(x)`` produced every node the block's
    own lines did; the call chain is how the user reads their model top-down)."""
    path = path.resolve()
    own = [key for key, source in sources.items() if _at(source.location, path, line)]
    called = [key for key, source in sources.items()
              if key not in own and any(_at(caller, path, line) for caller in source.callers)]
    return own + called


def marks_overlay(graph_id: str, marks: Sequence[Mark], name: str = "onnxlens") -> dict[str, Any]:
    """Model Explorer's node data (a ``ModelNodeData``: graph id → ``GraphNodeData``) that labels
    each marked node with its text and colours it by severity."""
    by_graph: dict[str, dict[str, Any]] = {}
    for mark in marks:
        results = by_graph.setdefault(mark.graph_id or graph_id, {})
        results[mark.node_id] = {"value": mark.label, "bgColor": SEVERITY_COLORS[mark.severity]}
    return {graph: {"name": name, "results": results} for graph, results in by_graph.items()}


def errors_overlay(graph_id: str, errors: Mapping[str, float],
                   name: str = "max abs error vs PyTorch") -> dict[str, Any]:
    """Model Explorer's node data for a numeric mismatch: each node's max absolute error
    against PyTorch (node id → error), coloured from the smallest (green) to the largest
    (red). JSON has no NaN or infinity: a non-finite error is shown as -1 on red."""
    results: dict[str, Any] = {}
    for node_id, error in errors.items():
        if math.isfinite(error):
            results[node_id] = {"value": error}
        else:
            results[node_id] = {"value": -1, "bgColor": SEVERITY_COLORS[Severity.ERROR]}
    return {graph_id: {"name": name, "results": results, "gradient": list(_ERROR_GRADIENT)}}


def runtimes_overlay(graph_id: str, node_ids: Sequence[str], runs: Sequence[RuntimeRun],
                     name: str = "runtimes") -> dict[str, Any]:
    """Model Explorer's node data for the runtimes named (docs/runtimes.md): each node labelled
    with where it runs ("openvino-cpu ✓ · nnapi → CPU"), red where a runtime cannot take it
    (it fails there), amber where one leaves it to the CPU, green where every one runs it.
    Only the runs that judged nodes one by one count: a runtime that loaded the model, or
    one that named the nodes it could not take."""
    judged = [run for run in runs if run.precision == "fp32" and (
        run.state in ("matches", "differs", "supported", "falls back") or run.unsupported)]
    if not judged:
        return {}
    results: dict[str, Any] = {}
    for node_id in node_ids:
        parts, worst = [], None
        for run in judged:
            if node_id not in run.unsupported:
                parts.append(f"{run.runtime} ✓")
            elif run.state == "fails":
                parts.append(f"{run.runtime} ✗")
                worst = Severity.ERROR
            else:
                parts.append(f"{run.runtime} → CPU")
                worst = worst or Severity.WARNING
        results[node_id] = {"value": " · ".join(parts), "bgColor": SEVERITY_COLORS[worst]
                            if worst is not None else RUNS_EVERYWHERE_COLOR}
    return {graph_id: {"name": name, "results": results}}


def sidecar(sources: Mapping[str, NodeSource], workspace: Path) -> dict[str, Any]:
    """The mapping as plain JSON for the editor: node key → where it came from (paths relative
    to the workspace, 1-based lines and columns, the end column exclusive)."""
    return {key: {
        "graph_id": source.graph_id, "node_id": source.node_id, "name": source.name,
        "op_type": source.op_type, **_position(source.location, workspace),
        "callers": [_position(caller, workspace) for caller in source.callers],
    } for key, source in sources.items()}


def read_sidecar(path: Path, workspace: Path) -> dict[str, NodeSource]:
    """The mapping a graph job wrote (``sidecar``), for the front ends: node key → its
    ``NodeSource``, paths absolute again."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {key: NodeSource(node["graph_id"], node["node_id"], node.get("name", node["node_id"]),
                            node["op_type"], _location(node, workspace),
                            tuple(_location(caller, workspace) for caller in node["callers"]))
            for key, node in data.items()}


def write_json(data: Mapping[str, Any], path: Path) -> None:
    """An overlay or the sidecar as a file (Model Explorer reads node data from files),
    written beside and swapped in: never through a symbolic link, never into a FIFO."""
    write_text_atomically(path, json.dumps(data, indent=1, sort_keys=True), stream_ok=False)


def is_graph_directory(directory: Path) -> bool:
    """Whether ``directory`` is one ``onnxlens graph`` wrote: it holds the marker, a regular
    file (a directory that merely holds a ``nodes.json`` is somebody else's)."""
    marker = directory / MARKER_FILE
    return marker.is_file() and not marker.is_symlink()


def write_marker(directory: Path) -> None:
    write_text_atomically(directory / MARKER_FILE, MARKER_TEXT, stream_ok=False)


def _position(location: Location, workspace: Path) -> dict[str, Any]:
    try:
        shown = location.path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        shown = location.path.as_posix()
    start, end = location.range.start, location.range.end
    return {"path": shown, "line": start.line, "column": start.column,
            "end_line": end.line, "end_column": end.column}


def _location(position: Mapping[str, Any], workspace: Path) -> Location:
    """``_position`` read back (an absolute path stays itself)."""
    return Location((workspace / position["path"]).resolve(),
                    Range.of(position["line"], position["column"], position["end_line"],
                             position["end_column"]))


def _at(location: Location, path: Path, line: int) -> bool:
    return location.range.start.line <= line <= location.range.end.line \
        and location.path.resolve() == path


def _node_source(graph_id: str, node_id: str, node: onnx.NodeProto,
                 workspace: Path) -> NodeSource | None:
    metadata = {entry.key: entry.value for entry in node.metadata_props}
    frames = parse_stack_trace(metadata.get(STACK_TRACE_KEY))
    mapped = map_frames(frames, workspace, hint=_hint(metadata, node.op_type))
    if mapped is None:
        return None
    callers = tuple(related.location for related in mapped.related
                    if related.message.startswith("called from")
                    and is_user_frame(related.location.path, workspace))
    return NodeSource(graph_id, node_id, node.name, node.op_type, mapped.location, callers)


def _hint(metadata: Mapping[str, str], op_type: str) -> str:
    """The aten op the node translates (``aten.sigmoid.default`` from the FX node's text), which
    narrows a line to its call better than the ONNX op type does; else the op type."""
    fx_node = metadata.get(FX_NODE_KEY, "")
    marker = "target=torch.ops."
    if marker in fx_node:
        return fx_node.split(marker, 1)[1].split("]", 1)[0].split("(", 1)[0]
    return op_type


def _shown_nodes(model: onnx.ModelProto) -> Iterator[tuple[str, str, onnx.NodeProto]]:
    """(graph id, node id, node) for every named node Model Explorer shows."""
    yield from _graph_nodes(model.graph.node, main_graph_id(model), prefix="", in_main=True)
    for function in model.functions:
        function_id = f"[function]{function.domain}::{function.name}"
        if function.overload:
            function_id += f"::{function.overload}"
        yield from _graph_nodes(function.node, function_id, prefix="", in_main=False)


def _graph_nodes(nodes: Sequence[onnx.NodeProto], graph_id: str, prefix: str,
                 in_main: bool) -> Iterator[tuple[str, str, onnx.NodeProto]]:
    """A graph's nodes as the adapter shows them: an If's branches embedded under the If's id
    (in the main graph and its bodies, not in functions), the bodies of the main graph's other
    nodes as graphs of their own; deeper bodies are not shown."""
    import onnx

    embeds_ifs = not graph_id.startswith("[function]")
    for node in nodes:
        if not node.name:
            continue
        node_id = prefix + node.name
        yield graph_id, node_id, node
        bodies = [a for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
        for body in bodies:
            if embeds_ifs and node.op_type == "If" and node.domain in ("", "ai.onnx"):
                yield from _graph_nodes(body.g.node, graph_id, f"{node_id}/{body.name}/",
                                        in_main)
            elif in_main:
                yield from _graph_nodes(body.g.node, f"{node_id}/{body.name}", prefix="",
                                        in_main=False)


__all__ = [
    "ERRORS_FILE",
    "MARKS_FILE",
    "MODEL_FILE",
    "NODES_FILE",
    "SEVERITY_COLORS",
    "GraphFiles",
    "Mark",
    "NodeSource",
    "errors_overlay",
    "main_graph_id",
    "marks_overlay",
    "node_sources",
    "nodes_at",
    "sidecar",
    "write_json",
]
