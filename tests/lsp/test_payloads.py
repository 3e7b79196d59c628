"""What the server sends the editor beyond LSP's types (lsp_server/payloads.py), as the VS Code
extension reads it: JSON samples made by the functions the handlers use are kept in
``vscode-extension/test/unit/payloads/``, and the extension's type check assigns each to its
TypeScript interface (``vscode-extension/test/unit/payloads.test.ts``). A change on either side
that the other does not follow fails one of the two.

``python -m tests.lsp.test_payloads`` writes the samples again after a deliberate change."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from export_worker.messages import JobDone, JobError, JobFailed, RunAnswer, SaveAnswer
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.positions import Range
from exporter.reports.graph_view import GraphFiles, NodeSource
from lsp_server.commands import _job_answer
from lsp_server.convert import PositionConverter
from lsp_server.graphs import ShownGraph, graph_payload
from lsp_server.payloads import (
    Cancelled,
    ExportAnswer,
    GraphNotShown,
    NodeRef,
    NodesAt,
    ReportAnswer,
    SarifWritten,
    ServerState,
    TargetCount,
    WorkspaceChecked,
    to_json,
)
from tests.exporter.reports.test_run import REPORT

SAMPLES = Path(__file__).resolve().parents[2] / "vscode-extension" / "test" / "unit" / "payloads"
WORKSPACE = Path("/w")
MODEL = WORKSPACE / "model.py"
FINDING = Diagnostic("ONNX201", "`aten::i0` has no ONNX translation.",
                     Location(MODEL, Range.of(6, 16, 6, 35)), target="Model")
LINES = {MODEL: ("import torch", "", "", "class Model(torch.nn.Module):",
                 "    def forward(self, x):", "        y = torch.special.i0(x)",
                 "        return torch.erf(y)")}


def _graph() -> Any:
    erf = NodeSource("main", "node_Erf_1", "node_Erf_1", "Erf",
                     Location(MODEL, Range.of(7, 16, 7, 28)),
                     (Location(MODEL, Range.of(6, 13, 6, 32)),))
    files = GraphFiles("/tmp/g/model.onnx", "/tmp/g/nodes.json", ["/tmp/g/marks.json"], "main",
                       selected_node="node_Erf_1")
    shown = ShownGraph(MODEL.as_uri(), "Model", Path("/tmp/g"), WORKSPACE, files, {"erf_1": erf})
    positions = PositionConverter("utf-16", lambda path: LINES.get(path, ()))
    return to_json(graph_payload(shown, "http://127.0.0.1:8081/?token=t", positions))


def samples() -> dict[str, Any]:
    """Each sample by its file's name: what the handlers send, made by their own code."""
    uri = MODEL.as_uri()
    return {
        "state.json": to_json(ServerState(True, "ready", [uri])),
        "export.json": to_json(ExportAnswer(uri, 3, {"Model": TargetCount(False, 1)})),
        "export-unchecked.json": to_json(ExportAnswer(uri, None, {})),
        "run.json": to_json(_job_answer(JobDone("1", RunAnswer(REPORT, "# Model"), 1.0, 2))),
        "run-failed.json": to_json(_job_answer(JobDone("1", RunAnswer(
            error="cannot run Model: the export failed", diagnostics=[FINDING]), 1.0, 2))),
        "saved.json": to_json(_job_answer(JobDone("1", SaveAnswer(
            True, ["/w/Model.onnx", "/w/Model.onnx.data"]), 1.0, 2))),
        "not-saved.json": to_json(_job_answer(JobDone("1", SaveAnswer(
            False, diagnostics=[FINDING], error="the export failed"), 1.0, 2))),
        "job-error.json": to_json(_job_answer(JobDone("1", JobError("no export target"),
                                                      0.1, 2))),
        "job-failed.json": to_json(_job_answer(JobFailed("1", "timeout", "no details"))),
        "cancelled.json": to_json(Cancelled()),
        "graph.json": _graph(),
        "graph-not-shown.json": to_json(GraphNotShown("no graph of Model: the export "
                                                      "stopped before ONNX", uri, "Model")),
        "nodes-at.json": to_json(NodesAt(uri, "Model", [NodeRef("erf_1", "node_Erf_1", "main",
                                                                "Erf")], "main")),
        "nodes-at-none.json": to_json(NodesAt(uri, None, [])),
        "workspace-checked.json": to_json(WorkspaceChecked(2, 3, 1)),
        "report.json": to_json(ReportAnswer("**ONNX export: `Model`** — ✓ exports")),
        "sarif-written.json": to_json(SarifWritten("/w/onnxlens.sarif")),
        "sarif-not-written.json": to_json(SarifWritten(error="../x.sarif is outside the "
                                                       "workspace")),
    }


def _text(sample: Any) -> str:
    return json.dumps(sample, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(samples()))
def test_the_extensions_samples_are_what_the_server_sends(name):
    path = SAMPLES / name
    assert path.is_file(), f"{path} is missing: python -m tests.lsp.test_payloads"
    assert path.read_text(encoding="utf-8") == _text(samples()[name]), (
        f"{name} is not what the server sends any more: check the extension's interface "
        "(vscode-extension/src/payloads.ts) and write the samples again with "
        "`python -m tests.lsp.test_payloads`")


def test_every_sample_file_is_one_the_server_makes():
    assert sorted(p.name for p in SAMPLES.glob("*.json")) == sorted(samples())


def test_the_graphs_locations_are_in_the_clients_encoding():
    (node,) = _graph()["nodes"].values()
    # 0-based lines and columns
    assert node["location"]["range"] == {"start": {"line": 6, "character": 15},
                                         "end": {"line": 6, "character": 27}}
    assert node["callers"][0]["range"]["start"] == {"line": 5, "character": 12}
    assert "selectedGraph" not in _graph()  # None is left out, as the client's optional


if __name__ == "__main__":
    SAMPLES.mkdir(parents=True, exist_ok=True)
    for old in SAMPLES.glob("*.json"):
        old.unlink()
    for sample_name, sample in samples().items():
        (SAMPLES / sample_name).write_text(_text(sample), encoding="utf-8")
    print(f"wrote {len(samples())} samples to {SAMPLES}", file=sys.stderr)
