"""The diagnostic model shared by every output (text, JSON, SARIF, LSP).

Lines and columns are 1-based; a range's end column is exclusive. Columns count
characters (code points), not bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exporter.findings.fixes import FixTrial, QuickFix
from exporter.findings.positions import Location, Position, Range
from exporter.findings.rules import Severity, get_rule

__all__ = ["Diagnostic", "Location", "Position", "Range", "Related", "merge_duplicates",
           "sort_key"]


@dataclass(frozen=True)
class Related:
    location: Location
    message: str


@dataclass(frozen=True)
class Diagnostic:
    rule: str
    message: str
    location: Location
    target: str
    severity: Severity | None = None
    related: tuple[Related, ...] = ()
    hint: str | None = None
    count: int = 1
    # Machine-readable extras: the operator, the ONNX node, the sizes fed (docs/cli.md)
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Edits offered as they are (exporter/findings/fixes.py)
    quick_fixes: tuple[QuickFix, ...] = field(default=(), compare=False, hash=False)
    # Fixes onnxlens tried that work for this finding (exporter/findings/fixes.py)
    fixes: tuple[FixTrial, ...] = field(default=(), compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.severity is None:
            object.__setattr__(self, "severity", get_rule(self.rule).severity)
        if self.hint is None:
            object.__setattr__(self, "hint", get_rule(self.rule).fix)

    @property
    def stage(self) -> str:
        return get_rule(self.rule).stage

    @property
    def key(self) -> tuple[str, Path, Range]:
        return (self.rule, self.location.path, self.location.range)


def merge_duplicates(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Merge diagnostics with the same rule and range, counting the occurrences."""
    merged: dict[tuple[str, Path, Range], Diagnostic] = {}
    for diagnostic in diagnostics:
        known = merged.get(diagnostic.key)
        if known is None:
            merged[diagnostic.key] = diagnostic
        else:
            merged[diagnostic.key] = replace(known, count=known.count + diagnostic.count)
    return list(merged.values())


def sort_key(diagnostic: Diagnostic) -> tuple[str, int, int, str]:
    start = diagnostic.location.range.start
    return (str(diagnostic.location.path), start.line, start.column, diagnostic.rule)
