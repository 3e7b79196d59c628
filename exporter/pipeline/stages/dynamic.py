"""Stage 7: when dynamic dimensions are declared, run PyTorch and ONNX Runtime again at other
sizes: the lower bound of each declared range, a larger size, and the sizes just outside each
range the capture narrowed (ONNX107). A declared dimension that became static, or a failure or
wrong result at another size, is reported where it happened; ONNX Runtime failing or wrong at
a size outside a narrowed range confirms that narrowing (its ONNX107 becomes an error) instead
of being reported apart. A size at which PyTorch itself fails is the model's own domain, not an
export problem: it is noted, and where it lies outside a narrowed range, the ONNX107 says the
model's code bounds the range. The inputs at another size repeat (or cut) the example's own
values (``example_inputs.resized``), so they stay valid for the model."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from exporter.findings.rules import Severity
from exporter.pipeline import ort_runner
from exporter.pipeline.comparing import compare_outputs
from exporter.pipeline.context import CheckContext
from exporter.pipeline.dynamic_dims import (
    DeclaredDims,
    Narrowed,
    declared_dims,
    declared_in_program,
    outside_sizes,
)
from exporter.pipeline.example_inputs import fresh_copy, resized
from exporter.pipeline.locating import (
    declared_dynamic,
    guards_a_dimension,
    report_at_node,
    report_guard,
)
from exporter.pipeline.model_state import state_kept
from exporter.pipeline.stages.base import StageSkipped
from exporter.pipeline.strict_recapture import strict_draft_report
from exporter.toolchain import torch_compat

#: the larger size: the example's size plus this (within the declared maximum)
LARGER_BY = 3
LOWER = "the lower bound of the declared range"
LARGER = "a larger size"
BELOW = "just below the range the graph holds for"
ABOVE = "just above the range the graph holds for"
ONE = "size 1, the usual deployment batch, which torch.export treats apart"


@dataclass(frozen=True)
class SizeRun:
    """One run at other sizes: each declared dimension's size, and why these sizes."""

    sizes: dict[str, int]
    why: str  # LOWER, LARGER, BELOW or ABOVE

    @property
    def where(self) -> str:
        return " at " + ", ".join(f"{name}={size}" for name, size in self.sizes.items())

    @property
    def situation(self) -> str:
        return f"{self.where} ({self.why}; the example inputs repeated or cut along those axes)"


@dataclass
class NarrowingRuns:
    """What the runs outside one narrowed range showed."""

    confirmed: str = ""  # ONNX Runtime failed or differed there: the finding's proof
    confirmed_sizes: dict[str, int] = field(default_factory=dict)  # the sizes of that run
    eager_failed: list[str] = field(default_factory=list)  # PyTorch itself failed there
    matched: list[str] = field(default_factory=list)  # ONNX Runtime matched PyTorch there
    sides: set[str] = field(default_factory=set)  # "below", "above": the sides run


def run(ctx: CheckContext) -> None:
    loaded = ctx.need_loaded()
    if ctx.need_captured().draft_only:
        # The graph is a draft export's, not a model torch.onnx.export makes: a failure at
        # another size would follow from the capture errors, not show a problem of its own.
        raise StageSkipped("capture failed: the draft export's graph is not the exporter's "
                           "model (see the capture errors)")
    declared = (declared_in_program(loaded.given_program, loaded.args, loaded.kwargs)
                if loaded.given_program is not None else
                declared_dims(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes))
    if not declared:
        raise StageSkipped("no dynamic dimensions declared")
    inputs = [t for t in ort_runner.flat_inputs(loaded.args, loaded.kwargs)
              if isinstance(t, torch.Tensor)]
    _report_static_dims(ctx, declared)
    narrowed = ctx.need_captured().narrowed
    runs = size_runs(inputs, declared, narrowed)
    if not runs:
        raise StageSkipped("no other size within the declared ranges")
    outcomes = {item.dim.name: NarrowingRuns() for item in narrowed}
    try:
        for size_run in runs:
            if size_run.why in (BELOW, ABOVE) and _side_known(narrowed, outcomes, size_run):
                continue
            if not _run_at(ctx, declared, size_run, outcomes):
                return
    finally:
        for item in narrowed:
            _settle(ctx, item, outcomes[item.dim.name])


def _outside(narrowed: tuple[Narrowed, ...], size_run: SizeRun) -> list[tuple[Narrowed, str]]:
    """The narrowed dimensions this run sizes outside their valid range but within the range
    checked (not size 1, whose run is its own), with the side."""
    found = []
    for item in narrowed:
        size = size_run.sizes.get(item.dim.name)
        if size is not None and not item.valid.holds(size) \
                and item.dim.low <= size <= item.dim.high:
            found.append((item, "below" if size < item.valid.low else "above"))
    return found


