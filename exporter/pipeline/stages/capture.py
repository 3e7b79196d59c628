"""Stage 2: capture as ``torch.onnx.export`` does (its strategies: non-strict ``torch.export``,
then strict); when every one fails, a draft export finds every capture problem at once, and
its graph (unsound where it guessed) feeds the later stages."""

from __future__ import annotations

import ast
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from exporter.findings.diagnostics import Diagnostic, Location, Related
from exporter.pipeline import after_verdict
from exporter.pipeline.context import Captured, CheckContext
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.locating import guards_a_dimension, report_guard, stack_frames
from exporter.pipeline.stages import soundness
from exporter.pipeline.stages.base import StageFailed
from exporter.source.python_syntax import parse_python
from exporter.source.text import node_range
from exporter.source.traces import Frame, Mapped, exception_frames
from exporter.toolchain import torch_compat

# (rule, pattern in "ExceptionType: message") for failures a draft export cannot attribute.
_EXCEPTION_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("ONNX101", re.compile(r"GuardOnDataDependentSymNode|data-dependent", re.I)),
    # torch.onnx's capture re-exports with torch's suggested shapes after "Constraints
    # violated": a dimension declared Dim.DYNAMIC that the code fixes then fails as a
    # "conflict between user-specified ranges and inferred ranges"
    ("ONNX102", re.compile(r"Constraints violated|specialized|marked .* as dynamic|"
                           r"conflicts between user-specified ranges", re.I)),
    ("ONNX104", re.compile(r"pytree|not a supported (input|output)|Unsupported (input|output)|"
                           r"output .*(type|structure)|register.*pytree", re.I)),
    ("ONNX103", re.compile(r"numpy|tolist|Unsupported|not supported|data pointer|"
                           r"Cannot access storage|cannot be traced|__torch_function__", re.I)),
]


def run(ctx: CheckContext) -> None:
    loaded = ctx.need_loaded()
    if loaded.given_program is not None:  # torch.onnx.export translates it as it is
        ctx.captured = Captured(loaded.given_program, "given")
        ctx.summary.capture_strategy = "given"
        return
    dynamic_shapes = torch_compat.dynamic_shapes_for_export(loaded.dynamic_shapes)
    started = time.process_time()  # CPU time: the budget after the verdict counts it
    with torch_compat.recording_shape_guards() as guards:
        attempts = torch_compat.capture(loaded.model, *fresh_copy(loaded.args, loaded.kwargs),
                                        dynamic_shapes)
    captured = next((a for a in attempts if a.program is not None), None)
    if captured is not None and captured.program is not None:
        narrowed = soundness.report_narrowed(ctx, captured.program, guards)
        ctx.captured = Captured(captured.program, captured.strategy, narrowed)
        ctx.summary.capture_strategy = captured.strategy
        return
    # Every strategy torch.onnx.export tries failed: the export fails here. A draft export
    # finds every capture problem at once; torch.onnx reports the first strategy's error.
    first_error = next(a.error for a in attempts if a.error is not None)
    _know_the_failure(ctx, first_error, time.process_time() - started)
    draft, error = _draft_export(ctx, dynamic_shapes)
    report = torch_compat.draft_failures(draft) if draft is not None else None
    found = _report_draft_failures(ctx, draft, *report) if report is not None else []
    if not found:
        _report_exception(ctx, first_error)
    if isinstance(error, after_verdict.BudgetSpent):
        raise StageFailed(after_verdict.why_stopped(ctx.after_verdict_budget)) from first_error
    if draft is None or not found:
        raise StageFailed from first_error
    ctx.captured = Captured(draft, "draft")
    ctx.summary.capture_strategy = "draft"
    for diagnostic in found:
        _note_draft_capture(ctx, diagnostic)
        ctx.report(  # off unless selected (exporter/reports/render.py): the error above says it
            "ONNX106",
            "The graph checked by the later stages was captured by a draft export, which "
            f"assumed this line behaves as it did for the example inputs ({diagnostic.rule}).",
            diagnostic.location,
        )


def _know_the_failure(ctx: CheckContext, error: BaseException,
                      capture_seconds: float) -> None:
    """The export is known to fail here once every strategy failed: torch's first error is
    the verdict (``ctx.known_failure``), shown at once (``ctx.early``, published by the
    language server) while the draft export, which can take several times the capture,
    collects every problem; its list replaces this one. From here the search for more
    problems runs on a budget (exporter/pipeline/after_verdict.py)."""
    ctx.after_verdict_deadline = after_verdict.deadline_after(capture_seconds)
    if ctx.after_verdict_deadline is not None:
        ctx.after_verdict_budget = ctx.after_verdict_deadline - time.process_time()
    before = len(ctx.diagnostics)
    _report_exception(ctx, error)
    ctx.known_failure = ctx.diagnostics[before:]
    del ctx.diagnostics[before:]
    if ctx.early is not None:
        ctx.early("capture", [*ctx.diagnostics, *ctx.known_failure])


