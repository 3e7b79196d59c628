"""The "Run in ONNX Runtime" report: outputs, the comparison with PyTorch, latency."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from exporter.findings.result import TargetResult
from exporter.pipeline import ort_runner
from exporter.pipeline.comparing import differences, random_outputs_of, tolerances
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.reports.run import OutputComparison, RunReport, TensorSummary


def build_run_report(ctx: CheckContext, result: TargetResult, model_path: Path | None,
                     repeat: int) -> RunReport:
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
    inputs = ort_runner.flat_inputs(*fresh_copy(loaded.args, loaded.kwargs),
                                    ctx.captured.program if ctx.captured is not None else None)
    outputs = ort_runner.run(session, inputs)
    expected = ort_runner.expected_outputs(loaded.eager_outputs)
    names = [value.name for value in session.get_outputs()]
    random = random_outputs_of(ctx) if ctx.translated is not None else {}
    comparison = [_compare(ctx, name, want, got, random=index in random)
                  for index, (name, want, got) in enumerate(zip(names, expected, outputs))]
    return RunReport(
        target=ctx.target.name,
        model=str(model_path) if model_path else "in-memory export",
        inputs=[_describe(value.name, ort_runner.input_array(given)) for value, given in
                zip(session.get_inputs(), inputs)],
        outputs=[_describe(name, value) for name, value in zip(names, outputs)],
        comparison=comparison,
        matched=all(entry.matched for entry in comparison) and len(expected) == len(outputs),
        latency=ort_runner.latency(session, inputs, repeat),
    )


def _describe(name: str, value: np.ndarray) -> TensorSummary:
    flat = value.reshape(-1)[:5]
    return TensorSummary(name, list(value.shape), str(value.dtype), [v.item() for v in flat])


def _compare(ctx: CheckContext, name: str, expected: np.ndarray, actual: np.ndarray, *,
             random: bool) -> OutputComparison:
    if expected.shape != actual.shape:
        return OutputComparison(name, False, reason=f"shape {list(actual.shape)} vs PyTorch "
                                f"{list(expected.shape)}")
    if random:
        return OutputComparison(name, True, reason="drawn from random numbers (ONNX Runtime "
                                "draws its own): only the shape is compared")
    atol, rtol = tolerances(ctx, expected.dtype)
    max_abs, max_rel = differences(expected, actual)
    matched = bool(np.allclose(actual.astype(np.float64), expected.astype(np.float64),
                               atol=atol, rtol=rtol, equal_nan=True))
    return OutputComparison(name, matched, max_abs=max_abs, max_rel=max_rel, atol=atol,
                            rtol=rtol)
