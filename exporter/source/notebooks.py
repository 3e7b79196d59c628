"""Jupyter notebooks as one Python module: the code cells in document order, each cell's lines
kept where they are, so that a target in cell 5 sees the imports and helpers of cells 1-4 and
every line of the module is one line of one cell (docs/notebooks.md).

IPython syntax that is not Python — line magics (``%time f()``), cell magics (``%%bash``), shell
lines (``!pip install x``, ``files = !ls``) and help (``torch.nn?``) — is neutralised as ruff and
nbQA do: the line becomes ``pass`` (or ``name = None``), with the original text kept in a comment,
so a check runs the cell's Python and nothing else. A cell that still cannot be parsed is left out
(its lines are blank in the module) and reported once, on that cell.

Cells are numbered from 1 over *all* cells of the file (markdown too), as ruff numbers them, so
"cell 5" is ``cells[4]`` of the ``.ipynb`` JSON. A notebook whose kernel is not Python (an R or
Julia notebook) is not read as Python: :class:`NotPythonNotebook`.
"""

from __future__ import annotations

import ast
import bisect
import json
import json.decoder
import json.scanner
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Range
from exporter.source.python_syntax import parse_python

NOTEBOOK_SUFFIX = ".ipynb"

#: cell magics whose body is Python that IPython runs (the first line alone is neutralised)
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_ASSIGNED_ESCAPE = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]")
_ESCAPE = re.compile(r"^(\s*)(?:[!%]|\?)")
_HELP = re.compile(r"^(\s*)[A-Za-z_][\w.]*\s*\?\??\s*$")


class NotebookError(ValueError):
    """The file is not a notebook onnxlens can read (not JSON, or not nbformat 4)."""


class NotPythonNotebook(NotebookError):
    """A notebook whose kernel's language is not Python (``metadata.kernelspec.language`` or
    ``metadata.language_info.name``): its cells are not Python, and it is not checked."""

    def __init__(self, language: str, field: str) -> None:
        super().__init__(f"its kernel's language is {language} (`{field}`), and onnxlens "
                         "checks notebooks whose kernel is Python")
        self.language, self.field = language, field


