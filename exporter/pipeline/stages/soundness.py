"""Part of the capture stage: a declared dynamic range that the captured graph silently narrowed
(ONNX107, docs/rules/ONNX107.md). torch.onnx.export accepts torch.export's suggested fixes
without a word (``dynamic_dims``), so the plain exporter succeeds. The guard that narrowed the
range is found in what the capture recorded: the guards of its shape environments, each with
the user line that added it, tried at the sizes just outside the narrowed range (a guard false
there is the one that excluded them). The finding is a warning until the dynamic stage runs
the model outside the narrowed range and shows the ONNX model wrong there."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy

from exporter.findings.diagnostics import Diagnostic, FindingData, Related
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.findings.rules import Severity
from exporter.pipeline.context import CheckContext
from exporter.pipeline.dynamic_dims import (
    DeclaredDim,
    Narrowed,
    ValidRange,
    declared_dims,
    describe_range,
    outside_sizes,
    valid_ranges,
)
from exporter.pipeline.locating import (
    BoundedDim,
    declared_dynamic,
    dynamic_shapes_with,
    pretty_source,
    stack_frames,
)
from exporter.pipeline.strict_recapture import strict_draft_report
from exporter.source.traces import Frame, is_user_frame
from exporter.toolchain import torch_compat

_RELATION = ("<", ">")  # a guard that bounds a size (not Eq/Ne, which specialize it)


@dataclass(frozen=True)
class NarrowingGuard:
    """The guard that narrowed a declared range, as the user reads it, and where it is."""

    text: str  # ``x.shape[1] >= 10``
    source: str  # torch's source of the narrowed size: ``L['x'].size()[1]``
    frames: list[Frame]  # the user's stack at the guard, outermost first


def report_narrowed(ctx: CheckContext, program: Any,
                    guards: list[torch_compat.ShapeGuard]) -> tuple[Narrowed, ...]:
    """ONNX107, a warning until a run confirms it, for every declared dimension the captured
    ``program`` is valid for over a narrower range than declared; ``guards`` are those the
    capture recorded."""
    loaded = ctx.need_loaded()
    declared = declared_dims(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes)
    if not declared:
        return ()
    valid = valid_ranges(program, loaded.args, loaded.kwargs)
    narrowed: list[tuple[DeclaredDim, ValidRange]] = []
    seen: set[str] = set()
    for index, axes in declared.items():
        for axis, dim in axes.items():
            captured = valid.get(index, {}).get(axis)
            if not isinstance(captured, ValidRange) or captured.low == captured.high \
                    or dim.name in seen:
                continue  # one size only is a specialization: ONNX102's (the dynamic stage)
            if captured.low > dim.low or captured.high < dim.high:
                seen.add(dim.name)
                narrowed.append((dim, captured))
    found = []
    recaptured: list[NarrowingGuard] | None = None  # one draft export per check, at most
    for dim, captured in narrowed:
        located = _narrowing_guards(ctx, guards, dim, captured)
        if not located:
            recaptured = _recaptured_guards(ctx) if recaptured is None else recaptured
            located = recaptured
        found.append(_report(ctx, dim, captured, located))
    return tuple(found)


def _narrowing_guards(ctx: CheckContext, guards: list[torch_compat.ShapeGuard],
                      dim: DeclaredDim, valid: ValidRange) -> list[NarrowingGuard]:
    """The recorded guards that exclude a size just outside the valid range (one for each
    side that was narrowed), in the user's code."""
    found: list[NarrowingGuard] = []
    for size in outside_sizes(dim, valid):
        for guard in guards:
            if not _excludes(guard, valid.symbol, size):
                continue
            frames = [Frame(Path(path), line, function) for path, line, function in guard.stack]
            if not any(is_user_frame(frame.path, ctx.workspace) for frame in frames):
                continue
            located = NarrowingGuard(
                _readable(str(guard.expression),
                          {symbol: pretty_source(source)
                           for symbol, source in guard.sources.items()}),
                guard.sources.get(valid.symbol, ""), frames)
            if located not in found:
                found.append(located)
            break
    return found


