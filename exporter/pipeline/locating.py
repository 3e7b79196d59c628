"""Locating problems that several stages report: at the ONNX node an error names
(validate, runtime, dynamic), and at the line that specialized a declared dynamic dimension
(capture, dynamic: ONNX102, with torch's suggested fix to try)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, FindingData, Location, Related
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.pipeline.context import CheckContext
from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, find_nodes, metadata, names_in_message
from exporter.source.traces import Frame
from exporter.toolchain import torch_compat


def report_at_node(
    ctx: CheckContext, rule: str, headline: str, message: str, fallback: Location | None = None,
    hint: str | None = None,
) -> None:
    """Report ``message`` at the source line of every node it names (or at the target)."""
    proto = ctx.translated.model_proto if ctx.translated is not None else None
    name, op_type = names_in_message(message)
    nodes = find_nodes(proto, name, op_type) if proto is not None else []
    detail = short_message(message)
    reported = False
    for node in nodes:
        where = ctx.map_stack_trace(metadata(node).get(STACK_TRACE_KEY), hint=node.op_type)
        if where is None:
            continue
        ctx.report(rule, f"{headline} at ONNX node `{node.name}` ({node.op_type}): {detail}",
                   where, hint=hint, data=FindingData(onnx_node=node.name, op_type=node.op_type))
        reported = True
    if not reported:
        ctx.report(rule, f"{headline}: {detail}", fallback, hint=hint)

_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : (\w+) : ")


# where a sentence ends: its stop, then a space (not `Erf(13).`'s dot inside a name)
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def short_message(message: str, limit: int = 300) -> str:
    """The toolchain's message on one line; a long one keeps its whole sentences that fit
    (at least its first, however long): never cut mid-sentence, what was left out marked."""
    text = " ".join(line.strip() for line in message.splitlines() if line.strip())
    text = _ORT_PREFIX.sub(lambda m: f"{m[1]}: ", text)
    if len(text) <= limit:
        return text
    ends = [match.end() for match in _SENTENCE_END.finditer(text)]
    cut = max((end for end in ends if end <= limit), default=ends[0] if ends else len(text))
    return text if cut >= len(text) else f"{text[:cut]} (…)"


def stack_frames(stack: list[dict[str, Any]], files: dict[int, str]) -> list[Frame]:
    frames = []
    for entry in stack:
        key = entry.get("filename")
        filename = files.get(key, key) if isinstance(key, int) else key
        if isinstance(filename, str):
            frames.append(Frame(Path(filename), int(entry.get("line", 0)), entry.get("name", "")))
    return frames


def pretty_source(source: str) -> str:
    """``L['x'].size()[0]`` → ``x.shape[0]``; ``L['args'][0]`` → ``args[0]``."""
    text = re.sub(r"L\['([^']+)'\]", r"\1", source)
    text = re.sub(r"\['([A-Za-z_]\w*)'\]", r"['\1']", text)
    return text.replace(".size()", ".shape")


def guards_a_dimension(data: dict[str, Any]) -> bool:
    """Whether a guard a draft export added constrains an input's size. A guard on unbacked
    values only (``Ne(u0, 1)``, from a data-dependent branch) fixes no dimension: its cause is
    the data-dependent expression (ONNX101), not a specialization (ONNX102); nor does a guard
    true at every size (``((s77//2)) <= s77``, from slicing ``x[: x.shape[0] // 2]``)."""
    return bool(data.get("symbol_to_sources")) \
        and not holds_at_every_size(str(data.get("expr") or ""))


_SIZE_SYMBOL = re.compile(r"\bs\d+\b")


def holds_at_every_size(expression: str) -> bool:
    """Whether torch's guard ``expression`` over sizes (``s0``, ``s77``) is true whatever
    non-negative integers they are; False when it cannot be decided."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    names = set(_SIZE_SYMBOL.findall(expression))
    if not names or re.search(r"\bu\d+\b", expression):
        return False
    symbols = {name: sympy.Symbol(name, integer=True, nonnegative=True) for name in names}
    from torch.utils._sympy import functions

    known = {name: getattr(functions, name) for name in ("FloorDiv", "PythonMod", "Max", "Min")
             if hasattr(functions, name)}
    try:
        relation = sympy.sympify(expression, locals={**known, **symbols})
        if relation is sympy.true:
            return True
        bounds = bound_sympy(relation, {symbol: ValueRanges(0, int_oo)
                                        for symbol in symbols.values()})
    except Exception:  # a function of torch's that sympy does not know: keep the guard
        return False
    return bool(bounds.lower == sympy.true)


def report_guard(ctx: CheckContext, data: dict[str, Any], files: dict[int, str],
                 prefix: str = "") -> Diagnostic:
    """ONNX102 at the line where a declared dynamic dimension got specialized."""
    where = ctx.map_frames(stack_frames(data.get("user_stack") or data.get("stack") or [], files))
    sources = data.get("symbol_to_sources") or {}
    described = ", ".join(f"`{pretty_source(src)}`" for src in sources.values()) or "a dimension"
    suggestion = data.get("new_dynamic_shapes")
    declared = declared_dynamic(ctx, [pretty_source(src) for src in sources.values()])
    message = (f"{prefix + ' ' if prefix else ''}{described}, {declared.phrase}, is specialized "
               f"or constrained here (guard `{data.get('expr')}`): the exported graph would only "
               f"accept the example size.{declared.note}")
    diagnostic = ctx.report("ONNX102", message, where, related=declared.related)
    # torch's suggested dynamic_shapes, and the specialized dimensions made static: edits
    # of the pragma's dynamic_shapes, tried before they are shown (docs/fixes.md)
    option = ctx.target.options.get("dynamic_shapes")
    if option is None:
        return diagnostic
    answers = (diagnostic.rule, diagnostic.location.range)
    if suggestion is not None:
        source = _suggestion_source(suggestion)
        ctx.fix_candidates.append(FixCandidate(
            "torch:suggested-dynamic-shapes", f"Use torch's suggested `dynamic_shapes={source}`",
            "torch", (FixEdit(ctx.target.path, option.range, source),), answers))
    static = _without_dims(ctx, list(sources.values()))
    if static is not None:
        ctx.fix_candidates.append(FixCandidate(
            "onnxlens:static-dimension", f"Make {described} static (the code needs one size)",
            "onnxlens", (FixEdit(ctx.target.path, option.range, static),), answers))
    return diagnostic


@dataclass(frozen=True)
class Declared:
    """How a dynamic dimension came to be dynamic, for a message: ``phrase`` replaces
    "declared dynamic", ``note`` (a sentence, with its leading space, or "") and ``related``
    say what torch's conversion of an export call's ``dynamic_axes`` moved
    (exporter/pipeline/converted_axes.py)."""

    phrase: str = "declared dynamic"
    note: str = ""
    related: tuple[Related, ...] = ()


def declared_dynamic(ctx: CheckContext, sources: list[str]) -> Declared:
    """For the dimensions ``sources`` (``x.shape[1]``): "declared dynamic", or, where the
    conversion of the call's ``dynamic_axes`` gave their input another input's entry, which."""
    converted = ctx.loaded.converted_axes if ctx.loaded is not None else None
    if converted is None:
        return Declared()
    phrases = [converted.declared(source) for source in sources] or [converted.declared(None)]
    phrase = next((p for p in phrases if p != Declared.phrase), Declared.phrase)
    return Declared(phrase, f" {converted.note}", converted.related)


_SOURCE = re.compile(r"L\['(\w+)'\]((?:\[(?:'[^']*'|\d+)\])*)\.size\(\)\[(\d+)\]")


@dataclass(frozen=True)
class BoundedDim:
    """A dimension declared over a range, for an edited ``dynamic_shapes``:
    ``torch.export.Dim(name, min=..., max=...)``."""

    name: str
    low: int | None
    high: int | None


def _without_dims(ctx: CheckContext, sources: list[str]) -> str | None:
    """The pragma's dynamic_shapes with the specialized dimensions removed, as source."""
    return dynamic_shapes_with(ctx, dict.fromkeys(sources))


def dynamic_shapes_with(ctx: CheckContext, changes: dict[str, BoundedDim | None]) -> str | None:
    """The pragma's dynamic_shapes as source, with the dimension of each source
    (``L['x'].size()[1]``) of ``changes`` removed (None) or declared over a range; None when
    a source is not one of the pragma's."""
    import inspect

    def thaw(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [thaw(item) for item in value]
        if isinstance(value, dict):
            return {key: thaw(item) for key, item in value.items()}
        return value

    loaded = ctx.need_loaded()
    spec = thaw(loaded.dynamic_shapes)
    try:
        names = list(inspect.signature(loaded.model.forward)
                     .bind(*loaded.args, **loaded.kwargs).arguments)
    except (TypeError, ValueError):
        return None
    for source, change in changes.items():
        match = _SOURCE.fullmatch(source)
        if match is None or match[1] not in names:
            return None
        root: Any = spec
        key: Any = match[1] if isinstance(spec, dict) else names.index(match[1])
        steps = [key] + [int(s) if s.isdigit() else s.strip("'")
                         for s in re.findall(r"\[('[^']*'|\d+)\]", match[2])]
        try:
            for step in steps[:-1]:
                root = root[step]
            leaf = root[steps[-1]]
            axis = int(match[3])
            if isinstance(leaf, dict) and change is not None:
                leaf[axis] = change
            elif isinstance(leaf, dict):
                leaf.pop(axis, None)
                if not leaf:
                    root[steps[-1]] = None
            elif isinstance(leaf, list):
                leaf[axis] = change
            else:
                return None
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(spec, (list, dict)) and all(
            v is None for v in (spec.values() if isinstance(spec, dict) else spec)):
        return "None"
    return _suggestion_source(tuple(spec) if isinstance(loaded.dynamic_shapes, tuple) else spec)


def _suggestion_source(suggestion: Any) -> str:
    """Render torch's suggested dynamic shapes as pragma source text."""

    def render(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ", ".join(f"{render(k)}: {render(v)}" for k, v in value.items()) + "}"
        if isinstance(value, (list, tuple)):
            inner = ", ".join(render(v) for v in value)
            if isinstance(value, tuple):
                return f"({inner},)" if len(value) == 1 else f"({inner})"
            return f"[{inner}]"
        if isinstance(value, BoundedDim):
            bounds = "".join(f", {key}={bound}" for key, bound in
                             (("min", value.low), ("max", value.high)) if bound is not None)
            return f"torch.export.Dim({value.name!r}{bounds})"
        if torch_compat.is_dim_hint(value):
            return f"torch.export.Dim.{torch_compat.dim_hint_name(value)}"
        name = type(value).__name__
        if name in ("_Dim", "Dim") or (hasattr(value, "__name__") and "Dim" in repr(type(value))):
            return f"torch.export.Dim({value.__name__!r})"
        return repr(value)

    return render(suggestion)


def strictly_dynamic(model: Any, args: tuple, kwargs: dict[str, Any], spec: Any) -> Any:
    """``spec`` with every declared dimension ``Dim.DYNAMIC`` (no range, no ``Dim.AUTO``):
    a capture with it reports each guard that specializes or bounds a dimension (which
    ``Dim.AUTO`` and torch.onnx's refined shapes accept silently)."""
    import inspect

    import torch

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
