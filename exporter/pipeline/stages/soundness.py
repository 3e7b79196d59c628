"""Part of the capture stage: a declared dynamic range that the captured graph silently narrowed
(ONNX107, docs/rules/ONNX107.md). torch.onnx.export accepts torch.export's suggested fixes
without a word (``dynamic_dims``), so the plain exporter succeeds; the dynamic stage then runs
the model at the lower bound of the declared range, which confirms the narrowing or not."""

from __future__ import annotations

import logging
import math
import re
from typing import Any

import torch

from exporter.findings.diagnostics import Diagnostic
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.findings.rules import Severity
from exporter.pipeline.context import CheckContext
from exporter.pipeline.dynamic_dims import (
    DeclaredDim,
    Narrowed,
    ValidRange,
    declared_dims,
    describe_range,
    valid_ranges,
)
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.locating import (
    BoundedDim,
    dynamic_shapes_with,
    pretty_source,
    stack_frames,
    strictly_dynamic,
)
from exporter.toolchain import torch_compat

_RELATION = ("<", ">")  # a guard that bounds a size (not Eq/Ne, which specialize it)


def report_narrowed(ctx: CheckContext, program: Any) -> tuple[Narrowed, ...]:
    """ONNX107 for every declared dimension the captured ``program`` is valid for over a
    narrower range than declared: an error where the user named the dimension, a warning
    for ``Dim.AUTO`` (they let torch decide the range)."""
    loaded = ctx.need_loaded()
    declared = declared_dims(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes)
    if not declared:
        return ()
    valid = valid_ranges(program, loaded.args, loaded.kwargs)
    narrowed: list[tuple[int, int, DeclaredDim, ValidRange]] = []
    seen: set[str] = set()
    for index, axes in declared.items():
        for axis, dim in axes.items():
            captured = valid.get(index, {}).get(axis)
            if not isinstance(captured, ValidRange) or captured.low == captured.high \
                    or dim.name in seen:
                continue  # one size only is a specialization: ONNX102's (the dynamic stage)
            if captured.low > dim.low or captured.high < dim.high:
                seen.add(dim.name)
                narrowed.append((index, axis, dim, captured))
    if not narrowed:
        return ()
    guards = _range_guards(ctx)
    found = []
    for _, axis, dim, captured in narrowed:
        guard = _guard_for(guards, axis)
        found.append(Narrowed(dim, captured, _report(ctx, dim, captured, guard)))
    return tuple(found)


def _report(ctx: CheckContext, dim: DeclaredDim, valid: ValidRange,
            guard: tuple[dict[str, Any], dict[int, str]] | None) -> Diagnostic:
    declared = describe_range(dim.low, dim.high)
    narrowed = describe_range(max(valid.low, dim.low), min(valid.high, dim.high))
    what = f"`{dim.name}`"
    where: Any = None
    because = "a guard in the traced code"
    if guard is not None:
        data, files = guard
        where = ctx.map_frames(stack_frames(data.get("user_stack") or [], files))
        sources = {str(symbol): pretty_source(str(source))
                   for symbol, source in (data.get("symbol_to_sources") or {}).items()}
        if sources:
            what = f"`{dim.name}` (`{next(iter(sources.values()))}`)"
        because = f"the guard `{_readable(str(data.get('expr')), sources)}` here"
    if where is None:
        where = ctx.option_location("dynamic_shapes")
    message = (f"{what} is declared dynamic over {declared}, but the exported graph is valid "
               f"only for {narrowed}: torch.onnx.export narrowed the range to {because} "
               "without an error, and the ONNX model does not check it, so at other sizes it "
               "runs and can give wrong results.")
    ask = "let torch decide (Dim.AUTO)" if not dim.named else "named the dimension"
    minimum = f"min={int(valid.low)}" if valid.low > dim.low else ""
    maximum = f"max={int(valid.high)}" if valid.high < dim.high else ""
    bounds = ", ".join(b for b in (minimum, maximum) if b)
    diagnostic = ctx.report(
        "ONNX107", message, where,
        severity=Severity.ERROR if dim.named else Severity.WARNING,
        hint=(f"Export both paths with `torch.cond` where the code branches on the size, or "
              f"declare the range you mean: `torch.export.Dim({dim.name!r}, {bounds})`."),
        data={"dimension": dim.name, "declared": declared, "valid": narrowed,
              "asked": ask})
    if guard is not None:
        _propose_range(ctx, diagnostic, dim, valid, guard[0])
    return diagnostic


