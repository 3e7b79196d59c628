"""Comparing ONNX Runtime with eager PyTorch, shared by the numerics and dynamic stages and
the run report: tolerances by dtype (or the user's), each output's differences, and on a
mismatch the first intermediate value that diverges, reported at its source line."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from exporter.findings.diagnostics import FindingData
from exporter.findings.result import NumericsRun
from exporter.pipeline import ort_runner
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.intermediates import intermediates
from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, metadata

# (atol, rtol) by dtype; integers and booleans must match exactly.
_TOLERANCES = {
    np.dtype("float16"): (1e-2, 1e-2),
    np.dtype("float32"): (1e-4, 1e-3),
    np.dtype("float64"): (1e-7, 1e-5),
}


def tolerances(ctx: CheckContext, dtype: np.dtype) -> tuple[float, float]:
    atol, rtol = _TOLERANCES.get(np.dtype(dtype), (0.0, 0.0))
    if dtype.kind == "f" and dtype not in _TOLERANCES:  # bfloat16 arrives as float32
        atol, rtol = 1e-2, 1e-2
    given = ctx.options  # the pragma's, else the project's; else the dtype's
    return (float(given.atol if given.atol is not None else atol),
            float(given.rtol if given.rtol is not None else rtol))


def differences(expected: np.ndarray, actual: np.ndarray) -> tuple[float, float]:
    expected64 = expected.astype(np.float64)
    actual64 = actual.astype(np.float64)
    finite = np.isfinite(expected64) & np.isfinite(actual64)
    if not finite.any():
        return 0.0, 0.0
    absolute = np.abs(expected64 - actual64)[finite]
    relative = absolute / np.maximum(np.abs(expected64[finite]), 1e-12)
    return float(absolute.max(initial=0.0)), float(relative.max(initial=0.0))


def compare_outputs(
    ctx: CheckContext, eager: Any, ort_outputs: list[np.ndarray], args: tuple,
    kwargs: dict[str, Any], *, rule: str, situation: str,
) -> bool:
    """Report each mismatching output; returns True when everything matched."""
    expected_all = [ort_runner.to_numpy(t) for t in ort_runner.flat_outputs(eager)
                    if isinstance(t, torch.Tensor)]
    matched = True
    worst: FindingData | None = None
    graph = ctx.need_translated().model_proto.graph
    for index, (expected, actual) in enumerate(zip(expected_all, ort_outputs)):
        name = graph.output[index].name
        if expected.shape != actual.shape:
            report_at_output(ctx, rule, index, f"Output `{name}` has shape {list(actual.shape)} in "
                           f"ONNX Runtime but {list(expected.shape)} in PyTorch{situation}.")
            matched = False
            continue
        if rule == "ONNX501" and _non_finite_only_in_ort(expected, actual):
            report_at_output(ctx, "ONNX503", index, f"Output `{name}` holds NaN or infinity in "
                           "ONNX Runtime where PyTorch's values are finite.")
            matched = False
            continue
        atol, rtol = tolerances(ctx, expected.dtype)
        if np.allclose(actual.astype(np.float64), expected.astype(np.float64),
                       atol=atol, rtol=rtol, equal_nan=True):
            continue
        max_abs, max_rel = differences(expected, actual)
        worst = FindingData(output=name, max_abs=max_abs, max_rel=max_rel, atol=atol,
                            rtol=rtol)
        report_at_output(ctx, rule, index,
                       f"Output `{name}` differs from PyTorch{situation}: max abs error "
                       f"{max_abs:.3g}, max rel error {max_rel:.3g} "
                       f"(atol {atol:g}, rtol {rtol:g}).",
                       data=worst)
        matched = False
    if not matched and worst:
        first_divergence(ctx, args, kwargs, situation=situation,
                         rule="ONNX502" if rule == "ONNX501" else rule)
    ctx.summary.numerics.append(NumericsRun(
        situation or "example inputs", matched, *(
            (worst.output, worst.max_abs, worst.max_rel, worst.atol, worst.rtol)
            if worst is not None else ())))
    return matched


def _non_finite_only_in_ort(expected: np.ndarray, actual: np.ndarray) -> bool:
    if expected.dtype.kind != "f":
        return False
    return bool((~np.isfinite(actual) & np.isfinite(expected)).any())


def report_at_output(ctx: CheckContext, rule: str, index: int, message: str,
                     data: FindingData | None = None) -> None:
    """Report ``message`` at the source line of the node that computes output ``index``."""
    graph = ctx.need_translated().model_proto.graph
    output_name = graph.output[index].name
    producer = next((n for n in graph.node if output_name in n.output), None)
    where = ctx.map_stack_trace(metadata(producer).get(STACK_TRACE_KEY)) if producer else None
    ctx.report(rule, message, where, data=data)


def first_divergence(ctx: CheckContext, args: tuple, kwargs: dict[str, Any], *, situation: str,
                     rule: str) -> None:
    """Compare every intermediate value and report the first that diverges."""
    translated = ctx.need_translated()
    if translated.onnx_program.exported_program is None:
        return
    try:
        pairs = intermediates(translated.onnx_program.exported_program, translated.model_proto,
                              translated.weights, *fresh_copy(args, kwargs))
        for pair in pairs:
            expected, actual = pair.expected, pair.actual
            if expected.shape != actual.shape:
                continue
            atol, rtol = tolerances(ctx, expected.dtype) if expected.dtype.kind == "f" \
                else (0.0, 0.0)
            max_abs, max_rel = differences(expected, actual)
            if max_abs > atol and max_rel > rtol:
                _report_divergence(ctx, pair.node, max_abs, max_rel, situation, rule)
                return
    except Exception:  # the search is a help on top of ONNX501: never a failure of its own
        logging.getLogger(__name__).debug("comparing intermediates failed", exc_info=True)


def _report_divergence(ctx: CheckContext, node: Any, max_abs: float, max_rel: float,
                       situation: str, rule: str) -> None:
    op = str(node.target)
    ctx.report(
        rule,
        f"The values first diverge at `{op}` (FX node `{node.name}`){situation}: max abs "
        f"error {max_abs:.3g}, max rel error {max_rel:.3g}; every value computed before it "
        "matches PyTorch.",
        ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
        data=FindingData(fx_node=node.name, operator=op),
    )
