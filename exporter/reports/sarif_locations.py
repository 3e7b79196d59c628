"""Where a SARIF result points: the run's artifacts (each named once, by index), regions with
the text of their lines (``snippet``) and a few lines around (``contextRegion``), a notebook's
cell, and the export target as a logical location.

URIs are relative to ``%SRCROOT%`` (the check's root) so that no absolute path of the user's
machine lands in the log unless asked for (``originalUriBaseIds``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import sarif_om as sarif

from exporter.findings.diagnostics import Diagnostic, Location, Range
from exporter.reports.render import in_cell
from exporter.source.notebooks import CodeCell, raw_range
from exporter.source.text import source_lines

SRCROOT = "%SRCROOT%"
#: the lines shown before and after a finding's own (clipped to the file or the cell)
CONTEXT_LINES = 2
_TARGET_NOTE = "while checking the export target `"
#: a line of the text shown -> its line in the file (a notebook cell's: in the .ipynb JSON)
_LineMap = Callable[[int], int]


class Artifacts:
    """``run.artifacts``: every file the log names, once, the files checked first (role
    ``analysisTarget``); every ``artifactLocation`` handed out carries its index."""

    def __init__(self, root: Path, checked: Iterable[Path] = ()) -> None:
        self.root = root.resolve()
        self.artifacts: list[sarif.Artifact] = []
        self._index: dict[str, int] = {}
        for path in checked:
            self.location(path, checked=True)

    def uri(self, path: Path) -> tuple[str, str | None]:
        """The path relative to the root (with ``%SRCROOT%``), else its absolute URI."""
        try:
            return path.resolve().relative_to(self.root).as_posix(), SRCROOT
        except ValueError:
            return path.resolve().as_uri(), None

    def location(self, path: Path, *, checked: bool = False) -> sarif.ArtifactLocation:
        uri, base = self.uri(path)
        index = self._index.get(uri)
        if index is None:
            index = self._index[uri] = len(self.artifacts)
            self.artifacts.append(sarif.Artifact(
                location=sarif.ArtifactLocation(uri=uri, uri_base_id=base),
                length=_length(path), roles=["analysisTarget"] if checked else None))
        return sarif.ArtifactLocation(uri=uri, uri_base_id=base, index=index)


def _length(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1  # sarif-om's "unset"


def region(range_: Range, snippet: str | None = None) -> sarif.Region:
    return sarif.Region(
        start_line=range_.start.line, start_column=range_.start.column,
        end_line=range_.end.line, end_column=range_.end.column,
        snippet=sarif.ArtifactContent(text=snippet) if snippet is not None else None)


def physical_location(location: Location, artifacts: Artifacts,
                      ) -> tuple[sarif.PhysicalLocation, dict[str, int] | None]:
    """The location's region with its lines and context; in a notebook, the cell's (and the
    cell named in the location's properties)."""
    where = artifacts.location(location.path)
    cell = in_cell(location)
    if cell is not None:
        return _in_notebook(where, *cell)
    lines = source_lines(location.path)
    rng = location.range
    return sarif.PhysicalLocation(
        artifact_location=where, region=region(rng, _snippet(lines, rng)),
        context_region=_context(lines, rng, lambda line: line)), None


def _in_notebook(where: sarif.ArtifactLocation, cell: CodeCell, range_: Range,
                 ) -> tuple[sarif.PhysicalLocation, dict[str, int]]:
    """SARIF has no notebook cells: the region is where the cell's text is in the .ipynb
    file's JSON (what GitHub code scanning and SARIF viewers open), its snippet and context
    the cell's lines as the user wrote them, and the location's properties say the cell and
    the line and column within it (docs/notebooks.md)."""
    properties = {"cell": cell.number, "cellLine": range_.start.line,
                  "cellColumn": range_.start.column}
    raw = raw_range(cell, range_)
    if raw is None:  # the file's layout is unknown: its first character, no text
        return sarif.PhysicalLocation(artifact_location=where,
                                      region=region(Range.of(1, 1, 1, 2))), properties
    return sarif.PhysicalLocation(
        artifact_location=where, region=region(raw, _snippet(cell.lines, range_)),
        context_region=_context(cell.lines, range_, lambda line: cell.raw_starts[line - 1][0],
                                lambda first, last: _text_column(cell, first, last)),
    ), properties


def _text_column(cell: CodeCell, first: int, last: int) -> int | None:
    """The column of the .ipynb file where the text of the cell's lines ``first..last``
    starts, when each is a JSON string of its own starting there (as Jupyter writes them);
    else None. The context region starts at that column: a viewer that places the region's
    columns in the context's snippet (Microsoft's SARIF viewer) then marks the finding's own
    text, not the characters as many places to its right as the string's indentation."""
    starts = cell.raw_starts[first - 1:last]
    columns = {column for _, column in starts}
    distinct_lines = len({line for line, _ in starts}) == len(starts) == last - first + 1
    return columns.pop() if distinct_lines and len(columns) == 1 else None


def _snippet(lines: Sequence[str], range_: Range) -> str | None:
    """The text of the range's lines; None when the file no longer has them."""
    first, last = range_.start.line, max(range_.end.line, range_.start.line)
    if not 0 < first <= last <= len(lines):
        return None
    return "\n".join(lines[first - 1:last])


def _context(lines: Sequence[str], range_: Range, file_line: _LineMap,
             file_column: Callable[[int, int], int | None] = lambda first, last: None,
             ) -> sarif.Region | None:
    """The range's lines and ``CONTEXT_LINES`` around them, clipped; None when there is
    nothing around the range (a context region must be more than its region). ``file_column``:
    the column of the file where the text of the shown lines starts (None: the first)."""
    first, last = range_.start.line, max(range_.end.line, range_.start.line)
    if not 0 < first <= last <= len(lines):
        return None
    start, end = max(1, first - CONTEXT_LINES), min(len(lines), last + CONTEXT_LINES)
    if (start, end) == (first, last):
        return None
    text = "\n".join(lines[start - 1:end])
    column = file_column(start, end)
    return sarif.Region(start_line=file_line(start), end_line=file_line(end),
                        start_column=column if column not in (None, 1) else None,
                        snippet=sarif.ArtifactContent(text=text))


def target_location(diagnostic: Diagnostic, artifacts: Artifacts) -> sarif.LogicalLocation | None:
    """The export target as ``path::Target`` (``onnxlens save``'s spelling): a class's model
    is an ``object``, a factory function or one ``torch.onnx.export`` call a ``function``."""
    if not diagnostic.target:
        return None
    path = diagnostic.location.path  # the target's own file, unless a note names another
    for related in diagnostic.related:
        if related.message.startswith(_TARGET_NOTE):
            path = related.location.path
    uri, base = artifacts.uri(path)
    shown = uri if base else str(path.resolve())
    return sarif.LogicalLocation(
        name=diagnostic.target, fully_qualified_name=f"{shown}::{diagnostic.target}",
        kind=_target_kind(path, diagnostic.target))


def _target_kind(path: Path, name: str) -> str:
    if "@" in name:  # `function@line`: a function's torch.onnx.export call
        return "function"
    definition = re.compile(rf"(?:async\s+)?def\s+{re.escape(name)}\b")
    return "function" if any(definition.match(line) for line in source_lines(path)) \
        else "object"

