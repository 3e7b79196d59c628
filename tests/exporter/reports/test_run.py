"""The run report (exporter/reports/run.py): its JSON form lists for each output what it has,
the reason or the differences, as the editor's run view reads it; its Markdown says both."""

from __future__ import annotations

from exporter.reports.run import (
    Latency,
    OutputComparison,
    RunReport,
    TensorSummary,
    format_run_report,
    run_report_json,
)

REPORT = RunReport("Model", "in-memory export", [TensorSummary("x", [2, 3], "float32", [0.5])],
                   [TensorSummary("y", [2], "float32", [1.25, 2.0]),
                    TensorSummary("z", [4], "int64", [1, 2])],
                   [OutputComparison("y", True, max_abs=1e-7, max_rel=2e-7, atol=1e-5,
                                     rtol=1e-4),
                    OutputComparison("z", False, reason="shape [4] vs PyTorch [3]"),
                    OutputComparison("noise", True, reason="drawn from random numbers")],
                   False, Latency(20, 0.5, 0.75, 0.55, 0.4))


def test_the_json_lists_the_reason_or_the_differences():
    data = run_report_json(REPORT)
    assert data["comparison"] == [
        {"output": "y", "matched": True, "max_abs": 1e-7, "max_rel": 2e-7, "atol": 1e-5,
         "rtol": 1e-4},
        {"output": "z", "matched": False, "reason": "shape [4] vs PyTorch [3]"},
        {"output": "noise", "matched": True, "reason": "drawn from random numbers"}]
    assert data["latency"] == {"runs": 20, "p50_ms": 0.5, "p90_ms": 0.75, "mean_ms": 0.55,
                               "min_ms": 0.4}
    assert data["outputs"][0] == {"name": "y", "shape": [2], "dtype": "float32",
                                  "values": [1.25, 2.0]}
    assert data["matched"] is False


def test_the_markdown_shows_each_output_and_the_latency():
    text = format_run_report(REPORT)
    assert "| y | yes | 1e-07 | 2e-07 |" in text
    assert "| z | no | shape [4] vs PyTorch [3] | |" in text
    assert "| noise | yes | drawn from random numbers | |" in text
    assert "p50 0.500 ms · p90 0.750 ms · mean 0.550 ms over 20 runs" in text
