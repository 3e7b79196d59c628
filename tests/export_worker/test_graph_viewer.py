"""The graph viewer: Model Explorer's server started on a saved model, on the loopback only,
and stopped whole (export_worker/graph_viewer.py, export_worker/viewer_launcher.py)."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import onnx
import pytest

from export_worker import graph_viewer
from export_worker.graph_viewer import (
    ViewerError,
    missing_packages_message,
    page_url,
    start_viewer,
)
from export_worker.viewer_launcher import TOKEN_HEADER
from tests.conftest import REPO, needs_model_explorer


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("viewer") / "mlp.onnx"
    subprocess.run([sys.executable, "-m", "onnxlens", "save", "examples/mlp.py::MLPModel",
                    "-o", str(output)], cwd=REPO, check=True, capture_output=True)
    return output


def _get(url: str, **headers: str) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
        return bytes(r.read())


def _post(url: str, body: object, **headers: str) -> object:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


@needs_model_explorer
def test_the_viewer_serves_the_model_and_stops(saved, tmp_path):
    names = [node.name for node in onnx.load(str(saved)).graph.node]
    node_data = tmp_path / "marks.json"
    node_data.write_text(json.dumps({"main_graph": {"results": {names[0]: {"value": "x"}}}}))
    with start_viewer(saved, [node_data], names[0]) as viewer:
        assert viewer.url.startswith(f"http://127.0.0.1:{viewer.port}/?data=")
        (data,) = parse_qs(urlsplit(viewer.url).query)["data"]
        state = json.loads(data)
        assert state["models"] == [{"url": str(saved.resolve()), "adapterId": "onnx_adapter"}]
        assert state["nodeData"] == [str(node_data.resolve())]
        assert state["uiState"]["paneStates"][0]["selectedNodeId"] == names[0]
        assert b"<app-root" in _get(viewer.url)
        secret = {TOKEN_HEADER: viewer.token}
        graphs = _post(viewer.base_url + "/apipost/v1/send_command", {
            "extensionId": "onnx_adapter", "cmdId": "convert", "modelPath": str(saved),
            "settings": {}, "deleteAfterConversion": False}, **secret)
        assert isinstance(graphs, dict)
        (main,) = [graph for graph in graphs["graphs"] if graph["id"] == "main_graph"]
        assert set(names) <= {node["id"] for node in main["nodes"]}
        # no request to PyPI or GitHub: the version check answers "nothing newer" at once
        assert json.loads(_get(viewer.base_url + "/api/v1/check_new_version",
                               **secret))["version"] == ""
        # the page's web font (Google's font service) is never fetched: fonts and requests
        # from this server alone
        with urllib.request.urlopen(viewer.base_url + "/", timeout=10) as page:
            assert "https://fonts.gstatic.com" in page.read().decode()
            assert page.headers["Content-Security-Policy"] == \
                "font-src 'self' data:; connect-src 'self'"
        with pytest.raises(urllib.error.HTTPError) as refused:  # DNS rebinding
            _get(viewer.base_url + "/check_health", Host=f"attacker.example:{viewer.port}")
        assert refused.value.code == 403
        process = viewer.process
    assert process.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # nothing of its process group is left
    with pytest.raises(urllib.error.URLError):
        _get(viewer.base_url + "/check_health")


def test_missing_packages_say_how_to_install_them(monkeypatch, tmp_path):
    message = missing_packages_message(["model_explorer"])
    assert "`model_explorer`" in message and 'pip install "onnxlens[graph]"' in message
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    monkeypatch.setattr(graph_viewer, "missing_packages", lambda: ["model_explorer_onnx"])
    with pytest.raises(ViewerError, match=r"onnxlens\[graph\]"):
        start_viewer(model, [], None)


def test_the_launcher_without_model_explorer_exits_with_the_install_command():
    blocked = ("import sys; sys.modules['model_explorer'] = None\n"
               "from export_worker.viewer_launcher import run\n"
               "sys.exit(run(['--port', '1', '--model', 'm.onnx']))")
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3
    assert 'pip install "onnxlens[graph]"' in done.stderr


@needs_model_explorer
def test_a_missing_model_is_a_viewer_error(tmp_path):
    with pytest.raises(ViewerError, match="no such file"):
        start_viewer(tmp_path / "absent.onnx", [], None)


def test_the_page_url_selects_a_node_of_another_graph(tmp_path):
    url = page_url("127.0.0.1", 8123, tmp_path / "m.onnx", [], "node_step", "node_loop/body")
    (data,) = parse_qs(urlsplit(url).query)["data"]
    pane = json.loads(data)["uiState"]["paneStates"][0]
    assert (pane["selectedNodeId"], pane["selectedGraphId"]) == ("node_step", "node_loop/body")


# -- who the viewer answers (issue 39): the page of its launch, its own files ----------------

def _status(url: str, body: bytes | None = None, method: str = "GET", **headers: str) -> int:
    request = urllib.request.Request(url, body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.fixture
def guarded(saved, tmp_path_factory):
    """A viewer on the saved model and a node data file, its temporary directory its own (what
    an upload would leave), and a file of the user's that only the user may read."""
    root = tmp_path_factory.mktemp("guarded")
    node_data = root / "marks.json"
    node_data.write_text(json.dumps({"main_graph": {"results": {}}}))
    private = root / "private.txt"
    private.write_text("the user's secret")
    private.chmod(0o600)
    temporary = root / "tmp"
    temporary.mkdir()
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(temporary)
    try:
        with start_viewer(saved, [node_data], None) as viewer:
            yield viewer, node_data, private, temporary
    finally:
        if previous is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = previous


