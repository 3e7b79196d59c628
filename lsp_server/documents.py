"""Text document notifications: they start, schedule and cancel checks."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types

from exporter.source.files import might_have_targets
from exporter.source.text import UnreadableSource, read_source
from lsp_server.convert import path_of
from lsp_server.server import OnnxLensServer

log = logging.getLogger(__name__)

#: the client's active and visible editors: ``{"active": uri | null, "visible": [uri]}``
EDITORS_NOTIFICATION = "onnxlens/editors"


def _python(uri: str) -> bool:
    return uri.endswith((".py", ".pyw"))


def did_open(ls: OnnxLensServer, params: types.DidOpenTextDocumentParams) -> None:
    if _python(params.text_document.uri) and ls.settings.trigger != "manual":
        ls.request_check(params.text_document.uri, opened=True)


def did_change(ls: OnnxLensServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.focus.touch(params.text_document.uri)  # queued checks: the latest edited goes first
    if _python(params.text_document.uri) and ls.settings.trigger == "onType":
        ls.request_check(params.text_document.uri, delay=ls.settings.debounceMs / 1000)


def did_save(ls: OnnxLensServer, params: types.DidSaveTextDocumentParams) -> None:
    if _python(params.text_document.uri) and ls.settings.trigger in ("onSave", "onType"):
        ls.request_check(params.text_document.uri)


def did_close(ls: OnnxLensServer, params: types.DidCloseTextDocumentParams) -> None:
    """A closed document's check (queued or running) is dropped and its diagnostics go; in
    the workspace-wide mode its saved text is checked instead, in the background."""
    uri = params.text_document.uri
    ls.checker.close(uri)
    ls.discovery.forget(uri)
    ls.focus.forget(uri)
    path = path_of(uri)
    if ls.settings.diagnosticMode == "workspace" and ls.trusted and _python(uri) \
            and not ls.is_excluded(path) and might_have_targets(path):
        try:
            ls.checker.request(uri, None, read_source(path))
            return
        except UnreadableSource:  # too big, or not a regular file: its check says so
            ls.checker.request(uri, None, "")
            return
        except (OSError, SyntaxError, UnicodeDecodeError):
            pass  # deleted or unreadable: nothing to check
    ls.forget_diagnostics(uri)


def editors_changed(ls: OnnxLensServer, params: Any) -> None:
    """The client's active and visible editors: their queued checks go first."""
    def field(name: str) -> Any:
        return params.get(name) if isinstance(params, dict) else getattr(params, name, None)

    active, visible = field("active"), field("visible")
    ls.focus.active = active if isinstance(active, str) else None
    ls.focus.visible = frozenset(uri for uri in visible if isinstance(uri, str)) \
        if isinstance(visible, list) else frozenset()
    log.debug("editors: active %s, visible %s", ls.focus.active, sorted(ls.focus.visible))
    ls.checker.focus_changed()


def register(server: OnnxLensServer) -> None:
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(did_save)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(EDITORS_NOTIFICATION)(editors_changed)
