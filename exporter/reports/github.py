"""``onnxlens check --format github``: one GitHub Actions workflow command per finding, and a
markdown table of every finding for the job's step summary (GitHub shows at most 10
annotations of a kind per step; the summary has room for all of them).

Workflow commands: https://docs.github.com/actions/reference/workflow-commands-for-github-actions
"""

from __future__ import annotations

from pathlib import Path

from exporter.findings.diagnostics import Diagnostic, Range, sort_key
from exporter.findings.result import NothingChecked
from exporter.findings.rules import RULES, Severity
from exporter.reports.render import display_path, in_cell, position, printable
from exporter.source.notebooks import raw_range

_COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(diagnostic: Diagnostic) -> str:
    """``::error file=…,line=…,col=…,endLine=…,endColumn=…,title=ONNX201::message``"""
    rng = diagnostic.location.range
    message = diagnostic.message
    cell = in_cell(diagnostic.location)
    if cell is not None:  # annotate the cell's line in the .ipynb file (docs/notebooks.md)
        rng = raw_range(*cell) or Range.of(1, 1, 1, 2)
        message = f"cell {cell[0].number}, line {cell[1].start.line}: {message}"
    properties = {
        "file": display_path(diagnostic.location.path),
        "line": rng.start.line, "col": rng.start.column,
        "endLine": rng.end.line, "endColumn": rng.end.column,
        "title": diagnostic.rule,
    }
    listed = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items())
    for fix in diagnostic.quick_fixes:
        message += f"\nFix: {fix.title}"
    for trial in diagnostic.fixes:  # fixes tried and found working (docs/fixes.md)
        message += f"\nTried and works: {trial.candidate.title}"
    if diagnostic.hint:
        message += f"\n{diagnostic.hint}"
    return f"::{_COMMANDS[Severity(diagnostic.severity)]} {listed}::{_escape_data(message)}"


def workflow_commands(diagnostics: list[Diagnostic],
                      nothing_checked: NothingChecked | None = None) -> str:
    """Every finding's annotation, and one for a run that checked no target (else a green
    check would look like a clean model)."""
    lines = [annotation(d) for d in sorted(diagnostics, key=sort_key)]
    if nothing_checked is not None:
        lines.append(f"::{_COMMANDS[nothing_checked.severity]} title=onnxlens::"
                     f"{_escape_data(f'Nothing checked: {nothing_checked.reason}')}")
    return "".join(line + "\n" for line in lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def step_summary(diagnostics: list[Diagnostic], summary_line: str) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``: the summary line and a table of every finding."""
    lines = ["## onnxlens", "", summary_line.strip(), ""]
    if diagnostics:
        lines += ["| Rule | Severity | Location | Message |", "|---|---|---|---|"]
        for diagnostic in sorted(diagnostics, key=sort_key):
            where = position(diagnostic.location)
            rule = RULES[diagnostic.rule]
            name = f"[{rule.id}]({rule.doc_url})" if rule.doc_url else rule.id
            lines.append(f"| {name} | {Severity(diagnostic.severity).value} "
                         f"| `{_cell(where)}` | {_cell(printable(diagnostic.message))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def append_step_summary(path: Path, text: str) -> None:
    """GitHub gives each step its own file; appending keeps what earlier commands wrote."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
