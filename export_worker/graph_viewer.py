"""The exported graph in Google's Model Explorer: its server in a subprocess of this interpreter
(``export_worker/viewer_launcher.py`` says what the launcher keeps it from doing), on a free
loopback port, and the page's URL with the model loaded, the node data applied and a node
selected.

The URL's ``data`` parameter is the web app's own state (what its ``decodeUrl`` reads):
``{"models": [{"url": <model path>, "adapterId": "onnx_adapter"}], "nodeData": [<paths>],
"nodeDataTargets": [""...], "uiState": {"paneStates": [{"selectedNodeId": ..., ...}]}}``,
JSON, percent-encoded. Imports neither torch nor onnx.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import webbrowser
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import quote

from export_worker.viewer_launcher import TOKEN_PARAMETER, TOKEN_VARIABLE

REQUIRED_MODULES = ("model_explorer", "model_explorer_onnx")
INSTALL_COMMAND = 'pip install "onnxlens[graph]"'
ADAPTER_ID = "onnx_adapter"
READY_TIMEOUT = 60.0  # seconds; the server is ready in about 2
_STOP_GRACE = 5.0
_TAIL_CHARS = 2000
_LAUNCHER = "export_worker.viewer_launcher"
_MISSING_EXIT_STATUS = 3  # the launcher's
#: the directory holding export_worker, on the launcher's path as on the worker's (the editor
#: extension's bundle is not on the interpreter's own path: export_worker/client.py)
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


class ViewerError(RuntimeError):
    """The viewer could not start: the message says why and what to do."""


def missing_packages_message(missing: list[str]) -> str:
    names = ", ".join(f"`{name}`" for name in missing)
    return (f"the graph viewer needs Google's Model Explorer ({names} not found in "
            f"{sys.executable}); install it with: {INSTALL_COMMAND}")


def missing_packages() -> list[str]:
    """The viewer's modules this interpreter cannot import (without importing them)."""
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def page_url(host: str, port: int, model_path: Path, node_data: list[Path],
             selected_node: str | None = None, selected_graph: str | None = None,
             token: str = "") -> str:
    """The page with the model, its node data and the selected node (``selected_graph``: the
    node's graph id when it is not the model's main graph), and the launch's secret, which the
    page's requests to the server carry (export_worker/viewer_launcher.py)."""
    pane: dict[str, Any] = {
        "deepestExpandedGroupNodeIds": [], "selectedNodeId": selected_node or "",
        "selectedGraphId": selected_graph or "", "selectedCollectionLabel": "",
        "widthFraction": 1,
    }
    data = {
        "models": [{"url": str(model_path.resolve()), "adapterId": ADAPTER_ID}],
        "nodeData": [str(path.resolve()) for path in node_data],
        "nodeDataTargets": ["" for _ in node_data],
        "uiState": {"paneStates": [pane]},
    }
    secret = f"&{TOKEN_PARAMETER}={quote(token)}" if token else ""
    return f"http://{_url_host(host)}:{port}/?data={quote(json.dumps(data))}{secret}"


@dataclass
class Viewer:
    """A running Model Explorer server; ``stop()`` (or leaving a ``with`` block) ends it."""

    url: str  # the page, with the launch's secret: give it to nobody else
    port: int
    host: str
    process: subprocess.Popen[bytes]
    _log: IO[bytes] = field(repr=False)
    token: str = field(default="", repr=False)
    serve_under: Path | None = None
    _private: list[str] = field(default_factory=list, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}"

    def output_tail(self) -> str:
        return _tail(self._log)

    def stop(self) -> None:
        """SIGTERM the server's process group, then SIGKILL it after a grace period."""
        _end(self.process)
        if self.process.stdin is not None:
            self.process.stdin.close()
        self._log.close()
        for directory in self._private:
            shutil.rmtree(directory, ignore_errors=True)

    def open_in_browser(self) -> bool:
        """Open the page in the user's browser through a file only the user can read, as
        Jupyter does: the browser's command line, which every local user sees (``ps``), names
        that file, not the page's secret. The file goes when the viewer stops."""
        directory = tempfile.mkdtemp(prefix="onnxlens-viewer-")  # mode 700
        self._private.append(directory)
        page = Path(directory) / "open.html"
        address = html.escape(self.url, quote=True)
        descriptor = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(f'<!doctype html><meta charset="utf-8">'
                         f'<meta http-equiv="refresh" content="0;url={address}">'
                         f'<a href="{address}">Open the graph in Model Explorer</a>\n')
        return webbrowser.open(page.as_uri())

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


