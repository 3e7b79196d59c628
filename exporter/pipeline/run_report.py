"""The "Run in ONNX Runtime" report: outputs, the comparison with PyTorch, latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from exporter.findings.result import TargetResult
from exporter.pipeline import ort_runner
from exporter.pipeline.comparing import differences, tolerances
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy


def build_run_report(ctx: CheckContext, result: TargetResult, model_path: Path | None,
                     repeat: int) -> dict[str, Any]:
    if ctx.weightless:
        raise RuntimeError('weights="none" models cannot run: they have no weights')
    failed = [s.name for s in result.stages if s.state.value == "failed"]
    if ctx.loaded is None:
        raise RuntimeError(f"the target could not be loaded ({', '.join(failed) or 'load'})")
    if model_path is not None:
        from exporter.pipeline.artifacts import load_model

        session = ort_runner.create_session(load_model(model_path))
    elif ctx.ran is not None:
        session = ctx.ran.session
    elif ctx.translated is not None:
        translated = ctx.translated
        session = ort_runner.create_session(translated.model_proto, translated.model_bytes,
                                            translated.weights)
    else:
        raise RuntimeError(f"the export failed ({', '.join(failed) or 'no model'})")
    loaded = ctx.loaded
    inputs = ort_runner.flat_inputs(*fresh_copy(loaded.args, loaded.kwargs))
    outputs = ort_runner.run(session, inputs)
    expected = [ort_runner.to_numpy(t) for t in ort_runner.flat_outputs(loaded.eager_outputs)
                if isinstance(t, torch.Tensor)]
    names = [value.name for value in session.get_outputs()]
    comparison = [_compare(ctx, name, want, got)
                  for name, want, got in zip(names, expected, outputs)]
    return {
        "target": ctx.target.name,
        "model": str(model_path) if model_path else "in-memory export",
        "inputs": [_describe(value.name, ort_runner.to_numpy(tensor)) for value, tensor in
                   zip(session.get_inputs(), [t for t in inputs if isinstance(t, torch.Tensor)])],
        "outputs": [_describe(name, value) for name, value in zip(names, outputs)],
        "comparison": comparison,
        "matched": all(entry["matched"] for entry in comparison) and len(expected) == len(outputs),
        "latency": ort_runner.latency(session, inputs, repeat),
    }


def _describe(name: str, value: np.ndarray) -> dict[str, Any]:
    flat = value.reshape(-1)[:5]
    return {"name": name, "shape": list(value.shape), "dtype": str(value.dtype),
            "values": [v.item() for v in flat]}


def _compare(ctx: CheckContext, name: str, expected: np.ndarray, actual: np.ndarray
             ) -> dict[str, Any]:
    if expected.shape != actual.shape:
        return {"output": name, "matched": False,
                "reason": f"shape {list(actual.shape)} vs PyTorch {list(expected.shape)}"}
    atol, rtol = tolerances(ctx, expected.dtype)
    max_abs, max_rel = differences(expected, actual)
    matched = bool(np.allclose(actual.astype(np.float64), expected.astype(np.float64),
                               atol=atol, rtol=rtol, equal_nan=True))
    return {"output": name, "matched": matched, "max_abs": max_abs, "max_rel": max_rel,
            "atol": atol, "rtol": rtol}


def format_run_report(report: dict[str, Any]) -> str:
    """Markdown: readable in a terminal and in an editor's preview."""
    lines = [f"# {report['target']} in ONNX Runtime", "", f"Model: {report['model']}", "",
             "## Outputs", "", "| output | shape | dtype | first values |", "|---|---|---|---|"]
    for output in report["outputs"]:
        values = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                           for v in output["values"])
        lines.append(f"| {output['name']} | {output['shape']} | {output['dtype']} | {values} |")
    lines += ["", "## Compared with PyTorch", "", "| output | match | max abs | max rel |",
              "|---|---|---|---|"]
    for entry in report["comparison"]:
        if "reason" in entry:
            lines.append(f"| {entry['output']} | no | {entry['reason']} | |")
        else:
            lines.append(f"| {entry['output']} | {'yes' if entry['matched'] else 'no'} | "
                         f"{entry['max_abs']:.3g} | {entry['max_rel']:.3g} |")
    latency = report["latency"]
    lines += ["", "## Latency", "",
              f"p50 {latency['p50_ms']:.3f} ms · p90 {latency['p90_ms']:.3f} ms · "
              f"mean {latency['mean_ms']:.3f} ms over {latency['runs']} runs", ""]
    return "\n".join(lines)
