"""The diagnostic model shared by every output (text, JSON, SARIF, LSP).

Lines and columns are 1-based; a range's end column is exclusive. Columns count
characters (code points), not bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from exporter.findings.fixes import FixTrial, QuickFix
from exporter.findings.positions import Location, Position, Range
from exporter.findings.rules import Severity, get_rule

__all__ = ["Diagnostic", "FindingData", "Location", "Position", "Range", "Related",
           "merge_duplicates", "sort_key"]


@dataclass(frozen=True)
class FindingData:
    """A finding's machine-readable extras (``data`` in the JSON report and in the editor's
    diagnostics, docs/cli.md): each rule sets its own; None is not set, and is left out of the
    JSON (``as_json``)."""

    operator: str | None = None  # ONNX2xx, ONNX50x: the ATen operator
    decomposed_operator: str | None = None  # ONNX201: what it decomposes to
    overload: str | None = None  # ONNX201: ``torch.ops.aten.i0.default``, for the stub ...
    arguments: list[str] | None = None  # ... and its argument names
    fx_node: str | None = None  # ONNX50x: the first diverging FX node
    onnx_node: str | None = None  # ONNX3xx/4xx: the ONNX node ...
    op_type: str | None = None  # ... and its op type
    output: str | None = None  # ONNX501/502: the output that differs most ...
    max_abs: float | None = None  # ... its errors against PyTorch ...
    max_rel: float | None = None
    atol: float | None = None  # ... and the tolerances
    rtol: float | None = None
    dimension: str | None = None  # ONNX107: the dimension, ...
    declared: str | None = None  # ... the range declared for it, ...
    valid: str | None = None  # ... the range the graph is valid for, ...
    declare: str | None = None  # ... the declaration that says so ...
    asked: str | None = None  # ... and how it was declared
    confirmed: bool | None = None  # ONNX107: a run outside the range failed or differed
    sizes: dict[str, int] | None = None  # ONNX403, a confirmed ONNX107: the sizes fed
    draft_capture: bool | None = None  # found by the draft export (capture failed)
    opset: int | None = None  # ONNX60x: the opset the call asks for
    early: bool | None = None  # the server: found while the check still runs

    def as_json(self) -> dict[str, Any]:
        return {f.name: value for f in fields(self)
                if (value := getattr(self, f.name)) is not None}


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
    data: FindingData = field(default_factory=FindingData, compare=False, hash=False)
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
