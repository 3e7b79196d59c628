"""The "Run in ONNX Runtime" report (``onnxlens run``, the editor's *Run*): its types, its JSON
form and its Markdown. Made by ``exporter.pipeline.run_report`` in a job; read by the front
ends, which never import torch, so this module imports nothing of the pipeline."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TensorSummary:
    name: str
    shape: list[int]
    dtype: str
    values: list[float | int | bool]  # the first few


@dataclass(frozen=True)
class OutputComparison:
    """One output against PyTorch's: its differences and tolerances, or why its values could
    not be compared (``reason``: the shapes differ, not matched; or it is drawn from random
    numbers and only its shape was compared, matched)."""

    output: str
    matched: bool
    reason: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    atol: float | None = None
    rtol: float | None = None


@dataclass(frozen=True)
class Latency:
    runs: int
    p50_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float


@dataclass(frozen=True)
class RunReport:
    target: str
    model: str  # the saved model's path, or "in-memory export"
    inputs: list[TensorSummary]
    outputs: list[TensorSummary]
    comparison: list[OutputComparison]
    matched: bool
    latency: Latency


def run_report_json(report: RunReport) -> dict[str, Any]:
    """The report as ``onnxlens run --format json`` prints it and the editor receives it (a
    comparison lists only what it has: ``reason``, or the differences)."""
    data = dataclasses.asdict(report)
    data["comparison"] = [{key: value for key, value in entry.items() if value is not None}
                          for entry in data["comparison"]]
    return data


def format_run_report(report: RunReport) -> str:
    """Markdown: readable in a terminal and in an editor's preview."""
    lines = [f"# {report.target} in ONNX Runtime", "", f"Model: {report.model}", "",
             "## Outputs", "", "| output | shape | dtype | first values |", "|---|---|---|---|"]
    for output in report.outputs:
        values = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                           for v in output.values)
        lines.append(f"| {output.name} | {output.shape} | {output.dtype} | {values} |")
    lines += ["", "## Compared with PyTorch", "", "| output | match | max abs | max rel |",
              "|---|---|---|---|"]
    for entry in report.comparison:
        if entry.reason is not None:
            lines.append(f"| {entry.output} | {'yes' if entry.matched else 'no'} | "
                         f"{entry.reason} | |")
        else:
            lines.append(f"| {entry.output} | {'yes' if entry.matched else 'no'} | "
                         f"{entry.max_abs:.3g} | {entry.max_rel:.3g} |")
    latency = report.latency
    lines += ["", "## Latency", "",
              f"p50 {latency.p50_ms:.3f} ms · p90 {latency.p90_ms:.3f} ms · "
              f"mean {latency.mean_ms:.3f} ms over {latency.runs} runs", ""]
    return "\n".join(lines)
