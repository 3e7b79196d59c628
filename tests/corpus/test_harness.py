"""The harness's own logic, without running any export: agreement rules, the other size for
dynamic dimensions, the ExportDB builder, splitting a batched onnxlens report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus.corpus import exportdb_target
from tests.corpus.judge import (
    AGREE,
    FALSE_ERROR,
    MISSED,
    TOOL_FAILURE,
    WRONG_CAUSE,
    agreement,
    mobile_agreement,
)
from tests.corpus.lens import LensDiagnostic, LensRuntime, LensTarget, Place, parse
from tests.corpus.truth import ErrorInfo, Failure, Frame, MobileTruth, TruthResult

ROOT = Path("/workspace")
MODEL = str(ROOT / "model.py")


def _failed(phase: str, line: int | None = None) -> TruthResult:
    frames = [Frame("/venv/lib/site-packages/torch/x.py", 3, "f")]
    if line is not None:
        frames.append(Frame(MODEL, line, "forward"))
    return TruthResult(MODEL, "T", "failed",
                       failure=Failure(phase, [ErrorInfo("RuntimeError", "boom", frames)]))


def _error(rule: str, line: int, related: int | None = None,
           severity: str = "error") -> LensDiagnostic:
    return LensDiagnostic(rule, severity, "message", Place(MODEL, line, 1, line, 5),
                          [Place(MODEL, related)] if related else [], "T")


@pytest.mark.parametrize(("truth", "diagnostics", "expected"), [
    (TruthResult(MODEL, "T", "ok"), [], AGREE),
    (TruthResult(MODEL, "T", "ok"), [_error("ONNX106", 3, severity="warning")], AGREE),
    (TruthResult(MODEL, "T", "ok"), [_error("ONNX501", 3)], FALSE_ERROR),
    (_failed("capture", 7), [], MISSED),
    (_failed("capture", 7), [_error("ONNX101", 7)], AGREE),
    (_failed("capture", 7), [_error("ONNX101", 2, related=7)], AGREE),
    (_failed("capture", 7), [_error("ONNX101", 9)], WRONG_CAUSE),
    (_failed("capture", 7), [_error("ONNX201", 7)], WRONG_CAUSE),
    (_failed("translate"), [_error("ONNX201", 12)], AGREE),  # no workspace frame: any line
    (_failed("dynamic"), [_error("ONNX102", 4)], AGREE),
    (_failed("ort_run"), [_error("ONNX401", 4)], WRONG_CAUSE),
    (TruthResult(MODEL, "T", "ok"), [_error("ONNX901", 4)], TOOL_FAILURE),
])
def test_agreement(truth: TruthResult, diagnostics: list[LensDiagnostic], expected: str) -> None:
    assert agreement(truth, diagnostics, ROOT)[0] == expected


@pytest.mark.parametrize(("left", "nodes", "checker_left", "expected"), [
    (("a", "b"), 5, ["Gather", "Where"], AGREE),
    ((), 5, [], AGREE),
    (("a",), 5, [], FALSE_ERROR),  # left out where the checker takes the graph whole
    ((), 5, ["Gather"], MISSED),
    (("a", "b", "c"), 5, ["Gather", "Where"], WRONG_CAUSE),  # more nodes left out
    (("a", "b"), 6, ["Gather", "Where"], WRONG_CAUSE),  # the same count of another graph
])
def test_mobile_agreement(left: tuple[str, ...], nodes: int, checker_left: list[str],
                          expected: str) -> None:
    """onnxlens's verdict on NNAPI against ONNX Runtime's checker's on a graph of 5 nodes."""
    lens = LensTarget("T", True, [], [], runtimes=[
        LensRuntime("nnapi", "falls back" if left else "supported", 0.0, "fp32", nodes, left)])
    assert mobile_agreement({"nnapi": MobileTruth(5, checker_left)}, lens, ROOT)[0] == expected


def test_a_mobile_provider_onnxlens_has_no_verdict_on_is_a_wrong_cause() -> None:
    lens = LensTarget("T", True, [], [], runtimes=[
        LensRuntime("nnapi", "supported", 0.0, "fp32", 5, ())])
    assert mobile_agreement({"coreml": MobileTruth(5, [])}, lens, ROOT)[0] == WRONG_CAUSE


