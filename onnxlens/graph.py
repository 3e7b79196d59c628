"""``onnxlens graph FILE::TARGET``: the graph onnxlens checked, in Google's Model Explorer
(docs/graph.md). One graph job in an export worker of its own (the target's check, then its
ONNX model and the files of ``exporter/pipeline/graph_files.py``), then the viewer on a
loopback port (``export_worker/graph_viewer.py``) until Ctrl+C. ``--no-serve`` writes the files
and says where each node came from, without the viewer."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from export_worker.graph_viewer import ViewerError, missing_packages, missing_packages_message
from export_worker.messages import GraphAnswer
from exporter.reports.graph_view import (
    GRAPH_FILES,
    MARKER_FILE,
    GraphFiles,
    NodeSource,
    is_graph_directory,
    read_sidecar,
    sidecar,
)
from exporter.reports.render import display_path, format_diagnostic, printable
from onnxlens.messages import EXIT_ERRORS, EXIT_OK, UsageError
from onnxlens.save_and_run import resolve_target, single_job


def graph_command(args: argparse.Namespace) -> int:
    if not args.no_serve and missing_packages():
        raise UsageError(missing_packages_message(missing_packages()))
    if args.output_dir is not None:
        _check_output_dir(args.output_dir)
    keep = args.output_dir is not None
    directory = (args.output_dir or Path(tempfile.mkdtemp(prefix="onnxlens-graph-"))).absolute()
    try:
        return _graph(args, directory)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


def _check_output_dir(directory: Path) -> None:
    """Before any check runs: a new or empty directory, or one an earlier ``graph`` wrote (it
    holds the graph's marker; its graph files are replaced), where this user may write; never
    a symbolic link, and never a directory of other files a graph's ``model.onnx`` could
    replace."""
    shown = f"--output-dir {display_path(directory)}"
    if directory.is_symlink():
        raise UsageError(f"{shown}: a symbolic link; give the directory itself")
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{shown}: not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not is_graph_directory(directory):
        raise UsageError(f"{shown}: the directory holds other files; give a new or empty one "
                         f"(or one `onnxlens graph` wrote: it holds `{MARKER_FILE}`)")
    for name in GRAPH_FILES:
        path = directory / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise UsageError(f"{shown}: `{name}` there is not a regular file (a symbolic "
                             "link, a directory, a FIFO); the graph does not replace it")
    existing = next(p for p in (directory, *directory.absolute().parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{shown}: {display_path(existing)} is not writable (a read-only "
                         "file system, or not yours)")


def _graph(args: argparse.Namespace, directory: Path) -> int:
    target, end = single_job(args, "graph", output=str(directory))
    answer = end.answer
    if isinstance(answer, GraphAnswer):  # the check's findings
        for diagnostic in answer.result.diagnostics:
            print(format_diagnostic(diagnostic), file=sys.stderr)
    else:
        end.print_problems(target)
    if not isinstance(answer, GraphAnswer) or answer.graph is None:
        print(f"onnxlens: no graph of {args.target}: {end.reason}", file=sys.stderr)
        return EXIT_ERRORS
    graph = answer.graph
    workspace = resolve_target(args.target, args.root)[2]
    nodes = read_sidecar(Path(graph.nodes), workspace)
    if args.no_serve:
        _report(args, graph, nodes, workspace, url=None, kept=args.output_dir is not None)
        return EXIT_OK
    from export_worker.graph_viewer import start_viewer

    try:
        viewer = start_viewer(Path(graph.model), [Path(p) for p in graph.node_data],
                              graph.selected_node, selected_graph=graph.selected_graph)
    except ViewerError as error:
        print(f"onnxlens: {error}", file=sys.stderr)
        return EXIT_ERRORS
    # SIGTERM stops the viewer as Ctrl+C does from before the address is printed: whoever
    # reads it may stop the command at once
    with viewer, _stopped_by_sigterm() as stopped:
        _report(args, graph, nodes, workspace, url=viewer.url,
                kept=args.output_dir is not None)
        if not args.no_browser:
            viewer.open_in_browser()
        _wait_for_interrupt(stopped)
    return EXIT_OK


def _report(args: argparse.Namespace, graph: GraphFiles, nodes: dict[str, NodeSource],
            workspace: Path, url: str | None, kept: bool) -> None:
    """Where the selected node came from, the files kept and the viewer's address; JSON: the
    whole mapping too (``nodes.json``, paths relative to the workspace)."""
    if args.format == "json":
        print(json.dumps({"target": args.target, "url": url, "model": graph.model,
                          "node_data": graph.node_data, "graph_id": graph.graph_id,
                          "selected_node": graph.selected_node,
                          "selected_graph": graph.selected_graph,
                          "nodes": sidecar(nodes, workspace)}, indent=2),
              flush=True)
        return
    print(f"onnxlens: graph of {args.target}: {len(nodes)} node(s) mapped to source lines",
          flush=True)
    if graph.selected_node is not None:
        key = graph.selected_node if graph.selected_graph is None \
            else f"{graph.selected_graph}/{graph.selected_node}"
        where = nodes.get(key)
        line = f" ({where.op_type}) at {display_path(where.location.path)}:" \
            f"{where.location.range.start.line}:{where.location.range.start.column}" \
            if where else ""
        print(f"onnxlens: selected node {printable(graph.selected_node)}{line}", flush=True)
    if kept:
        files = ", ".join(Path(path).name for path in (graph.model, graph.nodes,
                                                       *graph.node_data))
        print(f"onnxlens: wrote {display_path(Path(graph.model).parent)}/ ({files})",
              flush=True)
    if url is not None:
        print(f"onnxlens: Model Explorer at {url}", flush=True)
        print("onnxlens: press Ctrl+C to stop it", flush=True)


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[threading.Event]:
    """An event SIGTERM sets while the block runs (a `graph` left in the background is stopped
    as one expects)."""
    stopped = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        yield stopped
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wait_for_interrupt(stopped: threading.Event) -> None:
    """Until Ctrl+C or ``stopped``."""
    try:
        while not stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    print(file=sys.stderr)
