"""The dynamic dimensions of a target: which input axes its ``dynamic_shapes`` declares
dynamic and over which range, and over which range the captured graph is valid for each.

torch.onnx.export refines the user's ``dynamic_shapes`` from torch.export's suggested fixes when
a guard constrains a dimension (``_capture_strategies``): a ``Dim("seq")`` whose code branches on
``seq >= 10`` is exported as valid for ``[10, ∞)`` without a word, and the ONNX model, which keeps
``seq`` dynamic and checks nothing, runs and gives wrong numbers below 10. The captured
program's ``range_constraints`` still say so; comparing them with the declared range is how the
soundness check finds it (docs/rules/ONNX107.md).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

import torch

from exporter.findings.diagnostics import Diagnostic
from exporter.pipeline import ort_runner
from exporter.toolchain import torch_compat

#: torch.export treats sizes 0 and 1 apart (0/1 specialization); a declared range is checked
#: from this size up, and the run at the lower bound never goes below it.
SMALLEST_CHECKED_SIZE = 2


@dataclass(frozen=True)
class DeclaredDim:
    """One axis of one input tensor that ``dynamic_shapes`` declares dynamic."""

    name: str  # the Dim's or string's name, or ``dim<axis>`` for Dim.AUTO / Dim.DYNAMIC
    low: int  # the declared range, sizes 0 and 1 left out (SMALLEST_CHECKED_SIZE)
    high: float  # math.inf when unbounded
    # True where the user named the dimension (``Dim("seq")``, ``"seq"``, ``Dim.DYNAMIC``);
    # False for ``Dim.AUTO``, where the user let torch decide.
    named: bool
    # whether the declared range holds 1 (a string, a hint, a Dim with min 0 or 1): the usual
    # deployment batch, which the dynamic stage runs although torch.export treats it apart
    takes_one: bool = True


@dataclass(frozen=True)
class ValidRange:
    """The sizes the captured graph is valid for along one declared axis."""

    low: float
    high: float
    symbol: str = ""  # torch's symbol for the axis's size (``s77``), when it is one symbol

    def holds(self, size: int) -> bool:
        return self.low <= size <= self.high


@dataclass(frozen=True)
class Narrowed:
    """A declared dimension that the captured graph is valid for over a narrower range."""

    dim: DeclaredDim
    valid: ValidRange
    # the ONNX107 reported for it, a warning that says no run confirmed it; the dynamic stage
    # replaces its last sentence by what the runs outside the valid range showed
    diagnostic: Diagnostic
    stated: str  # the message without that last sentence


def outside_sizes(dim: DeclaredDim, valid: ValidRange) -> list[int]:
    """The sizes just outside the range the graph holds for, within the declared range:
    where a narrowing shows (the guard that excludes them, the runs that confirm it)."""
    sizes = []
    if valid.low > dim.low:
        sizes.append(int(valid.low) - 1)
    if valid.high < dim.high and not math.isinf(valid.high):
        sizes.append(int(valid.high) + 1)
    return sizes


# flat tensor index (ort_runner.flat_inputs, tensors only) -> {axis: the declared dimension}
DeclaredDims = dict[int, dict[int, DeclaredDim]]


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
    by_identity: dict[int, dict[int, DeclaredDim]] = {}
    for value, sub_spec in pairs:
        _walk(value, sub_spec, by_identity)
    tensors = [t for t in ort_runner.flat_inputs(args, kwargs) if isinstance(t, torch.Tensor)]
    return {index: by_identity[id(t)] for index, t in enumerate(tensors) if id(t) in by_identity}


def _walk(value: Any, spec: Any, found: dict[int, dict[int, DeclaredDim]]) -> None:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        axes = spec.items() if isinstance(spec, dict) else enumerate(spec)
        dims = {int(axis): _declared(dim, int(axis)) for axis, dim in axes
                if dim is not None and not isinstance(dim, int) and not _is_static(dim)}
        if dims:
            found[id(value)] = dims
    elif isinstance(value, dict) and isinstance(spec, dict):
        for key, item in value.items():
            _walk(item, spec.get(key), found)
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for item, sub_spec in zip(value, spec):
            _walk(item, sub_spec, found)


def _is_static(dim: Any) -> bool:
    return torch_compat.is_dim_hint(dim) and torch_compat.dim_hint_name(dim) == "STATIC"


def _declared(dim: Any, axis: int) -> DeclaredDim:
    if isinstance(dim, str):
        return DeclaredDim(dim, SMALLEST_CHECKED_SIZE, math.inf, named=True)
    if torch_compat.is_dim_hint(dim):
        return DeclaredDim(f"dim{axis}", SMALLEST_CHECKED_SIZE, math.inf,
                           named=torch_compat.dim_hint_name(dim) != "AUTO")
    low, high = _number(getattr(dim, "min", None), 0), _number(getattr(dim, "max", None), math.inf)
    return DeclaredDim(str(getattr(dim, "__name__", None) or f"dim{axis}"),
                       max(int(low), SMALLEST_CHECKED_SIZE), high, named=True,
                       takes_one=low <= 1 <= high)


def _number(value: Any, default: float) -> float:
    """A bound of torch's (an int, sympy's ``int_oo``, None) as a number."""
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if not math.isnan(number) else default


def valid_ranges(program: Any, args: tuple, kwargs: dict[str, Any]) -> dict[int, dict[int, Any]]:
    """flat tensor index -> {axis: ValidRange, or the int the axis was fixed to} of the
    captured graph, from its input placeholders and ``range_constraints``. Empty when the
    placeholders cannot be paired with the inputs."""
    constraints = getattr(program, "range_constraints", {}) or {}
    found: dict[int, dict[int, Any]] = {}
    for index, (_, placeholder) in enumerate(_tensor_placeholders(program, args, kwargs)):
        shape = getattr(placeholder.meta.get("val"), "shape", None)
        if shape is not None:
            found[index] = {axis: _axis_range(size, constraints)
                            for axis, size in enumerate(shape)}
    return found


def _tensor_placeholders(program: Any, args: tuple, kwargs: dict[str, Any]
                         ) -> list[tuple[torch.Tensor, torch.fx.Node]]:
    """Each flat input tensor with the graph's placeholder for it (the program's user inputs
    are the flattened inputs, a constant among them as a ``ConstantArgument``); empty when
    they cannot be paired."""
    specs = [spec for spec in program.graph_signature.input_specs
             if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    leaves = torch_compat.tree_leaves((args, kwargs))
    if len(specs) != len(leaves):
        return []
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    pairs = []
    for leaf, spec in zip(leaves, specs):
        if not isinstance(leaf, torch.Tensor):
            continue
        node = placeholders.get(getattr(spec.arg, "name", ""))
        if node is None:
            return []
        pairs.append((leaf, node))
    return pairs


def declared_in_program(program: Any, args: tuple, kwargs: dict[str, Any]) -> DeclaredDims:
    """The dynamic dimensions of an ExportedProgram an export call exports as it is (the user
    declared them to ``torch.export.export``): each input axis its graph keeps as one symbol,
    over the range of its ``range_constraints``, named after the first input axis of that
    symbol (axes of one symbol are resized together)."""
    names = [node.name for _, node in _tensor_placeholders(program, args, kwargs)]
    by_symbol: dict[str, str] = {}
    found: DeclaredDims = {}
    for index, axes in valid_ranges(program, args, kwargs).items():
        dims = {axis: DeclaredDim(
                    by_symbol.setdefault(valid.symbol, f"{names[index]}.shape[{axis}]"),
                    max(int(valid.low), SMALLEST_CHECKED_SIZE), valid.high, named=True,
                    takes_one=valid.low <= 1 <= valid.high)
                for axis, valid in axes.items()
                if isinstance(valid, ValidRange) and valid.symbol}
        if dims:
            found[index] = dims
    return found


def _axis_range(size: Any, constraints: dict[Any, Any]) -> Any:
    if isinstance(size, int):
        return size
    expression = getattr(getattr(size, "node", None), "expr", None)
    bounds = constraints.get(expression)
    if bounds is None:
        return ValidRange(0, math.inf)  # an expression of several symbols: not judged here
    return ValidRange(_number(bounds.lower, 0), _number(bounds.upper, math.inf), str(expression))


def describe_range(low: float, high: float) -> str:
    return f"[{int(low)}, ∞)" if math.isinf(high) else f"[{int(low)}, {int(high)}]"