def _excludes(guard: torch_compat.ShapeGuard, symbol: str, size: int) -> bool:
    """Whether ``guard`` is false with ``symbol`` at ``size`` (its other sizes as in the
    example)."""
    free: set[Any] = set(getattr(guard.expression, "free_symbols", ()))
    if symbol not in {str(s) for s in free}:
        return False
    values = {s: sympy.Integer(size if str(s) == symbol else guard.hints.get(str(s), -1))
              for s in free}
    if any(value < 0 for value in values.values()):
        return False  # a symbol with no example size: not decided here
    try:
        return bool(guard.expression.xreplace(values) == sympy.false)
    except Exception:  # a function sympy cannot evaluate on these sizes
        return False


def _report(ctx: CheckContext, dim: DeclaredDim, valid: ValidRange,
            guards: list[NarrowingGuard]) -> Narrowed:
    declared = describe_range(dim.low, dim.high)
    narrowed = describe_range(max(valid.low, dim.low), min(valid.high, dim.high))
    what = f"`{dim.name}`"
    where: Any = None
    because = "a guard in the traced code"
    related: tuple[Related, ...] = ()
    if guards:
        guard = guards[0]
        where = ctx.map_frames(guard.frames)
        if guard.source:
            what = f"`{dim.name}` (`{pretty_source(guard.source)}`)"
        because = f"the guard `{guard.text}` here"
        if len(guards) > 1:
            other = ctx.map_frames(guards[1].frames)
            if other is not None:
                because += f" and `{guards[1].text}`"
                related = (Related(other.location, f"the guard `{guards[1].text}`"),)
    if where is None:
        where = ctx.option_location("dynamic_shapes")
    # an export call's converted `dynamic_axes` may have given the input another's entry
    conversion = declared_dynamic(
        ctx, [pretty_source(guards[0].source)] if guards and guards[0].source else [])
    related += conversion.related
    stated = (f"{what} is {conversion.phrase} over {declared}, but the exported graph is valid "
              f"only for {narrowed}: torch.onnx.export narrowed the range to {because} "
              f"without an error, and the ONNX model does not check it.{conversion.note}")
    minimum = f"min={int(valid.low)}" if valid.low > dim.low else ""
    maximum = f"max={int(valid.high)}" if valid.high < dim.high else ""
    bounds = ", ".join(b for b in (minimum, maximum) if b)
    declare = f"torch.export.Dim({dim.name!r}, {bounds})"
    diagnostic = ctx.report(
        "ONNX107", stated + f" Not confirmed: no run at a size outside {narrowed} was made.",
        where, severity=Severity.WARNING, related=related,
        hint=(f"Export both paths with `torch.cond` where the code branches on the size, or "
              f"declare the range you mean: `{declare}`."),
        data=FindingData(dimension=dim.name, declared=declared, valid=narrowed, declare=declare,
                         asked="named the dimension" if dim.named
                         else "let torch decide (Dim.AUTO)"))
    if guards and guards[0].source:
        _propose_range(ctx, diagnostic, dim, valid, guards[0].source)
    return Narrowed(dim, valid, diagnostic, stated)


def _propose_range(ctx: CheckContext, diagnostic: Diagnostic, dim: DeclaredDim,
                   valid: ValidRange, source: str) -> None:
    """The range fix to try (docs/fixes.md): the pragma's dynamic_shapes with the dimension
    declared over the range the graph holds for."""
    option = ctx.target.options.get("dynamic_shapes")
    if option is None:
        return
    low = int(valid.low) if valid.low > dim.low else None
    high = int(valid.high) if valid.high < dim.high and not math.isinf(valid.high) else None
    if low is None and high is None:
        return
    edited = dynamic_shapes_with(ctx, {source: BoundedDim(dim.name, low, high)})
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


def _recaptured_guards(ctx: CheckContext) -> list[NarrowingGuard]:
    """Where the capture's own guards do not say (the capability is off, or the guard sits
    in a library, whose caller in the user's code only a whole stack names): a draft export
    with every declared dimension strictly dynamic reports the guards torch added, with the
    user's stack."""
    report = strict_draft_report(ctx)
    if report is None:
        return []
    failures, files = report
    for failure in failures:
        data = failure.data
        expression = str(data.get("expr", ""))
        if failure.kind != "GUARD_ADDED" or not data.get("user_stack") \
                or not any(op in expression for op in _RELATION):
            continue
        sources = {str(symbol): str(source)
                   for symbol, source in (data.get("symbol_to_sources") or {}).items()}
        return [NarrowingGuard(
            _readable(expression, {s: pretty_source(v) for s, v in sources.items()}),
            next(iter(sources.values()), "") if len(sources) == 1 else "",
            stack_frames(data["user_stack"], files))]
    return []
