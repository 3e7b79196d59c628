"""LSP lifecycle: initialize, trust, settings, shutdown, and the status request."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from lsp_server.client_support import ClientSupport
from lsp_server.graphs import GRAPH_CLOSED
from lsp_server.server import OnnxLensServer

TRUST_NOTIFICATION = "onnxlens/trustChanged"
STATUS_REQUEST = "onnxlens/status"


def initialize(ls: OnnxLensServer, params: types.InitializeParams) -> None:
    options = params.initialization_options if isinstance(params.initialization_options,
                                                          dict) else {}
    ls.trusted = bool(options.get("trusted", False))
    ls.initialization_settings = options.get("settings")
    # the client shows graphs in a panel of its own (the VS Code extension); else the server
    # opens them in the browser (lsp_server/graphs.py)
    ls.graphs.panel_client = bool(options.get("graphPanel", False))
    ls.support = ClientSupport.of(params.capabilities)
    folders = [folder.uri for folder in params.workspace_folders or []] or (
        [params.root_uri] if params.root_uri else [])
    ls.roots = _paths(folders)


def _paths(uris: list[str]) -> list[Path]:
    """The workspace folders' paths, in the client's order."""
    paths = [to_fs_path(uri) for uri in uris]
    return list(dict.fromkeys(Path(path).resolve() for path in paths if path))


async def did_change_workspace_folders(ls: OnnxLensServer,
                                       params: types.DidChangeWorkspaceFoldersParams) -> None:
    """Folders added to or removed from a multi-root workspace: each added one has its own
    settings; open documents are checked again with their folder's."""
    removed = set(_paths([folder.uri for folder in params.event.removed]))
    ls.roots = [root for root in ls.roots if root not in removed] + [
        root for root in _paths([folder.uri for folder in params.event.added])
        if root not in ls.roots]
    await _settings_changed(ls)


async def initialized(ls: OnnxLensServer, params: types.InitializedParams) -> None:
    await ls.load_settings()
    if ls.trusted:
        await ls.worker.start()
        if ls.settings.diagnosticMode == "workspace":
            ls.start_workspace_check()
    else:
        ls.notify_state()
        ls.tell("onnxlens runs your models' code to check them, so it waits until this "
                "workspace is trusted. No model code has been run.", types.MessageType.Info)


async def shutdown(ls: OnnxLensServer, params: None) -> None:
    ls.shut_down = True
    ls.checker.cancel_all()
    await ls.graphs.close()
    await ls.worker.stop()


async def trust_changed(ls: OnnxLensServer, params: Any) -> None:
    trusted = bool(getattr(params, "trusted", False) if not isinstance(params, dict)
                   else params.get("trusted", False))
    if trusted == ls.trusted:
        return
    ls.trusted = trusted
    ls.checker.forget_all_results()
    await ls.load_settings()  # the workspace's pyproject.toml counts only while trusted
    if trusted:
        await ls.worker.start()
        ls.check_open_documents()
        if ls.settings.diagnosticMode == "workspace":
            ls.start_workspace_check()
    else:
        if ls.workspace_check is not None:
            ls.workspace_check.cancel()
        ls.checker.cancel_all()
        await ls.graphs.close()  # a graph is what running the model made, too
        await ls.worker.stop()
        # what the checks found came from running the model: it goes with the trust
        for uri in sorted(ls.store.clear()):
            ls.publish(uri)
    ls.notify_state()
    ls.refresh_code_lens()


async def did_change_configuration(ls: OnnxLensServer,
                                   params: types.DidChangeConfigurationParams) -> None:
    if isinstance(params.settings, dict) and isinstance(params.settings.get("onnxlens"), dict):
        ls.initialization_settings = params.settings["onnxlens"]
    await _settings_changed(ls)


async def _settings_changed(ls: OnnxLensServer) -> None:
    """Read the settings again; apply what changed."""
    before, folders_before = ls.settings, ls.folder_settings
    await ls.load_settings()
    if ls.trusted and (ls.settings != before or ls.folder_settings != folders_before):
        # applied at once, as a restart would, without one: what a check runs with changed,
        # or only what is shown (a rule ignored); the result cache answers the latter
        ls.check_open_documents()
        if before.diagnosticMode == "workspace" == ls.settings.diagnosticMode:
            ls.start_workspace_check()


async def status(ls: OnnxLensServer, params: Any) -> dict[str, Any]:
    """For tests and the status bar: the worker's processes and what is being checked."""
    answer = await ls.worker.status()
    if answer is not None:
        worker: dict[str, Any] = {**dataclasses.asdict(answer), "ready": True}
    else:  # not started, warming up, or not answering (it is replaced then)
        worker = {"pid": ls.worker.pid, "jobs": [], "ready": False}
    return {"trusted": ls.trusted, "worker": worker, "workerState": ls.worker.state,
            "checking": ls.checker.checking(),
            "serverImportsTorch": "torch" in sys.modules,
            "results": ls.checker.result_counts(),
            "queue": ls.checker.queue_counts(),
            "pending": ls.checker.pending_counts(),
            "viewer": {"pid": ls.graphs.viewer_pid, "renderingAgain": ls.graphs.rendering_again},
            "settings": ls.settings.__dict__}


def graph_closed(ls: OnnxLensServer, params: Any) -> None:
    """The client closed its graph panel: the graph is no longer rendered after checks."""
    ls.graphs.closed()


def register(server: OnnxLensServer) -> None:
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.SHUTDOWN)(shutdown)
    server.feature(TRUST_NOTIFICATION)(trust_changed)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(did_change_workspace_folders)
    server.feature(STATUS_REQUEST)(status)
    server.feature(GRAPH_CLOSED)(graph_closed)