class NotebookCodeTooBig(NotebookError):
    """The notebook's code cells hold more than the limit a check reads (their outputs do not
    count: exporter/source/text.py turns this into UnreadableSource)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"its code cells hold {size} bytes, more than {limit}")
        self.size, self.limit = size, limit


def is_notebook(path: Path) -> bool:
    return path.suffix == NOTEBOOK_SUFFIX


@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based, over all cells of the notebook
    first_line: int  # the module line of the cell's first line (1-based)
    lines: tuple[str, ...]  # the cell's text as the user wrote it
    # where each line's text starts in the .ipynb file: (1-based line, 1-based column of the
    # first character) and whether the file escapes non-ASCII characters (SARIF regions)
    raw_starts: tuple[tuple[int, int], ...] = ()
    ascii_escaped: bool = False

    @property
    def last_line(self) -> int:
        return self.first_line + max(len(self.lines), 1) - 1


@dataclass(frozen=True)
class CellProblem:
    """A code cell left out of the module: Python cannot parse it."""

    cell: int
    line: int  # within the cell, 1-based
    column: int  # 1-based
    message: str


@dataclass(frozen=True)
class CellPosition:
    cell: int
    line: int  # within the cell, 1-based


@dataclass(frozen=True)
class CellSource:
    """A code cell as the notebook holds it: what a module is built from (and what the
    language server sends the worker with a notebook's unsaved text)."""

    number: int  # 1-based, over all cells of the notebook
    text: str


@dataclass(frozen=True)
class NotebookModule:
    text: str  # the module a check imports (and every line of it a line of one cell)
    cells: tuple[CodeCell, ...]
    problems: tuple[CellProblem, ...]
    sources: tuple[CellSource, ...] = ()

    def cell_at(self, line: int) -> CodeCell | None:
        for cell in self.cells:
            if cell.first_line <= line <= cell.last_line:
                return cell
        return None

    def position(self, line: int) -> CellPosition | None:
        """Where a line of the module is in the notebook; None past the last cell."""
        cell = self.cell_at(line)
        return CellPosition(cell.number, line - cell.first_line + 1) if cell else None

    def cell_range(self, range_: Range) -> tuple[CodeCell, Range] | None:
        """A module range as a range of the cell it starts in (lines counted in the cell; a
        range that runs into a later cell ends at the end of its first cell's line)."""
        cell = self.cell_at(range_.start.line)
        if cell is None:
            return None
        offset = cell.first_line - 1
        end_line, end_column = range_.end.line, range_.end.column
        if end_line > cell.last_line:
            end_line = range_.start.line
            end_column = max(len(cell.lines[end_line - cell.first_line]) + 1,
                             range_.start.column + 1)
        return cell, Range.of(range_.start.line - offset, range_.start.column,
                              end_line - offset, end_column)

    def module_line(self, cell_number: int, line: int) -> int | None:
        """The module line of a cell's line (the inverse of :meth:`position`)."""
        for cell in self.cells:
            if cell.number == cell_number:
                return cell.first_line + line - 1
        return None


def notebook_module(raw: bytes, max_code_bytes: int | None = None) -> NotebookModule:
    """The module of a notebook file's bytes. Raises NotebookError for a file that is not an
    nbformat 4 notebook, NotPythonNotebook for a notebook of another language, and (with
    ``max_code_bytes``) NotebookCodeTooBig when its code cells' text (UTF-8) is bigger."""
    text = _text_of(raw)
    sources = _code_sources(_decoded(text, _LOCATING_DECODER))
    if max_code_bytes is not None:
        size = sum(len(piece.encode("utf-8", "surrogatepass"))
                   for _, pieces in sources for piece in pieces)
        if size > max_code_bytes:
            raise NotebookCodeTooBig(size, max_code_bytes)
    line_starts = _line_starts(text)
    ascii_escaped = b"\\u" in raw
    code = [(number, "".join(pieces), _raw_starts(pieces, line_starts))
            for number, pieces in sources]
    return _module(code, ascii_escaped)


def notebook_problem(raw: bytes) -> NotebookError | None:
    """What :func:`notebook_module` would raise for the file's bytes (its size limit aside),
    found cheaply: json's C decoder, no cell parsed. None for a notebook it reads."""
    try:
        _code_sources(_decoded(_text_of(raw), json.JSONDecoder()))
    except NotebookError as error:
        return error
    return None


def _text_of(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"it is not valid JSON ({error})") from None


def _decoded(text: str, decoder: json.JSONDecoder) -> Any:
    try:
        return decoder.decode(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"it is not valid JSON ({error})") from None


def _code_sources(document: Any) -> list[tuple[int, list[str]]]:
    """(number, the pieces of its ``source``) of each code cell; raises NotebookError."""
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list) or document.get("nbformat", 4) != 4:
        raise NotebookError("it is not a Jupyter notebook in nbformat 4 (no `cells` list)")
    language = _kernel_language(document.get("metadata"))
    if language is not None:
        raise NotPythonNotebook(*language)
    return [(index + 1, _source_pieces(cell.get("source", "")))
            for index, cell in enumerate(cells)
            if isinstance(cell, dict) and cell.get("cell_type") == "code"]


def _kernel_language(metadata: object) -> tuple[str, str] | None:
    """(language, the field that says it) when the notebook's kernel is not Python; None for
    a Python notebook, or one that does not say (nbformat makes both fields optional)."""
    if not isinstance(metadata, dict):
        return None
    for section, key in (("kernelspec", "language"), ("language_info", "name")):
        values = metadata.get(section)
        value = values.get(key) if isinstance(values, dict) else None
        if isinstance(value, str) and value.strip() \
                and not value.strip().lower().startswith("python"):
            return value.strip(), f"metadata.{section}.{key}"
    return None


def module_of_cells(cells: list[tuple[int, str]]) -> NotebookModule:
    """The module of code cells given as (number, text), in order: what an editor's notebook
    document holds (the language server's notebook sync)."""
    return _module([(number, text, ()) for number, text in cells], False)


