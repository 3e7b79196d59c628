"""The graph a check exported, written as the files Model Explorer shows (docs/graph.md): the
ONNX model as ``torch.onnx.export`` made it (its source metadata kept), each node's source
line (``nodes.json``), the findings as node labels (``marks.json``), for a numeric
mismatch, each node's error against PyTorch (``errors.json``), and where runtimes are named,
where each node runs (``runtimes.json``). The node to select is the one
the first error names: the node ONNX Runtime failed in, the first value that diverges, else
the first node of the line the error is at."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import onnx

from exporter.findings.diagnostics import Diagnostic
from exporter.findings.rules import Severity
from exporter.pipeline.artifacts import save_model
from exporter.pipeline.comparing import differences
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.intermediates import intermediates
from exporter.reports.graph_view import (
    ERRORS_FILE,
    MARKS_FILE,
    MODEL_FILE,
    NODES_FILE,
    RUNTIMES_FILE,
    GraphFiles,
    Mark,
    NodeSource,
    errors_overlay,
    main_graph_id,
    marks_overlay,
    node_sources,
    runtimes_overlay,
    sidecar,
    write_json,
    write_marker,
)

_LABEL_LIMIT = 160
#: the rules whose finding is a numeric mismatch: their graph shows each node's error
_MISMATCH_RULES = ("ONNX501", "ONNX502", "ONNX503")


def write_graph_files(ctx: CheckContext, diagnostics: list[Diagnostic],
                      directory: Path) -> GraphFiles | None:
    """Write the graph of ``ctx``'s check into ``directory``; None when the check never got
    an ONNX model (it failed to load, capture or translate)."""
    translated = ctx.translated
    if translated is None:
        return None
    proto = translated.model_proto
    directory.mkdir(parents=True, exist_ok=True)
    write_marker(directory)
    model_path = directory / MODEL_FILE
    save_model(proto, model_path)
    graph_id = main_graph_id(proto)
    sources = node_sources(proto, ctx.workspace)
    producers = _producers(proto)
    marks = list(_marks(diagnostics, sources, producers, graph_id))
    write_json(sidecar(sources, ctx.workspace), directory / NODES_FILE)
    node_data = []
    if any(d.rule in _MISMATCH_RULES for d in diagnostics):
        errors = _node_errors(ctx, producers)
        if errors:
            write_json(errors_overlay(graph_id, errors), directory / ERRORS_FILE)
            node_data.append(str(directory / ERRORS_FILE))
    # Model Explorer colours the nodes by the last node data it was given: the marks, or
    # where the runtimes named run each node when there are such
    write_json(marks_overlay(graph_id, marks), directory / MARKS_FILE)
    node_data.append(str(directory / MARKS_FILE))
    runtimes = runtimes_overlay(graph_id, [node.name for node in proto.graph.node],
                                ctx.summary.runtimes)
    if runtimes:
        write_json(runtimes, directory / RUNTIMES_FILE)
        node_data.append(str(directory / RUNTIMES_FILE))
    first = next((mark for mark in marks if mark.severity == Severity.ERROR),
                 marks[0] if marks else None)
    return GraphFiles(model=str(model_path), nodes=str(directory / NODES_FILE),
                      node_data=node_data, graph_id=graph_id,
                      selected_node=first.node_id if first else None,
                      selected_graph=first.graph_id if first and first.graph_id != graph_id
                      else None)


def _producers(proto: onnx.ModelProto) -> dict[str, str]:
    """Each value of the main graph → the name of the node computing it."""
    return {output: node.name for node in proto.graph.node for output in node.output if node.name}


def _marks(diagnostics: Iterable[Diagnostic], sources: Mapping[str, NodeSource],
           producers: Mapping[str, str], graph_id: str) -> Iterable[Mark]:
    """A label on the nodes each finding is about: the node it names, the node computing the
    value it names, else the nodes of its own source line. Errors first, then the rest."""
    marked: set[tuple[str, str]] = set()
    by_line: dict[tuple[Path, int], list[NodeSource]] = {}  # each node's own line, once
    for source in sources.values():
        key = (source.location.path.resolve(), source.location.range.start.line)
        by_line.setdefault(key, []).append(source)
    ordered = sorted(diagnostics, key=lambda d: d.severity != Severity.ERROR)
    for diagnostic in ordered:
        label = f"{diagnostic.rule}: {diagnostic.message}"
        if len(label) > _LABEL_LIMIT:
            label = label[:_LABEL_LIMIT - 1] + "…"
        severity = diagnostic.severity or Severity.ERROR
        named = diagnostic.data.onnx_node or producers.get(diagnostic.data.fx_node or "")
        if named:
            places = [(graph_id, str(named))]
        else:
            location = diagnostic.location
            places = [(source.graph_id, source.node_id) for source in by_line.get(
                (location.path.resolve(), location.range.start.line), [])]
        for place in places:
            if place not in marked:
                marked.add(place)
                yield Mark(place[1], label, severity, place[0])


def _node_errors(ctx: CheckContext, producers: Mapping[str, str]) -> dict[str, float]:
    """Each main-graph node's max absolute error against PyTorch at the example inputs (the
    values both runtimes compute: exporter/pipeline/intermediates.py)."""
    translated, loaded = ctx.translated, ctx.loaded
    if translated is None or loaded is None or translated.onnx_program.exported_program is None:
        return {}
    errors: dict[str, float] = {}
    try:
        for pair in intermediates(translated.onnx_program.exported_program,
                                  translated.model_proto, translated.weights,
                                  *fresh_copy(loaded.args, loaded.kwargs)):
            node = producers.get(pair.node.name)
            if node is not None and pair.expected.shape == pair.actual.shape:
                errors[node] = differences(pair.expected, pair.actual)[0]
    except Exception:  # the overlay is a help on top of the findings: never a failure
        logging.getLogger(__name__).debug("comparing intermediates failed", exc_info=True)
    return errors
