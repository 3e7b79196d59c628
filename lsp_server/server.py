"""The onnxlens language server's session: its state (trust, settings, what the client
supports, the documents' checks and diagnostics, the export worker) and what the handlers do
with it. The handlers are in ``lifecycle``, ``documents``, ``presentation`` and ``commands``.
It never imports torch: checks run in the export worker (``export_worker``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from export_worker.client import ProgressHandler, WorkerClient, WorkerUnavailable
from export_worker.messages import CheckSettings, JobKind, JobOutcome, JobRequest
from exporter import __version__
from exporter.config import find_root, load_config
from exporter.diagnostics import Diagnostic
from exporter.files import write_text_atomically
from exporter.report import apply_severity, filter_rules
from exporter.result import CheckResult
from exporter.settings_schema import is_excluded
from exporter.sourcetext import read_source, source_lines, split_lines
from exporter.targets import Discovery, Target, discover
from exporter.versions import install_hint
from lsp_server.admission import Focus, default_budget_mb, default_slots
from lsp_server.checks import Checker, new_token
from lsp_server.client_support import ClientSupport
from lsp_server.convert import PositionConverter, path_uri, to_lsp
from lsp_server.settings import Settings, apply_all, from_pyproject
from lsp_server.store import DiagnosticsStore, group_by_file

log = logging.getLogger(__name__)

TRUST_NOTIFICATION = "onnxlens/trustChanged"
#: the client's active and visible editors: ``{"active": uri | null, "visible": [uri]}``
EDITORS_NOTIFICATION = "onnxlens/editors"
STATUS_REQUEST = "onnxlens/status"
MAX_REVIVE_DELAY = 30.0  # seconds between attempts to start a worker that keeps dying
STATE_NOTIFICATION = "onnxlens/state"
_LOG_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning,
               "info": types.MessageType.Info, "debug": types.MessageType.Log}


class Progress:
    def __init__(self, token: str, cancelled: Any) -> None:
        self.token = token
        self.cancelled = cancelled


@dataclasses.dataclass(frozen=True)
class _Discovered:
    """A document's targets, found (or being found, in a thread) for one version of it."""

    version: int
    text: str
    future: asyncio.Future[tuple[Discovery, float]]