def _read(viewer, path: Path | str, **headers: str) -> int:
    return _status(f"{viewer.base_url}/api/v1/read_text_file?path={path}", **headers)


@needs_model_explorer
def test_the_api_answers_the_page_of_its_launch_about_its_own_files(guarded, saved):
    viewer, node_data, private, temporary = guarded
    secret = {TOKEN_HEADER: viewer.token}
    page = {"Referer": viewer.url}  # what the page's own requests carry
    assert _read(viewer, node_data, **secret) == 200
    assert _read(viewer, node_data, **page) == 200
    # without the launch's secret, or with it from another site's page: nothing
    assert _read(viewer, node_data) == 403
    assert _read(viewer, node_data, Referer=viewer.url.replace("127.0.0.1", "evil.example")) \
        == 403
    assert _read(viewer, node_data, **{TOKEN_HEADER: "guessed"}) == 403
    # with it: only the files of its graph, never a device
    for path in (private, "/etc/shadow", "/dev/zero"):
        assert _read(viewer, path, **secret) == 403, path
    convert = {"extensionId": "onnx_adapter", "cmdId": "convert", "settings": {},
               "deleteAfterConversion": False}
    command = f"{viewer.base_url}/apipost/v1/send_command"
    headers = {"Content-Type": "application/json", **secret}
    assert _status(command, json.dumps({**convert, "modelPath": str(saved)}).encode(), "POST",
                   **headers) == 200
    assert _status(command, json.dumps({**convert, "modelPath": str(private)}).encode(),
                   "POST", **headers) == 403
    assert _status(command, json.dumps({**convert, "modelPath": str(saved),
                                        "deleteAfterConversion": True}).encode(), "POST",
                   **headers) == 403
    assert saved.is_file()
    # no upload, no configuration change, no request body over 1 MB
    upload = (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\n\r\n"
              b"planted\r\n--b--\r\n")
    assert _status(f"{viewer.base_url}/apipost/v1/upload", upload, "POST",
                   **{"Content-Type": "multipart/form-data; boundary=b"}, **secret) == 403
    assert _status(f"{viewer.base_url}/apipost/v1/update_config", b"{}", "POST",
                   **headers) == 403
    assert _status(command, b"x" * (2 << 20), "POST", **headers) == 413
    assert list(temporary.iterdir()) == []
    # the page and Model Explorer's own static files are public
    assert _status(viewer.base_url + "/") == 200
    assert _status(viewer.base_url + "/check_health") == 200


@needs_model_explorer
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to act as another local user")
def test_another_local_user_reads_nothing(guarded):
    """Another local user (uid 65534) knows the port and the paths, not the secret: no file of
    the user's or of the graph, no /dev/zero, no upload."""
    viewer, node_data, private, temporary = guarded
    script = ("import sys, urllib.request, urllib.error\n"
              "upload = (b'--b\\r\\nContent-Disposition: form-data; name=\"file\"; '\n"
              "          b'filename=\"x\"\\r\\n\\r\\nplanted\\r\\n--b--\\r\\n')\n"
              "for path in sys.argv[2:]:\n"
              "    body = upload if 'upload' in path else None\n"
              "    request = urllib.request.Request(sys.argv[1] + path, body, headers={\n"
              "        'Content-Type': 'multipart/form-data; boundary=b'})\n"
              "    try:\n"
              "        urllib.request.urlopen(request, timeout=30)\n"
              "        print(200)\n"
              "    except urllib.error.HTTPError as error:\n"
              "        print(error.code)\n")
    paths = [f"/api/v1/read_text_file?path={path}" for path in (private, node_data, "/dev/zero")]
    paths += ["/api/v1/load_node_data?node_data_index=0", "/apipost/v1/upload"]
    answer = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
         "-I", "-c", script, viewer.base_url, *paths],
        capture_output=True, text=True, timeout=60, check=True)
    assert answer.stdout.split() == ["403"] * len(paths)
    assert list(temporary.iterdir()) == []


