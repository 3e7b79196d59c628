"""Text (compiler-style) and JSON renderings of a check result."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, Location, Range, sort_key
from exporter.findings.fixes import FixCandidate, FixEdit, FixTrial
from exporter.findings.result import CheckResult
from exporter.findings.rules import RULES, Severity
from exporter.reports.serialize import summary_to_data
from exporter.source.notebooks import CodeCell
from exporter.source.text import line_text, notebook_at, split_lines

JSON_VERSION = 2


def display_path(path: Path, base: Path | None = None) -> str:
    """The path relative to ``base`` (default: the working directory) when it is inside,
    else as given."""
    base = (base or Path.cwd()).resolve()
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return str(path)


# C0 controls but tab and newline, DEL, C1 controls: ESC starts ANSI and OSC sequences
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` for a terminal or a CI log: control characters a model's message (or a
    source line) holds are shown escaped (``\x1b``), never sent raw, so that no ANSI or OSC
    sequence from the user's code recolours, retitles or rewrites the user's terminal."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


#: reported only when ``select`` names them (as ruff's RUF100): unused suppressions, and
#: the draft-capture warning whose fact every capture error it follows already carries
OFF_BY_DEFAULT = frozenset({"ONNX006", "ONNX106"})


def filter_rules(
    diagnostics: Iterable[Diagnostic], select: list[str] | None, ignore: list[str] | None
) -> list[Diagnostic]:
    """``select``/``ignore`` take ids or prefixes (``ONNX2`` = every translate rule)."""

    def matches(rule: str, patterns: list[str]) -> bool:
        return any(rule.startswith(pattern) for pattern in patterns)

    kept = []
    for diagnostic in diagnostics:
        if select and not matches(diagnostic.rule, select):
            continue
        if not select and diagnostic.rule in OFF_BY_DEFAULT:
            continue
        if ignore and matches(diagnostic.rule, ignore):
            continue
        kept.append(diagnostic)
    return kept


def apply_severity(diagnostics: Iterable[Diagnostic],
                   overrides: dict[str, str] | None) -> list[Diagnostic]:
    """``{"ONNX106": "info", "ONNX5": "warning"}``: ids or prefixes, the longest one wins."""
    if not overrides:
        return list(diagnostics)
    changed = []
    for diagnostic in diagnostics:
        matching = [key for key in overrides if diagnostic.rule.startswith(key)]
        if matching:
            level = Severity(overrides[max(matching, key=len)])
            diagnostic = replace(diagnostic, severity=level)
        changed.append(diagnostic)
    return changed


# -- text ------------------------------------------------------------------------------------

def in_cell(location: Location) -> tuple[CodeCell, Range] | None:
    """A notebook's location as the cell it is in and the range within that cell; None for
    a Python file (docs/notebooks.md: how each output locates a notebook's finding)."""
    notebook = notebook_at(location.path)
    return notebook.cell_range(location.range) if notebook else None


def position(location: Location) -> str:
    """``path:line:column``; in a notebook ``path:cell N:line:column`` (as ruff writes it)."""
    start = location.range.start
    cell = in_cell(location)
    if cell is not None:
        return (f"{display_path(location.path)}:cell {cell[0].number}:"
                f"{cell[1].start.line}:{start.column}")
    return f"{display_path(location.path)}:{start.line}:{start.column}"


def _excerpt(location: Location) -> list[str]:
    rng = location.range
    text = line_text(location.path, rng.start.line)
    cell = in_cell(location)
    if cell is not None:  # the cell's line as written (magics and all), numbered in the cell
        rng = cell[1]
        text = cell[0].lines[rng.start.line - 1]
    if not text:
        return []
    gutter = str(rng.start.line)
    end_column = rng.end.column if rng.end.line == rng.start.line else len(text) + 1
    width = max(end_column - rng.start.column, 1)
    pad = " " * len(gutter)
    return [f" {gutter} | {text.rstrip()}",
            f" {pad} | {' ' * (rng.start.column - 1)}{'^' * width}"]


def format_diagnostic(diagnostic: Diagnostic) -> str:
    severity = Severity(diagnostic.severity).value
    count = f" (x{diagnostic.count})" if diagnostic.count > 1 else ""
    lines = [f"{position(diagnostic.location)}: {severity}[{diagnostic.rule}]: "
             f"{diagnostic.message}{count}"]
    lines += _excerpt(diagnostic.location)
    for related in diagnostic.related:
        lines.append(f"   note: {position(related.location)}: {related.message}")
    for fix in diagnostic.quick_fixes:
        lines += [f"   fix: {fix.title}", *_edit_lines(fix.edits)]
    for trial in diagnostic.fixes:
        lines += _proven_fix(trial)
    if diagnostic.hint:
        lines.append(f"   help: {diagnostic.hint}")
    rule = RULES[diagnostic.rule]
    lines.append(f"   docs: {rule.doc_url or f'onnxlens rule {rule.id}'}")
    return printable("\n".join(lines))


def _proven_fix(trial: FixTrial) -> list[str]:
    """A fix onnxlens tried, and the edits it is made of."""
    return [f"   fix: {trial.candidate.title}; tried: the model then exports and ONNX Runtime "
            f"matches PyTorch ({trial.seconds:.1f} s)", *_edit_lines(trial.candidate.edits)]


def _edit_lines(edits: tuple[FixEdit, ...]) -> list[str]:
    """Each edit of a fix: where, and what it does there."""
    lines = []
    for edit in edits:
        text = " ".join(part.strip() for part in split_lines(edit.text) if part.strip())
        change = "remove" if not text else f"insert `{text}`" \
            if edit.range.start == edit.range.end else f"replace with `{text}`"
        lines.append(f"        {position(Location(edit.path, edit.range))}: {change}")
    return lines


def format_text(result: CheckResult, diagnostics: list[Diagnostic]) -> str:
    parts = [format_findings(diagnostics)] if diagnostics else []
    runtimes = format_runtimes(result)
    if runtimes:
        parts.append(runtimes)
    return "\n\n".join([*parts, format_summary(result, diagnostics)])


def format_runtimes(result: CheckResult) -> str:
    """The deploy stage's table (docs/runtimes.md), one line per target, runtime and
    precision; empty when no runtime besides ONNX Runtime's CPU provider and no precision
    besides fp32 was named."""
    rows = [(target.name, run) for target in result.targets for run in target.summary.runtimes]
    if not rows:
        return ""
    names = max(len(name) for name, _ in rows)
    runtimes = max(len(run.shown) for _, run in rows)
    lines = ["Runtimes:"]
    for name, run in rows:
        details = []
        if run.unsupported:
            shown = ", ".join(run.unsupported[:5]) + (", …" if len(run.unsupported) > 5 else "")
            details.append(f"not taken: {shown}")
        if run.partitions is not None:
            details.append(f"{run.partitions} partition(s)")
        if run.state == "not run here":
            details.append(run.detail)
        timing = f"{run.seconds:.2f} s" if run.state != "not run here" else ""
        lines.append(f"  {name.ljust(names)}  {run.shown.ljust(runtimes)}  {run.state}"
                     + (f" ({'; '.join(details)})" if details else "")
                     + (f"  {timing}" if timing else ""))
    return "\n".join(lines)


def format_findings(diagnostics: list[Diagnostic]) -> str:
    return "\n\n".join(format_diagnostic(d) for d in sorted(diagnostics, key=sort_key))


def format_summary(result: CheckResult, diagnostics: list[Diagnostic]) -> str:
    errors = sum(1 for d in diagnostics if d.severity == Severity.ERROR)
    warnings = sum(1 for d in diagnostics if d.severity == Severity.WARNING)
    failing = {(d.target, _target_file(result, d)) for d in diagnostics
               if d.severity == Severity.ERROR and d.target}
    nothing = result.nothing_checked
    files = nothing.files_read if nothing is not None else len(result.files)
    summary = (f"Checked {len(result.targets)} target(s) in {files} file(s): "
               f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
               f"{f' ({len(failing)} target(s) failing)' if failing else ''}.")
    return summary + "\n" + (f"{nothing.line}\n" if nothing is not None else "")


def _target_file(result: CheckResult, diagnostic: Diagnostic) -> Path:
    for target in result.targets:
        if diagnostic in target.diagnostics:
            return target.path
    return diagnostic.location.path


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


# -- JSON ------------------------------------------------------------------------------------

def _range_json(range_: Range) -> dict[str, dict[str, int]]:
    return {"start": {"line": range_.start.line, "column": range_.start.column},
            "end": {"line": range_.end.line, "column": range_.end.column}}


def _located_json(path: Path, range_: Range) -> dict[str, Any]:
    """``path`` and ``range``; in a notebook the range counts lines within ``cell``, the
    cell's 1-based index over all cells of the file (as ruff's JSON has it)."""
    cell = in_cell(Location(path, range_))
    if cell is None:
        return {"path": display_path(path), "range": _range_json(range_)}
    return {"path": display_path(path), "cell": cell[0].number, "range": _range_json(cell[1])}


def diagnostic_json(diagnostic: Diagnostic) -> dict[str, Any]:
    return {
        "rule": diagnostic.rule,
        "severity": Severity(diagnostic.severity).value,
        "message": diagnostic.message,
        **_located_json(diagnostic.location.path, diagnostic.location.range),
        "target": diagnostic.target,
        "stage": diagnostic.stage,
        "related": [{**_located_json(r.location.path, r.location.range), "message": r.message}
                    for r in diagnostic.related],
        "hint": diagnostic.hint,
        "count": diagnostic.count,
        "url": RULES[diagnostic.rule].doc_link,
        "data": diagnostic.data.as_json(),
        "quick_fixes": [{"title": fix.title, "edits": _edits_json(fix.edits)}
                        for fix in diagnostic.quick_fixes],
        "fixes": [{**_candidate_json(trial.candidate), "seconds": round(trial.seconds, 1)}
                  for trial in diagnostic.fixes],
    }


def _edits_json(edits: tuple[FixEdit, ...]) -> list[dict[str, Any]]:
    return [{**_located_json(edit.path, edit.range), "text": edit.text} for edit in edits]


def _candidate_json(candidate: FixCandidate) -> dict[str, Any]:
    return {"key": candidate.key, "title": candidate.title, "source": candidate.source,
            "edits": _edits_json(candidate.edits)}


def result_json(result: CheckResult, diagnostics: list[Diagnostic]) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "targets": [{
            "name": target.name,
            **_located_json(target.path, target.definition),
            "ok": target.ok,
            "stages": [status.as_dict() for status in target.stages],
            "summary": summary_to_data(target.summary),
            "fix_trials": [{**_candidate_json(trial.candidate), "verdict": trial.verdict,
                            "seconds": round(trial.seconds, 1), "detail": trial.detail}
                           for trial in target.fix_trials],
        } for target in result.targets],
        "diagnostics": [diagnostic_json(d) for d in sorted(diagnostics, key=sort_key)],
        **({"nothing_checked": {"files_read": nothing.files_read, "reason": nothing.reason,
                                "severity": nothing.severity.value}}
           if (nothing := result.nothing_checked) is not None else {}),
    }