def start_viewer(model_path: Path, node_data: list[Path], selected_node: str | None, *,
                 host: str = "127.0.0.1", selected_graph: str | None = None,
                 timeout: float = READY_TIMEOUT, serve_under: Path | None = None) -> Viewer:
    """Start Model Explorer on ``model_path`` and wait until it answers (at most ``timeout``
    seconds). It serves those files, and every file under ``serve_under`` (a directory only
    onnxlens writes: the language server's graphs). Raises ViewerError with the server's last
    output when it cannot start."""
    missing = missing_packages()
    if missing:
        raise ViewerError(missing_packages_message(missing))
    for path in (model_path, *node_data):
        if not path.is_file():
            raise ViewerError(f"the graph viewer cannot read {path}: no such file")
    for attempt in range(3):  # another process may take the free port before the server does
        port = free_port(host)
        log = tempfile.TemporaryFile(prefix="onnxlens-viewer-")  # noqa: SIM115  # the Viewer closes it
        command = [sys.executable, "-m", _LAUNCHER, "--host", host, "--port", str(port),
                   "--model", str(model_path.resolve()), "--exit-with-stdin"]
        for path in node_data:
            command += ["--node-data", str(path.resolve())]
        if serve_under is not None:
            command += ["--serve-under", str(serve_under.resolve())]
        # stdin: a pipe only this process holds; the server ends when it closes, so a viewer
        # never outlives its parent, however that ends (SIGKILL included)
        token = secrets.token_urlsafe(32)
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**_environment(), TOKEN_VARIABLE: token})
        viewer = Viewer(page_url(host, port, model_path, node_data, selected_node,
                                 selected_graph, token), port, host, process, log, token,
                        serve_under)
        try:
            ready = _wait_ready(viewer, timeout)
        except BaseException:
            viewer.stop()
            raise
        if ready:
            return viewer
        output = viewer.output_tail()
        viewer.stop()
        if process.returncode == _MISSING_EXIT_STATUS:
            raise ViewerError(missing_packages_message(list(REQUIRED_MODULES)) + "\n" + output)
        if "already in use" not in output or attempt == 2:
            raise ViewerError(f"Model Explorer did not start (exit status "
                              f"{process.returncode}); its last output:\n{output}")
    raise AssertionError("unreachable")


def _environment() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (never 0: Model Explorer would poll port 0 for ever)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _wait_ready(viewer: Viewer, timeout: float) -> bool:
    """True once ``/check_health`` answers; False when the process ended or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if viewer.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(viewer.base_url + "/check_health", timeout=2) as answer:
                if answer.read() == b"model_explorer_ok":
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    return False


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    _signal_group(process, signal.SIGTERM)
    try:
        process.wait(_STOP_GRACE)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)  # the server runs in a session (a group) of its own
    except ProcessLookupError:
        pass


def _tail(log: IO[bytes]) -> str:
    if log.closed:
        return ""
    log.flush()
    log.seek(0, os.SEEK_END)
    size = log.tell()
    log.seek(max(0, size - _TAIL_CHARS))
    return log.read().decode("utf-8", "replace").strip()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


__all__ = ["INSTALL_COMMAND", "Viewer", "ViewerError", "free_port", "missing_packages",
           "missing_packages_message", "page_url", "start_viewer"]
