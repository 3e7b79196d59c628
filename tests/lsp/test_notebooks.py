"""A notebook open in the editor (LSP notebook sync): its code cells are checked as one module
and each finding is published on its cell's text document, at the line within the cell; an
edit of a cell, saved, re-checks (lsp_server/notebooks.py, docs/notebooks.md)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from lsprotocol import types

from tests.lsp.conftest import diagnostics_for, served, uri_of

NOTEBOOK = Path(__file__).parents[1] / "onnxlens" / "notebooks" / "export.ipynb"
FIXED = "    def forward(self, x):\n        return torch.where(x.sum() > 0, x + 1, x - 1)\n"


def _cell_uri(notebook: Path, number: int) -> str:
    """As VS Code names a cell: a quoted fragment (pygls keeps the document unquoted)."""
    return f"vscode-notebook-cell:{notebook.resolve().as_posix()}#W{number}sZmlsZQ%3D%3D"


async def test_findings_land_on_their_cells_and_clear_after_the_fix(tmp_path):
    notebook = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, notebook)
    (tmp_path / "pyproject.toml").write_text("")
    cells = json.loads(notebook.read_text())["cells"]
    texts = {number: "".join(cell["source"]) for number, cell in enumerate(cells, 1)
             if cell["cell_type"] == "code"}
    notebook_uri = uri_of(notebook)
    async with served(tmp_path) as client:
        client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri, notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(
                    kind=types.NotebookCellKind.Code if number in texts
                    else types.NotebookCellKind.Markup, document=_cell_uri(notebook, number))
                    for number in range(1, len(cells) + 1)]),
            cell_text_documents=[types.TextDocumentItem(
                uri=_cell_uri(notebook, number), language_id="python", version=1, text=text)
                for number, text in texts.items()]))

        branching = _cell_uri(notebook, 6)
        found = await diagnostics_for(client, branching, lambda d: bool(d))
        assert [(d.code, d.range.start.line, d.range.start.character, d.range.end.character)
                for d in found] == [("ONNX101", 3, 11, 22)]  # cell 6, line 4, `x.sum() > 0`
        assert found[0].message.startswith("`if x.sum() > 0:` depends on the values")
        for number in sorted(texts.keys() - {6}):  # clean (Quiet's finding is suppressed)
            assert await diagnostics_for(client, _cell_uri(notebook, number)) == []

        # CodeLens and hover on the cell that holds the target, at the cell's lines; the
        # commands act on the notebook
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=branching)))
        assert [(lens.range.start.line, lens.command.title, list(lens.command.arguments))
                for lens in lenses][:2] == [
            (1, "✗ ONNX · 1 problem", [notebook_uri, "Branching"]),
            (1, "Export", [notebook_uri, "Branching"])]
        clean = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=_cell_uri(notebook, 4)),
            position=types.Position(line=1, character=8)))  # `class Clean`
        assert clean is not None and "ONNX export: `Clean`" in clean.contents.value
        # the quick fix edits the cell's own document, at the cell's line
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=branching), range=found[0].range,
            context=types.CodeActionContext(diagnostics=found)))
        ignore = actions[-1]
        assert ignore.title == "Ignore ONNX101 on this line"
        ((edited, (edit,)),) = ignore.edit.changes.items()
        assert (edited, edit.range.start.line) == (branching, 3)

        fixed = texts[6].replace(texts[6][texts[6].index("    def forward"):], FIXED)
        client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2,
                                                                        uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
                text_content=[types.NotebookDocumentCellContentChanges(
                    document=types.VersionedTextDocumentIdentifier(uri=branching, version=2),
                    changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)])]))))
        client.diagnostics.pop(branching, None)
        client.notebook_document_did_save(types.DidSaveNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook_uri)))
        assert await diagnostics_for(client, branching) == []

        client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook_uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=_cell_uri(notebook, n))
                                 for n in texts]))


EXPORTING_CELLS = {
    1: "import torch\n",
    2: "class Branching(torch.nn.Module):\n    def forward(self, x):\n"
       "        if x.sum() > 0:\n            return x\n        return -x\n",
    3: "# onnx-export:\ndef export_branching():\n    x = torch.randn(2, 3)\n"
       '    torch.onnx.export(Branching(), (x,), "branching.onnx", dynamo=True)\n',
}


async def test_an_export_call_in_an_edited_notebook_is_named_by_its_cell_and_checked(tmp_path):
    """Issue 38: an export call's target in a notebook is named by its cell and line
    (``export_branching@cell3:4``), never by a line of the module the cells make, also while
    the open cells differ from the saved file (the worker finds the target by that name)."""
    notebook = tmp_path / "exports.ipynb"
    _write_notebook(notebook, list(EXPORTING_CELLS.values()))
    (tmp_path / "pyproject.toml").write_text("")
    # unsaved: two lines more in cell 1, so the module's lines are not the saved file's
    texts = {**EXPORTING_CELLS, 1: "import torch\n\nprint('edited')\n"}
    notebook_uri = uri_of(notebook)
    async with served(tmp_path) as client:
        _open(client, notebook, texts)
        found = await diagnostics_for(client, _cell_uri(notebook, 2), lambda d: bool(d))
        assert [(d.code, d.range.start.line, d.range.start.character) for d in found] == [
            ("ONNX101", 2, 11)]  # cell 2, line 3: `x.sum() > 0`
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=_cell_uri(notebook, 3))))
        assert [(lens.range.start.line, lens.command.title, list(lens.command.arguments))
                for lens in lenses][:1] == [
            (3, "✗ ONNX · 1 problem", [notebook_uri, "export_branching@cell3:4"])]
        assert not (tmp_path / "branching.onnx").exists()


def _open(client, notebook: Path, texts: dict[int, str]) -> None:
    """Open ``notebook`` with its code cells ``texts`` (by number), in the editor."""
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=uri_of(notebook), notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=types.NotebookCellKind.Code,
                                      document=_cell_uri(notebook, number))
                   for number in texts]),
        cell_text_documents=[types.TextDocumentItem(
            uri=_cell_uri(notebook, number), language_id="python", version=1, text=text)
            for number, text in texts.items()]))


def _write_notebook(path: Path, texts: list[str], metadata: dict | None = None) -> None:
    path.write_text(json.dumps({"cells": [
        {"cell_type": "code", "metadata": {}, "source": text.splitlines(True), "outputs": [],
         "execution_count": None} for text in texts],
        "metadata": metadata or {}, "nbformat": 4, "nbformat_minor": 5}))


DELETED_CELLS = {
    1: "import torch\n",
    2: "# onnx-export: args=(torch.randn(2, 3),)\nclass Branching(torch.nn.Module):\n"
       "    def forward(self, x):\n        if x.sum() > 0:\n            return x\n"
       "        return -x\n",
    3: "# onnx-export: args=(torch.randn(2, 3),)\nclass Doubling(torch.nn.Module):\n"
       "    def forward(self, x):\n        return x * 2\n",
}


async def test_a_deleted_cells_findings_leave_the_problems_panel(tmp_path):
    """Issue 39: a check published on the cells the notebook has, so what was shown on a
    deleted cell stayed in the Problems panel for ever."""
    notebook = tmp_path / "deleted.ipynb"
    _write_notebook(notebook, list(DELETED_CELLS.values()))
    (tmp_path / "pyproject.toml").write_text("")
    notebook_uri = uri_of(notebook)
    deleted = _cell_uri(notebook, 2)
    async with served(tmp_path) as client:
        _open(client, notebook, DELETED_CELLS)
        found = await diagnostics_for(client, deleted, lambda d: bool(d))
        assert [(d.code, d.range.start.line) for d in found] == [("ONNX101", 3)]

        client.diagnostics.pop(deleted, None)  # the next publish for it is awaited
        client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2,
                                                                        uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(start=1, delete_count=1, cells=[]),
                    did_close=[types.TextDocumentIdentifier(uri=deleted)])))))
        client.notebook_document_did_save(types.DidSaveNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook_uri)))

        assert await diagnostics_for(client, deleted) == []
        # the check of the notebook without it: its other target, clean
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=_cell_uri(notebook, 3))))
        assert [list(lens.command.arguments) for lens in lenses][:1] == [
            [notebook_uri, "Doubling"]]
        assert await diagnostics_for(client, _cell_uri(notebook, 3)) == []


async def test_a_notebook_whose_kernel_is_not_python_gets_only_why(tmp_path):
    """Issue 39: an R notebook was parsed as Python ("Syntax error in cell ...")."""
    texts = {1: "library(torch)\nx <- torch_randn(2, 3)\n",
             2: "# torch.onnx from R\nif (as.numeric(x$sum()) > 0) {\n  print('yes')\n}\n"}
    notebook = tmp_path / "analysis.ipynb"
    _write_notebook(notebook, list(texts.values()),
                    {"kernelspec": {"display_name": "R", "language": "R", "name": "ir"},
                     "language_info": {"name": "R"}})
    (tmp_path / "pyproject.toml").write_text("")
    async with served(tmp_path) as client:
        _open(client, notebook, texts)
        found = await diagnostics_for(client, _cell_uri(notebook, 1), lambda d: bool(d))
        assert [(d.code, d.severity, d.range.start.line) for d in found] == [
            ("ONNX005", types.DiagnosticSeverity.Information, 0)]
        assert found[0].message.startswith("The notebook is not checked: its kernel's "
                                           "language is R (`metadata.kernelspec.language`)")
        assert await diagnostics_for(client, _cell_uri(notebook, 2)) == []


def test_a_cells_quick_fixes_edit_the_cell_at_its_own_lines():
    """A legacy argument in the third cell: its quick fixes (the removal, "Check this call")
    become code actions on the cell's document at the cell's lines; a fix that would edit
    another cell is dropped (lsp_server/notebooks.py, lsp_server/features.py)."""
    from exporter.findings.fixes import FixEdit, QuickFix
    from exporter.findings.positions import Range
    from exporter.source.edits import apply_edits
    from exporter.source.notebooks import module_of_cells
    from exporter.source.targets import discover
    from lsp_server.client_support import ClientSupport
    from lsp_server.convert import PositionConverter, to_lsp
    from lsp_server.features import code_actions
    from lsp_server.notebooks import NotebookView

    path = Path("/nb/export.ipynb")
    cells = [(1, "import torch\n"), (2, "model = torch.nn.Linear(2, 2)\nx = torch.randn(1, 2)\n"),
             (4, "def export():\n    torch.onnx.export(model, (x,), 'm.onnx',"
                 " do_constant_folding=True)\n")]
    module = module_of_cells(cells)
    view = NotebookView(path, module, {n: f"cell:{n}" for n, _ in cells})
    (finding,) = discover(path, module.text, module).diagnostics
    assert finding.rule == "ONNX604"
    elsewhere = QuickFix("Edit another cell", (FixEdit(path, Range.of(1, 1, 1, 1), "#\n"),))
    finding = replace(finding, quick_fixes=(*finding.quick_fixes, elsewhere))
    cell = module.cells[2]
    shown = to_lsp(view._fixes_in_cell(finding, cell), ClientSupport(),
                   PositionConverter("utf-16", lambda _: tuple(module.text.splitlines())))
    positions = view.cell_positions(cell, PositionConverter("utf-16", lambda _: ()))
    actions = code_actions("cell:4", [shown], {}, list(cell.lines), positions, path)
    assert [a.title for a in actions] == [
        "Remove the ignored `do_constant_folding`",
        "Check this call: mark `export` with `# onnx-export:`"]
    text = cells[2][1]
    removed, marked = ([*a.edit.changes["cell:4"]] for a in actions[:2])
    assert apply_edits(text, [FixEdit(path, Range.of(e.range.start.line + 1,
                                                     e.range.start.character + 1,
                                                     e.range.end.line + 1,
                                                     e.range.end.character + 1), e.new_text)
                              for e in removed]) == text.replace(", do_constant_folding=True", "")
    assert marked[0].range.start.line == 0 and marked[0].new_text == "# onnx-export:\n"
