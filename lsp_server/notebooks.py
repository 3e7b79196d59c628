"""Notebook documents (LSP notebook sync, pygls 2): a notebook open in the editor is checked
as one module of its code cells in order (exporter/source/notebooks.py, docs/notebooks.md),
and what the check finds is published on the cells, each finding on its cell's line.

The check's origin is the notebook's URI; its findings, in module lines, are split over the
cells' text documents (``vscode-notebook-cell:`` URIs) when they are published."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from exporter.findings.diagnostics import Diagnostic
from exporter.source.notebooks import NotebookModule, module_of_cells
from exporter.source.text import split_lines
from lsp_server.convert import PositionConverter, path_of, path_uri, to_lsp
from lsp_server.server import OnnxLensServer


@dataclass(frozen=True)
class NotebookView:
    """A notebook as its last check read it: the module, and each code cell's text document."""

    path: Path
    module: NotebookModule
    cell_uris: dict[int, str]  # cell number -> the cell's text document URI

    def publish(self, diagnostics: list[Diagnostic], server: OnnxLensServer,
                positions: PositionConverter) -> None:
        """Each finding on its cell (a cell with none gets an empty list)."""
        lines = tuple(split_lines(self.module.text))
        module_lines = PositionConverter(positions.encoding, lambda path: lines
                                         if path == self.path else positions.lines_of(path))
        by_cell: dict[str, list[types.Diagnostic]] = {uri: [] for uri in self.cell_uris.values()}
        for diagnostic in diagnostics:
            placed = self.module.cell_range(diagnostic.location.range)
            if placed is None or placed[0].number not in self.cell_uris:
                continue
            cell, _ = placed
            shown = to_lsp(diagnostic, server.support, module_lines)
            shown.range = _shifted(shown.range, cell.first_line - 1, cell.lines)
            if shown.related_information:
                shown.related_information = [self._on_cell(info)
                                             for info in shown.related_information]
            by_cell[self.cell_uris[cell.number]].append(shown)
        for uri, shown_on_cell in by_cell.items():
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=shown_on_cell))

    def _on_cell(self, info: types.DiagnosticRelatedInformation
                 ) -> types.DiagnosticRelatedInformation:
        if path_of(info.location.uri) != self.path:
            return info
        cell = self.module.cell_at(info.location.range.start.line + 1)
        if cell is None or cell.number not in self.cell_uris:
            return info
        return types.DiagnosticRelatedInformation(
            location=types.Location(uri=self.cell_uris[cell.number],
                                    range=_shifted(info.location.range, cell.first_line - 1,
                                                   cell.lines)),
            message=info.message)

    def clear(self, server: OnnxLensServer) -> None:
        for uri in self.cell_uris.values():
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[]))


def _shifted(range_: types.Range, offset: int, lines: tuple[str, ...]) -> types.Range:
    """A module range as a range of its cell (``offset``: the module lines before the cell);
    one that runs past the cell ends at the end of its first line."""
    start = types.Position(line=range_.start.line - offset, character=range_.start.character)
    end_line = range_.end.line - offset
    if end_line >= len(lines):
        return types.Range(start=start, end=types.Position(
            line=start.line, character=max(len(lines[start.line]) if start.line < len(lines)
                                           else 0, start.character + 1)))
    return types.Range(start=start, end=types.Position(line=end_line,
                                                       character=range_.end.character))


def view_of(server: OnnxLensServer, notebook_uri: str) -> NotebookView | None:
    """The notebook's code cells, as the editor holds them now, as one module."""
    notebook = server.workspace.get_notebook_document(notebook_uri=notebook_uri)
    if notebook is None:
        return None
    cells: list[tuple[int, str]] = []
    uris: dict[int, str] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.kind != types.NotebookCellKind.Code:
            continue
        # (pygls keeps a cell's document under its URI unquoted: `#W1s...%3D%3D` -> `==`)
        cells.append((index + 1, server.workspace.get_text_document(cell.document).source))
        uris[index + 1] = cell.document
    return NotebookView(path_of(notebook_uri).resolve(), module_of_cells(cells), uris)


def check_notebook(server: OnnxLensServer, notebook_uri: str, delay: float = 0.0) -> None:
    if not server.trusted:
        return
    view = view_of(server, notebook_uri)
    if view is None:
        return
    server.notebooks[path_uri(view.path)] = view
    notebook = server.workspace.get_notebook_document(notebook_uri=notebook_uri)
    server.checker.request(notebook_uri, notebook.version if notebook else None,
                           view.module.text, delay=delay)


def did_open(server: OnnxLensServer, params: types.DidOpenNotebookDocumentParams) -> None:
    if server.settings.trigger != "manual":
        check_notebook(server, params.notebook_document.uri)


def did_change(server: OnnxLensServer, params: types.DidChangeNotebookDocumentParams) -> None:
    """An edit in any cell re-checks the notebook's targets (those after it see the edit)."""
    if server.settings.trigger == "onType":
        check_notebook(server, params.notebook_document.uri,
                       delay=server.settings.debounceMs / 1000)


def did_save(server: OnnxLensServer, params: types.DidSaveNotebookDocumentParams) -> None:
    if server.settings.trigger in ("onSave", "onType"):
        check_notebook(server, params.notebook_document.uri)


def did_close(server: OnnxLensServer, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    server.checker.close(uri)
    server.store.replace(uri, {})
    view = server.notebooks.pop(path_uri(path_of(uri).resolve()), None)
    if isinstance(view, NotebookView):
        view.clear(server)


def register(server: OnnxLensServer) -> None:
    server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)(did_save)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)(did_close)