HOSTILE_PAGE = """<!doctype html><meta charset="utf-8">
<img src="{viewer}/api/v1/read_text_file?path=/dev/zero">
<img src="{viewer}/api/v1/read_text_file?path={private}">
<form id="upload" method="post" enctype="multipart/form-data" target="sink"
      action="{viewer}/apipost/v1/upload"><input type="hidden" name="file" value="x"></form>
<iframe name="sink"></iframe>
<script>
fetch("{viewer}/api/v1/read_text_file?path={node_data}", {{mode: "no-cors"}});
document.getElementById("upload").submit();
</script>"""


@needs_model_explorer
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_a_page_of_another_origin_gets_nothing(guarded, tmp_path):
    """A web page open in the user's browser sends blind requests to the port: every one is
    refused (no file read, /dev/zero never opened, no upload saved)."""
    viewer, node_data, private, temporary = guarded
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(HOSTILE_PAGE.format(viewer=viewer.base_url,
                                                         private=private, node_data=node_data))
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                               "--directory", str(site), "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split("port ")[1].split()[0]
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path}/profile",
                        "--virtual-time-budget=5000", "--dump-dom",
                        f"http://127.0.0.1:{port}/index.html"],
                       capture_output=True, timeout=120, check=True)
    finally:
        server.kill()
        server.wait()
    log = viewer.output_tail()
    answered = [line for line in log.splitlines() if line.startswith("onnxlens viewer: ")
                and str(port) not in line]
    assert any("path=/dev/zero" in line for line in answered), log
    assert any("POST /apipost/v1/upload" in line for line in answered), log
    assert any(f"path={node_data}" in line for line in answered), log
    assert all("refused (403" in line for line in answered), answered
    assert list(temporary.iterdir()) == []


@needs_model_explorer
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_the_page_of_its_launch_shows_the_graph_in_a_browser(guarded, tmp_path):
    """The secret reaches the page's own requests (their Referer), in a real browser: the
    page converts the model (waited for in the viewer's log, however busy the machine)."""
    viewer, *_ = guarded
    browser = subprocess.Popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path}/profile", "--remote-debugging-port=0",
         viewer.url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    converted = "onnxlens viewer: POST /apipost/v1/send_command? let through"
    try:
        deadline = time.monotonic() + 180
        while converted not in viewer.output_tail() and time.monotonic() < deadline:
            assert browser.poll() is None, "the browser ended"
            time.sleep(0.2)  # polling the log for the event, not proving an absence
    finally:
        browser.kill()
        browser.wait()
    log = viewer.output_tail()
    assert converted in log, log
    assert "onnxlens viewer: GET /api/v1/get_extensions? let through" in log, log
    assert "refused" not in log, log


@needs_model_explorer
def test_the_browser_is_given_a_private_file_not_the_secret(guarded, monkeypatch):
    """`onnxlens graph` opens the page through a file only the user can read: the browser's
    command line (seen by every local user) does not carry the secret."""
    viewer, *_ = guarded
    opened: list[str] = []
    monkeypatch.setattr(graph_viewer.webbrowser, "open", lambda uri: opened.append(uri) or True)
    assert viewer.open_in_browser()
    (uri,) = opened
    assert uri.startswith("file://") and viewer.token not in uri
    page = Path(urlsplit(uri).path)
    assert page.stat().st_mode & 0o777 == 0o600
    assert page.parent.stat().st_mode & 0o777 == 0o700
    assert html.escape(viewer.url, quote=True) in page.read_text()
    viewer.stop()
    assert not page.parent.exists()


@needs_model_explorer
def test_the_language_servers_viewer_serves_its_graphs_directory_alone(saved, tmp_path):
    """The language server's viewer shows every graph it writes under its own directory; a
    symlink planted there to a file outside, a FIFO and anything outside are refused."""
    graphs = tmp_path / "graphs"
    (graphs / "2").mkdir(parents=True)
    later = graphs / "2" / "marks.json"
    later.write_text("{}")
    outside = tmp_path / "outside.txt"
    outside.write_text("not a graph")
    (graphs / "2" / "link.json").symlink_to(outside)
    os.mkfifo(graphs / "2" / "fifo.json")
    with start_viewer(saved, [], None, serve_under=graphs) as viewer:
        secret = {TOKEN_HEADER: viewer.token}
        assert _read(viewer, later, **secret) == 200
        for path in (graphs / "2" / "link.json", graphs / "2" / "fifo.json", outside, graphs):
            assert _read(viewer, path, **secret) == 403, path