def _discover_timed(path: Path, text: str | None) -> tuple[Discovery, float]:
    """Run in a thread: the targets of ``text`` (None: the file's saved text), and the
    seconds it took."""
    started = time.perf_counter()
    if text is None:
        try:
            text = read_source(path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            return Discovery([], []), 0.0  # a check of the file says why it cannot be read
    return discover(path, text), time.perf_counter() - started


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


class OnnxLensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("onnxlens", __version__, protocol_cls=_Protocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.support = ClientSupport()  # what the client supports: set at initialize
        self.trusted = False
        self.initialization_settings: Any = None
        # set once the first settings are read: a document opened before that waits, so that
        # its check honours them (`exclude`, the limits) — it raced them before
        self.settings_loaded = asyncio.Event()
        self.store = DiagnosticsStore()
        self.focus = Focus()
        self.checker = Checker(self)
        self.budget_mb = default_budget_mb()  # measured once, when the server starts
        self.workspace_check: asyncio.Task[Any] | None = None
        self.worker = WorkerClient(on_output=self._worker_output, on_state=self._worker_state)
        self.worker_state = "stopped"
        self.root: Path | None = None
        self._restart_lock = asyncio.Lock()
        self._told_toolchain: str | None = None
        self._settings_problems: set[str] = set()  # those the user was shown
        # LSP: the process exits 0 after `shutdown` then `exit`, else 1
        self.shut_down = False
        self._revive_delay = 0.0
        self._background: set[asyncio.Future[Any]] = set()
        # per open document: its targets and its lines, for its current version only
        self._discoveries: dict[str, _Discovered] = {}
        self._lines: dict[str, tuple[str, tuple[str, ...]]] = {}

    def spawn(self, work: Any) -> None:
        """Run a coroutine in the background, keeping a reference until it is done."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- helpers used by the features ----------------------------------------------------

    def path_of(self, uri: str) -> Path:
        return Path(to_fs_path(uri) or uri)

    def root_for(self, path: Path) -> Path:
        if self.root is not None:
            try:
                path.resolve().relative_to(self.root)
                return self.root
            except ValueError:
                pass
        return find_root(path)

    def lines_of(self, path: Path) -> tuple[str, ...]:
        """The lines of the open document (split once per version of its text: a CodeLens
        request split a 4.5 MB document twice per target), else of the saved file."""
        document = self.workspace.text_documents.get(path_uri(path))
        if document is None:
            return source_lines(path)
        source = document.source
        known = self._lines.get(document.uri)
        if known is None or known[0] is not source:
            known = self._lines[document.uri] = (source, tuple(split_lines(source)))
        return known[1]

    def positions(self) -> PositionConverter:
        encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        return PositionConverter(str(encoding), self.lines_of)

    def log(self, message: str, level: str = "info") -> None:
        order = list(_LOG_LEVELS)
        if order.index(level) <= order.index(self.settings.logLevel):
            self.window_log_message(types.LogMessageParams(type=_LOG_LEVELS[level],
                                                           message=message))

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Only for what the user must act on."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def filter(self, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """The rules the settings select, at the severities they give."""
        kept = filter_rules(diagnostics, self.settings.select or None,
                            self.settings.ignore or None)
        return apply_severity(kept, self.settings.severity)

    def is_excluded(self, path: Path) -> bool:
        """``exclude``/``extendExclude`` globs, relative to the workspace (as the CLI)."""
        root = self.root_for(path)
        try:
            parts = path.resolve().relative_to(root).parts
        except ValueError:
            return False
        return is_excluded(parts, self.settings.excluded)

    # -- progress ------------------------------------------------------------------------

    async def progress_begin(self, title: str, message: str | None) -> Progress | None:
        if not self.support.work_done_progress:
            return None
        token = new_token()
        try:
            # Shielded: a check cancelled meanwhile must not cancel pygls' own future.
            await asyncio.shield(self.work_done_progress.create_async(token))
        except Exception:
            return None
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=title, message=message, cancellable=True))
        return Progress(token, self.work_done_progress.tokens.get(token))

    def progress_report(self, progress: Progress, message: str) -> None:
        self.work_done_progress.report(progress.token,
                                       types.WorkDoneProgressReport(message=message))

    def progress_end(self, progress: Progress, message: str) -> None:
        self.work_done_progress.end(progress.token, types.WorkDoneProgressEnd(message=message))

    # -- worker --------------------------------------------------------------------------

    def _worker_output(self, line: str) -> None:
        self.log(f"worker: {line}", "debug")

    def _worker_state(self, state: str) -> None:
        self.worker_state = state
        self.notify_state()
        self.log(f"export worker {state}", "info" if state != "down" else "warning")
        if state == "ready":
            self._revive_delay = 0.0
        if state == "down" and self.trusted:
            self.spawn(self._revive_worker())

    async def _revive_worker(self) -> None:
        """Start the worker again: at once the first time, then after 1, 2, 4 ... 30 s while
        it keeps dying before it is ready (a broken environment must not spin). A check
        requested meanwhile does not wait: it starts a new worker (WorkerClient.submit)."""
        delay, self._revive_delay = self._revive_delay, min(max(1.0, self._revive_delay * 2),
                                                            MAX_REVIVE_DELAY)
        if delay:
            self.log(f"the export worker keeps stopping before it is ready; starting a new "
                     f"one in {delay:g} s (or at the next check)", "warning")
        await asyncio.sleep(delay)
        async with self._restart_lock:
            if self.worker.process is None and self.trusted and not self.shut_down:
                await self.worker.start()

    async def start_worker(self) -> None:
        if not self.trusted:
            return
        await self.worker.start()
        self.spawn(self._report_worker_start())

    async def _report_worker_start(self) -> None:
        try:
            ready = await self.worker.wait_ready()
            self.log(f"export worker ready in {ready.seconds} s (pid {ready.pid})")
        except WorkerUnavailable as error:
            self.tell(f"onnxlens cannot check models: {error}. Install torch, onnx, "
                      "onnxscript and onnxruntime into the interpreter that runs the server "
                      f"({install_hint()}).", types.MessageType.Error)
            return
        # an untested torch, or a capability that fell back: said once per worker start
        for warning in ready.warnings:
            self.log(warning, "warning")
        message = ready.toolchain.get("message")
        if message and message != self._told_toolchain:
            self._told_toolchain = message
            self.log(message, "warning")
            self.tell(message, types.MessageType.Info)

    def job_request(self, kind: JobKind, target: Target, text: str,
                    **extra: Any) -> JobRequest:
        """A worker job for ``target`` as the user's editor shows ``text``, with the limits
        and tolerances of the current settings."""
        settings = self.settings
        return JobRequest(kind, str(target.path), str(self.root_for(target.path)), target.name,
                          text=text, timeout=settings.timeoutSeconds,
                          memory_limit_mb=settings.memoryLimitMB,
                          settings=CheckSettings(settings.opset, settings.atol, settings.rtol),
                          record_inputs=kind == "check", **extra)

    async def submit(self, request: JobRequest,
                     on_progress: ProgressHandler | None = None) -> JobOutcome:
        try:
            return await self.worker.submit(request, on_progress)
        except WorkerUnavailable as error:
            from export_worker.messages import JobFailed

            return JobFailed("", "worker-lost", str(error))

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
        problems: list[str] = []
        sources: list[tuple[str, Any]] = []
        # An untrusted workspace's own file sets nothing: where reports go, how long and how
        # big a check may run are the user's settings until they trust the folder.
        if self.root is not None and self.trusted:
            project = load_config(self.root)
            problems += project.problems
            sources.append(("pyproject.toml", from_pyproject(project.values)))
        sources.append(("initializationOptions", self.initialization_settings))
        if self.support.configuration:
            try:
                (configured,) = await self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="onnxlens")]))
            except Exception as error:
                self.log(f"workspace/configuration failed: {error}", "warning")
                configured = None
            sources.append(("settings", configured))
        settings, found = apply_all(Settings(), sources)
        problems += found
        previous, self.settings = self.settings, settings
        self.checker.queue.configure(settings.maxConcurrentChecks or default_slots(),
                                     settings.memoryBudgetMB or self.budget_mb)
        self.settings_loaded.set()  # before the workspace check below starts
        if previous.diagnosticMode == "workspace" and settings.diagnosticMode != "workspace":
            self.forget_unopened()
        elif settings.diagnosticMode == "workspace" and previous.diagnosticMode != "workspace" \
                and self.trusted and self.worker.ready is not None:
            self.start_workspace_check()
        # each problem shown once: not again when the settings are read again (a change of
        # another setting, the workspace trusted) while it is still there
        told, self._settings_problems = self._settings_problems, set(problems)
        for problem in problems:
            if problem in told:
                self.log(f"settings: {problem} (shown before)", "warning")
            else:
                self.tell(f"onnxlens: {problem}")

    # -- publishing ----------------------------------------------------------------------

    def replace_diagnostics(self, origin: str, version: int | None,
                            diagnostics: list[Diagnostic]) -> None:
        by_file = group_by_file(diagnostics, path_uri)
        by_file.setdefault(origin, [])
        for uri in sorted(self.store.replace(origin, by_file)):
            self.publish(uri, version if uri == origin else None)

    def publish(self, uri: str, version: int | None = None) -> None:
        positions = self.positions()
        diagnostics = [to_lsp(d, self.support, positions) for d in self.store.for_file(uri)]
        if not self.support.diagnostic_versions:
            version = None
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=diagnostics, version=version))

    def notify_state(self) -> None:
        """Tell the client what the status bar shows: trust, the worker, what is checking."""
        checking = sorted(uri for uri, s in self.checker.documents.items() if s.checking)
        self.protocol.notify(STATE_NOTIFICATION, {"trusted": self.trusted,
                                                  "workerState": self.worker_state,
                                                  "checking": checking})

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
        from exporter.sarif import sarif_dict

        result = CheckResult(file_diagnostics=self.store.all())
        root = self.root or destination.parent
        text = json.dumps(sarif_dict(result, root), indent=2)
        destination.parent.mkdir(parents=True, exist_ok=True)
        return write_text_atomically(destination, text)

    # -- document access -----------------------------------------------------------------

    async def document_targets(self, uri: str) -> list[Target]:
        return (await self.discovered(uri)).targets

    async def discovered(self, uri: str, version: int | None = None,
                         text: str | None = None) -> Discovery:
        """The targets of ``uri`` as ``text`` (its ``version``) holds them; without a text,
        the open document's, else the saved file's. Found in a thread, so that the server
        answers other requests meanwhile, and once per version of an open document, for
        its check, CodeLens, hover and commands alike (a 4.5 MB file with 2,000 targets
        held every request, even ``onnxlens/status``, for minutes)."""
        document = self.workspace.text_documents.get(uri)
        if text is None and document is not None:
            version, text = document.version, document.source
        known = self._discoveries.get(uri)
        if known is None or known.version != version or text is None \
                or (known.text is not text and known.text != text):
            future = asyncio.get_running_loop().run_in_executor(
                None, _discover_timed, self.path_of(uri), text)
            future.add_done_callback(lambda done: self._discovery_done(uri, version, done))
            if version is None or text is None or document is None:
                return (await asyncio.shield(future))[0]  # a file nobody opened: not kept
            known = self._discoveries[uri] = _Discovered(version, text, future)
        return (await asyncio.shield(known.future))[0]

    def _discovery_done(self, uri: str, version: int | None,
                        done: asyncio.Future[tuple[Discovery, float]]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            log.error("finding the targets of %s failed", uri, exc_info=error)
            return
        found, seconds = done.result()
        self.log(f"found {len(found.targets)} target(s) in {self.path_of(uri).name} "
                 f"v{version} in {seconds:.2f} s", "debug")

    def forget_document(self, uri: str) -> None:
        """A closed document: its targets and lines are no longer kept."""
        self._discoveries.pop(uri, None)
        self._lines.pop(uri, None)

    def request_check(self, uri: str, *, delay: float = 0.0,
                      opened: bool = False) -> asyncio.Task[None] | None:
        if not self.trusted:
            return None
        self.focus.touch(uri)
        document = self.workspace.get_text_document(uri)
        return self.checker.request(uri, document.version, document.source, delay=delay,
                                    opened=opened)

    # -- the workspace-wide mode ---------------------------------------------------------

    def workspace_files(self) -> list[Path]:
        """The files in the workspace that may hold targets, without the excluded ones."""
        from exporter.source_files import might_have_targets, python_files_below

        if self.root is None:
            return []
        return [path for path in python_files_below(self.root, self.root,
                                                    self.settings.excluded)
                if might_have_targets(path)]

    async def check_workspace(self) -> dict[str, int]:
        """Check every target in the workspace at the lowest priority (open documents are
        checked as they are edited); unchanged files reuse their last result. Cancelling
        stops the checks still queued or running."""
        paths = self.workspace_files()
        tasks = []
        for path in paths:
            uri = path_uri(path)
            if uri in self.workspace.text_documents:
                continue
            running = self.checker.tasks.get(uri)
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
        return {"files": len(files),
                "targets": sum(len(state.targets) for state in files),
                "problems": sum(len(r.diagnostics) for s in files for r in s.targets.values())}

    def start_workspace_check(self) -> None:
        """``diagnosticMode: workspace``: check the workspace in the background, with
        progress the user can cancel; a running one is replaced."""
        from lsp_server.checks import with_progress

        if self.workspace_check is not None:
            self.workspace_check.cancel()
        self.workspace_check = asyncio.ensure_future(
            with_progress(self, "Checking the workspace", self.check_workspace))
        self.workspace_check.add_done_callback(_quietly_cancelled)

    def forget_unopened(self) -> None:
        """Back from the workspace-wide mode: what was found in files nobody opened goes."""
        if self.workspace_check is not None:
            self.workspace_check.cancel()
        for uri in list(self.checker.documents):
            if uri not in self.workspace.text_documents:
                self.checker.close(uri)
                for file in self.store.replace(uri, {}):
                    self.publish(file)


def _quietly_cancelled(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the workspace check failed", exc_info=task.exception())


server = OnnxLensServer()


# The handlers register themselves on ``server`` (one module per concern).
from lsp_server import commands, documents, lifecycle, presentation  # noqa: E402, F401
