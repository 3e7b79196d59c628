"""What the editor shows on request: CodeLens, hover, code actions."""

from __future__ import annotations

from lsprotocol import types
from lsprotocol.converters import get_converter

from lsp_server import features, notebooks
from lsp_server.convert import path_of
from lsp_server.server import OnnxLensServer


async def code_lens(ls: OnnxLensServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    uri = params.text_document.uri
    cell = notebooks.cell_context(ls, uri)
    if cell is not None:  # a notebook's cell: its targets; the commands act on the notebook
        state = ls.checker.state(cell.notebook_uri)
        return features.code_lenses(cell.notebook_uri, cell.targets(), state.targets,
                                    state.checking, ls.trusted,
                                    cell.view.cell_positions(cell.cell, ls.positions()),
                                    ls.checker.queue_position(cell.notebook_uri))
    targets = await ls.discovery.targets(uri)  # in a thread: the server answers meanwhile
    state = ls.checker.state(uri)
    return features.code_lenses(uri, targets, state.targets, state.checking,
                                ls.trusted, ls.positions(), ls.checker.queue_position(uri))


async def hover(ls: OnnxLensServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    cell = notebooks.cell_context(ls, uri)
    if cell is not None:
        targets = cell.targets()
        positions = cell.view.cell_positions(cell.cell, ls.positions())
        uri = cell.notebook_uri  # whose check state the hover shows
    else:
        targets = await ls.discovery.targets(uri)
        positions = ls.positions()
    line = params.position.line + 1
    for target in targets:
        spans = [target.definition] + ([target.pragma] if target.pragma else [])
        for span in spans:
            where = positions.range(target.path, span)
            if not span.start.line <= line <= span.end.line:
                continue
            inside = (where.start.line, where.start.character) <= (
                params.position.line, params.position.character) <= (
                where.end.line, where.end.character)
            if inside:
                state = ls.checker.state(uri)
                return features.hover(target, state.targets.get(target.name), state.checking,
                                      ls.support.markdown_hover, positions)
    return None


async def code_action(ls: OnnxLensServer, params: types.CodeActionParams
                      ) -> list[types.CodeAction | types.Command] | None:
    uri = params.text_document.uri
    cell = notebooks.cell_context(ls, uri)
    if cell is not None:  # the edits are made in the cell's own text document
        targets = {t.name: t for t in cell.targets()}
        path = cell.view.path
        lines, positions = list(cell.cell.lines), cell.view.cell_positions(cell.cell,
                                                                          ls.positions())
    else:
        targets = {t.name: t for t in await ls.discovery.targets(uri)}
        path = path_of(uri)
        lines, positions = list(ls.discovery.lines_of(path)), ls.positions()
    actions = features.code_actions(uri, list(params.context.diagnostics), targets,
                                    lines, positions, path)
    if not ls.support.code_action_literals:
        return [types.Command(title=a.title, command="onnxlens.applyEdit",
                              arguments=[get_converter().unstructure(a.edit)])
                for a in actions] or None
    return list(actions) or None


def register(server: OnnxLensServer) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_LENS)(code_lens)
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix]))(code_action)
