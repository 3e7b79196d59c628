"""Model Explorer's server as onnxlens runs it (``python -m export_worker.viewer_launcher``,
started by ``export_worker/graph_viewer.py``): its ONNX adapter only, on a loopback port, and
nothing leaves the machine.

What ``model_explorer.server.start`` would do otherwise, and what this module does instead:

* it asks PyPI and GitHub for a newer release, with no timeout, in a thread after start-up and
  at ``/api/v1/check_new_version`` (the web app calls it): ``server._check_new_version`` (both
  callers look it up by name) answers "no newer version" without a request;
* any other ``requests`` call to a host other than the loopback is refused (none is known; the
  ``--reuse_server`` director and the health checks only call the local server);
* it imports torch when it can (for its ExportedProgram adapter): the import is blocked, which
  saves seconds and hundreds of MB; the ONNX adapter does not need it;
* it answers whatever ``Host`` a request names: a request whose ``Host`` is not the loopback is
  refused (a web page cannot reach the server through DNS rebinding);
* it serves any file of the machine to anyone who can reach the port (``read_text_file``, the
  adapters' ``convert`` command), saves uploads in new temporary directories, and changes its
  configuration on request: :class:`Served` lets through only what the page of this launch
  needs (docs/graph.md, "Who can reach the viewer"). Every request to its API carries the
  launch's secret (in the page's URL, which the page's own requests name as their
  ``Referer``; or in a header); ``read_text_file`` reads only the node data files and
  ``convert`` only the model this launch was started for, regular files only; uploads, the
  configuration and every other command are refused; a request body or query over 1 MB is
  refused. The page's static files (Model Explorer's own) are served to anyone;
* its page loads a web font from Google's font service: every answer carries a
  Content-Security-Policy that allows fonts and requests from this server alone;
* it may open a browser tab: never (``no_open_in_browser``, and ``webbrowser`` is disarmed);
* its own health check polls for ever if the server never comes up: skipped; the parent polls
  ``/check_health`` with a deadline;
* it runs until it is stopped: with ``--exit-with-stdin`` it exits when its stdin (a pipe the
  parent holds) reaches its end, i.e. when the parent (the CLI, the language server) is gone,
  however it ended.

Exit status 3 with a message on stderr when the packages are missing.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import stat
import sys
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MISSING_EXIT_STATUS = 3
ADAPTER_MODULE = "model_explorer_onnx"
ADAPTER_ID = "onnx_adapter"
#: the launch's secret: in the environment, never on the command line (``ps`` shows that to
#: every local user)
TOKEN_VARIABLE = "ONNXLENS_VIEWER_TOKEN"
TOKEN_HEADER = "X-Onnxlens-Token"
TOKEN_PARAMETER = "token"
MAX_REQUEST_BYTES = 1 << 20
MAX_FILE_BYTES = 256 << 20
#: the API routes the page needs and that act on this launch's files alone (its config's
#: models and node data, by index), besides ``read_text_file`` and ``send_command``
_PASSED_ROUTES = frozenset({"/api/v1/get_extensions", "/api/v1/check_new_version",
                            "/api/v1/load_graphs_json", "/api/v1/load_node_data",
                            "/apistream/server_director"})
_API_PREFIXES = ("/api/", "/apipost/", "/apistream/")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m export_worker.viewer_launcher")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", action="append", default=[], help="a model file to serve")
    parser.add_argument("--node-data", action="append", default=[], help="a node data file")
    parser.add_argument("--serve-under", action="append", default=[],
                        help="also serve the graph files under this directory (onnxlens's own)")
    parser.add_argument("--exit-with-stdin", action="store_true",
                        help="exit when stdin reaches its end (the parent is gone)")
    return parser


def _exit_with_stdin() -> None:
    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="onnxlens-parent-watch", daemon=True).start()


def _no_version_check(print_msg: bool = True) -> dict[str, str]:
    return {"version": "", "runningVersion": "", "releaseUrl": "", "desktopAppUrl": ""}


def _refuse_remote_requests() -> None:
    import requests

    original = requests.sessions.Session.request

    def local_only(self: Any, method: str, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        text = url.decode() if isinstance(url, bytes) else str(url)
        host = urlsplit(text).hostname or ""
        if host not in LOOPBACK_HOSTS:
            raise requests.ConnectionError(f"onnxlens: the viewer makes no request to {host}")
        return original(self, method, url, *args, **kwargs)

    requests.sessions.Session.request = local_only  # type: ignore[method-assign]


#: the page's fonts and requests come from this server alone (the web app asks Google's font
#: service for a web font; offline that request fails, and with this it is never made)
CONTENT_SECURITY_POLICY = "font-src 'self' data:; connect-src 'self'"


@dataclass(frozen=True)
class Served:
    """What one launch serves: its secret, and the files it was started for (real paths): the
    ones named, and every file under the directories named (the language server's graphs)."""

    token: str
    files: frozenset[str]
    directories: tuple[str, ...] = ()

    def refusal(self, method: str, path: str, query: str, args: dict[str, str],
                headers: dict[str, str], host: str, body: bytes | None) -> tuple[int, str] | None:
        """Why a request is refused (status, reason), or None to let it through."""
        if len(query) > MAX_REQUEST_BYTES or len(body or b"") > MAX_REQUEST_BYTES:
            return 413, "the request is too large"
        if path == "/check_health":
            return None
        if not path.startswith(_API_PREFIXES):  # Model Explorer's own static files
            return None if method in ("GET", "HEAD") else (405, "static files are read only")
        if not self._authorized(args, headers, host):
            return 403, "this viewer answers only the page onnxlens opened for it"
        if path in _PASSED_ROUTES:
            return None
        if path == "/api/v1/read_text_file":
            return None if self.readable(args.get("path")) \
                else (403, "the viewer reads only the files of its graphs")
        if path in ("/api/v1/send_command", "/apipost/v1/send_command"):
            command = _json(args.get("json", "") if method == "GET" else body)
            return None if self._converts_own_model(command) \
                else (403, "the viewer converts only the models of its graphs")
        return 403, "not served by onnxlens's viewer (no upload, no configuration change)"

    def readable(self, path: Any) -> bool:
        """Whether ``path`` names a file of this launch, now a regular file of a bounded size
        (never a device, a FIFO or a symlink swapped in)."""
        if not isinstance(path, str) or not path:
            return False
        real = os.path.realpath(os.path.expanduser(path))
        if real not in self.files \
                and not any(real.startswith(directory + os.sep) for directory in self.directories):
            return False
        try:
            status = os.stat(real)
        except OSError:
            return False
        return stat.S_ISREG(status.st_mode) and status.st_size <= MAX_FILE_BYTES

    def _authorized(self, args: dict[str, str], headers: dict[str, str], host: str) -> bool:
        given = [headers.get(TOKEN_HEADER.lower(), ""), args.get(TOKEN_PARAMETER, "")]
        referer = urlsplit(headers.get("referer", ""))
        if referer.scheme == "http" and referer.netloc == host:  # the page's own request
            given += parse_qs(referer.query).get(TOKEN_PARAMETER, [])
        return any(hmac.compare_digest(value.encode(), self.token.encode())
                   for value in given if value)

    def _converts_own_model(self, command: Any) -> bool:
        return isinstance(command, dict) and command.get("cmdId") == "convert" \
            and command.get("extensionId") == ADAPTER_ID \
            and not command.get("deleteAfterConversion") \
            and self.readable(command.get("modelPath"))


def _json(text: str | bytes | None) -> Any:
    try:
        return json.loads(text or b"")
    except ValueError:
        return None


def served_files(files: list[str], directories: list[str], token: str) -> Served:
    return Served(token, frozenset(os.path.realpath(f) for f in files),
                  tuple(os.path.realpath(d) for d in directories))


def _loopback_flask(served: Served) -> None:
    """Every Flask app made from now on refuses a request whose Host is not the loopback and
    what ``served`` refuses, and its pages make no request to another host
    (``CONTENT_SECURITY_POLICY``)."""
    import flask

    class LoopbackFlask(flask.Flask):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
            self.before_request(_check_host)
            self.before_request(_check_request)
            self.after_request(_no_other_hosts)

    def _check_host() -> Any:
        if urlsplit("//" + flask.request.host).hostname not in LOOPBACK_HOSTS:
            flask.abort(403)
        return None

    def _check_request() -> Any:
        request = flask.request
        if request.path == "/api/v1/notify_user_provided_model_path":
            return {"status": "ok"}  # it would watch any path for changes: nothing to do
        body = request.get_data(cache=True) if request.method == "POST" else None
        refused = served.refusal(request.method, request.path,
                                 request.query_string.decode("latin-1"),
                                 dict(request.args.items()),
                                 {k.lower(): v for k, v in request.headers.items()},
                                 request.host, body)
        if request.path.startswith(_API_PREFIXES):  # the viewer's log: what it answered whom
            decision = f"refused ({refused[0]}: {refused[1]})" if refused else "let through"
            print(f"onnxlens viewer: {request.method} {request.full_path} {decision}",
                  file=sys.stderr, flush=True)
        if refused is not None:
            return flask.Response(refused[1] + "\n", status=refused[0], mimetype="text/plain")
        return None

    def _no_other_hosts(response: flask.Response) -> flask.Response:
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        # the page's own requests name its whole URL, the secret with it, and no other site
        # learns it
        response.headers["Referrer-Policy"] = "same-origin"
        return response

    flask.Flask = LoopbackFlask  # type: ignore[misc]


def run(argv: list[str]) -> int:
    options = _parser().parse_args(argv)
    if options.exit_with_stdin:
        _exit_with_stdin()
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError
    try:
        import webbrowser

        import model_explorer_onnx  # noqa: F401
        from model_explorer import server
        from model_explorer.config import ModelExplorerConfig
    except ImportError as error:
        print(f"onnxlens: the graph viewer needs Model Explorer ({error}); install it with: "
              'pip install "onnxlens[graph]"', file=sys.stderr)
        return MISSING_EXIT_STATUS
    server._check_new_version = _no_version_check
    webbrowser.open = webbrowser.open_new = webbrowser.open_new_tab = (  # type: ignore[assignment]
        lambda *args, **kwargs: False)
    token = os.environ.pop(TOKEN_VARIABLE, "")
    if not token:
        print(f"onnxlens: the viewer needs its launch's secret in {TOKEN_VARIABLE}",
              file=sys.stderr)
        return 2
    _refuse_remote_requests()
    _loopback_flask(served_files(options.model + options.node_data, options.serve_under, token))
    config = ModelExplorerConfig()
    for model in options.model:
        config.add_model_from_path(model)
    for node_data in options.node_data:
        config.add_node_data_from_path(node_data)
    server.start(host=options.host, port=options.port, config=config,
                 extensions=[ADAPTER_MODULE], no_open_in_browser=True, skip_health_check=True)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
