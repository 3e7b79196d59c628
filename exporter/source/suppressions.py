"""Inline suppressions: ``# onnxlens: ignore[ONNX201, ONNX106]`` or ``# onnxlens: ignore``.

On the line a finding is reported at, the comment silences exactly those rules there (ids or
prefixes, as ``--select`` takes them; no list: every rule). On a target's pragma lines or its
``def``/``class`` line, it silences them for every finding of that target, wherever it is
reported. Only real comments count (``tokenize``), never text inside a string.

A suppression that silenced nothing is itself a finding, ONNX006, which is off unless asked
for (``--select ONNX006``), as ruff's RUF100.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exporter.findings.diagnostics import Diagnostic, Location, Range
from exporter.findings.result import CheckResult
from exporter.source.targets import Target

UNUSED_RULE = "ONNX006"
_COMMENT = re.compile(r"onnxlens:\s*ignore\b(?:\[(?P<rules>[^\]]*)\])?", re.IGNORECASE)
_RULE = re.compile(r"ONNX\d{1,3}")


@dataclass
class Suppression:
    path: Path
    line: int
    column: int  # 1-based, of the "onnxlens:" text
    end_column: int
    rules: tuple[str, ...] | None  # None: every rule
    used: set[str] = field(default_factory=set)

    def silences(self, rule: str) -> bool:
        return self.rules is None or any(rule.startswith(pattern) for pattern in self.rules)

    @property
    def location(self) -> Location:
        return Location(self.path, Range.of(self.line, self.column, self.line, self.end_column))


def parse_comment(text: str) -> tuple[int, int, tuple[str, ...] | None] | None:
    """(start, end offsets, rules) of the suppression inside one comment, if it holds one."""
    match = _COMMENT.search(text)
    if match is None:
        return None
    listed = match["rules"]
    if listed is None:
        return match.start(), match.end(), None
    rules = tuple(part.strip().upper() for part in listed.split(",") if part.strip())
    return match.start(), match.end(), tuple(r for r in rules if _RULE.fullmatch(r)) or None


def find_suppressions(path: Path, lines: Sequence[str]) -> list[Suppression]:
    found: list[Suppression] = []
    readline = io.StringIO("\n".join(lines) + "\n").readline
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type != tokenize.COMMENT:
                continue
            parsed = parse_comment(token.string)
            if parsed is not None:
                start, end, rules = parsed
                line, column = token.start
                found.append(Suppression(path, line, column + start + 1, column + end + 1,
                                         rules))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # what was read before the error still counts
    return found


def apply_suppressions(result: CheckResult, targets: Iterable[Target],
                       lines_of: Callable[[Path], Sequence[str]]) -> list[Diagnostic]:
    """Remove the findings a suppression silences from ``result`` (so that a target whose
    only errors are silenced is ok); returns ONNX006 for each suppression in the files of
    ``targets`` (the files whose checks ran) that silenced nothing."""
    by_file: dict[Path, list[Suppression]] = {}

    def suppressions(path: Path) -> list[Suppression]:
        if path not in by_file:
            by_file[path] = find_suppressions(path, lines_of(path))
        return by_file[path]

    target_list = list(targets)
    whole_target = {target.name: [s for s in suppressions(target.path)
                                  if s.line in _target_lines(target)]
                    for target in target_list}

    def kept(diagnostic: Diagnostic) -> bool:
        here = [s for s in suppressions(diagnostic.location.path)
                if s.line == diagnostic.location.range.start.line]
        silencing = [s for s in here + whole_target.get(diagnostic.target, [])
                     if s.silences(diagnostic.rule)]
        for suppression in silencing:
            suppression.used.add(diagnostic.rule)
        return not silencing

    result.file_diagnostics = [d for d in result.file_diagnostics if kept(d)]
    for target_result in result.targets:
        target_result.diagnostics = [d for d in target_result.diagnostics if kept(d)]

    unused = []
    for path in sorted({target.path for target in target_list}):
        for suppression in suppressions(path):
            if suppression.used:
                continue
            listed = ", ".join(suppression.rules) if suppression.rules else "any rule"
            unused.append(Diagnostic(
                UNUSED_RULE, f"This suppression silenced nothing: no finding of {listed} "
                "is reported here.", suppression.location, target="",
                hint="Remove the comment (what it silenced is gone)."))
    return unused


def _target_lines(target: Target) -> set[int]:
    lines = {target.definition.start.line}
    if target.pragma is not None:
        lines.update(range(target.pragma.start.line, target.pragma.end.line + 1))
    return lines


def with_rule_added(comment_line: str, rule: str) -> str | None:
    """``line`` with ``rule`` added to its suppression comment, or None if it has none."""
    parsed = parse_comment(comment_line)
    if parsed is None:
        return None
    start, end, rules = parsed
    if rules is None and "[" not in comment_line[start:end]:
        return comment_line  # already silences every rule
    updated = f"onnxlens: ignore[{', '.join([*(rules or ()), rule])}]"
    return comment_line[:start] + updated + comment_line[end:]
