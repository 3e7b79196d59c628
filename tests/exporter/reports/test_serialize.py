"""A check's result through the worker's JSON and back (exporter/reports/serialize.py): the
model summary is typed on both sides, and the JSON report's ``summary`` holds every field."""

from __future__ import annotations

import json
from pathlib import Path

from exporter.findings.positions import Range
from exporter.findings.result import (
    CheckResult,
    ModelSummary,
    NumericsRun,
    RuntimeRun,
    TargetResult,
    TensorSummary,
)
from exporter.reports.render import result_json
from exporter.reports.serialize import result_from_data, result_to_data

SUMMARY = ModelSummary(
    parameters=1234, call_context=["torch.no_grad()"], capture_strategy="non-strict", nodes=7,
    opset=18, inputs=[TensorSummary("x", "float32", ("batch", 8))],
    outputs=[TensorSummary("y", "float16", ())], operators={"MatMul": 2, "Add": 1},
    initializer_bytes=4096, ort_run_ms=0.25,
    numerics=[NumericsRun("example inputs", True),
              NumericsRun("batch=3", False, "y", 0.5, 0.1, 1e-5, 1e-3)],
    dynamic_not_run=["PyTorch itself fails at length=1: ValueError: too short"],
    runtimes=[RuntimeRun("openvino-cpu", "fails", 0.5, 12, ("n0",), "unconverted operators"),
              RuntimeRun("cuda", "not run here", detail="no CUDAExecutionProvider")])


def _result(summary: ModelSummary) -> CheckResult:
    path = Path("/w/model.py")
    return CheckResult(targets=[TargetResult("Model", path, Range.of(3, 7, 3, 12),
                                             summary=summary)], files=[path])


def test_the_summary_comes_back_from_the_workers_json_as_it_left():
    for summary in (SUMMARY, ModelSummary()):
        data = json.loads(json.dumps(result_to_data(_result(summary))))
        (target,) = result_from_data(data).targets
        assert target.summary == summary


def test_the_json_reports_summary_holds_every_field_unset_ones_as_null_or_empty():
    (target,) = result_json(_result(ModelSummary(nodes=3, opset=20)), [])["targets"]
    assert target["summary"] == {
        "parameters": None, "call_context": None, "capture_strategy": None, "nodes": 3,
        "opset": 20, "inputs": [], "outputs": [], "operators": {}, "initializer_bytes": None,
        "ort_run_ms": None, "numerics": [], "dynamic_not_run": [], "runtimes": []}
    (target,) = result_json(_result(SUMMARY), [])["targets"]
    assert target["summary"]["inputs"] == [{"name": "x", "dtype": "float32",
                                            "shape": ("batch", 8)}]
    assert target["summary"]["numerics"][1] == {
        "situation": "batch=3", "matched": False, "output": "y", "max_abs": 0.5,
        "max_rel": 0.1, "atol": 1e-5, "rtol": 1e-3}
