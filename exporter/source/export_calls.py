"""The ``torch.onnx.export(...)`` calls a file already makes, and what in them the supported
torches treat differently from what their author likely expected — found without running
anything (docs/export-calls.md; rules ONNX601-ONNX604).

What the exporter does with each argument is read from ``torch.onnx.export`` and
``torch/onnx/_internal/exporter/_compat.py`` (``export_compat``), the same in torch 2.13.0 and
2.14.1: ``dynamo=True`` is the default (torch 2.9); ``dynamic_axes`` is converted to
``dynamic_shapes`` with ``Dim.DYNAMIC`` axes when no ``dynamic_shapes`` is given, and ignored
when one is; an ``opset_version`` below the torchlib opset is built at that opset and then
converted down; the deprecated TorchScript-era arguments are not passed on at all.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, FindingData, Location, Range
from exporter.findings.fixes import FixEdit, QuickFix
from exporter.source.text import node_range

EXPORT_FUNCTION = "torch.onnx.export"
#: the opset torchlib's translations are written for (torch/onnx/_internal/exporter/
#: _constants.py, TORCHLIB_OPSET, in every supported torch; tests compare it with the
#: installed torch's): a lower opset_version is reached by the ONNX version converter
TORCHLIB_OPSET = 18
#: accepted by torch.onnx.export, not passed on by the torch.export-based path (deprecated
#: since torch 2.6), with what happens instead
IGNORED_BY_DYNAMO = {
    "training": "the model is exported in the mode it is in: call `model.eval()` or "
                "`model.train()` before exporting",
    "operator_export_type": "only standard ONNX operators are emitted",
    "do_constant_folding": "constants are always folded (`optimize=True`)",
    "custom_opsets": "opsets of custom domains come from the translations that use them",
    "export_modules_as_functions": "modules are inlined into one graph",
    "autograd_inlining": "autograd functions are traced through",
}
#: only used when the model is saved to ``f``
ONLY_WITH_FILE = ("export_params", "keep_initializers_as_inputs")


@dataclass(frozen=True)
class Argument:
    """One argument of the call as written: its value's source and where it is."""

    name: str  # keyword name; "" for a positional argument
    source: str
    node: ast.expr
    range: Range  # the whole argument (``name=value``)
    removal: Range  # what to delete to remove it, a separating comma included


