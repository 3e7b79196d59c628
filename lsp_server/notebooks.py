"""Notebook documents (LSP notebook sync, pygls 2): a notebook open in the editor is checked
as one module of its code cells in order (exporter/source/notebooks.py, docs/notebooks.md),
and what the check finds is published on the cells, each finding on its cell's line.

The check's origin is the notebook's URI; its findings, in module lines, are split over the
cells' text documents (``vscode-notebook-cell:`` URIs) when they are published."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types

from exporter.findings.diagnostics import Diagnostic, Range
from exporter.findings.fixes import FixEdit
from exporter.source.notebooks import CodeCell, NotebookModule, module_of_cells
from exporter.source.targets import Target, discover
from exporter.source.text import split_lines
from lsp_server.convert import PositionConverter, path_of, path_uri, to_lsp
from lsp_server.server import OnnxLensServer


@dataclass(frozen=True)
class NotebookView:
    """A notebook as its last check read it: the module, and each code cell's text document."""

    path: Path
    module: NotebookModule
    cell_uris: dict[int, str]  # cell number -> the cell's text document URI
    # the cells of an earlier view that this one no longer has (deleted): the next publish
    # clears what was shown on them, once
    gone: set[str] = field(default_factory=set, compare=False)

    @property
    def text(self) -> str:
        return self.module.text

    @cached_property
    def targets(self) -> list[Target]:
        """The notebook's targets, found once per checked text (CodeLens and hover ask often)."""
        return discover(self.path, self.module.text, self.module).targets

    def cell_of(self, cell_uri: str) -> CodeCell | None:
        wanted = unquote(cell_uri)
        number = next((n for n, uri in self.cell_uris.items() if unquote(uri) == wanted), None)
        return next((c for c in self.module.cells if c.number == number), None)

    def targets_in(self, cell: CodeCell) -> list[Target]:
        """The notebook's targets defined in ``cell``, their ranges counted in the cell."""
        offset = cell.first_line - 1
        return [replace(target, definition=_moved(target.definition, -offset),
                        pragma=_moved(target.pragma, -offset) if target.pragma else None)
                for target in self.targets
                if cell.first_line <= target.definition.start.line <= cell.last_line]

    def cell_positions(self, cell: CodeCell, positions: PositionConverter) -> PositionConverter:
        """Columns converted with the cell's own lines."""
        return PositionConverter(positions.encoding, lambda path: cell.lines
                                 if path == self.path else positions.lines_of(path))

    def after(self, earlier: NotebookView | None) -> NotebookView:
        """This view, in place of ``earlier``: the cells ``earlier`` had (or had lost before
        its findings were published) that this one does not have are ``gone``."""
        if earlier is not None:
            self.gone.update((set(earlier.cell_uris.values()) | earlier.gone)
                             - set(self.cell_uris.values()))
        return self

    def publish(self, diagnostics: list[Diagnostic], server: OnnxLensServer,
                positions: PositionConverter) -> None:
        """Each finding on its cell (a cell with none gets an empty list, and so does a
        deleted cell: what was shown on it would stay in the Problems panel)."""
        lines = tuple(split_lines(self.module.text))
        module_lines = PositionConverter(positions.encoding, lambda path: lines
                                         if path == self.path else positions.lines_of(path))
        by_cell: dict[str, list[types.Diagnostic]] = {uri: [] for uri in self.cell_uris.values()}
        for diagnostic in diagnostics:
            placed = self.module.cell_range(diagnostic.location.range)
            if placed is None or placed[0].number not in self.cell_uris:
                continue
            cell, _ = placed
            shown = to_lsp(self._fixes_in_cell(diagnostic, cell), server.support,
                           module_lines)
            shown.range = _shifted(shown.range, cell.first_line - 1, cell.lines)
            if shown.related_information:
                shown.related_information = [self._on_cell(info)
                                             for info in shown.related_information]
            by_cell[self.cell_uris[cell.number]].append(shown)
        for uri in sorted(self.gone):
            by_cell.setdefault(uri, [])
        self.gone.clear()
        for uri, shown_on_cell in by_cell.items():
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=shown_on_cell))

    def _fixes_in_cell(self, diagnostic: Diagnostic, cell: CodeCell) -> Diagnostic:
        """The diagnostic with its fixes' edits of the notebook in lines of ``cell``, where
        code actions apply them; a fix that edits the notebook outside the cell is dropped."""
        def in_cell(edits: tuple[FixEdit, ...]) -> tuple[FixEdit, ...] | None:
            moved = []
            for edit in edits:
                if edit.path == self.path:
                    if not cell.first_line <= edit.range.start.line <= edit.range.end.line \
                            <= cell.last_line:
                        return None
                    edit = replace(edit, range=_moved(edit.range, 1 - cell.first_line))
                moved.append(edit)
            return tuple(moved)

        quick_fixes = [replace(fix, edits=edits) for fix in diagnostic.quick_fixes
                       if (edits := in_cell(fix.edits)) is not None]
        tried = [replace(trial, candidate=replace(trial.candidate, edits=edits))
                 for trial in diagnostic.fixes
                 if (edits := in_cell(trial.candidate.edits)) is not None]
        return replace(diagnostic, quick_fixes=tuple(quick_fixes), fixes=tuple(tried))

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
        for uri in [*self.cell_uris.values(), *sorted(self.gone - set(self.cell_uris.values()))]:
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[]))


def _moved(range_: Range, lines: int) -> Range:
    return Range.of(range_.start.line + lines, range_.start.column,
                    range_.end.line + lines, range_.end.column)


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


def check_notebook(server: OnnxLensServer, notebook_uri: str,
                   delay: float = 0.0) -> asyncio.Task[None] | None:
    if not server.trusted:
        return None
    view = view_of(server, notebook_uri)
    if view is None:
        return None
    earlier = server.notebooks.get(path_uri(view.path))
    server.notebooks[path_uri(view.path)] = view.after(
        earlier if isinstance(earlier, NotebookView) else None)
    notebook = server.workspace.get_notebook_document(notebook_uri=notebook_uri)
    return server.checker.request(notebook_uri, notebook.version if notebook else None,
                                  view.module.text, delay=delay)


@dataclass(frozen=True)
class CellContext:
    """A cell's text document as part of its open notebook: what CodeLens, hover and code
    actions on the cell need."""

    notebook_uri: str
    view: NotebookView
    cell: CodeCell

    def targets(self) -> list[Target]:
        return self.view.targets_in(self.cell)


def cell_context(server: OnnxLensServer, uri: str) -> CellContext | None:
    """``uri`` as a cell of an open, checked notebook; None for any other document."""
    notebook = server.workspace.get_notebook_document(cell_uri=uri)
    if notebook is None:
        return None
    view = server.notebook(notebook.uri)
    if not isinstance(view, NotebookView):
        return None
    cell = view.cell_of(uri)
    return CellContext(notebook.uri, view, cell) if cell is not None else None


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
    server.check_notebook = lambda uri: check_notebook(server, uri)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)(did_save)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)(did_close)
