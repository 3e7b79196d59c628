"""The graph viewer: Model Explorer's server started on a saved model, on the loopback only,
and stopped whole (export_worker/graph_viewer.py, export_worker/viewer_launcher.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def _post(url: str, body: object) -> object:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
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
        graphs = _post(viewer.base_url + "/apipost/v1/send_command", {
            "extensionId": "onnx_adapter", "cmdId": "convert", "modelPath": str(saved),
            "settings": {}, "deleteAfterConversion": False})
        assert isinstance(graphs, dict)
        (main,) = [graph for graph in graphs["graphs"] if graph["id"] == "main_graph"]
        assert set(names) <= {node["id"] for node in main["nodes"]}
        # no request to PyPI or GitHub: the version check answers "nothing newer" at once
        assert json.loads(_get(viewer.base_url + "/api/v1/check_new_version"))["version"] == ""
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