@dataclass
class ExportCall:
    path: Path
    range: Range  # the whole call
    callee: Range  # ``torch.onnx.export``
    positional: list[Argument] = field(default_factory=list)
    keywords: dict[str, Argument] = field(default_factory=dict)
    enclosing_function: str | None = None  # the top-level def the call is in

    def literal(self, name: str, default: Any = None) -> Any:
        """The keyword's value when it is a literal; ``default`` when absent; ``...`` when
        it is an expression that would have to run."""
        argument = self.keywords.get(name)
        if argument is None:
            return default
        try:
            return ast.literal_eval(argument.node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return ...


def export_calls(path: Path, tree: ast.Module, lines: list[str]) -> list[ExportCall]:
    """Every call of ``torch.onnx.export`` in the file, through whatever names the file
    imported it under (``import torch as t``, ``from torch import onnx``,
    ``from torch.onnx import export``)."""
    names = _imported_names(tree)
    source = "\n".join(lines)
    calls = []
    for top in tree.body:
        enclosing = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        for node in ast.walk(top):
            if isinstance(node, ast.Call) and _resolve(node.func, names) == EXPORT_FUNCTION:
                calls.append(_call(path, node, lines, source, enclosing))
    return calls


def _imported_names(tree: ast.Module) -> dict[str, str]:
    names = {"torch": "torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _resolve(node: ast.expr, names: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


def _call(path: Path, node: ast.Call, lines: list[str], source: str,
          enclosing: str | None) -> ExportCall:
    call = ExportCall(path, node_range(node, lines), node_range(node.func, lines),
                      enclosing_function=enclosing)
    written: list[ast.expr | ast.keyword] = sorted([*node.args, *node.keywords],
                                                   key=lambda n: (n.lineno, n.col_offset))
    ranges = [node_range(item, lines) for item in written]
    for index, item in enumerate(written):
        if index > 0:  # from the end of the argument before: ", name=value"
            removal = Range(ranges[index - 1].end, ranges[index].end)
        elif len(written) > 1:  # the first: "name=value, "
            removal = Range(ranges[0].start, ranges[1].start)
        else:
            removal = ranges[0]
        value = item.value if isinstance(item, ast.keyword) else item
        segment = ast.get_source_segment(source, value) or ""
        if isinstance(item, ast.keyword):
            if item.arg is not None:  # not **options
                call.keywords[item.arg] = Argument(item.arg, segment, value, ranges[index],
                                                   removal)
        elif not isinstance(item, ast.Starred):
            call.positional.append(Argument("", segment, value, ranges[index], removal))
    return call


def callable_without_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a check can call the function as it is, with no arguments: every parameter has
    a default or is ``*args``/``**kwargs`` (``def main(output="model.onnx", opset=18)``, as
    export scripts write it). Only such a function's export calls are targets
    (docs/export-calls.md)."""
    arguments = function.args
    positional = len(arguments.posonlyargs) + len(arguments.args)
    return (len(arguments.defaults) == positional
            and all(default is not None for default in arguments.kw_defaults))


def export_call_sites(tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef
                      ) -> list[ast.Call]:
    """The calls in ``function`` that export: of ``torch.onnx.export`` itself, or of a
    top-level function of this file that (through others of this file) calls it. One per
    line (a check intercepts a call by the line of ``function`` it runs from)."""
    names = _imported_names(tree)
    functions = {node.name: node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def called(node: ast.AST) -> set[str]:
        return {call.func.id for call in ast.walk(node) if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name) and call.func.id in functions}

    exporting = {name for name, node in functions.items()
                 if any(isinstance(c, ast.Call) and _resolve(c.func, names) == EXPORT_FUNCTION
                        for c in ast.walk(node))}
    growing = True
    while growing:  # the helpers of helpers
        more = {name for name, node in functions.items() if called(node) & exporting}
        growing = not more <= exporting
        exporting |= more
    exporting.discard(function.name)
    sites: dict[int, ast.Call] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and (
                _resolve(node.func, names) == EXPORT_FUNCTION
                or (isinstance(node.func, ast.Name) and node.func.id in exporting)):
            sites.setdefault(node.lineno, node)
    return [sites[line] for line in sorted(sites)]


# -- the rules -------------------------------------------------------------------------------

def legacy_argument_diagnostics(tree: ast.Module, calls: list[ExportCall],
                                lines: list[str]) -> list[Diagnostic]:
    """ONNX601-ONNX604 for every call (docs/rules/ONNX60*.md). Each carries, when the call is
    in a function callable without arguments and without a pragma, the edit that marks the function
    so that its calls are checked (a second quick fix)."""
    found: list[Diagnostic] = []
    for call in calls:
        dynamo = call.literal("dynamo", True)
        if dynamo is False:
            own = [_torchscript(call)]
        elif dynamo is not True:
            continue  # decided at run time: which exporter runs is not known here
        else:
            own = _dynamic_axes(tree, call) + _opset(call) + _ignored(call)
        check_this_call = _check_this_call(tree, call, lines)
        if check_this_call is not None:
            own = [replace(d, quick_fixes=(*d.quick_fixes, check_this_call)) for d in own]
        found += own
    return found


def _check_this_call(tree: ast.Module, call: ExportCall,
                     lines: list[str]) -> QuickFix | None:
    """The edit that puts ``# onnx-export:`` above the call's function (docs/export-calls.md)."""
    function = next((node for node in tree.body if isinstance(node, ast.FunctionDef)
                     and node.name == call.enclosing_function), None)
    if function is None:
        return None
    if not callable_without_arguments(function):
        return None
    first = min([function.lineno] + [d.lineno for d in function.decorator_list])
    above = lines[first - 2].strip() if first > 1 else ""
    if above.startswith("#") and above[1:].strip().startswith("onnx-export"):
        return None  # already marked: its calls are targets
    indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    return QuickFix(f"Check this call: mark `{function.name}` with `# onnx-export:`",
                    (FixEdit(call.path, Range.of(first, 1, first, 1),
                             f"{indent}# onnx-export:\n"),))


def _here(call: ExportCall, argument: Argument) -> Location:
    return Location(call.path, argument.range)


def _removal(call: ExportCall, argument: Argument, title: str) -> tuple[QuickFix]:
    return (QuickFix(title, (FixEdit(call.path, argument.removal, ""),)),)


def _torchscript(call: ExportCall) -> Diagnostic:
    argument = call.keywords["dynamo"]
    return Diagnostic(
        "ONNX601", "`dynamo=False` runs the TorchScript exporter, deprecated since torch 2.9 "
        "(the torch.export-based exporter is the default); what this call exports is not what "
        "`torch.onnx.export` does by default, and onnxlens checks only the default exporter.",
        _here(call, argument), target="",
        quick_fixes=_removal(call, argument, "Remove `dynamo=False` (use the "
                                             "torch.export-based exporter)"))


def _dynamic_axes(tree: ast.Module, call: ExportCall) -> list[Diagnostic]:
    argument = call.keywords.get("dynamic_axes")
    if argument is None:
        return []
    if "dynamic_shapes" in call.keywords:
        return [Diagnostic(
            "ONNX604", "`dynamic_axes` is ignored: `dynamic_shapes` is given, and the "
            "torch.export-based exporter uses only that.", _here(call, argument), target="",
            quick_fixes=_removal(call, argument, "Remove the ignored `dynamic_axes`"))]
    rewrite = dynamic_shapes_for(tree, call)
    rewrites = () if rewrite is None else (QuickFix(
        "Replace `dynamic_axes` with the equivalent `dynamic_shapes`",
        (FixEdit(call.path, argument.range, f"dynamic_shapes={rewrite}"),)),)
    return [Diagnostic(
        "ONNX602", "`dynamic_axes` is converted to `dynamic_shapes` with `Dim.DYNAMIC` for "
        "each listed axis: torch.export may then specialize an axis to the example's size or "
        "stop with `Constraints violated`, and output entries are dropped. Give "
        "`dynamic_shapes`, keyed by `forward`'s parameter names"
        + (f": `{rewrite}`." if rewrite else "."),
        _here(call, argument), target="", quick_fixes=rewrites)]


def _opset(call: ExportCall) -> list[Diagnostic]:
    argument = call.keywords.get("opset_version")
    opset = call.literal("opset_version")
    if argument is None or not isinstance(opset, int) or opset >= TORCHLIB_OPSET:
        return []
    return [Diagnostic(
        "ONNX603", f"`opset_version={opset}` is below opset {TORCHLIB_OPSET}, the lowest the "
        f"exporter's translations are written for: the graph is built at opset "
        f"{TORCHLIB_OPSET} and converted down by the ONNX version converter, which fails for "
        f"some operators (the model then stays at opset {TORCHLIB_OPSET}).",
        _here(call, argument), target="", data=FindingData(opset=opset))]


def _ignored(call: ExportCall) -> list[Diagnostic]:
    found = []
    for name, instead in IGNORED_BY_DYNAMO.items():
        argument = call.keywords.get(name)
        if argument is not None:
            found.append(Diagnostic(
                "ONNX604", f"`{name}` is ignored by the torch.export-based exporter "
                f"(deprecated since torch 2.6): {instead}.", _here(call, argument), target="",
                quick_fixes=_removal(call, argument, f"Remove the ignored `{name}`")))
    has_file = len(call.positional) >= 3 or "f" in call.keywords
    for name in ONLY_WITH_FILE:
        argument = call.keywords.get(name)
        if argument is not None and not has_file:
            found.append(Diagnostic(
                "ONNX604", f"`{name}` is ignored: it applies only when the model is saved to "
                "`f`, and this call gives no file.", _here(call, argument), target="",
                quick_fixes=_removal(call, argument, f"Remove the ignored `{name}`")))
    return found


# -- dynamic_axes -> dynamic_shapes ----------------------------------------------------------

def dynamic_shapes_for(tree: ast.Module, call: ExportCall) -> str | None:
    """The ``dynamic_shapes`` that ``export_compat`` builds from this call's ``dynamic_axes``,
    as source keyed by ``forward``'s parameter names; None unless that is certain from the
    text: literal ``dynamic_axes`` and ``input_names``, a model built from a class of this
    file whose ``forward`` takes plain parameters, and a literal tuple of example inputs, one
    per input name (so that the i-th input name is the i-th parameter)."""
    axes, input_names = call.literal("dynamic_axes"), call.literal("input_names")
    output_names = call.literal("output_names", [])
    if not (isinstance(axes, dict) and isinstance(input_names, (list, tuple))
            and isinstance(output_names, (list, tuple))
            and all(isinstance(name, str) for name in [*axes, *input_names])):
        return None
    example = call.positional[1].node if len(call.positional) > 1 else None
    if example is None and "args" in call.keywords:
        example = call.keywords["args"].node
    if not (isinstance(example, ast.Tuple) and len(example.elts) == len(input_names)
            and not any(isinstance(e, (ast.Tuple, ast.List, ast.Dict, ast.Starred))
                        for e in example.elts)) or "kwargs" in call.keywords:
        return None
    parameters = _forward_parameters(tree, call)
    if parameters is None or len(parameters) < len(input_names):
        return None
    entries = []
    for name, parameter in zip(input_names, parameters):
        dims = axes.get(name)
        if dims is None:
            entries.append(f"{parameter!r}: None")
        elif isinstance(dims, dict) and all(isinstance(k, int) and isinstance(v, str)
                                            for k, v in dims.items()):
            named = ", ".join(f"{k}: {v!r}" for k, v in dims.items())
            entries.append(f"{parameter!r}: {{{named}}}")
        elif isinstance(dims, (list, tuple)) and all(isinstance(k, int) for k in dims):
            entries.append(f"{parameter!r}: {{"
                           + ", ".join(f"{k}: torch.export.Dim.DYNAMIC" for k in dims) + "}")
        else:
            return None
    unknown = set(axes) - set(input_names) - set(output_names)
    if unknown:
        return None  # torch would key them by a name that is no input: not rewritten
    return "{" + ", ".join(entries) + "}"


def _forward_parameters(tree: ast.Module, call: ExportCall) -> list[str] | None:
    """The parameter names of ``forward`` of the model's class, when the model is
    ``SomeClass(...)`` or a name assigned ``SomeClass(...)`` in the call's function (or at
    the top level), and the class is defined at the top of this file."""
    model = call.positional[0].node if call.positional else None
    if model is None and "model" in call.keywords:
        model = call.keywords["model"].node
    built = _class_built_by(model, tree, call.enclosing_function)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if built not in classes:
        return None
    for item in classes[built].body:
        if isinstance(item, ast.FunctionDef) and item.name == "forward":
            arguments = item.args
            if arguments.vararg or arguments.kwarg or arguments.posonlyargs:
                return None
            return [a.arg for a in arguments.args[1:]]
    return None


def _class_built_by(model: ast.expr | None, tree: ast.Module,
                    function: str | None) -> str | None:
    if isinstance(model, ast.Call):
        call = model
        if isinstance(call.func, ast.Attribute) and call.func.attr == "eval":
            return _class_built_by(call.func.value, tree, function)
        return call.func.id if isinstance(call.func, ast.Name) else None
    if not isinstance(model, ast.Name):
        return None
    scopes: list[ast.AST] = [node for node in tree.body
                             if isinstance(node, ast.FunctionDef) and node.name == function]
    scopes.append(tree)
    for scope in scopes:
        assigned = [node.value for node in ast.walk(scope) if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == model.id for t in node.targets)]
        if len(assigned) == 1:
            return _class_built_by(assigned[0], tree, None)
        if assigned:
            return None  # bound more than once: not certain
    return None
