"""The onnxlens language server's session: its state (trust, settings, what the client
supports, the documents' checks and diagnostics, the export worker) and what the handlers do
with it. ``lsp_server.app.create_server`` builds it and registers the handlers (``lifecycle``,
``documents``, ``presentation``, ``commands``). It never imports torch: checks run in the
export worker (``export_worker``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from check_service.file_check import FileCheck
from check_service.files import FileTargets
from check_service.requests import job_request
from check_service.rules import shown
from export_worker.messages import JobKind, JobRequest
from exporter import __version__
from exporter.config.options import Options, apply_all, from_pyproject
from exporter.config.pyproject import find_root, load_config
from exporter.config.schema import is_excluded
from exporter.findings.diagnostics import Diagnostic
from exporter.findings.result import CheckResult
from exporter.reports.writing import write_text_atomically
from exporter.source.notebooks import CellSource, is_notebook, recent_notebook
from exporter.source.targets import Target
from exporter.source.text import read_source
from lsp_server.admission import Focus, default_budget_mb, default_slots
from lsp_server.checks import Checker
from lsp_server.client_support import ClientSupport
from lsp_server.convert import PositionConverter, path_of, path_uri, to_lsp
from lsp_server.discovery import TargetDiscovery
from lsp_server.graphs import GraphViews
from lsp_server.payloads import ServerState, WorkspaceChecked, to_json
from lsp_server.progress import ProgressReporter, with_progress
from lsp_server.store import DiagnosticsStore, group_by_file
from lsp_server.supervisor import WorkerSupervisor

log = logging.getLogger(__name__)

STATE_NOTIFICATION = "onnxlens/state"
_LOG_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning,
               "info": types.MessageType.Info, "debug": types.MessageType.Log}


@dataclasses.dataclass(frozen=True)
class _MalformedRequest:
    """A request whose params do not match the spec (e.g. a negative line)."""

    id: Any
    method: str
    jsonrpc: str = "2.0"


class _Protocol(LanguageServerProtocol):
    """pygls answers a request whose handler raised with the server's Python traceback in
    the error's data; the client gets the error's message, the traceback goes to the log.
    pygls drops a request whose params it cannot read, and its client waits forever: it
    gets an InvalidParams error instead (every request is answered)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except Exception:
            if isinstance(data, dict) and "id" in data and isinstance(data.get("method"), str):
                return _MalformedRequest(data["id"], data["method"])
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _MalformedRequest):
            self._send_response(message.id, error=types.ResponseError(
                code=types.ErrorCodes.InvalidParams,
                message=f"{message.method}: the params do not match the protocol"))
            return
        super().handle_message(message)

    def _send_response(self, msg_id: Any, result: Any = None,
                       error: types.ResponseError | None = None) -> None:
        if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
            logging.getLogger(__name__).debug("request %s failed:\n%s", msg_id,
                                              "".join(error.data["traceback"]))
            error = types.ResponseError(code=error.code, message=error.message)
        super()._send_response(msg_id, result, error)


#: the notebooks whose Python cells the client sends (lsp_server/notebooks.py): every notebook
#: type (Jupyter's, and others that hold Python cells)
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithCells(
        notebook="*", cells=[types.NotebookCellLanguage(language="python")])],
    save=True)


class NotebookState(Protocol):
    """An open notebook as its last check read it (lsp_server/notebooks.py): the module of
    its code cells, and the publisher of its file's findings on its cells."""

    @property
    def text(self) -> str: ...

    def publish(self, diagnostics: list[Diagnostic], server: OnnxLensServer,
                positions: PositionConverter) -> None: ...


class OnnxLensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("onnxlens", __version__, protocol_cls=_Protocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC)
        # open notebooks by their file's URI: their findings are published on their cells;
        # check_notebook (set by lsp_server/notebooks.py) checks one by its URI
        self.notebooks: dict[str, NotebookState] = {}
        self.check_notebook: Callable[[str], asyncio.Task[None] | None] | None = None
        # the first workspace folder's settings: what the session as a whole follows (when
        # checks start, how many run, the workspace mode, SARIF, the log); a check follows
        # its own folder's (``settings_for``)
        self.settings = Options()
        self.folder_settings: dict[Path, Options] = {}  # each workspace folder's
        self.support = ClientSupport()  # what the client supports: set at initialize
        self.trusted = False
        self.initialization_settings: Any = None
        # set once the first settings are read: a document opened before that waits, so that
        # its check honours them (`exclude`, the limits) — it raced them before
        self.settings_loaded = asyncio.Event()
        self.store = DiagnosticsStore()
        self.focus = Focus()
        self.discovery = TargetDiscovery(lambda uri: self.workspace.text_documents.get(uri),
                                         self.log)
        self.progress_reporter = ProgressReporter(self,
                                                  lambda: self.support.work_done_progress)
        self.worker = WorkerSupervisor(self)
        self.checker = Checker(self, self.focus)
        self.graphs = GraphViews(self)  # the graph view (lsp_server/graphs.py)
        self.budget_mb = default_budget_mb()  # measured once, when the server starts
        self.workspace_check: asyncio.Task[Any] | None = None
        self.roots: list[Path] = []  # the workspace folders, the first one first
        self._settings_problems: set[str] = set()  # those the user was shown
        # LSP: the process exits 0 after `shutdown` then `exit`, else 1
        self.shut_down = False

    # -- helpers used by the features ----------------------------------------------------

    def is_open(self, uri: str) -> bool:
        return uri in self.workspace.text_documents

    @property
    def root(self) -> Path | None:
        """The first workspace folder (the session's SARIF and the workspace check start
        there)."""
        return self.roots[0] if self.roots else None

    def folder_of(self, path: Path) -> Path | None:
        """The workspace folder that holds ``path`` (the innermost one of nested folders): as
        the path is written (a symbolic link in the folder is the folder's, whatever it points
        to), else as it resolves."""
        for candidate in (path.absolute(), path.resolve()):
            holding = [root for root in self.roots if candidate.is_relative_to(root)]
            if holding:
                return max(holding, key=lambda root: len(root.parts))
        return None

    def root_for(self, path: Path) -> Path:
        return self.folder_of(path) or find_root(path)

    def settings_for(self, path: Path) -> Options:
        """The settings a check of ``path`` runs with: its workspace folder's."""
        folder = self.folder_of(path)
        return self.folder_settings.get(folder, self.settings) if folder else self.settings

    def positions(self) -> PositionConverter:
        encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        return PositionConverter(str(encoding), self.discovery.lines_of)

    def log(self, message: str, level: str = "info") -> None:
        order = list(_LOG_LEVELS)
        if order.index(level) <= order.index(self.settings.logLevel):
            self.window_log_message(types.LogMessageParams(type=_LOG_LEVELS[level],
                                                           message=message))

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Only for what the user must act on."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def filter(self, diagnostics: list[Diagnostic], path: Path) -> list[Diagnostic]:
        """The rules the settings of ``path``'s folder select, at the severities they give."""
        return shown(diagnostics, self.settings_for(path))

    def is_excluded(self, path: Path) -> bool:
        """``exclude``/``extendExclude`` globs, relative to the workspace (as the CLI)."""
        root = self.root_for(path)
        try:
            parts = path.resolve().relative_to(root).parts
        except ValueError:
            return False
        return is_excluded(parts, self.settings_for(path).excluded)

    def job_request(self, kind: JobKind, target: Target, text: str,
                    settings: Options | None = None, **extra: Any) -> JobRequest:
        """A worker job for ``target`` as the user's editor shows ``text``, with the limits
        and tolerances of ``settings`` (a check's own), else of the current settings."""
        return job_request(kind, target, self.root_for(target.path),
                           settings or self.settings_for(target.path),
                           text=text, notebook_cells=_notebook_cells(target.path, text),
                           record_inputs=kind == "check", **extra)

    def file_check(self, found: FileTargets, settings: Options) -> FileCheck:
        """A check of the editor's text of a file (check_service.file_check)."""
        return FileCheck(found, self.root_for(found.path), settings, unsaved=True,
                         notebook_cells=_notebook_cells(found.path, found.text),
                         record_inputs=True, lines_of=self.discovery.lines_of)

    # -- settings ------------------------------------------------------------------------

    async def load_settings(self) -> None:
        """Read the settings again; a check requested meanwhile waits for them (a setting
        changed and the file saved at once: the save's check uses the new settings)."""
        self.settings_loaded.clear()
        try:
            await self._load_settings()
        finally:
            self.settings_loaded.set()

    async def _load_settings(self) -> None:
        folders: list[Path | None] = [*self.roots] or [None]
        problems: list[str] = []
        read: list[Options] = []
        for folder, editor in zip(folders, await self._configured(folders)):
            settings, found = self._settings_of(folder, editor)
            named = f"{folder.name}: " if folder is not None and len(folders) > 1 else ""
            problems += [named + problem for problem in found]
            read.append(settings)
        self.folder_settings = {folder: settings for folder, settings in zip(folders, read)
                                if folder is not None}
        settings = read[0]
        previous, self.settings = self.settings, settings
        self.checker.configure(settings.maxConcurrentChecks or default_slots(),
                               settings.memoryBudgetMB or self.budget_mb)
        self.settings_loaded.set()  # before the workspace check below starts
        if previous.diagnosticMode == "workspace" and settings.diagnosticMode != "workspace":
            self.forget_unopened()
        elif settings.diagnosticMode == "workspace" and previous.diagnosticMode != "workspace" \
                and self.trusted and self.worker.started:
            self.start_workspace_check()
        # each problem shown once: not again when the settings are read again (a change of
        # another setting, the workspace trusted) while it is still there
        told, self._settings_problems = self._settings_problems, set(problems)
        for problem in problems:
            if problem in told:
                self.log(f"settings: {problem} (shown before)", "warning")
            else:
                self.tell(f"onnxlens: {problem}")

    def _settings_of(self, folder: Path | None, editor: Any) -> tuple[Options, list[str]]:
        """A workspace folder's settings from its pyproject.toml, the initialization options
        and the editor's settings for the folder (``editor``), and the problems found."""
        problems: list[str] = []
        sources: list[tuple[str, Any]] = []
        # An untrusted workspace's own file sets nothing: where reports go, how long and how
        # big a check may run are the user's settings until they trust the folder.
        if folder is not None and self.trusted:
            project = load_config(folder)
            problems += project.problems
            sources.append(("pyproject.toml", from_pyproject(project.values)))
        sources.append(("initializationOptions", self.initialization_settings))
        if self.support.configuration:
            sources.append(("settings", editor))
        settings, found = apply_all(Options(), sources)
        return settings, problems + found

    async def _configured(self, folders: list[Path | None]) -> list[Any]:
        """The editor's ``onnxlens`` settings for each folder (``workspace/configuration``,
        one item per folder, scoped to it); None where there are none."""
        if not self.support.configuration:
            return [None] * len(folders)
        items = [types.ConfigurationItem(section="onnxlens",
                                         scope_uri=path_uri(folder) if folder else None)
                 for folder in folders]
        try:
            configured = await self.workspace_configuration_async(
                types.ConfigurationParams(items=items))
        except Exception as error:
            self.log(f"workspace/configuration failed: {error}", "warning")
            return [None] * len(folders)
        return [*configured, *[None] * (len(folders) - len(configured))][:len(folders)]

    # -- publishing ----------------------------------------------------------------------

    def replace_diagnostics(self, origin: str, version: int | None,
                            diagnostics: list[Diagnostic]) -> None:
        by_file = group_by_file(diagnostics, path_uri)
        by_file.setdefault(origin, [])
        for uri in sorted(self.store.replace(origin, by_file)):
            self.publish(uri, version if uri == origin else None)

    def forget_diagnostics(self, origin: str) -> None:
        """What checking ``origin`` found goes, from every file it was shown on."""
        for file in self.store.replace(origin, {}):
            self.publish(file)

    def publish(self, uri: str, version: int | None = None) -> None:
        positions = self.positions()
        notebook = self.notebooks.get(uri)
        if notebook is not None:
            notebook.publish(self.store.for_file(uri), self, positions)
            return
        diagnostics = [to_lsp(d, self.support, positions) for d in self.store.for_file(uri)]
        if not self.support.diagnostic_versions:
            version = None
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=diagnostics, version=version))

    def notify_state(self) -> None:
        """Tell the client what the status bar shows: trust, the worker, what is checking."""
        self.protocol.notify(STATE_NOTIFICATION, to_json(ServerState(
            self.trusted, self.worker.state, self.checker.checking())))

    def notify(self, method: str, params: Any) -> None:
        """A notification of onnxlens's own (``onnxlens/...``)."""
        self.protocol.notify(method, params)

    def check_ended(self, uri: str) -> None:
        """A check of ``uri`` published its verdict."""
        self.graphs.checked(uri)

    def refresh_code_lens(self) -> None:
        if self.support.code_lens_refresh:
            self.workspace_code_lens_refresh(None)

    def after_check(self) -> None:
        if self.settings.sarifOutputDirectory:
            directory = Path(self.settings.sarifOutputDirectory)
            if not directory.is_absolute() and self.root is not None:
                directory = self.root / directory
            try:
                self.write_sarif(directory / "onnxlens.sarif")
            except OSError as error:
                self.log(f"cannot write SARIF to {directory}: {error}", "warning")

    def write_sarif(self, destination: Path) -> Path:
        from exporter.reports.sarif import sarif_dict

        result = CheckResult(file_diagnostics=self.store.all())
        root = self.root or destination.parent
        text = json.dumps(sarif_dict(result, root), indent=2)
        destination.parent.mkdir(parents=True, exist_ok=True)
        return write_text_atomically(destination, text)

    # -- checks --------------------------------------------------------------------------

    def notebook(self, uri: str) -> NotebookState | None:
        """The open notebook at ``uri`` (the notebook's URI, not a cell's)."""
        return self.notebooks.get(path_uri(path_of(uri).resolve()))

    def document_text(self, uri: str) -> str:
        """What a check of ``uri`` reads: an open notebook's code cells as one module, else
        the open document's text, else the saved file's."""
        notebook = self.notebook(uri)
        return notebook.text if notebook is not None else \
            self.workspace.get_text_document(uri).source

    def check_open_documents(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.request_check(uri)

    def request_check(self, uri: str, *, delay: float = 0.0,
                      opened: bool = False) -> asyncio.Task[None] | None:
        if not self.trusted:
            return None
        if self.notebook(uri) is not None and self.check_notebook is not None:
            return self.check_notebook(uri)
        self.focus.touch(uri)
        document = self.workspace.get_text_document(uri)
        return self.checker.request(uri, document.version, document.source, delay=delay,
                                    opened=opened)

    # -- the workspace-wide mode ---------------------------------------------------------

    def workspace_files(self) -> list[Path]:
        """The files in the workspace that may hold targets, without the excluded ones."""
        from exporter.source.files import might_have_targets, python_files_below

        # notebooks=False: the server locates findings by line of a Python file; a notebook's
        # cells are checked once the server syncs notebook documents (issue 27, item 2).
        # A file of nested folders is its innermost folder's, with that folder's excludes.
        return [path for root in self.roots
                for path in python_files_below(root, root, self.settings_for(root).excluded,
                                               notebooks=False)
                if self.folder_of(path) == root and might_have_targets(path)]

    async def check_workspace(self) -> WorkspaceChecked:
        """Check every target in the workspace at the lowest priority (open documents are
        checked as they are edited); unchanged files reuse their last result. Cancelling
        stops the checks still queued or running."""
        paths = self.workspace_files()
        tasks = []
        for path in paths:
            uri = path_uri(path)
            if self.is_open(uri):
                continue
            running = self.checker.running_check(uri)
            if running is None:
                try:
                    text = read_source(path)  # never a FIFO or a device, nor over 10 MB
                except (OSError, SyntaxError, UnicodeDecodeError):
                    text = ""  # the check says why the file cannot be read
                running = self.checker.request(uri, None, text)
            if running is not None:
                tasks.append(running)
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        files = [self.checker.state(path_uri(path)) for path in paths]
        return WorkspaceChecked(
            len(files), sum(len(state.targets) for state in files),
            sum(len(r.diagnostics) for s in files for r in s.targets.values()))

    def start_workspace_check(self) -> None:
        """``diagnosticMode: workspace``: check the workspace in the background, with
        progress the user can cancel; a running one is replaced."""
        if self.workspace_check is not None:
            self.workspace_check.cancel()
        self.workspace_check = asyncio.ensure_future(
            with_progress(self.progress_reporter, "Checking the workspace",
                          self.check_workspace))
        self.workspace_check.add_done_callback(_quietly_cancelled)

    def forget_unopened(self) -> None:
        """Back from the workspace-wide mode: what was found in files nobody opened goes."""
        if self.workspace_check is not None:
            self.workspace_check.cancel()
        for uri in list(self.checker.documents):
            if not self.is_open(uri):
                self.checker.close(uri)
                self.forget_diagnostics(uri)


def _quietly_cancelled(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the workspace check failed", exc_info=task.exception())


def _notebook_cells(path: Path, text: str) -> list[CellSource]:
    """A notebook's code cells when ``text`` is their module (its targets are named by cell)."""
    notebook = recent_notebook(text) if is_notebook(path) else None
    return list(notebook.sources) if notebook else []
