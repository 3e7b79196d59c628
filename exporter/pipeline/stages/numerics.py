"""Stage 6: compare ONNX Runtime's outputs with eager PyTorch; on a mismatch, find the first
intermediate value that diverges and report it at its source line (exporter.pipeline.comparing).
Outputs drawn from random numbers are compared by shape, and a note says so (ONNX504)."""

from __future__ import annotations

from exporter.pipeline.comparing import compare_outputs, report_random_outputs
from exporter.pipeline.context import CheckContext


def run(ctx: CheckContext) -> None:
    loaded = ctx.need_loaded()
    compare_outputs(ctx, loaded.eager_outputs, ctx.need_ran().outputs, loaded.args,
                    loaded.kwargs, rule="ONNX501", situation="")
    report_random_outputs(ctx)
