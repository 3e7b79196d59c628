"""Stage 5: create an ONNX Runtime session and run it on the example inputs."""

from __future__ import annotations

import time

from exporter import ort_runner
from exporter.context import CheckContext
from exporter.example_inputs import fresh_copy
from exporter.stages.base import StageFailed
from exporter.stages.validate import report_at_node


def run(ctx: CheckContext) -> None:
    try:
        ctx.ort_session = ort_runner.create_session(ctx.model_proto, ctx.model_bytes, ctx.weights)
    except Exception as error:
        report_at_node(ctx, "ONNX401", "ONNX Runtime cannot create a session", str(error))
        raise StageFailed from error
    try:
        started = time.perf_counter()
        ctx.ort_outputs = ort_runner.run(
            ctx.ort_session, ort_runner.flat_inputs(*fresh_copy(ctx.args, ctx.kwargs)))
        ctx.summary["ort_run_ms"] = (time.perf_counter() - started) * 1000
    except Exception as error:
        report_at_node(ctx, "ONNX402", "ONNX Runtime failed to run the model", str(error))
        raise StageFailed from error