def _side_known(narrowed: tuple[Narrowed, ...], outcomes: dict[str, NarrowingRuns],
                size_run: SizeRun) -> bool:
    """Whether an earlier run already sized this run's narrowed dimension on the same side
    (the lower bound of the declared range lies below a narrowed lower bound)."""
    return all(side in outcomes[item.dim.name].sides for item, side in _outside(narrowed,
                                                                              size_run))


def _run_at(ctx: CheckContext, declared: DeclaredDims, size_run: SizeRun,
            outcomes: dict[str, NarrowingRuns]) -> bool:
    """Run at ``size_run``'s sizes in both runtimes; False when a problem was reported."""
    loaded = ctx.need_loaded()
    outside = _outside(ctx.need_captured().narrowed, size_run)
    new_args, new_kwargs = resized_inputs(loaded.args, loaded.kwargs, declared, size_run.sizes)
    situation = size_run.situation
    eager_args, eager_kwargs = fresh_copy(new_args, new_kwargs)
    try:
        # each run starts from the model as built (the capture's tracing included)
        with torch.no_grad(), state_kept(loaded.model, loaded.as_built) as kept:
            eager = kept.outputs_apart(loaded.model(*eager_args, **eager_kwargs))
    except Exception as error:
        # The model itself does not take this size (a window, a kernel larger than the size,
        # an assertion of its own): its domain, not a problem of the export.
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        for item, _ in outside:
            outcomes[item.dim.name].eager_failed.append(
                f"PyTorch itself fails{size_run.where} ({size_run.why}: {reason.rstrip('.')})")
        ctx.summary.dynamic_not_run.append(
            f"PyTorch itself fails{situation}: {reason}")
        return True
    before = len(ctx.diagnostics)
    try:
        outputs = ort_runner.run(ctx.need_ran().session,
                                 ort_runner.flat_inputs(*fresh_copy(new_args, new_kwargs),
                                                        ctx.need_captured().program))
    except Exception as error:
        if _confirm(outside, outcomes, size_run,
                    f"ONNX Runtime fails: {str(error).splitlines()[0]}"):
            return False
        specialized = [d.location for d in ctx.diagnostics if d.rule == "ONNX102"]
        report_at_node(ctx, "ONNX403", f"ONNX Runtime fails{situation}", str(error),
                       fallback=specialized[-1] if specialized else None)
        _record_sizes(ctx, before, size_run)
        if not specialized:
            _locate_specialization(ctx, "The exported graph depends on the example size:")
        return False
    for item, side in outside:  # ONNX Runtime ran outside the range on this side
        outcomes[item.dim.name].sides.add(side)
    if compare_outputs(ctx, eager, outputs, new_args, new_kwargs, rule="ONNX403",
                       situation=situation):
        for item, _ in outside:
            outcomes[item.dim.name].matched.append(f"{size_run.where} ({size_run.why})")
        return True
    mismatch = ctx.diagnostics[before].message if len(ctx.diagnostics) > before else ""
    if _confirm(outside, outcomes, size_run, mismatch):
        del ctx.diagnostics[before:]
        return False
    _record_sizes(ctx, before, size_run)
    _locate_specialization(ctx, "The exported graph depends on the example size:")
    return False


def _record_sizes(ctx: CheckContext, before: int, size_run: SizeRun) -> None:
    """The sizes fed, in the data of the ONNX403s this run reported: what a reader (the
    corpus's judge replays them on the plain exporter's model) needs to run them again."""
    for index in range(before, len(ctx.diagnostics)):
        diagnostic = ctx.diagnostics[index]
        if diagnostic.rule == "ONNX403":
            ctx.diagnostics[index] = replace(
                diagnostic, data=replace(diagnostic.data, sizes=dict(size_run.sizes)))


def _confirm(outside: list[tuple[Narrowed, str]], outcomes: dict[str, NarrowingRuns],
             size_run: SizeRun, what: str) -> bool:
    """A failure at a size outside the range the capture narrowed a dimension to is that
    narrowing's consequence: its ONNX107 says so (and is an error) instead of an ONNX403."""
    if not outside:
        return False
    what = what.replace(size_run.situation, "").strip()
    for item, _ in outside:
        outcomes[item.dim.name].confirmed = f"Confirmed{size_run.where} ({size_run.why}): {what}"
        outcomes[item.dim.name].confirmed_sizes = dict(size_run.sizes)
    return True


def _settle(ctx: CheckContext, narrowed: Narrowed, runs: NarrowingRuns) -> None:
    """The ONNX107's last sentence and severity from what the runs outside its range showed:
    an error only where ONNX Runtime failed or differed from PyTorch there."""
    severity = Severity.WARNING
    data = narrowed.diagnostic.data
    hint = narrowed.diagnostic.hint
    if runs.confirmed:
        outcome, severity = runs.confirmed, Severity.ERROR
        data = replace(data, confirmed=True, sizes=runs.confirmed_sizes)
    elif runs.eager_failed:  # the last is the nearest to the range
        outcome = (f"{runs.eager_failed[-1]}: the model's own code bounds "
                   f"`{narrowed.dim.name}`, so this range is the model's, not one the export "
                   "lost.")
        if runs.matched:
            outcome += f" ONNX Runtime matched PyTorch{' and'.join(runs.matched)}."
        hint = f"Declare the range the model supports: `{data.declare}`."
    elif runs.matched:
        outcome = f"Not confirmed: ONNX Runtime matched PyTorch{' and'.join(runs.matched)}."
    else:
        return  # no run outside the range: the finding says so already
    index = next((i for i, d in enumerate(ctx.diagnostics) if d is narrowed.diagnostic), None)
    if index is not None:
        ctx.diagnostics[index] = replace(narrowed.diagnostic,
                                         message=f"{narrowed.stated} {outcome}",
                                         severity=severity, hint=hint, data=data)


