"""exporter diagnostics → LSP diagnostics, honouring the client's capabilities and the
negotiated position encoding (exporter columns count code points, LSP's default is UTF-16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from exporter.findings.diagnostics import Diagnostic, Range
from exporter.findings.rules import RULES, Severity
from exporter.reports.serialize import edits_to_data
from lsp_server.client_support import ClientSupport

_SEVERITY = {Severity.ERROR: types.DiagnosticSeverity.Error,
             Severity.WARNING: types.DiagnosticSeverity.Warning,
             Severity.INFO: types.DiagnosticSeverity.Information}


def path_uri(path: Path) -> str:
    return from_fs_path(str(path)) or path.as_uri()


def path_of(uri: str) -> Path:
    return Path(to_fs_path(uri) or uri)


class PositionConverter:
    """Columns from code points to the client's encoding, per line of text."""

    def __init__(self, encoding: str, lines_of: Any) -> None:
        self.encoding = encoding
        self.lines_of = lines_of  # Path -> tuple[str, ...]

    def column(self, path: Path, line: int, column: int) -> int:
        """1-based code-point column → 0-based column in the client's encoding."""
        lines = self.lines_of(path)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        prefix = text[: max(column - 1, 0)]
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(prefix.encode("utf-8"))
        if self.encoding == types.PositionEncodingKind.Utf32:
            return len(prefix)
        return len(prefix.encode("utf-16-le")) // 2

    def range(self, path: Path, range_: Range) -> types.Range:
        start, end = range_.start, range_.end
        return types.Range(
            start=types.Position(line=start.line - 1,
                                 character=self.column(path, start.line, start.column)),
            end=types.Position(line=end.line - 1,
                               character=self.column(path, end.line, end.column)))


def _data(diagnostic: Diagnostic) -> dict[str, Any]:
    """The diagnostic's data, and every quick fix it offers under ``fixes`` (the client sends
    them back with a code-action request): those offered as they are, then those tried and
    found working (``tried``, docs/fixes.md)."""
    data: dict[str, Any] = {"rule": diagnostic.rule, "target": diagnostic.target,
                            **diagnostic.data.as_json()}
    fixes = [{"title": fix.title, "edits": edits_to_data(fix.edits), "tried": False}
             for fix in diagnostic.quick_fixes]
    fixes += [{"title": trial.candidate.title, "edits": edits_to_data(trial.candidate.edits),
               "tried": True} for trial in diagnostic.fixes]
    if fixes:
        data["fixes"] = fixes
    return data


def to_lsp(diagnostic: Diagnostic, support: ClientSupport,
           positions: PositionConverter) -> types.Diagnostic:
    related = None
    if support.related_information and diagnostic.related:
        related = [types.DiagnosticRelatedInformation(
            location=types.Location(uri=path_uri(r.location.path),
                                    range=positions.range(r.location.path, r.location.range)),
            message=r.message) for r in diagnostic.related]
    description = None
    if support.code_description:
        description = types.CodeDescription(href=RULES[diagnostic.rule].doc_link)
    count = f" (×{diagnostic.count})" if diagnostic.count > 1 else ""
    hint = f"\n{diagnostic.hint}" if diagnostic.hint else ""
    if diagnostic.fixes:
        hint = "".join(f"\nTried and works: {trial.candidate.title} (a quick fix)"
                       for trial in diagnostic.fixes) + hint
    return types.Diagnostic(
        range=positions.range(diagnostic.location.path, diagnostic.location.range),
        message=f"{diagnostic.message}{count}{hint}",
        severity=_SEVERITY[Severity(diagnostic.severity)],
        code=diagnostic.rule,
        code_description=description,
        source="onnxlens",
        related_information=related,
        data=_data(diagnostic),
    )
