"""``onnxlens graph``: the graph a check exported, each node mapped to its source line, the
failing node selected and labelled (docs/graph.md); ``onnxlens save --strip-source-metadata``."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest

from exporter.findings.rules import Severity
from exporter.reports.graph_view import RUNS_EVERYWHERE_COLOR, SEVERITY_COLORS
from onnxlens.cli import main
from tests.conftest import REPO, needs_model_explorer

EXAMPLES = REPO / "examples" / "failing"


def _line_of(path: Path, text: str) -> tuple[int, int]:
    """The 1-based line and column where ``text`` first appears in ``path``."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if text in line:
            return number, line.index(text) + 1
    raise AssertionError(f"{text!r} not in {path}")


def _graph(capsys: pytest.CaptureFixture[str], target: str, directory: Path) -> dict:
    assert main(["graph", target, "--no-serve", "--format", "json",
                 "--output-dir", str(directory)]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.every_torch  # where torch's exporter says each node came from
def test_the_node_onnx_runtime_fails_in_is_selected_labelled_and_mapped_to_its_line(
        tmp_path, capsys):
    graph = _graph(capsys, f"{EXAMPLES}/double_precision.py::PreciseGelu", tmp_path)
    model = onnx.load(graph["model"])
    by_name = {node.name: node for node in model.graph.node}
    selected = graph["selected_node"]
    assert by_name[selected].op_type == "Erf"
    line, column = _line_of(EXAMPLES / "double_precision.py", "torch.erf(")
    where = graph["nodes"][selected]
    assert (where["path"], where["line"], where["column"]) == (
        "examples/failing/double_precision.py", line, column)
    # every mapped node is a node of the model, on a line of the example's forward
    assert set(graph["nodes"]) <= set(by_name)
    forward = _line_of(EXAMPLES / "double_precision.py", "def forward")[0]
    assert all(forward < node["line"] <= forward + 3 for node in graph["nodes"].values())
    marks = json.loads(Path(graph["node_data"][-1]).read_text())[graph["graph_id"]]["results"]
    assert marks[selected]["value"].startswith("ONNX401: ONNX Runtime cannot create a session")


def test_a_numeric_mismatch_selects_the_first_diverging_node_and_shows_each_nodes_error(
        tmp_path, capsys):
    graph = _graph(capsys, f"{EXAMPLES}/custom_translation.py::FeedForward", tmp_path)
    errors_file, marks_file = (Path(p) for p in graph["node_data"])
    assert errors_file.name == "errors.json" and marks_file.name == "marks.json"
    selected = graph["selected_node"]
    assert graph["nodes"][selected]["line"] == _line_of(
        EXAMPLES / "custom_translation.py", "torch.nn.functional.gelu(")[0]
    errors = json.loads(errors_file.read_text())[graph["graph_id"]]["results"]
    assert errors[selected]["value"] > 1e-4  # past the pragma's atol
    assert min(error["value"] for error in errors.values()) == 0.0  # the Linear before it
    marks = json.loads(marks_file.read_text())[graph["graph_id"]]["results"]
    assert marks[selected]["value"].startswith("ONNX502: The values first diverge")


def test_the_runtimes_named_colour_each_node_by_where_it_runs(tmp_path, capsys):
    """Issue 43: a model judged for NNAPI and CoreML: the nodes either leaves to the CPU are
    amber and say which, the rest green; the layer comes last, so it colours the graph (a
    node a runtime cannot take at all, red, is tests/exporter/reports/test_graph_view.py's)."""
    fixture = REPO / "tests" / "exporter" / "fixtures" / "runtimes" / "model.py"
    graph = _graph(capsys, f"{fixture}::OnPhones", tmp_path)
    *_, marks_file, runtimes_file = (Path(p) for p in graph["node_data"])
    assert (marks_file.name, runtimes_file.name) == ("marks.json", "runtimes.json")
    layer = json.loads(runtimes_file.read_text())[graph["graph_id"]]
    model = onnx.load(graph["model"])
    kinds = {node.name: node.op_type for node in model.graph.node}
    labels = {kinds[node]: result["value"] for node, result in layer["results"].items()}
    assert labels["Det"] == "nnapi → CPU · coreml → CPU"
    assert labels["ReduceSum"] == "nnapi → CPU · coreml ✓"
    assert set(layer["results"]) == set(kinds)
    colours = {result["bgColor"] for result in layer["results"].values()}
    assert colours == {SEVERITY_COLORS[Severity.WARNING], RUNS_EVERYWHERE_COLOR}


def test_no_graph_when_the_export_stops_before_translation_ends(tmp_path, capsys):
    assert main(["graph", f"{EXAMPLES}/special_functions.py::BesselFeatures", "--no-serve",
                 "--output-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "error[ONNX201]" in err
    assert "onnxlens: no graph of" in err and "before there was an ONNX graph" in err


@contextlib.contextmanager
def _graph_serving(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """``onnxlens graph`` serving the double-precision example (JSON report on stdout), killed
    at the end if still running."""
    errors = (tmp_path / "stderr").open("w")  # a file: a full pipe would stop the command
    process = subprocess.Popen(
        [sys.executable, "-m", "onnxlens", "graph",
         "examples/failing/double_precision.py::PreciseGelu", "--no-browser", "--format", "json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        assert process.stdout is not None
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        errors.close()


@needs_model_explorer
def test_graph_stopped_as_soon_as_it_prints_stops_cleanly(tmp_path):
    """SIGTERM sent the moment the report starts: the command ended by the signal itself
    (status -15) when the signal came before its handler was installed, after the print."""
    with _graph_serving(tmp_path) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "{\n", (tmp_path / "stderr").read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0


@needs_model_explorer
def test_graph_serves_model_explorer_until_stopped(tmp_path):
    with _graph_serving(tmp_path) as process:
        assert process.stdout is not None
        printed = ""
        for line in process.stdout:  # the JSON report, printed once the viewer answers
            printed += line
            if line == "}\n":
                break
        assert printed, (tmp_path / "stderr").read_text()
        report = json.loads(printed)
        url, model = report["url"], report["model"]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
    port = int(re.search(r":(\d+)/", url)[1])  # type: ignore[index]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=2)
    assert Path(model).name == "model.onnx"
    assert not Path(model).parent.exists()  # its temporary directory is removed


def test_an_output_dir_holding_other_files_is_refused_before_any_check(tmp_path, capsys):
    (tmp_path / "model.onnx").write_bytes(b"the user's own model")
    assert main(["graph", f"{EXAMPLES}/double_precision.py::PreciseGelu", "--no-serve",
                 "--output-dir", str(tmp_path)]) == 2
    assert "holds other files" in capsys.readouterr().err
    assert (tmp_path / "model.onnx").read_bytes() == b"the user's own model"
    assert main(["graph", f"{EXAMPLES}/double_precision.py::PreciseGelu", "--no-serve",
                 "--output-dir", str(tmp_path / "model.onnx")]) == 2
    assert "not a directory" in capsys.readouterr().err


SENTINEL_TARGET = """\
import pathlib

import torch

pathlib.Path(__file__).with_name("imported").touch()  # the check ran


# onnx-export: args=(torch.randn(2, 3),)
class Twice(torch.nn.Module):
    def forward(self, x):
        return x * 2
"""


def test_an_output_dir_not_a_graphs_own_is_refused_before_any_check(tmp_path, capsys, tmpfs):
    """Issue 39: a graph replaces only the files of a directory a graph wrote (its marker), never
    through a symbolic link, and says so before the check runs (exit 2)."""
    target = tmp_path / "project" / "model.py"
    target.parent.mkdir()
    target.write_text(SENTINEL_TARGET)
    precious = tmp_path / "precious.json"
    precious.write_text("the user's own file")
    # the user's model.onnx beside an unrelated nodes.json: not a graph's directory
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "model.onnx").write_bytes(b"the user's own model")
    (theirs / "nodes.json").write_text("{}")
    # a graph's directory whose marks.json somebody made a symbolic link
    linked = tmp_path / "linked"
    assert main(["graph", f"{target}::Twice", "--no-serve", "--output-dir", str(linked)]) == 0
    (target.parent / "imported").unlink()
    (linked / "marks.json").unlink()
    (linked / "marks.json").symlink_to(precious)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    read_only = tmpfs("ro", "ro,size=1m")
    capsys.readouterr()
    for directory, said in ((theirs, "holds other files"),
                            (linked, "`marks.json` there is not a regular file"),
                            (dangling, "a symbolic link"),
                            (read_only / "graph", "is not writable")):
        assert main(["graph", f"{target}::Twice", "--no-serve",
                     "--output-dir", str(directory)]) == 2, directory
        assert said in capsys.readouterr().err
        assert not (target.parent / "imported").exists(), directory
    assert (theirs / "model.onnx").read_bytes() == b"the user's own model"
    assert precious.read_text() == "the user's own file"
    assert not (tmp_path / "nowhere").exists()
    # a directory a graph wrote is a graph's: the next graph replaces its files
    (linked / "marks.json").unlink()
    assert main(["graph", f"{target}::Twice", "--no-serve", "--output-dir", str(linked)]) == 0
    assert (linked / ".onnxlens-graph").is_file() and (linked / "marks.json").is_file()


def test_save_strips_the_source_metadata_only_when_asked(tmp_path, capsys, monkeypatch):
    kept, stripped = tmp_path / "kept.onnx", tmp_path / "stripped.onnx"
    target = "examples/mlp.py::MLPModel"
    monkeypatch.chdir(REPO)
    assert main(["save", target, "-o", str(kept)]) == 0
    assert main(["save", target, "-o", str(stripped), "--strip-source-metadata"]) == 0
    capsys.readouterr()

    def keys(path: Path) -> set[str]:
        return {entry.key for node in onnx.load(path).graph.node for entry in node.metadata_props}

    assert "pkg.torch.onnx.stack_trace" in keys(kept)
    assert str(REPO).encode() in kept.read_bytes()
    assert "pkg.torch.onnx.stack_trace" not in keys(stripped)
    assert "namespace" in keys(stripped)  # the module hierarchy stays
    assert str(REPO).encode() not in stripped.read_bytes()
    assert b"site-packages" not in stripped.read_bytes()