@pytest.mark.parametrize(("reported_at", "expected"), [
    (7, AGREE), (9, WRONG_CAUSE), (None, WRONG_CAUSE)])
def test_a_mobile_fallback_is_reported_at_a_line_of_its_nodes_trace(
        reported_at: int | None, expected: str) -> None:
    """The node left out was exported from line 7 of the workspace (via torch's frames)."""
    frames = [Frame("/venv/lib/site-packages/torch/nn/x.py", 3, "f"), Frame(MODEL, 7, "forward")]
    truth = MobileTruth(5, ["Gather"], [frames])
    found = [_error("ONNX705", reported_at, severity="warning")] if reported_at else []
    lens = LensTarget("T", True, [], found, runtimes=[
        LensRuntime("coreml", "falls back", 0.0, "fp32", 5, ("node_embedding",))])
    assert mobile_agreement({"coreml": truth}, lens, ROOT)[0] == expected


def test_other_size_tiles_the_example_along_declared_axes() -> None:
    torch = pytest.importorskip("torch")
    from tests.corpus.truth import _OTHER_SIZES, _resized, declared_axes

    class Model(torch.nn.Module):
        def forward(self, ids, mask, scale):
            return ids * mask * scale

    ids, mask, scale = torch.tensor([[3, 1, 2]]), torch.tensor([[1, 1, 0]]), torch.ones(2)
    declared = declared_axes(Model(), (ids,), {"mask": mask, "scale": scale},
                             {"ids": {1: "seq"}, "mask": {1: "seq"}, "scale": None})
    resized = _resized((ids,), {"mask": mask, "scale": scale}, declared, _OTHER_SIZES[0])
    assert resized is not None
    (new_ids,), kwargs, sizes = resized
    assert new_ids.tolist() == [[3, 1, 2, 3, 1, 2]]
    assert kwargs["mask"].tolist() == [[1, 1, 0, 1, 1, 0]]
    assert kwargs["scale"] is scale
    assert sizes == {"ids[1]": 6, "mask[1]": 6}
    bounded = declared_axes(Model(), (ids,), {"mask": mask, "scale": scale},
                            {"ids": {1: torch.export.Dim("seq", max=4)}})
    assert _resized((ids,), {"mask": mask, "scale": scale}, bounded, _OTHER_SIZES[0]) is None
    assert _resized((ids,), {"mask": mask, "scale": scale}, bounded,
                    _OTHER_SIZES[1])[2] == {"ids[1]": 4}  # type: ignore[index]


def test_exportdb_builder_is_appended_to_the_unchanged_source() -> None:
    source = ("import torch\n\nclass M(torch.nn.Module):\n    pass\n\n"
              "example_args = (torch.randn(2),)\ndynamic_shapes = {'x': {0: 'n'}}\nmodel = M()\n")
    text = exportdb_target("demo", source)
    assert text is not None and text.startswith(source.rstrip())
    assert text.endswith('# onnx-export: name="exportdb.demo", dynamic_shapes=dynamic_shapes\n'
                         "def _onnxlens_corpus_target():\n    return model, example_args\n")
    assert exportdb_target("no_model", "import torch\n") is None


def test_a_batched_report_is_split_by_file() -> None:
    def entry(path: str, target: str, rule: str) -> dict:
        span = {"start": {"line": 2, "column": 1}, "end": {"line": 2, "column": 4}}
        return {"rule": rule, "severity": "error", "message": "m", "path": path,
                "range": span, "target": target, "related": []}

    report = {
        "targets": [{"name": "A", "path": "a.py", "ok": False, "stages": []},
                    {"name": "B", "path": "sub/b.py", "ok": True, "stages": []}],
        "diagnostics": [entry("a.py", "A", "ONNX201"), entry("sub/b.py", "", "ONNX001")],
    }
    files = parse(report, [ROOT / "a.py", ROOT / "sub" / "b.py"], ROOT, 1)
    a, b = files[str(ROOT / "a.py")], files[str(ROOT / "sub" / "b.py")]
    assert [d.rule for d in a.targets["A"].diagnostics] == ["ONNX201"]
    assert b.targets["B"].diagnostics == [] and [d.rule for d in b.loose] == ["ONNX001"]
