"""The server, built: ``create_server()`` makes a session and registers every handler module
on it, one concern each."""

from __future__ import annotations

from lsp_server import commands, documents, lifecycle, notebooks, presentation
from lsp_server.server import OnnxLensServer

#: what each module handles: commands, text document notifications, notebook document
#: notifications, the session's lifecycle, what the editor shows on request (in this order)
REGISTER = (commands.register, documents.register, notebooks.register, lifecycle.register,
            presentation.register)


def create_server() -> OnnxLensServer:
    server = OnnxLensServer()
    for register in REGISTER:
        register(server)
    return server
