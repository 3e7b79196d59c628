"""Stage 7: when dynamic dimensions are declared, run PyTorch and ONNX Runtime again at another
size. A declared dimension that became static, or a failure or wrong result at the other size,
is reported where it happened. The inputs at the other size repeat the example's own values
(``example_inputs.resized``), so they stay valid for the model."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch

from exporter import ort_runner, torch_compat
from exporter.comparing import compare_outputs
from exporter.context import CheckContext
from exporter.example_inputs import fresh_copy, resized
from exporter.locating import report_at_node, report_guard
from exporter.source_map import exception_frames
from exporter.stages.base import StageSkipped

# flat tensor index -> {axis: dimension name}
DeclaredDims = dict[int, dict[int, str]]


def run(ctx: CheckContext) -> None:
    loaded = ctx.need_loaded()
    declared = declared_dims(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes)
    if not declared:
        raise StageSkipped("no dynamic dimensions declared")
    inputs = [t for t in ort_runner.flat_inputs(loaded.args, loaded.kwargs)
              if isinstance(t, torch.Tensor)]
    _report_static_dims(ctx, declared)
    sizes = _other_sizes(inputs, declared)
    new_args, new_kwargs = _resized_inputs(loaded.args, loaded.kwargs, declared, sizes)
    situation = (" at another size (" + ", ".join(f"{n}={s}" for n, s in sizes.items())
                 + "; the example inputs repeated along those axes)")
    eager_args, eager_kwargs = fresh_copy(new_args, new_kwargs)
    try:
        with torch.no_grad():
            eager = loaded.model(*eager_args, **eager_kwargs)
    except Exception as error:
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if any(d.rule == "ONNX102" for d in ctx.diagnostics):
            raise StageSkipped(f"PyTorch itself fails{situation} (see ONNX102): {reason}") from None
        ctx.report("ONNX403", f"PyTorch itself fails{situation}: {reason}",
                   ctx.map_frames(exception_frames(error)))
        return
    try:
        outputs = ort_runner.run(ctx.need_ran().session,
                                 ort_runner.flat_inputs(*fresh_copy(new_args, new_kwargs)))
    except Exception as error:
        specialized = [d.location for d in ctx.diagnostics if d.rule == "ONNX102"]
        report_at_node(ctx, "ONNX403", f"ONNX Runtime fails{situation}", str(error),
                       fallback=specialized[-1] if specialized else None)
        return
    if not compare_outputs(ctx, eager, outputs, new_args, new_kwargs, rule="ONNX403",
                           situation=situation):
        _locate_specialization(ctx, "The exported graph depends on the example size:")


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
            f"`{name}` (axis {axis} of input `{graph_inputs[index].name}`, fixed to "
            f"{dims[axis].dim_value})"
            for axis, name in axes.items()
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
    strict_spec = _strictly_dynamic(loaded.model, loaded.args, loaded.kwargs,
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


def _strictly_dynamic(model: Any, args: tuple, kwargs: dict[str, Any], spec: Any) -> Any:
    def convert(value: Any, sub_spec: Any) -> Any:
        if sub_spec is None:
            return None
        if isinstance(value, torch.Tensor):
            if isinstance(sub_spec, dict):
                return {axis: None if d is None else torch.export.Dim.DYNAMIC
                        for axis, d in sub_spec.items()}
            return [None if d is None else torch.export.Dim.DYNAMIC for d in sub_spec]
        if isinstance(value, dict) and isinstance(sub_spec, dict):
            return {key: convert(value.get(key), item) for key, item in sub_spec.items()}
        if isinstance(value, (list, tuple)) and isinstance(sub_spec, (list, tuple)):
            return type(sub_spec)(convert(v, s) for v, s in zip(value, sub_spec))
        return sub_spec

    bound = inspect.signature(model.forward).bind(*args, **kwargs)
    values = list(bound.arguments.items())
    if isinstance(spec, dict) and not all(isinstance(k, int) for k in spec):
        return {name: convert(value, spec.get(name)) for name, value in values if name in spec}
    return type(spec)(convert(value, s) for (_, value), s in zip(values, spec))


def declared_dims(model: Any, args: tuple, kwargs: dict[str, Any], spec: Any) -> DeclaredDims:
    """Which axes of which flattened input tensors ``dynamic_shapes`` declares dynamic."""
    if spec is None:
        return {}
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {}
    values = list(bound.arguments.items())
    if isinstance(spec, dict) and not all(isinstance(k, int) for k in spec):
        pairs = [(value, spec.get(name)) for name, value in values]
    else:
        pairs = list(zip([value for _, value in values], spec))
    by_identity: dict[int, dict[int, str]] = {}
    for value, sub_spec in pairs:
        _walk(value, sub_spec, by_identity)
    tensors = [t for t in ort_runner.flat_inputs(args, kwargs) if isinstance(t, torch.Tensor)]
    return {index: by_identity[id(t)] for index, t in enumerate(tensors) if id(t) in by_identity}


def _walk(value: Any, spec: Any, found: dict[int, dict[int, str]]) -> None:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        axes = spec.items() if isinstance(spec, dict) else enumerate(spec)
        dims = {int(axis): _dim_name(dim, axis) for axis, dim in axes if dim is not None}
        if dims:
            found[id(value)] = dims
    elif isinstance(value, dict) and isinstance(spec, dict):
        for key, item in value.items():
            _walk(item, spec.get(key), found)
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for item, sub_spec in zip(value, spec):
            _walk(item, sub_spec, found)


def _dim_name(dim: Any, axis: int) -> str:
    if isinstance(dim, str):
        return dim
    return str(getattr(dim, "__name__", None) or f"dim{axis}")


def _other_sizes(inputs: list[torch.Tensor], declared: DeclaredDims) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for index, axes in declared.items():
        for axis, name in axes.items():
            if name not in sizes and axis < inputs[index].dim():
                sizes[name] = int(inputs[index].shape[axis]) + 3
    return sizes


def _resized_inputs(args: tuple, kwargs: dict[str, Any], declared: DeclaredDims,
                    sizes: dict[str, int]) -> tuple[tuple, dict[str, Any]]:
    tensors = [t for t in ort_runner.flat_inputs(args, kwargs) if isinstance(t, torch.Tensor)]
    replacements = {}
    for index, axes in declared.items():
        original = tensors[index]
        shape = list(original.shape)
        for axis, name in axes.items():
            if axis < len(shape):
                shape[axis] = sizes[name]
        replacements[id(original)] = resized(original, shape)

    def swap(value: Any) -> Any:
        return replacements.get(id(value), value)

    new_args, new_kwargs = torch_compat.tree_map(swap, (args, kwargs))
    return tuple(new_args), dict(new_kwargs)
