"""The server is built by ``create_server()`` (lsp_server/app.py), not imported into being, and
the modules of ``lsp_server`` import one another without a circle."""

from __future__ import annotations

import ast
from pathlib import Path

from lsprotocol import types

from lsp_server.app import create_server

PACKAGE = Path(__file__).resolve().parents[2] / "lsp_server"
PREFIX = "lsp_server."
COMMANDS = ["onnxlens.export", "onnxlens.checkWorkspace", "onnxlens.saveModel",
            "onnxlens.runModel", "onnxlens.showReport", "onnxlens.showGraph",
            "onnxlens.graphNodesAt", "onnxlens.writeSarif",
            "onnxlens.restartWorker", "onnxlens.applyEdit"]


def test_each_server_is_built_with_every_handler_of_its_own():
    first, second = create_server(), create_server()
    assert first is not second and first.checker is not second.checker
    for server in (first, second):
        assert list(server.protocol.fm.commands) == COMMANDS
        features = server.protocol.fm.features
        assert {types.INITIALIZE, types.SHUTDOWN, types.TEXT_DOCUMENT_DID_OPEN,
                types.TEXT_DOCUMENT_DID_CLOSE, types.TEXT_DOCUMENT_CODE_LENS,
                types.TEXT_DOCUMENT_HOVER, types.TEXT_DOCUMENT_CODE_ACTION,
                "onnxlens/status", "onnxlens/trustChanged", "onnxlens/editors"} <= set(features)


def _imports() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports (also those
    imported only for type checking)."""
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in modules:
        imported: set[str] = set()
        for node in ast.walk(ast.parse((PACKAGE / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "lsp_server":
                imported |= {alias.name for alias in node.names} & modules
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
                imported.add((node.module or "").removeprefix(PREFIX))
            elif isinstance(node, ast.Import):
                imported |= {alias.name.removeprefix(PREFIX) for alias in node.names
                             if alias.name.startswith(PREFIX)}
        graph[name] = imported - {name}
    return graph


def test_no_module_imports_one_that_imports_it_back():
    graph = _imports()
    assert graph["server"] and graph["app"]  # the scan sees the imports
    circular = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph[module]
        if start in seen:
            circular.append(start)
    assert circular == []
