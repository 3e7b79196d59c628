"""The text edits fixes are made of (``exporter/findings/fixes.py``): applying them to a
text, and the keyword argument an edit adds to a call or changes in it. Nothing here runs the
user's code."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable
from pathlib import Path

from exporter.findings.diagnostics import Position, Range
from exporter.findings.fixes import FixEdit
from exporter.source.text import node_range

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class EditConflict(ValueError):
    """Edits that overlap, or fall outside the text."""


def apply_edits(text: str, edits: Iterable[FixEdit]) -> str:
    """``text`` with ``edits`` made (positions as Python and LSP count them: lines broken at
    ``\\n``, ``\\r\\n`` and ``\\r``, columns in code points)."""
    starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]

    def offset(position: Position) -> int:
        if not 1 <= position.line <= len(starts):
            raise EditConflict(f"line {position.line} is not in the text")
        line_start = starts[position.line - 1]
        line_end = starts[position.line] if position.line < len(starts) else len(text)
        result = line_start + position.column - 1
        if not line_start <= result <= line_end:
            raise EditConflict(f"column {position.column} is not in line {position.line}")
        return result

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.text) for e in edits),
                   reverse=True)
    for (start, _, _), (_, previous_end, _) in itertools.pairwise(spans):
        if previous_end > start:
            raise EditConflict("overlapping edits")
    for start, end, replacement in spans:
        text = text[:start] + replacement + text[end:]
    return text


def keyword_edits(path: Path, lines: list[str], call: ast.Call,
                  keywords: dict[str, str]) -> tuple[FixEdit, ...]:
    """The edits that make ``call`` pass each ``name=value`` of ``keywords``: the value
    replaced where the call passes the keyword already, the others added after the last
    argument in the call's own layout (one argument per line with a trailing comma stays so).
    """
    edits = []
    added = []
    for name, value in keywords.items():
        passed = next((k for k in call.keywords if k.arg == name), None)
        if passed is not None:
            edits.append(FixEdit(path, node_range(passed.value, lines), value))
        else:
            added.append(f"{name}={value}")
    if added:
        edits.append(_added_keywords(path, lines, call, added))
    return tuple(edits)


def _added_keywords(path: Path, lines: list[str], call: ast.Call, added: list[str]) -> FixEdit:
    call_range = node_range(call, lines)
    arguments: list[ast.AST] = [*call.args, *call.keywords]
    close = Position(call_range.end.line, call_range.end.column - 1)  # at the ")"
    if not arguments:
        return FixEdit(path, Range(close, close), ", ".join(added))
    last = max((node_range(node, lines) for node in arguments), key=lambda r: r.end).end
    multi_line = close.line > last.line
    indent = re.match(r"\s*", lines[last.line - 1]).group()  # type: ignore[union-attr]
    comma = _text_between(lines, last, close).find(",")
    if comma >= 0:  # a trailing comma: the keywords go after it, with one of their own
        after = _advance(lines, last, comma + 1)
        text = "".join(f"\n{indent}{item}," for item in added) if multi_line \
            else "".join(f" {item}," for item in added)
        return FixEdit(path, Range(after, after), text)
    text = "".join(f",\n{indent}{item}" for item in added) if multi_line \
        else "".join(f", {item}" for item in added)
    return FixEdit(path, Range(last, last), text)


def _text_between(lines: list[str], start: Position, end: Position) -> str:
    if start.line == end.line:
        return lines[start.line - 1][start.column - 1:end.column - 1]
    middle = lines[start.line:end.line - 1]
    return "\n".join([lines[start.line - 1][start.column - 1:], *middle,
                      lines[end.line - 1][:end.column - 1]])


def _advance(lines: list[str], start: Position, count: int) -> Position:
    """The position ``count`` characters after ``start`` (a line break counts one)."""
    line, column = start.line, start.column
    while count > 0:
        rest = len(lines[line - 1]) - (column - 1)
        if count <= rest:
            return Position(line, column + count)
        count -= rest + 1
        line, column = line + 1, 1
    return Position(line, column)