class IPythonStandIn:
    """What ``get_ipython()`` returns in a check: every method does nothing and returns None
    (``get_ipython().run_line_magic("matplotlib", "inline")``, ``.system("pip install x")``),
    as a magic line is neutralised: what it does does not happen in a check."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("__"):  # no protocol (pickling, copying) is pretended
            raise AttributeError(name)
        return _does_nothing

    def __repr__(self) -> str:
        return "<onnxlens's stand-in for IPython's shell>"


def _does_nothing(*args: object, **kwargs: object) -> None:
    return None


_STAND_IN = IPythonStandIn()


def get_ipython() -> IPythonStandIn:
    """The stand-in for IPython's ``get_ipython`` a notebook's module gets
    (:func:`ipython_names`)."""
    return _STAND_IN


def ipython_names(text: str) -> dict[str, object]:
    """What a notebook's module holds before its cells run, as IPython's namespace does:
    ``get_ipython`` when the code uses that name and its top level never binds it (a
    ``def get_ipython``, ``from IPython import get_ipython``: theirs is kept)."""
    if "get_ipython" not in text:
        return {}
    try:
        tree = parse_python(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return {}
    used = any(isinstance(node, ast.Name) and node.id == "get_ipython"
               and isinstance(node.ctx, ast.Load) for node in ast.walk(tree))
    return {"get_ipython": get_ipython} if used and "get_ipython" not in _bound_at_top(tree) \
        else {}


def _bound_at_top(tree: ast.Module) -> set[str]:
    """The names a module's top level binds (not those of its functions' and classes' bodies)."""
    bound: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        pending.extend(ast.iter_child_nodes(node))
    return bound


def recent_notebook(text: str) -> NotebookModule | None:
    """The notebook module built last in this process whose text is ``text``: an editor's
    notebook is checked as its module's text, and naming a target by its cell needs the cells."""
    with _RECENT_LOCK:
        return _RECENT.get(text)


_RECENT: dict[str, NotebookModule] = {}
_RECENT_KEPT = 16
_RECENT_LOCK = threading.Lock()  # the language server discovers in threads


def _module(code: list[tuple[int, str, tuple[tuple[int, int], ...]]],
            ascii_escaped: bool) -> NotebookModule:
    module_lines: list[str] = []
    code_cells: list[CodeCell] = []
    problems: list[CellProblem] = []
    for number, text, raw_starts in code:
        lines = tuple(_cell_lines(text))
        python, problem = _python_of(lines, number)
        if problem is not None:
            problems.append(problem)
        code_cells.append(CodeCell(number, len(module_lines) + 1, lines, raw_starts,
                                   ascii_escaped))
        module_lines += python or [""]
    module = NotebookModule("".join(line + "\n" for line in module_lines), tuple(code_cells),
                            tuple(problems), tuple(CellSource(n, text) for n, text, _ in code))
    with _RECENT_LOCK:
        _RECENT.pop(module.text, None)
        _RECENT[module.text] = module
        while len(_RECENT) > _RECENT_KEPT:
            del _RECENT[next(iter(_RECENT))]
    return module


def _source_pieces(source: object) -> list[str]:
    if isinstance(source, str):
        return [source]
    if isinstance(source, list) and all(isinstance(piece, str) for piece in source):
        return list(source)
    raise NotebookError("a code cell's `source` is neither a string nor a list of strings")