DRAFT_NOTE = ("the later stages checked the graph a draft export captured, assuming this line "
              "behaves as it did for the example inputs (ONNX106)")


def _note_draft_capture(ctx: CheckContext, diagnostic: Diagnostic) -> None:
    """The capture error carries the draft-export fact itself (a related location, and
    ``draft_capture`` in its data and SARIF properties): one entry per cause."""
    noted = replace(diagnostic, related=(*diagnostic.related,
                                         Related(diagnostic.location, DRAFT_NOTE)),
                    data=replace(diagnostic.data, draft_capture=True))
    index = next(i for i, d in enumerate(ctx.diagnostics) if d is diagnostic)
    ctx.diagnostics[index] = noted


def _draft_export(ctx: CheckContext, dynamic_shapes: Any
                  ) -> tuple[Any, BaseException | None]:
    """The draft export's program, or None and why (an error, or its budget spent)."""
    loaded = ctx.need_loaded()
    args, kwargs = fresh_copy(loaded.args, loaded.kwargs)
    try:
        with after_verdict.spending(ctx.after_verdict_deadline), torch_compat.onnx_exporting():
            program = torch.export.draft_export(
                loaded.model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False
            )
    except (Exception, after_verdict.BudgetSpent) as error:
        return None, error
    return program, None


def _report_draft_failures(ctx: CheckContext, draft: Any,
                           failures: list[torch_compat.DraftFailure],
                           files: dict[int, str]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for failure in failures:
        kind, data = failure.kind, failure.data
        frames = stack_frames(data.get("user_stack") or data.get("stack") or [], files)
        where = ctx.map_frames(frames)
        if kind == "DATA_DEPENDENT_ERROR":
            code = (data.get("frame_locals") or {}).get("loc") or "this expression"
            found.append(ctx.report(
                "ONNX101",
                f"`{code.strip()}` depends on the values inside a tensor (`{data.get('expr')}`); "
                "torch.export cannot decide it while tracing. The draft export assumed "
                f"`{data.get('result')}`, as for the example inputs.",
                where,
            ))
        elif kind == "GUARD_ADDED":
            if guards_a_dimension(data):
                found.append(report_guard(ctx, data, files))
        elif kind in ("MISSING_FAKE_KERNEL", "MISMATCHED_FAKE_KERNEL"):
            op = str(data.get("op") or "")
            where = where or _op_call_site(ctx, draft, op)
            problem = ("has no fake (meta) kernel" if kind == "MISSING_FAKE_KERNEL"
                       else "has a fake kernel that disagrees with its real kernel")
            found.append(ctx.report(
                "ONNX105", f"The custom operator `{op}` {problem}, so torch.export cannot "
                "trace it; the draft export made one up from the example inputs.", where,
                hint="Register a fake kernel with `@<op>.register_fake` (torch.library) that "
                     "computes the output shapes and dtypes without real data."))
        else:
            found.append(ctx.report(
                "ONNX105", f"Capture problem: {kind.lower().replace('_', ' ')}", where))
    return found


def _op_call_site(ctx: CheckContext, program: Any, op: str) -> Any:
    """Where the graph calls ``op`` (draft reports carry no stack for kernel problems)."""
    for node in program.graph.nodes:
        if node.op == "call_function" and str(node.target) == op:
            return ctx.map_stack_trace(node.meta.get("stack_trace"), hint=op)
    return None


def _report_exception(ctx: CheckContext, error: BaseException) -> None:
    text = f"{type(error).__name__}: {error}"
    rule = next((rule for rule, pattern in _EXCEPTION_RULES if pattern.search(text)), "ONNX105")
    where: Mapped | Location | None = (ctx.map_frames(exception_frames(error))
                                       or ctx.map_frames(_frames_in_message(str(error))))
    if where is None and rule == "ONNX102":
        where = ctx.option_location("dynamic_shapes")
    if where is None and rule == "ONNX104":
        where = _forward_return(ctx)
    ctx.report(rule, f"torch.export failed: {_first_lines(error)}", where)


def _forward_return(ctx: CheckContext) -> Location | None:
    """Output structure problems surface after ``forward`` returned: point at its return."""
    forward = getattr(type(ctx.need_loaded().model), "forward", None)
    code = getattr(forward, "__code__", None)
    if code is None:
        return None
    path = Path(code.co_filename)
    lines = ctx.sources.lines(path)
    try:
        tree = parse_python("\n".join(lines))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.lineno == code.co_firstlineno:
            values = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value]
            if values:
                return Location(path, node_range(values[-1], lines))
    return None


def _frames_in_message(message: str) -> list[Frame]:
    """torch.export quotes the user call that raised: ``File "x.py", line 4, in forward``."""
    from exporter.source.traces import parse_stack_trace

    return parse_stack_trace(message)


def _first_lines(error: BaseException, limit: int = 3) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    useful = [line for line in lines if not line.lstrip().startswith(("For more", "For C++"))]
    text = " ".join(line.strip() for line in useful[:limit])
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
