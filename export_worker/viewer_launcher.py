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
import os
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MISSING_EXIT_STATUS = 3
ADAPTER_MODULE = "model_explorer_onnx"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m export_worker.viewer_launcher")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", action="append", default=[], help="a model file to serve")
    parser.add_argument("--node-data", action="append", default=[], help="a node data file")
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


def _loopback_flask() -> None:
    """Every Flask app made from now on refuses a request whose Host is not the loopback, and
    its pages make no request to another host (``CONTENT_SECURITY_POLICY``)."""
    import flask

    class LoopbackFlask(flask.Flask):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.before_request(_check_host)
            self.after_request(_no_other_hosts)

    def _check_host() -> Any:
        if urlsplit("//" + flask.request.host).hostname not in LOOPBACK_HOSTS:
            flask.abort(403)
        return None

    def _no_other_hosts(response: flask.Response) -> flask.Response:
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
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
    _refuse_remote_requests()
    _loopback_flask()
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