def size_runs(inputs: list[torch.Tensor], declared: DeclaredDims,
              narrowed: tuple[Narrowed, ...] = ()) -> list[SizeRun]:
    """The lower bound of every declared range, then a larger size, then the sizes just
    outside each narrowed range (the other dimensions at the example's size), then every
    dimension whose declared range holds 1 at 1; a run that would feed only the example's
    sizes is left out."""
    example: dict[str, int] = {}
    lower: dict[str, int] = {}
    larger: dict[str, int] = {}
    one: dict[str, int] = {}
    for index, axes in declared.items():
        for axis, dim in axes.items():
            if dim.name in example or axis >= inputs[index].dim():
                continue
            size = int(inputs[index].shape[axis])
            example[dim.name] = size
            lower[dim.name] = dim.low
            high = dim.high if not math.isinf(dim.high) else size + LARGER_BY
            larger[dim.name] = int(min(size + LARGER_BY, high))
            one[dim.name] = 1 if dim.takes_one else size
    runs = [SizeRun(sizes, why) for sizes, why in ((lower, LOWER), (larger, LARGER))
            if sizes != example]
    for item in narrowed:
        if item.dim.name not in example:
            continue
        for size in outside_sizes(item.dim, item.valid):
            why = BELOW if size < item.valid.low else ABOVE
            runs.append(SizeRun({**example, item.dim.name: size}, why))
    if one != example:
        runs.append(SizeRun(one, ONE))
    return runs


def _report_static_dims(ctx: CheckContext, declared: DeclaredDims) -> None:
    if any(d.rule == "ONNX102" for d in ctx.diagnostics):
        return  # the capture stage already located the specialization
    graph_inputs = ctx.need_translated().model_proto.graph.input
    static: list[str] = []
    sources: list[str] = []
    for index, axes in declared.items():
        if index >= len(graph_inputs):
            continue
        dims = graph_inputs[index].type.tensor_type.shape.dim
        static.extend(
            f"`{dim.name}` (axis {axis} of input `{graph_inputs[index].name}`, fixed to "
            f"{dims[axis].dim_value})"
            for axis, dim in axes.items()
            if axis < len(dims) and not dims[axis].HasField("dim_param")
        )
        sources.extend(f"{graph_inputs[index].name}.shape[{axis}]" for axis in axes
                       if axis < len(dims) and not dims[axis].HasField("dim_param"))
    if not static:
        return
    # "Declared dynamic", or which entry an export call's converted `dynamic_axes` gave
    conversion = declared_dynamic(ctx, sources)
    headline = (f"{conversion.phrase[:1].upper()}{conversion.phrase[1:]} but static in the "
                f"ONNX model: {', '.join(static)}.")
    if not _locate_specialization(ctx, headline):
        ctx.report("ONNX102", headline + conversion.note, ctx.option_location("dynamic_shapes"),
                   related=conversion.related)


def _locate_specialization(ctx: CheckContext, headline: str) -> bool:
    """Re-capture with every declared dimension strictly dynamic to find the line that
    specialized it (``Dim.AUTO`` lets torch.export do that silently)."""
    report = strict_draft_report(ctx)
    if report is None:
        return False
    failures, files = report
    found = False
    for failure in failures:
        if failure.kind == "GUARD_ADDED" and guards_a_dimension(failure.data):
            report_guard(ctx, failure.data, files, prefix=headline)
            found = True
    return found


def resized_inputs(args: tuple, kwargs: dict[str, Any], declared: DeclaredDims,
                   sizes: dict[str, int]) -> tuple[tuple, dict[str, Any]]:
    """The inputs with each declared dimension at its size in ``sizes`` (by the dimension's
    name), the example's values repeated or cut along it."""
    tensors = [t for t in ort_runner.flat_inputs(args, kwargs) if isinstance(t, torch.Tensor)]
    replacements = {}
    for index, axes in declared.items():
        original = tensors[index]
        shape = list(original.shape)
        for axis, dim in axes.items():
            if axis < len(shape):
                shape[axis] = sizes[dim.name]
        replacements[id(original)] = resized(original, shape)

    def swap(value: Any) -> Any:
        return replacements.get(id(value), value)

    new_args, new_kwargs = torch_compat.tree_map(swap, (args, kwargs))
    return tuple(new_args), dict(new_kwargs)
