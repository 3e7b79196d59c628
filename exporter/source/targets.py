"""Static discovery of export targets: nothing in the user's file is executed here.

Two kinds of targets exist (docs/architecture.md §2):

* subclasses of ``torch.onnx.ExportableModule`` that can be built with no arguments;
* top-level classes and functions with a ``# onnx-export: key=value, ...`` pragma directly
  above them (decorators may sit between). A pragma may continue over the following
  comment lines.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from exporter.findings.diagnostics import Diagnostic, Location, Range
from exporter.source.export_calls import (
    callable_without_arguments,
    export_call_sites,
    export_calls,
    legacy_argument_diagnostics,
)
from exporter.source.notebooks import NotebookModule, is_notebook, recent_notebook
from exporter.source.python_syntax import parse_python
from exporter.source.text import (
    char_column,
    node_range,
    notebook_at,
    split_lines,
    without_bom,
)

PRAGMA_PREFIX = re.compile(r"^(\s*)#\s*onnx-export\s*:")

PRAGMA_KEYS: dict[str, str] = {
    "args": "positional example inputs (a tuple)",
    "kwargs": "keyword example inputs (a dict)",
    "dynamic_shapes": "dynamic dimensions, as torch.onnx.export takes them",
    "init": "keyword arguments for the class constructor (a dict)",
    "input_names": "names of the ONNX graph inputs",
    "output_names": "names of the ONNX graph outputs",
    "opset": "ONNX opset version (an int)",
    "atol": "absolute tolerance of the numeric comparison",
    "rtol": "relative tolerance of the numeric comparison",
    "runtimes": 'runtimes to check the model on besides ONNX Runtime\'s CPU provider, e.g. '
                '["openvino-cpu"]',
    "precision": 'precisions to check the model at besides fp32, on each runtime, e.g. ["fp16", '
                 '"int8"]',
    "name": "the target's name (a string literal)",
    "weights": '"random" (default) or "none" (meta device, no weights materialized)',
    "custom_translation_table": "{torch op: onnxscript function} translations of your own",
    "training": "export in training mode (default False: eval mode)",
}
LITERAL_KEYS = {"name": str, "weights": str, "training": bool}
WEIGHT_MODES = ("random", "none")


@dataclass(frozen=True)
class PragmaOption:
    key: str
    source: str
    range: Range


@dataclass(frozen=True)
class Target:
    name: str
    path: Path
    kind: Literal["class", "function"]
    symbol: str
    definition: Range
    exportable_module: bool = False
    pragma: Range | None = None
    options: dict[str, PragmaOption] = field(default_factory=dict)
    # The first line of the definition (its first decorator), and the line of a later
    # top-level statement that binds the same name, if any: the module then holds that
    # later object under the name, not this definition.
    first_line: int = 0
    rebound_at: int | None = None
    # A function's target that is one of its torch.onnx.export calls (docs/export-calls.md):
    # the line of the function the call runs from; the check runs the function with
    # torch.onnx.export intercepted and checks that call's model and arguments. ANY_LINE:
    # the first call the function reaches, from whichever line (its calls are in helpers of
    # other files or installed packages, which the file does not show).
    export_call_line: int | None = None

    def literal(self, key: str, default: object = None) -> object:
        option = self.options.get(key)
        return ast.literal_eval(option.source) if option else default

    @property
    def weights(self) -> str:
        return str(self.literal("weights", "random"))


#: ``Target.export_call_line`` of a function whose export call is found by running it
ANY_LINE = 0


@dataclass
class Discovery:
    targets: list[Target]
    diagnostics: list[Diagnostic]


@dataclass
class _PragmaText:
    """A pragma's text with, for each of its lines, where that line starts in the file."""

    first_line: int
    segments: list[tuple[int, int, str]]  # (file line, 0-based column of text, text)

    @property
    def text(self) -> str:
        return "\n".join(segment for _, _, segment in self.segments)

    def file_range(self, node: ast.AST) -> Range:
        """Map a node of ``ast.parse('_(' + text + ')')`` back to file coordinates."""

        def convert(line: int, byte_column: int) -> tuple[int, int]:
            file_line, offset, text = self.segments[line - 1]
            parsed_line = f"_({text}" if line == 1 else text
            column = char_column(parsed_line, byte_column) - (2 if line == 1 else 0)
            return file_line, offset + column + 1

        start = convert(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = convert(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return Range.of(*start, *end)

    def whole_range(self) -> Range:
        """The pragma's text, without the surrounding blanks."""
        last_line, offset, text = self.segments[-1]
        first_line, first_offset, first_text = self.segments[0]
        indent = len(first_text) - len(first_text.lstrip())
        return Range.of(first_line, first_offset + indent + 1,
                        last_line, offset + len(text.rstrip()) + 1)


def discover(path: Path, source: str, notebook: NotebookModule | None = None) -> Discovery:
    """Find the targets of one file. Malformed pragmas become ONNX001 diagnostics.
    ``notebook``: the notebook whose module ``source`` is (default: the file on disk, when its
    module is ``source``), so that a target named by a line is named by its cell's line."""
    source = without_bom(source)
    if notebook is None and is_notebook(path):
        notebook = recent_notebook(source) or notebook_at(path)
    if notebook is not None and notebook.text != source:
        notebook = None
    lines = split_lines(source)
    try:
        tree = parse_python(source, filename=str(path))
    except SyntaxError as error:
        return Discovery([], [_syntax_error_diagnostic(path, lines, error)])
    except (RecursionError, MemoryError) as error:  # 20,000 chained `x + x + ...`
        return Discovery([], [Diagnostic(
            "ONNX002", f"Python cannot parse this file: it is nested too deeply "
            f"({type(error).__name__}); it cannot be imported either.",
            Location(path, Range.of(1, 1, 1, 2)), target="",
            hint="Split the deeply nested expression into smaller statements.")])

    targets: list[Target] = []
    diagnostics: list[Diagnostic] = []
    used_pragma_lines: set[int] = set()
    for node in tree.body:
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        pragma = _pragma_above(node, lines)
        exportable = isinstance(node, ast.ClassDef) and _is_exportable_module(node)
        if pragma is None and not exportable:
            continue
        if pragma is not None:
            used_pragma_lines.update(line for line, _, _ in pragma.segments)
        target, problems = _build_target(path, lines, node, pragma, exportable)
        diagnostics.extend(problems)
        if target is not None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            targets += _export_call_targets(tree, node, target, lines, notebook) or [target]
        elif target is not None:
            targets.append(target)

    for number, text in enumerate(lines, start=1):
        if PRAGMA_PREFIX.match(text) and number not in used_pragma_lines:
            start = text.index("#")
            diagnostics.append(Diagnostic(
                "ONNX001",
                "This `# onnx-export:` pragma is not attached to a target: put it directly "
                "above a top-level `class` or `def` (decorators may sit between).",
                Location(path, Range.of(number, start + 1, number, len(text.rstrip()) + 1)),
                target="",
            ))
    diagnostics.extend(_unparsable_cells(path, notebook))
    diagnostics.extend(legacy_argument_diagnostics(tree, export_calls(path, tree, lines), lines))
    _report_duplicate_names(targets, diagnostics)
    bindings = _top_level_bindings(tree)
    targets = [replace(target, rebound_at=next(
        (line for line in bindings.get(target.symbol, []) if line > target.definition.start.line),
        None)) for target in targets]
    return Discovery(targets, diagnostics)


def _unparsable_cells(path: Path, notebook: NotebookModule | None) -> list[Diagnostic]:
    """ONNX002 on each code cell of a notebook that Python cannot parse (the notebook's
    module leaves it out: exporter/source/notebooks.py)."""
    if notebook is None:
        return []
    found = []
    for problem in notebook.problems:
        line = notebook.module_line(problem.cell, problem.line) or 1
        found.append(Diagnostic(
            "ONNX002", f"Syntax error in cell {problem.cell}: {problem.message}; the cell is "
            "left out when the notebook's targets are checked.",
            Location(path, Range.of(line, problem.column, line, problem.column + 1)),
            target="", hint="Fix the cell; targets in later cells that use what it defines "
                            "fail to load until then."))
    return found


def _top_level_bindings(tree: ast.Module) -> dict[str, list[int]]:
    """The lines where each name is bound by a top-level statement."""
    bound: dict[str, list[int]] = {}

    def add(name: str, line: int) -> None:
        bound.setdefault(name, []).append(line)

    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.name, node.lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        add(name.id, node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                add((alias.asname or alias.name).split(".")[0], node.lineno)
    return bound


def _syntax_error_diagnostic(path: Path, lines: list[str], error: SyntaxError) -> Diagnostic:
    line = error.lineno or 1
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    column = max(error.offset or 1, 1)
    end_column = error.end_offset if error.end_offset and error.end_offset > column else column + 1
    if error.end_lineno and error.end_lineno != line:
        end_column = len(text) + 1
    return Diagnostic(
        "ONNX002",
        f"Syntax error: {error.msg}",
        Location(path, Range.of(line, column, line, max(end_column, column + 1))),
        target="",
        hint="Fix the syntax error; no target of this file can be checked until then.",
    )


def _pragma_above(node: ast.stmt, lines: list[str]) -> _PragmaText | None:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    comment_lines: list[int] = []
    line = first - 1
    while line >= 1 and lines[line - 1].lstrip().startswith("#"):
        comment_lines.append(line)
        line -= 1
    comment_lines.reverse()
    for index, number in enumerate(comment_lines):
        match = PRAGMA_PREFIX.match(lines[number - 1])
        if match is None:
            continue
        segments = [(number, match.end(),
                     _without_suppression(lines[number - 1][match.end():]))]
        for continuation in comment_lines[index + 1:]:
            text = lines[continuation - 1]
            if PRAGMA_PREFIX.match(text):
                break
            hash_at = text.index("#") + 1
            segments.append((continuation, hash_at, _without_suppression(text[hash_at:])))
        return _PragmaText(number, segments)
    return None


# A suppression comment at the end of a pragma line (exporter/source/suppressions.py) is not part
# of the pragma's keyword arguments.
_TRAILING_SUPPRESSION = re.compile(r"\s*#\s*onnxlens:\s*ignore\b.*$", re.IGNORECASE)


def _without_suppression(text: str) -> str:
    return _TRAILING_SUPPRESSION.sub("", text)


def _is_exportable_module(node: ast.ClassDef) -> bool:
    for base in node.bases:
        dotted = ast.unparse(base)
        if dotted.split(".")[-1] == "ExportableModule":
            return True
    return False


def _init_needs_arguments(node: ast.ClassDef) -> bool:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            arguments = item.args
            positional = arguments.posonlyargs + arguments.args
            required = len(positional) - len(arguments.defaults) - 1  # minus self
            kw_required = [d for d in arguments.kw_defaults if d is None]
            return required > 0 or bool(kw_required)
    return False


def _build_target(
    path: Path,
    lines: list[str],
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef,
    pragma: _PragmaText | None,
    exportable: bool,
) -> tuple[Target | None, list[Diagnostic]]:
    name_range = _definition_name_range(node, lines)
    options: dict[str, PragmaOption] = {}
    problems: list[Diagnostic] = []
    if pragma is not None:
        try:
            options, problems = _parse_pragma(path, pragma, node.name)
        except (RecursionError, MemoryError):  # ast.unparse of a 400-term `+` chain
            problems = [Diagnostic(
                "ONNX001", "The pragma's expression is nested too deeply to read; build the "
                "value in a helper function of the module and call it from the pragma.",
                Location(path, pragma.whole_range()), target=node.name)]
        if problems:
            return None, problems
    if exportable and pragma is None and _init_needs_arguments(node):  # type: ignore[arg-type]
        # docs/architecture.md §2: only ExportableModules buildable with no arguments are
        # targets; the user hears why this one is not checked (it was skipped without a word)
        return None, [Diagnostic(
            "ONNX005", f"`{node.name}` is not checked: its constructor needs arguments. Add "
            "`# onnx-export: init={...}` above the class to check it.",
            Location(path, name_range), target="")]
    name = options["name"].source if "name" in options else None
    target = Target(
        name=ast.literal_eval(name) if name else node.name,
        path=path,
        kind="class" if isinstance(node, ast.ClassDef) else "function",
        symbol=node.name,
        definition=name_range,
        exportable_module=exportable,
        pragma=pragma.whole_range() if pragma else None,
        options=options,
        first_line=min([node.lineno] + [d.lineno for d in node.decorator_list]),
    )
    return target, []


def _export_call_targets(tree: ast.Module, node: ast.FunctionDef | ast.AsyncFunctionDef,
                         target: Target, lines: list[str],
                         notebook: NotebookModule | None) -> list[Target]:
    """A function that exports (calls torch.onnx.export, itself or through helpers of this
    file) is one target per call, named ``function@line`` and located at the call; in a
    notebook ``function@cellC:L``, the line counted in its cell as the user sees it."""
    if not (callable_without_arguments(node) or node.decorator_list):
        # a decorator may supply the arguments (click's commands parse them from the command
        # line); where none does, calling it raises what Python raises (ONNX003), as for any
        # function target
        return []
    sites = export_call_sites(tree, node)
    if not sites and "args" not in target.options and not _returns_a_value(node):
        # it returns no model and has no inputs: what it can export is a call it makes through
        # a helper the file does not show (timm's `onnx_export`), the first it reaches
        return [replace(target, export_call_line=ANY_LINE)]
    return [replace(target, name=f"{target.name}@{_line_label(call.lineno, notebook)}",
                    definition=node_range(call.func, lines), export_call_line=call.lineno)
            for call in sites]


def _returns_a_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function's own code (not a function or class nested in it) returns a value
    or yields."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if (isinstance(node, ast.Return) and node.value is not None) \
                or isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def _line_label(line: int, notebook: NotebookModule | None) -> str:
    position = notebook.position(line) if notebook is not None else None
    return f"cell{position.cell}:{position.line}" if position is not None else str(line)


def _definition_name_range(node: ast.stmt, lines: list[str]) -> Range:
    """The range of the name in ``class Name`` / ``def name``."""
    text = lines[node.lineno - 1]
    keyword = "class" if isinstance(node, ast.ClassDef) else "def"
    match = re.search(rf"\b{keyword}\s+({re.escape(node.name)})\b", text)  # type: ignore[attr-defined]
    if match is None:
        return node_range(node, lines)
    return Range.of(node.lineno, match.start(1) + 1, node.lineno, match.end(1) + 1)


def _parse_pragma(
    path: Path, pragma: _PragmaText, symbol: str
) -> tuple[dict[str, PragmaOption], list[Diagnostic]]:
    def problem(message: str, where: Range) -> Diagnostic:
        return Diagnostic("ONNX001", message, Location(path, where), target=symbol)

    try:
        call = parse_python(f"_({pragma.text})", mode="eval").body
    except SyntaxError as error:
        return {}, [problem(
            f"The pragma is not a valid keyword-argument list: {error.msg}.",
            pragma.whole_range(),
        )]
    assert isinstance(call, ast.Call)
    problems: list[Diagnostic] = []
    for positional in call.args:
        problems.append(problem(
            f"`{ast.unparse(positional)}` needs a key: the pragma takes `key=value` pairs "
            f"({', '.join(PRAGMA_KEYS)}).",
            pragma.file_range(positional),
        ))
    options: dict[str, PragmaOption] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            problems.append(problem("`**` is not allowed in a pragma.",
                                    pragma.file_range(keyword)))
            continue
        where = pragma.file_range(keyword)
        if keyword.arg not in PRAGMA_KEYS:
            suggestion = _closest_key(keyword.arg)
            hint = f" Did you mean `{suggestion}`?" if suggestion else ""
            problems.append(problem(
                f"Unknown pragma key `{keyword.arg}`.{hint} "
                f"Known keys: {', '.join(PRAGMA_KEYS)}.",
                where,
            ))
            continue
        if keyword.arg in options:
            problems.append(problem(f"The key `{keyword.arg}` is given twice.", where))
            continue
        literal_problem = _check_literal(keyword)
        if literal_problem:
            problems.append(problem(literal_problem, pragma.file_range(keyword.value)))
            continue
        options[keyword.arg] = PragmaOption(
            keyword.arg, ast.unparse(keyword.value), pragma.file_range(keyword.value)
        )
    return options, problems


def _check_literal(keyword: ast.keyword) -> str | None:
    expected = LITERAL_KEYS.get(keyword.arg or "")
    if expected is None:
        return None
    try:
        value = ast.literal_eval(keyword.value)
    except ValueError:
        value = None
    if not isinstance(value, expected):
        return f"`{keyword.arg}` must be a {expected.__name__} literal."
    if keyword.arg == "weights" and value not in WEIGHT_MODES:
        return f'`weights` must be one of {", ".join(map(repr, WEIGHT_MODES))}, not {value!r}.'
    return None


def _closest_key(key: str) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key, list(PRAGMA_KEYS), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _report_duplicate_names(targets: list[Target], diagnostics: list[Diagnostic]) -> None:
    seen: dict[str, Target] = {}
    for target in list(targets):
        if target.name in seen:
            where = target.options["name"].range if "name" in target.options else target.definition
            diagnostics.append(Diagnostic(
                "ONNX001",
                f"Another target in this file is already named `{target.name}`; "
                "give this one a different `name=`.",
                Location(target.path, where),
                target=target.name,
            ))
            targets.remove(target)
        else:
            seen[target.name] = target
