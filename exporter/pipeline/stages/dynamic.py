"""Stage 7: when dynamic dimensions are declared, run PyTorch and ONNX Runtime again at other
sizes: the lower bound of each declared range, and a larger size. A declared dimension that
became static, or a failure or wrong result at another size, is reported where it happened; a
failure at a size outside the range the capture narrowed the dimension to confirms that
narrowing (ONNX107) instead of being reported apart. The inputs at another size repeat (or cut)
the example's own values (``example_inputs.resized``), so they stay valid for the model."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from exporter.findings.rules import Severity
from exporter.pipeline import ort_runner
from exporter.pipeline.comparing import compare_outputs
from exporter.pipeline.context import CheckContext
from exporter.pipeline.dynamic_dims import DeclaredDims, Narrowed, declared_dims
from exporter.pipeline.example_inputs import fresh_copy, resized
from exporter.pipeline.locating import report_at_node, report_guard, strictly_dynamic
from exporter.pipeline.stages.base import StageSkipped
from exporter.source.traces import exception_frames
from exporter.toolchain import torch_compat

#: the larger size: the example's size plus this (within the declared maximum)
LARGER_BY = 3
LOWER = "the lower bound of the declared range"
LARGER = "a larger size"


@dataclass(frozen=True)
class SizeRun:
    """One run at other sizes: each declared dimension's size, and why these sizes."""

    sizes: dict[str, int]
    why: str  # "the lower bound of the declared range", "a larger size"

    @property
    def where(self) -> str:
        return " at " + ", ".join(f"{name}={size}" for name, size in self.sizes.items())

    @property
    def situation(self) -> str:
        return f"{self.where} ({self.why}; the example inputs repeated or cut along those axes)"


def run(ctx: CheckContext) -> None:
    loaded = ctx.need_loaded()
    if ctx.need_captured().draft_only:
        # The graph is a draft export's, not a model torch.onnx.export makes: a failure at
        # another size would follow from the capture errors, not show a problem of its own.
        raise StageSkipped("capture failed: the draft export's graph is not the exporter's "
                           "model (see the capture errors)")
    declared = declared_dims(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes)
    if not declared:
        raise StageSkipped("no dynamic dimensions declared")
    inputs = [t for t in ort_runner.flat_inputs(loaded.args, loaded.kwargs)
              if isinstance(t, torch.Tensor)]
    _report_static_dims(ctx, declared)
    runs = size_runs(inputs, declared)
    if not runs:
        raise StageSkipped("no other size within the declared ranges")
    for size_run in runs:
        if not _run_at(ctx, declared, size_run):
            return


def _run_at(ctx: CheckContext, declared: DeclaredDims, size_run: SizeRun) -> bool:
    """Run at ``size_run``'s sizes in both runtimes; False when a problem was reported."""
    loaded = ctx.need_loaded()
    new_args, new_kwargs = _resized_inputs(loaded.args, loaded.kwargs, declared, size_run.sizes)
    situation = size_run.situation
    eager_args, eager_kwargs = fresh_copy(new_args, new_kwargs)
    try:
        with torch.no_grad():
            eager = loaded.model(*eager_args, **eager_kwargs)
    except Exception as error:
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if size_run.why != LARGER:
            # The model itself does not take the smallest declared size (a window, a kernel
            # larger than 2): not a problem of the export; the larger size is still run.
            ctx.summary.setdefault("dynamic_not_run", []).append(
                f"PyTorch itself fails{situation}: {reason}")
            return True
        if any(d.rule == "ONNX102" for d in ctx.diagnostics):
            raise StageSkipped(f"PyTorch itself fails{situation} (see ONNX102): {reason}") from None
        ctx.report("ONNX403", f"PyTorch itself fails{situation}: {reason}",
                   ctx.map_frames(exception_frames(error)))
        return False
    before = len(ctx.diagnostics)
    try:
        outputs = ort_runner.run(ctx.need_ran().session,
                                 ort_runner.flat_inputs(*fresh_copy(new_args, new_kwargs)))
    except Exception as error:
        if _confirm_narrowing(ctx, size_run, f"ONNX Runtime fails: {str(error).splitlines()[0]}"):
            return False
        specialized = [d.location for d in ctx.diagnostics if d.rule == "ONNX102"]
        report_at_node(ctx, "ONNX403", f"ONNX Runtime fails{situation}", str(error),
                       fallback=specialized[-1] if specialized else None)
        if not specialized:
            _locate_specialization(ctx, "The exported graph depends on the example size:")
        return False
    if compare_outputs(ctx, eager, outputs, new_args, new_kwargs, rule="ONNX403",
                       situation=situation):
        return True
    mismatch = ctx.diagnostics[before].message if len(ctx.diagnostics) > before else ""
    if _confirm_narrowing(ctx, size_run, mismatch, drop_from=before):
        return False
    _locate_specialization(ctx, "The exported graph depends on the example size:")
    return False


