"""Stage 5: create an ONNX Runtime session and run it on the example inputs."""

from __future__ import annotations

import time

from exporter.pipeline import ort_runner
from exporter.pipeline.context import CheckContext, Ran
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.locating import report_at_node
from exporter.pipeline.stages.base import StageFailed


def run(ctx: CheckContext) -> None:
    translated, loaded = ctx.need_translated(), ctx.need_loaded()
    try:
        session = ort_runner.create_session(translated.model_proto, translated.model_bytes,
                                            translated.weights)
    except Exception as error:
        if not translated.model_proto.graph.output:
            _report_no_outputs(ctx)
        else:
            report_at_node(ctx, "ONNX401", "ONNX Runtime cannot create a session", str(error))
        raise StageFailed from error
    try:
        started = time.perf_counter()
        outputs = ort_runner.run(
            session, ort_runner.flat_inputs(*fresh_copy(loaded.args, loaded.kwargs),
                                     ctx.need_captured().program))
        ctx.summary.ort_run_ms = (time.perf_counter() - started) * 1000
        ctx.ran = Ran(session, outputs)
    except Exception as error:
        report_at_node(ctx, "ONNX402", "ONNX Runtime failed to run the model", str(error))
        raise StageFailed from error


def _report_no_outputs(ctx: CheckContext) -> None:
    """A forward that returns no tensor (``None``, ``()``, a dict of ``None``; one that only
    updates its buffers) exports an ONNX model without outputs, which ONNX Runtime refuses
    with a message about its own internals (``ort_value_name_idx_map.MaxIdx() > -1``)."""
    ctx.report("ONNX401", "The model returns no tensor (its forward gives `None`, or nothing "
               "but `None`), so the ONNX model has no outputs, and ONNX Runtime cannot create a "
               "session for a model without outputs.",
               hint="Return the tensors the model computes; a forward that only updates the "
               "model's buffers exports nothing to run.")