def _cell_lines(text: str) -> list[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _python_of(lines: tuple[str, ...], number: int) -> tuple[list[str], CellProblem | None]:
    """The cell's lines as Python: as written when they parse; else with IPython's syntax
    neutralised; else blank lines and the problem."""
    text = "\n".join(lines) + "\n"
    if _parses(text):
        return list(lines), None
    neutral = _neutralised(lines)
    try:
        parse_python("\n".join(neutral) + "\n")
        return neutral, None
    except SyntaxError as error:
        return ([""] * len(lines),
                CellProblem(number, error.lineno or 1, max(error.offset or 1, 1), error.msg))
    except (RecursionError, MemoryError, ValueError) as error:
        return [""] * len(lines), CellProblem(number, 1, 1, f"{type(error).__name__}: {error}")


def _parses(text: str) -> bool:
    try:
        parse_python(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return True


def _neutralised(lines: tuple[str, ...]) -> list[str]:
    if lines and lines[0].startswith("%%"):
        magic = lines[0][2:].split(maxsplit=1)[0] if lines[0][2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:  # %%bash, %%writefile...: not Python at all
            return [f"# {line}" if line.strip() else "" for line in lines]
        return [f"pass  # {lines[0]}", *_neutralised(lines[1:])]
    result = []
    for line in lines:
        assigned = _ASSIGNED_ESCAPE.match(line)
        escape = _ESCAPE.match(line) or _HELP.match(line)
        if assigned:
            names = assigned.group(2)
            value = ", ".join(["None"] * (names.count(",") + 1))
            result.append(f"{assigned.group(1)}{names} = {value}  # {line.strip()}")
        elif escape:
            result.append(f"{escape.group(1)}pass  # {line.strip()}")
        else:
            result.append(line)
    return result


# -- where a cell's lines are in the .ipynb file (for SARIF) --------------------------------

class _LocatedString(str):
    """A JSON string value that knows the offset of its opening quote in the document."""

    offset: int


def _located_decoder() -> json.JSONDecoder:
    """json's own decoder with its pure-Python scanner, whose string parser is replaced by one
    that records each string's offset (the scanner reads ``parse_string`` when it is made;
    the C scanner would not call it). typeshed leaves these documented names out."""
    decoder = json.JSONDecoder()

    def parse_string(text: str, end: int, strict: bool) -> tuple[str, int]:
        value, after = json.decoder.scanstring(text, end, strict)  # type: ignore[attr-defined]
        located = _LocatedString(value)
        located.offset = end - 1
        return located, after

    decoder.parse_string = parse_string  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder


_LOCATING_DECODER = _located_decoder()


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts += [match.end() for match in re.finditer(r"\n", text)]
    return starts


def _raw_starts(pieces: list[str], line_starts: list[int]) -> tuple[tuple[int, int], ...]:
    """For each line of the cell, where its text starts in the file. Jupyter writes one
    string per line; a cell written as one string has all its lines start at that string."""
    starts: list[tuple[int, int]] = []
    for piece in pieces:
        offset = getattr(piece, "offset", None)
        if offset is None:
            return ()
        line_index = bisect.bisect_right(line_starts, offset) - 1
        position = (line_index + 1, offset - line_starts[line_index] + 2)
        starts += [position] * max(len(_cell_lines(piece)) if piece else 1, 1)
    return tuple(starts) if len(starts) == len(_cell_lines("".join(pieces))) else ()


def raw_position(cell: CodeCell, line: int, column: int) -> tuple[int, int] | None:
    """The (line, column) in the .ipynb file of a cell's (line, column); None when unknown.
    Columns count characters of the JSON text, escapes included."""
    if not 0 < line <= len(cell.raw_starts) or not 0 < line <= len(cell.lines):
        return None
    raw_line, raw_start = cell.raw_starts[line - 1]
    if line > 1 and cell.raw_starts[line - 2] == cell.raw_starts[line - 1]:
        return raw_line, raw_start  # a multi-line string: the string's start
    prefix = cell.lines[line - 1][:max(column - 1, 0)]
    escaped = json.dumps(prefix, ensure_ascii=cell.ascii_escaped)[1:-1]
    return raw_line, raw_start + len(escaped)


def raw_range(cell: CodeCell, range_: Range) -> Range | None:
    """A range of a cell (lines counted in the cell) as a range of the .ipynb file's text;
    None when the file's layout is unknown. At least one character long."""
    start = raw_position(cell, range_.start.line, range_.start.column)
    if start is None:
        return None
    end = raw_position(cell, range_.end.line, range_.end.column)
    if end is None or end <= start:
        end = (start[0], start[1] + 1)
    return Range.of(*start, *end)
