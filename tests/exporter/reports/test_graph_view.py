"""ONNX nodes back to the source lines that produced them, and the overlays and mapping the
graph viewer shows (exporter/reports/graph_view.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from exporter.findings.result import RuntimeRun
from exporter.findings.rules import Severity
from exporter.reports.graph_view import (
    RUNS_EVERYWHERE_COLOR,
    SEVERITY_COLORS,
    Mark,
    errors_overlay,
    main_graph_id,
    marks_overlay,
    node_sources,
    nodes_at,
    read_sidecar,
    runtimes_overlay,
    sidecar,
    write_json,
)
from tests.conftest import REPO

MLP = REPO / "examples" / "mlp.py"


def line_of(path: Path, text: str) -> int:
    (line,) = [number for number, line in enumerate(path.read_text().splitlines(), 1)
               if text in line]
    return line


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> onnx.ModelProto:
    """The MLP example as `onnxlens save` writes it (torch.onnx.export's model)."""
    output = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    subprocess.run([sys.executable, "-m", "onnxlens", "save", "examples/mlp.py::MLPModel",
                    "-o", str(output)], cwd=REPO, check=True, capture_output=True)
    return onnx.load(str(output))


@pytest.mark.every_torch  # what the exporter writes in the nodes' metadata
def test_every_node_of_the_mlp_maps_to_its_line(mlp):
    sources = node_sources(mlp, REPO)
    assert set(sources) == {node.name for node in mlp.graph.node}
    by_line: dict[int, list[str]] = {}
    for source in sources.values():
        assert source.location.path.resolve() == MLP.resolve()
        assert source.graph_id == "main_graph" and source.node_id == source.name
        by_line.setdefault(source.location.range.start.line, []).append(source.op_type)
    assert by_line[line_of(MLP, "torch.cat(")] == ["Concat"]
    for layer in ("fc_combined", "fc0", "fc1", "fc2"):  # each Linear and its sigmoid
        assert sorted(by_line[line_of(MLP, f"self.{layer}(")]) == ["Gemm", "Sigmoid"]
    assert by_line[line_of(MLP, "return self.fc3(")] == ["Gemm"]


@pytest.mark.every_torch
def test_a_node_is_narrowed_to_its_call_and_a_line_gives_its_nodes(mlp):
    sources = node_sources(mlp, REPO)
    line = line_of(MLP, "self.fc1(")
    text = MLP.read_text().splitlines()[line - 1]
    at_line = nodes_at(sources, MLP, line)
    assert sorted(sources[key].op_type for key in at_line) == ["Gemm", "Sigmoid"]
    (sigmoid,) = [sources[key] for key in at_line if sources[key].op_type == "Sigmoid"]
    # the aten op (from the FX node) picks the call: `torch.sigmoid(...)`, 1-based columns
    assert sigmoid.location.range.start.column == text.index("torch.sigmoid(") + 1
    assert sigmoid.location.range.end.column == len(text) + 1
    assert nodes_at(sources, MLP, line_of(MLP, "def forward")) == []
    assert nodes_at(sources, REPO / "examples" / "other.py", line) == []


@pytest.mark.every_torch
def test_the_sidecar_and_the_overlays_of_an_exported_model(mlp, tmp_path):
    sources = node_sources(mlp, REPO)
    graph = main_graph_id(mlp)
    assert graph == mlp.graph.name == "main_graph"
    (concat,) = [key for key, source in sources.items() if source.op_type == "Concat"]
    entry = sidecar(sources, REPO)[concat]
    text = MLP.read_text().splitlines()[line_of(MLP, "torch.cat(") - 1]
    assert entry == {"graph_id": "main_graph", "node_id": concat, "name": concat,
                     "op_type": "Concat",
                     "path": "examples/mlp.py", "line": line_of(MLP, "torch.cat("),
                     "column": text.index("torch.cat(") + 1, "end_line": entry["line"],
                     "end_column": len(text.rstrip()) + 1,
                     "callers": []}
    overlay = marks_overlay(graph, [Mark.at(sources[concat], "ONNX402: no kernel")])
    assert overlay == {"main_graph": {"name": "onnxlens", "results": {
        concat: {"value": "ONNX402: no kernel", "bgColor": SEVERITY_COLORS[Severity.ERROR]}}}}
    write_json(overlay, tmp_path / "marks.json")
    assert json.loads((tmp_path / "marks.json").read_text()) == overlay


def test_the_numeric_overlay_is_a_gradient_over_the_errors():
    overlay = errors_overlay("main_graph", {"a": 0.5, "b": 2.0, "c": float("nan")})
    data = overlay["main_graph"]
    assert data["results"]["a"] == {"value": 0.5} and data["results"]["b"] == {"value": 2.0}
    assert data["results"]["c"] == {"value": -1, "bgColor": SEVERITY_COLORS[Severity.ERROR]}
    assert [stop["stop"] for stop in data["gradient"]] == [0, 1]
    json.dumps(overlay, allow_nan=False)  # valid JSON for the web app


def test_the_runtimes_overlay_says_where_each_node_runs():
    runs = [RuntimeRun("openvino-cpu", "fails", unsupported=("n0",)),
            RuntimeRun("nnapi", "falls back", unsupported=("n0", "n2")),
            RuntimeRun("cuda", "not run here"),
            RuntimeRun("ort-web", "fails", detail="compile"),  # named no node
            RuntimeRun("ort-cpu", "differs", precision="fp16")]
    overlay = runtimes_overlay("main_graph", ["n0", "n1", "n2"], runs)
    assert overlay["main_graph"]["results"] == {
        "n0": {"value": "openvino-cpu ✗ · nnapi → CPU",
               "bgColor": SEVERITY_COLORS[Severity.ERROR]},
        "n1": {"value": "openvino-cpu ✓ · nnapi ✓", "bgColor": RUNS_EVERYWHERE_COLOR},
        "n2": {"value": "openvino-cpu ✓ · nnapi → CPU",
               "bgColor": SEVERITY_COLORS[Severity.WARNING]}}
    assert runtimes_overlay("main_graph", ["n0"], runs[2:]) == {}


def test_marks_of_several_graphs_and_severities():
    overlay = marks_overlay("main_graph", [
        Mark("n1", "ONNX301: checker", Severity.WARNING),
        Mark("node_add", "ONNX402", graph_id="node_loop/body"),
    ])
    assert overlay["main_graph"]["results"]["n1"]["bgColor"] == SEVERITY_COLORS[Severity.WARNING]
    assert overlay["node_loop/body"]["results"] == {
        "node_add": {"value": "ONNX402", "bgColor": SEVERITY_COLORS[Severity.ERROR]}}


# A model with an If, a Loop and a function, each node's trace in a user file with a helper:
# the ids Model Explorer's ONNX adapter gives them, and the call chain.
USER_CODE = '''\
import torch


def helper(x):
    return torch.relu(x)


class Model(torch.nn.Module):
    def forward(self, x):
        y = helper(x)
        return torch.cond(y.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (y,))
'''


def _node(op: str, name: str, trace: str, inputs: list[str], outputs: list[str],
          **attributes: object) -> onnx.NodeProto:
    node = helper.make_node(op, inputs, outputs, name=name, **attributes)
    entry = node.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.stack_trace", trace
    return node


def _trace(path: Path, *lines: tuple[int, str]) -> str:
    return "\n".join(f'File "{path}", line {line}, in {function}\n    code'
                     for line, function in lines)


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[onnx.ModelProto, Path]:
    user = tmp_path / "model.py"
    user.write_text(USER_CODE)
    call, relu, cond = (line_of(user, text) for text in ("= helper(x)", "torch.relu", "torch.cond"))
    library = Path(sys.prefix) / "lib" / "site-packages" / "torch" / "nn" / "functional.py"
    in_helper = _trace(user, (call, "forward"), (relu, "helper"))
    at_cond = _trace(user, (cond, "forward"))
    branch = helper.make_graph([_node("Sin", "node_sin", at_cond, ["y"], ["s"])], "then",
                               [], [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])])
    other = helper.make_graph([_node("Cos", "node_cos", at_cond, ["y"], ["c"])], "else",
                              [], [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    scalar = TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [_node("Identity", "node_step", at_cond, ["v"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", scalar[0], []),
         helper.make_tensor_value_info("k", scalar[1], []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("k_out", scalar[1], []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph([
        _node("Relu", "node_relu", in_helper, ["x"], ["y"]),
        _node("Abs", "node_lib", _trace(library, (1, "relu")), ["y"], ["z"]),
        _node("If", "node_cond", at_cond, ["b"], ["o"], then_branch=branch, else_branch=other),
        _node("Loop", "node_loop", at_cond, ["", "", "y"], ["w"], body=body),
        helper.make_node("Neg", ["y"], ["unnamed"]),
        _node("f", "node_call", at_cond, ["y"], ["g"], domain="pkg.custom"),
    ], "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])])
    function = helper.make_function(
        "pkg.custom", "f", ["a"], ["r"], [_node("Mul", "node_mul", in_helper, ["a", "a"], ["r"])],
        [helper.make_opsetid("", 18)])
    model = helper.make_model(graph, functions=[function],
                              opset_imports=[helper.make_opsetid("", 18),
                                             helper.make_opsetid("pkg.custom", 1)])
    return model, user


def test_nodes_in_branches_bodies_and_functions_get_the_adapters_ids(synthetic):
    model, user = synthetic
    sources = node_sources(model, user.parent)
    assert {key: (source.graph_id, source.node_id) for key, source in sources.items()} == {
        "node_relu": ("main_graph", "node_relu"),
        "node_cond": ("main_graph", "node_cond"),
        # an If's branches are embedded in its graph, under the If's id
        "node_cond/then_branch/node_sin": ("main_graph", "node_cond/then_branch/node_sin"),
        "node_cond/else_branch/node_cos": ("main_graph", "node_cond/else_branch/node_cos"),
        "node_loop": ("main_graph", "node_loop"),
        "node_loop/body/node_step": ("node_loop/body", "node_step"),
        "node_call": ("main_graph", "node_call"),
        "[function]pkg.custom::f/node_mul": ("[function]pkg.custom::f", "node_mul"),
    }  # not the node whose trace is all library frames, nor the unnamed one


def test_a_call_line_gives_the_nodes_its_callee_produced(synthetic):
    model, user = synthetic
    sources = node_sources(model, user.parent)
    relu_line, call_line = line_of(user, "torch.relu"), line_of(user, "= helper(x)")
    column = user.read_text().splitlines()[call_line - 1].index("helper(x)") + 1
    assert sources["node_relu"].location.range.start.line == relu_line
    assert [caller.range.start.line for caller in sources["node_relu"].callers] == [call_line]
    expected = ["node_relu", "[function]pkg.custom::f/node_mul"]
    assert nodes_at(sources, user, relu_line) == expected
    assert nodes_at(sources, user, call_line) == expected  # through the call chain
    assert sidecar(sources, user.parent)["node_relu"]["callers"] == [
        {"path": "model.py", "line": call_line, "column": column, "end_line": call_line,
         "end_column": column + len("helper(x)")}]



def test_the_front_ends_read_back_what_the_job_wrote(synthetic, tmp_path):
    """The sidecar is how the worker hands the mapping to the front ends: read back, each node
    is its ``NodeSource`` (ids, ONNX name in a branch, callers), paths absolute again."""
    model, user = synthetic
    sources = node_sources(model, user.parent)
    write_json(sidecar(sources, user.parent), tmp_path / "nodes.json")
    read = read_sidecar(tmp_path / "nodes.json", user.parent)
    resolved = {key: replace(source, location=replace(source.location,
                                                      path=source.location.path.resolve()),
                             callers=tuple(replace(c, path=c.path.resolve())
                                           for c in source.callers))
                for key, source in sources.items()}
    assert read == resolved
    assert read["node_cond/then_branch/node_sin"].name == "node_sin"
    assert sorted(nodes_at(read, user, line_of(user, "= helper(x)"))) == [
        "[function]pkg.custom::f/node_mul", "node_relu"]


def test_the_main_graph_id_without_a_name():
    model = helper.make_model(helper.make_graph([], "g", [], []))
    model.graph.ClearField("name")
    assert main_graph_id(model) == "<main>"
    model.graph.name = ""
    assert main_graph_id(model) == "unnamed_graph"
