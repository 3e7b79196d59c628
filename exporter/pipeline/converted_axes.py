"""What torch's conversion of a call's ``dynamic_axes`` gave each input (docs/export-calls.md).

``torch.onnx.export`` converts ``dynamic_axes`` to ``dynamic_shapes``
(``_dynamic_shapes.from_dynamic_axes_to_dynamic_shapes``, the same in every supported torch) by
position, not by name: it lists the entries of ``dynamic_axes`` in their order (outputs left
out), then the ``input_names`` that have none, and pairs that list with ``forward``'s inputs,
flattened, in theirs. When the orders differ, an input gets another input's entry:
segment-anything's export (``dynamic_axes`` for ``point_coords`` and ``point_labels``,
``input_names`` starting with ``image_embeddings``) makes ``image_embeddings.shape[1]`` dynamic,
which nobody declared, and ``point_labels`` static. A message that would call such a
dimension "declared dynamic" says instead which entry the conversion gave its input, and every
message about a dynamic dimension of such a call says what the conversion moved."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from exporter.findings.diagnostics import Location, Related
from exporter.source.export_calls import export_calls
from exporter.source.python_syntax import parse_python
from exporter.source.text import Sources
from exporter.toolchain import torch_compat


@dataclass(frozen=True)
class Entry:
    """One entry of ``dynamic_axes`` (or an ``input_names`` name without one)."""

    key: str
    axes: Any  # as written: {1: "num_points"}, [0, 1], None

    @property
    def dynamic(self) -> frozenset[int]:
        if isinstance(self.axes, dict):
            return frozenset(int(axis) for axis in self.axes)
        if isinstance(self.axes, (list, tuple)):
            return frozenset(int(axis) for axis in self.axes)
        return frozenset()

    def __str__(self) -> str:
        return f"`{self.key!r}: {self.axes!r}`"


@dataclass(frozen=True)
class Moved:
    """An input the conversion gave other dynamic axes than its own entry declares."""

    input: str  # as torch's sources name it: ``image_embeddings``, ``x[0]``
    named: str | None  # its name in ``input_names``, when that differs
    given: Entry  # the entry the conversion gave it
    own: Entry | None  # the entry the user wrote for it (by ``input_names`` or its name)

    @property
    def label(self) -> str:
        return f"`{self.input}`" + (f" (`input_names`: `{self.named!r}`)" if self.named else "")


@dataclass(frozen=True)
class ConvertedAxes:
    """The inputs torch's conversion of ``dynamic_axes`` gave another input's entry."""

    moved: tuple[Moved, ...]
    argument: Location | None = None  # the call's ``dynamic_axes=`` argument, when found

    def declared(self, source: str | None) -> str:
        """How the dimension ``source`` (``image_embeddings.shape[1]``, in a message) came to
        be dynamic: "declared dynamic", or the entry the conversion gave its input."""
        for moved in self.moved:
            axis = _axis_of(source, moved.input)
            if axis is None and moved.named is not None:  # an ONNX input's name
                axis = _axis_of(source, moved.named)
            if axis is not None and axis in moved.given.dynamic \
                    and (moved.own is None or axis not in moved.own.dynamic):
                return (f"dynamic (only because torch's conversion of `dynamic_axes` gave "
                        f"{moved.label} the entry {moved.given})")
        return "declared dynamic"

    @property
    def note(self) -> str:
        """What the conversion moved, as a sentence."""
        parts = []
        for moved in self.moved:
            given = str(moved.given) if moved.given.dynamic else "no dynamic axis"
            own = f" instead of {moved.own}" if moved.own is not None and moved.own.dynamic \
                else ""
            parts.append(f"{moved.label} got {given}{own}")
        listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        return ("torch.onnx.export converts `dynamic_axes` by position, not by name: its "
                "entries in order, then the other `input_names`, go to `forward`'s inputs in "
                f"order, so {listed}. Give `dynamic_shapes` keyed by `forward`'s parameter "
                "names instead.")

    @property
    def related(self) -> tuple[Related, ...]:
        if self.argument is None:
            return ()
        return (Related(self.argument, "the `dynamic_axes` torch.onnx.export converted by "
                                       "position"),)


def converted_axes(call: Any, model: torch.nn.Module, args: tuple, kwargs: dict[str, Any],
                   sources: Sources) -> ConvertedAxes | None:
    """What the conversion of ``call``'s ``dynamic_axes`` moved (an ``InterceptedCall``, its
    inputs as torch splits them); None when it converts nothing or moves nothing."""
    dynamic_axes = call["dynamic_axes"]
    if call["dynamic_shapes"] is not None or not isinstance(dynamic_axes, dict):
        return None
    outputs = set(call["output_names"] or ())
    input_names = list(call["input_names"] or ())
    # torch's order: the entries (outputs left out), then the input names without one
    entries = [Entry(str(key), axes) for key, axes in dynamic_axes.items() if key not in outputs]
    entries += [Entry(name, None) for name in input_names
                if name not in dynamic_axes and name not in outputs]
    leaves = _named_leaves(model, args, kwargs)
    if leaves is None or len(leaves) != len(entries):
        return None  # not as torch pairs them: nothing to explain
    written = {str(key): Entry(str(key), axes) for key, axes in dynamic_axes.items()
               if key not in outputs}
    moved = []
    for index, ((name, is_parameter), given) in enumerate(zip(leaves, entries)):
        own_name = input_names[index] if index < len(input_names) \
            else (name if is_parameter else None)
        own = written.get(own_name) if own_name is not None else None
        if given.dynamic != (own.dynamic if own is not None else frozenset()):
            moved.append(Moved(name, own_name if own_name not in (None, name) else None,
                               given, own))
    if not moved:
        return None
    return ConvertedAxes(tuple(moved), _argument(call, sources))


def _named_leaves(model: torch.nn.Module, args: tuple,
                  kwargs: dict[str, Any]) -> list[tuple[str, bool]] | None:
    """``forward``'s inputs flattened as torch flattens them, each named as torch's sources
    name it, and whether it is a whole parameter; None when the names cannot be told."""
    try:
        parameters = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return None
    named: list[tuple[str, bool]] = []
    for index, parameter in enumerate(parameters):
        if index < len(args):
            value = args[index]
        elif parameter in kwargs:
            value = kwargs[parameter]
        else:
            continue
        leaves = _leaf_names(parameter, value)
        if len(leaves) != len(torch_compat.tree_leaves(value)):
            return None  # a container torch flattens otherwise (a registered pytree node)
        named += [(leaf, leaf == parameter) for leaf in leaves]
    return named


def _leaf_names(name: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaf_names(f"{name}[{key!r}]",
                                                                           item)]
    if isinstance(value, (list, tuple)):
        return [leaf for index, item in enumerate(value)
                for leaf in _leaf_names(f"{name}[{index}]", item)]
    return [name]


def _axis_of(source: str | None, input_name: str) -> int | None:
    """The axis of ``input_name`` that ``source`` (``x.shape[1]``) names, if it does."""
    if source is None:
        return None
    prefix = f"{input_name}.shape["
    if not source.startswith(prefix) or not source.endswith("]"):
        return None
    try:
        return int(source[len(prefix):-1])
    except ValueError:
        return None


def _argument(call: Any, sources: Sources) -> Location | None:
    """The ``dynamic_axes=`` argument of the ``torch.onnx.export`` call that was made."""
    if call.caller is None:
        return None
    path, line = call.caller
    try:
        tree = parse_python(sources.read(path))
    except (OSError, SyntaxError, ValueError):
        return None
    lines = list(sources.lines(path))
    for found in export_calls(path, tree, lines):
        argument = found.keywords.get("dynamic_axes")
        if argument is not None and found.range.start.line <= line <= found.range.end.line:
            return Location(path, argument.range)
    return None

