"""Comparing ONNX Runtime with eager PyTorch, shared by the numerics and dynamic stages and
the run report: tolerances by dtype (or the user's), each output's differences, and on a
mismatch the first intermediate value that diverges, reported at its source line. An output
drawn from random numbers is compared by shape only (``exporter.pipeline.random_draws``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from exporter.findings.diagnostics import FindingData
from exporter.findings.result import NumericsRun
from exporter.pipeline import ort_runner
from exporter.pipeline.context import CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.intermediates import intermediates, operation, output_nodes
from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, metadata
from exporter.pipeline.random_draws import onnx_random_values, random_outputs, random_sources
from exporter.pipeline.training_modules import training_note

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
    expected_all = ort_runner.expected_outputs(eager)
    reported_before = len(ctx.diagnostics)
    matched = True
    worst: FindingData | None = None
    graph = ctx.need_translated().model_proto.graph
    drawn_in_pytorch = _drawn_in_pytorch(ctx)
    random = _drawn_in_both(ctx, drawn_in_pytorch)
    for index, (expected, actual) in enumerate(zip(expected_all, ort_outputs)):
        name = graph.output[index].name
        if expected.shape != actual.shape:
            report_at_output(ctx, rule, index, f"Output `{name}` has shape {list(actual.shape)} in "
                           f"ONNX Runtime but {list(expected.shape)} in PyTorch{situation}.")
            matched = False
            continue
        if index in random:
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
                       f"(atol {atol:g}, rtol {rtol:g})."
                       + _draws_only_in_pytorch(drawn_in_pytorch.get(index)),
                       data=worst)
        matched = False
    if not matched and worst:
        found = first_divergence(ctx, args, kwargs, situation=situation,
                                 rule="ONNX502" if rule == "ONNX501" else rule)
        if found is BEFORE_THE_TRANSLATION:
            _blame_the_capture(ctx, rule, reported_before)
        elif isinstance(found, AtAnOutput):
            _blame_the_output(ctx, rule, reported_before, found)
    ctx.summary.numerics.append(NumericsRun(
        situation or "example inputs", matched, *(
            (worst.output, worst.max_abs, worst.max_rel, worst.atol, worst.rtol)
            if worst is not None else ())))
    return matched


def random_outputs_of(ctx: CheckContext) -> dict[int, torch.fx.Node]:
    """The outputs drawn from random numbers in PyTorch and in the ONNX model alike, with the
    node of the exported graph that draws them (none when the program is unknown)."""
    return _drawn_in_both(ctx, _drawn_in_pytorch(ctx))


def _drawn_in_both(ctx: CheckContext, drawn: dict[int, torch.fx.Node]
                   ) -> dict[int, torch.fx.Node]:
    """Of the outputs PyTorch draws for, those the ONNX model draws for too."""
    if not drawn:
        return {}
    translated = ctx.need_translated()
    graph = translated.model_proto.graph
    onnx_drawn = onnx_random_values(translated.model_proto)
    return {index: source for index, source in drawn.items()
            if index < len(graph.output) and graph.output[index].name in onnx_drawn}


def _drawn_in_pytorch(ctx: CheckContext) -> dict[int, torch.fx.Node]:
    program = ctx.need_translated().onnx_program.exported_program
    return random_outputs(program) if program is not None else {}


def _draws_only_in_pytorch(source: torch.fx.Node | None) -> str:
    """What a mismatch message adds when PyTorch draws random numbers for the output and the
    ONNX model (its output not spared) draws none."""
    if source is None:
        return ""
    return (f" PyTorch draws random numbers for it (`{source.target}`); the ONNX model draws "
            "none.")


def spared_nodes(ctx: CheckContext) -> set[str]:
    """The names of the exported graph's nodes whose values come from the random numbers of
    an output compared by shape only: the search for the first diverging value passes them
    (by name: it runs the program's unlifted module, whose nodes are others)."""
    program = ctx.need_translated().onnx_program.exported_program
    spared = set(random_outputs_of(ctx).values())
    if program is None or not spared:
        return set()
    return {node.name for node, source in random_sources(program).items() if source in spared}


def report_random_outputs(ctx: CheckContext) -> None:
    """One note (ONNX504) at each node whose random numbers reach an output: those outputs'
    values were not compared."""
    graph = ctx.need_translated().model_proto.graph
    by_source: dict[torch.fx.Node, list[str]] = {}
    for index, source in random_outputs_of(ctx).items():
        if index < len(graph.output):
            by_source.setdefault(source, []).append(f"`{graph.output[index].name}`")
    for source, names in by_source.items():
        op = str(source.target)
        outputs = ("Output " if len(names) == 1 else "Outputs ") + ", ".join(names)
        ctx.report("ONNX504",
                   f"{outputs} {'depends' if len(names) == 1 else 'depend'} on the random numbers "
                   f"`{op}` draws here; ONNX Runtime draws its own, so only "
                   f"{'its shape was' if len(names) == 1 else 'their shapes were'} compared "
                   "with PyTorch's.",
                   ctx.map_stack_trace(source.meta.get("stack_trace"), hint=op),
                   hint=training_note(ctx.need_loaded().model, source),
                   data=FindingData(fx_node=source.name, operator=op))


def _non_finite_only_in_ort(expected: np.ndarray, actual: np.ndarray) -> bool:
    if expected.dtype.kind != "f":
        return False
    return bool((~np.isfinite(actual) & np.isfinite(expected)).any())


def report_at_output(ctx: CheckContext, rule: str, index: int, message: str,
                     data: FindingData | None = None) -> None:
    """Report ``message`` at the source line of the node that computes output ``index``, at
    the call of that line that made it (the exported graph's operator for the output)."""
    translated = ctx.need_translated()
    output_name = translated.model_proto.graph.output[index].name
    producer = next((n for n in translated.model_proto.graph.node if output_name in n.output),
                    None)
    if producer is None:
        ctx.report(rule, message, None, data=data)
        return
    where = ctx.map_stack_trace(metadata(producer).get(STACK_TRACE_KEY),
                                hint=_operator_of(translated.onnx_program.exported_program,
                                                  index) or producer.op_type)
    ctx.report(rule, message, where, data=data)


def _operator_of(program: torch.export.ExportedProgram | None, index: int) -> str | None:
    """The operator of the exported graph's node that computes output ``index``."""
    nodes = output_nodes(program) if program is not None else []
    node = nodes[index] if index < len(nodes) else None
    return str(node.target) if node is not None and node.op == "call_function" else None


@dataclass(frozen=True)
class AtAnOutput:
    """The values first diverge at the operator that computes an output (which ONNX501 marks
    already): every value computed before it matches."""

    node: torch.fx.Node
    output: str  # the ONNX model's name of that output


#: nothing diverges inside the graph torch.onnx translated and its outputs, run in PyTorch,
#: are ONNX Runtime's: the outputs differ from eager PyTorch before the translation
BEFORE_THE_TRANSLATION = "before the translation"
#: an intermediate value diverges first (reported), or the search found nothing certain
REPORTED_OR_UNKNOWN = None


def first_divergence(ctx: CheckContext, args: tuple, kwargs: dict[str, Any], *, situation: str,
                     rule: str) -> AtAnOutput | str | None:
    """Compare every intermediate value in graph order and report the first that diverges
    (``rule``, unless it computes an output: then ``AtAnOutput``, and nothing after it is
    searched, since every later value may follow from it)."""
    translated = ctx.need_translated()
    if translated.onnx_program.exported_program is None:
        return REPORTED_OR_UNKNOWN
    outputs_match: bool | None = None
    try:
        program = translated.onnx_program.exported_program
        skipped = spared_nodes(ctx)
        producers = output_nodes(program)
        produce_outputs = {node.name for node in producers if node is not None}
        pairs = intermediates(program, translated.model_proto, translated.weights,
                              *fresh_copy(args, kwargs), with_outputs=True)
        for pair in pairs:
            expected, actual = pair.expected, pair.actual
            if pair.node.name in skipped:
                continue
            diverges = expected.shape != actual.shape
            if not diverges:
                atol, rtol = tolerances(ctx, expected.dtype) if expected.dtype.kind == "f" \
                    else (0.0, 0.0)
                max_abs, max_rel = differences(expected, actual)
                diverges = max_abs > atol and max_rel > rtol
            if pair.node.name in produce_outputs:  # ONNX501 marks an output's operator
                if diverges:
                    index = [n.name if n is not None else None
                             for n in producers].index(pair.node.name)
                    return AtAnOutput(pair.node,
                                      translated.model_proto.graph.output[index].name)
                outputs_match = outputs_match is not False
            elif diverges and expected.shape == actual.shape:
                _report_divergence(ctx, pair.node, max_abs, max_rel, situation, rule)
                return REPORTED_OR_UNKNOWN
    except Exception:  # the search is a help on top of ONNX501: never a failure of its own
        logging.getLogger(__name__).debug("comparing intermediates failed", exc_info=True)
        return REPORTED_OR_UNKNOWN
    return BEFORE_THE_TRANSLATION if outputs_match is True else REPORTED_OR_UNKNOWN


def _blame_the_output(ctx: CheckContext, rule: str, since: int, found: AtAnOutput) -> None:
    """Say on each output mismatch reported since ``since`` where the values first diverge:
    at an output's own operator, so no ONNX502 comes."""
    op, node = operation(found.node)
    hint = (f"The values first diverge at `{op}` ({node}), "
            f"the operation that computes output `{found.output}`: every value computed "
            "before it matches PyTorch. " + (
                training_note(ctx.need_loaded().model, found.node)
                or "Check its translation (often a custom translation), or loosen the "
                "tolerance."))
    _rehint(ctx, rule, since, hint)


def _blame_the_capture(ctx: CheckContext, rule: str, since: int) -> None:
    """Say on each output mismatch reported since ``since`` that the graph torch.onnx
    translated computes ONNX Runtime's values (no translation to check)."""
    hint = ("The graph torch.onnx translated, run in PyTorch, gives ONNX Runtime's values: "
            "the difference comes before the translation. Eager PyTorch computes what "
            "torch.export did not trace (a fast path under `torch.no_grad()`, as "
            "nn.TransformerEncoder takes with a padding mask; a branch on "
            "`torch.is_grad_enabled()` or `requires_grad`), or a value the export froze (a "
            "Python or NumPy random number), or torch.onnx's decomposition changed it.")
    _rehint(ctx, rule, since, hint)


def _rehint(ctx: CheckContext, rule: str, since: int, hint: str) -> None:
    for position in range(since, len(ctx.diagnostics)):
        if ctx.diagnostics[position].rule == rule:
            ctx.diagnostics[position] = replace(ctx.diagnostics[position], hint=hint)


def _report_divergence(ctx: CheckContext, node: Any, max_abs: float, max_rel: float,
                       situation: str, rule: str) -> None:
    op, named = operation(node)
    ctx.report(
        rule,
        f"The values first diverge at `{op}` ({named}){situation}: max abs "
        f"error {max_abs:.3g}, max rel error {max_rel:.3g}; every value computed before it "
        "matches PyTorch.",
        ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op),
        hint=training_note(ctx.need_loaded().model, node),
        data=FindingData(fx_node=node.name, operator=op),
    )