def _propose_range(ctx: CheckContext, diagnostic: Diagnostic, dim: DeclaredDim,
                   valid: ValidRange, guard: dict[str, Any]) -> None:
    """The range fix to try (docs/fixes.md): the pragma's dynamic_shapes with the dimension
    declared over the range the graph holds for."""
    option = ctx.target.options.get("dynamic_shapes")
    sources = [str(source) for source in (guard.get("symbol_to_sources") or {}).values()]
    if option is None or len(sources) != 1:
        return
    low = int(valid.low) if valid.low > dim.low else None
    high = int(valid.high) if valid.high < dim.high and not math.isinf(valid.high) else None
    if low is None and high is None:
        return
    edited = dynamic_shapes_with(ctx, {sources[0]: BoundedDim(dim.name, low, high)})
    if edited is None:
        return
    bounds = ", ".join(f"{key}={bound}" for key, bound in (("min", low), ("max", high))
                       if bound is not None)
    ctx.fix_candidates.append(FixCandidate(
        "onnxlens:declared-range", f"Declare `{dim.name}` over the range the graph holds for "
        f"(`torch.export.Dim({dim.name!r}, {bounds})`)", "onnxlens",
        (FixEdit(ctx.target.path, option.range, edited),),
        (diagnostic.rule, diagnostic.location.range)))


def _readable(expression: str, sources: dict[str, str]) -> str:
    """``s27 >= 10`` → ``x.shape[1] >= 10``."""
    for symbol, source in sorted(sources.items(), key=lambda item: -len(item[0])):
        expression = re.sub(rf"\b{re.escape(symbol)}\b", source, expression)
    return expression


def _range_guards(ctx: CheckContext) -> list[tuple[dict[str, Any], dict[int, str]]]:
    """The guards that bound a declared dimension, with their user stacks: a draft export
    with every declared dimension strictly dynamic reports each guard torch added."""
    loaded = ctx.need_loaded()
    try:
        spec = strictly_dynamic(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes)
        args, kwargs = fresh_copy(loaded.args, loaded.kwargs)
        program = torch.export.draft_export(loaded.model, args, kwargs, dynamic_shapes=spec,
                                            strict=False)
    except Exception:
        logging.getLogger(__name__).debug("locating the narrowing guard failed", exc_info=True)
        return []
    report = torch_compat.draft_failures(program)
    if report is None:
        return []
    failures, files = report
    return [(failure.data, files) for failure in failures
            if failure.kind == "GUARD_ADDED"
            and any(op in str(failure.data.get("expr", "")) for op in _RELATION)
            and failure.data.get("user_stack")]


def _guard_for(guards: list[tuple[dict[str, Any], dict[int, str]]],
               axis: int) -> tuple[dict[str, Any], dict[int, str]] | None:
    """The first guard on a source of this axis (``L['x'].size()[1]``), else the first."""
    for guard in guards:
        sources = (guard[0].get("symbol_to_sources") or {}).values()
        if any(str(source).endswith(f".size()[{axis}]") for source in sources):
            return guard
    return guards[0] if guards else None


def confirmed(narrowed: Narrowed, size: int) -> bool:
    """Whether a run at ``size`` lies outside the valid range (so its failure is this one)."""
    return not narrowed.valid.holds(size) and narrowed.dim.low <= size <= (
        narrowed.dim.high if not math.isinf(narrowed.dim.high) else size)