def _confirm_narrowing(ctx: CheckContext, size_run: SizeRun, what: str,
                       drop_from: int | None = None) -> bool:
    """A failure at a size outside the range the capture narrowed a dimension to is that
    narrowing's consequence: its ONNX107 says so (and is an error, whatever was declared)
    instead of a separate ONNX403."""
    narrowed = [n for n in ctx.need_captured().narrowed
                if n.dim.name in size_run.sizes and not n.valid.holds(size_run.sizes[n.dim.name])]
    if not narrowed:
        return False
    if drop_from is not None:
        del ctx.diagnostics[drop_from:]
    what = what.replace(size_run.situation, "").strip()
    for item in narrowed:
        _upgrade(ctx, item, f" Confirmed{size_run.where} ({size_run.why}): {what}")
    return True


def _upgrade(ctx: CheckContext, narrowed: Narrowed, confirmation: str) -> None:
    index = next((i for i, d in enumerate(ctx.diagnostics) if d is narrowed.diagnostic), None)
    if index is None:
        return
    diagnostic = ctx.diagnostics[index]
    ctx.diagnostics[index] = replace(diagnostic, message=diagnostic.message + confirmation,
                                     severity=Severity.ERROR,
                                     data={**diagnostic.data, "confirmed": True})


def size_runs(inputs: list[torch.Tensor], declared: DeclaredDims) -> list[SizeRun]:
    """The lower bound of every declared range, then a larger size; a run that would feed
    only the example's sizes is left out."""
    example: dict[str, int] = {}
    lower: dict[str, int] = {}
    larger: dict[str, int] = {}
    for index, axes in declared.items():
        for axis, dim in axes.items():
            if dim.name in example or axis >= inputs[index].dim():
                continue
            size = int(inputs[index].shape[axis])
            example[dim.name] = size
            lower[dim.name] = dim.low
            high = dim.high if not math.isinf(dim.high) else size + LARGER_BY
            larger[dim.name] = int(min(size + LARGER_BY, high))
    return [SizeRun(sizes, why) for sizes, why in ((lower, LOWER), (larger, LARGER))
            if sizes != example]


def _report_static_dims(ctx: CheckContext, declared: DeclaredDims) -> None:
    if any(d.rule == "ONNX102" for d in ctx.diagnostics):
        return  # the capture stage already located the specialization
    graph_inputs = ctx.need_translated().model_proto.graph.input
    static: list[str] = []
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
    if not static:
        return
    headline = (f"Declared dynamic but static in the ONNX model: {', '.join(static)}.")
    if not _locate_specialization(ctx, headline):
        ctx.report("ONNX102", headline, ctx.option_location("dynamic_shapes"))


def _locate_specialization(ctx: CheckContext, headline: str) -> bool:
    """Re-capture with every declared dimension strictly dynamic to find the line that
    specialized it (``Dim.AUTO`` lets torch.export do that silently)."""
    loaded = ctx.need_loaded()
    strict_spec = strictly_dynamic(loaded.model, loaded.args, loaded.kwargs,
                                    loaded.dynamic_shapes)
    args, kwargs = fresh_copy(loaded.args, loaded.kwargs)
    try:
        program = torch.export.draft_export(loaded.model, args, kwargs,
                                            dynamic_shapes=strict_spec, strict=False)
    except Exception:
        logging.getLogger(__name__).debug("re-capture failed", exc_info=True)
        return False
    report = torch_compat.draft_failures(program)
    if report is None:
        return False
    failures, files = report
    found = False
    for failure in failures:
        if failure.kind == "GUARD_ADDED":
            report_guard(ctx, failure.data, files, prefix=headline)
            found = True
    return found


def _resized_inputs(args: tuple, kwargs: dict[str, Any], declared: DeclaredDims,
                    sizes: dict[str, int]) -> tuple[tuple, dict[str, Any]]:
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
