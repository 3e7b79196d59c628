"""Text document notifications: they start, schedule and cancel checks."""

from __future__ import annotations

from lsprotocol import types

from lsp_server.server import OnnxLensServer, server


def _python(uri: str) -> bool:
    return uri.endswith((".py", ".pyw"))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: OnnxLensServer, params: types.DidOpenTextDocumentParams) -> None:
    if _python(params.text_document.uri) and ls.settings.trigger != "manual":
        ls.request_check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: OnnxLensServer, params: types.DidChangeTextDocumentParams) -> None:
    if _python(params.text_document.uri) and ls.settings.trigger == "onType":
        ls.request_check(params.text_document.uri, delay=ls.settings.debounceMs / 1000)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
def did_save(ls: OnnxLensServer, params: types.DidSaveTextDocumentParams) -> None:
    if _python(params.text_document.uri) and ls.settings.trigger in ("onSave", "onType"):
        ls.request_check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: OnnxLensServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.checker.close(uri)
    for file in ls.store.replace(uri, {}):
        ls.publish(file)


