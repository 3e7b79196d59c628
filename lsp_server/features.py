"""CodeLens, hover and code actions, built from a document's targets and its last results.
Plain functions of their inputs: ``presentation`` wires them to LSP methods."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

from exporter.findings.result import (
    ModelSummary,
    RuntimeRun,
    StageState,
    TargetResult,
    TensorSummary,
)
from exporter.source.suppressions import UNUSED_RULE, with_rule_added
from exporter.source.targets import Target
from lsp_server.convert import PositionConverter, path_uri

_log = logging.getLogger(__name__)

_STATE_MARKS = {StageState.PASSED: "✓", StageState.FAILED: "✗", StageState.SKIPPED: "–"}


# -- CodeLens --------------------------------------------------------------------------------

def lens_title(result: TargetResult | None, checking: bool, trusted: bool,
               queued: int | None = None) -> str:
    """``queued``: the document's place among those waiting for a check (1: next)."""
    if not trusted:
        return "ONNX · not checked (workspace not trusted)"
    if checking and queued is not None:
        return f"ONNX · queued (#{queued})"
    if checking:
        return "ONNX · checking…"
    if result is None:
        return "ONNX · not checked yet"
    errors = [d for d in result.diagnostics if d.severity == "error"]
    if errors:
        return f"✗ ONNX · {len(errors)} problem{'s' if len(errors) != 1 else ''}"
    parts = ["✓ ONNX", *_facts(result.summary, brief=True)]
    warnings = len(result.diagnostics)
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    return " · ".join(parts)


def _facts(summary: ModelSummary, *, brief: bool) -> list[str]:
    """Nodes, opset and ORT time (CodeLens); plus parameters and weights (hover)."""
    facts = []
    if summary.nodes is not None:
        facts.append(f"{summary.nodes} nodes")
    if summary.opset is not None:
        facts.append(f"opset {summary.opset}")
    if not brief and summary.parameters is not None:
        facts.append(f"{summary.parameters:,} parameters")
    if not brief and summary.initializer_bytes:
        facts.append(f"weights {_size(summary.initializer_bytes)}")
    if summary.ort_run_ms is not None:
        run = summary.ort_run_ms
        facts.append(f"{run:.1f} ms" if brief else f"ONNX Runtime run {run:.2f} ms")
    return facts


def code_lenses(uri: str, targets: list[Target], results: dict[str, TargetResult],
                checking: bool, trusted: bool, positions: PositionConverter,
                queued: int | None = None) -> list[types.CodeLens]:
    lenses = []
    for target in targets:
        where = positions.range(target.path, target.definition)
        arguments = [uri, target.name]
        title = lens_title(results.get(target.name), checking, trusted, queued)
        lenses.append(types.CodeLens(range=where, command=types.Command(
            title=title, command="onnxlens.showReport", arguments=arguments)))
        actions = [("Export", "onnxlens.export"), ("Save", "onnxlens.saveModel"),
                   ("Run", "onnxlens.runModel")]
        if trusted:  # a graph is what running the model makes: none in an untrusted folder
            actions.append(("Graph", "onnxlens.showGraph"))
        for label, command in actions:
            lenses.append(types.CodeLens(range=where, command=types.Command(
                title=label, command=command, arguments=arguments)))
    return lenses


# -- hover -----------------------------------------------------------------------------------

def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GB"


def _io_table(title: str, values: list[TensorSummary]) -> list[str]:
    if not values:
        return []
    rows = [f"| {title} | dtype | shape |", "|---|---|---|"]
    for value in values:
        shape = "×".join(str(d) for d in value.shape) or "scalar"
        rows.append(f"| `{value.name}` | {value.dtype} | {shape} |")
    return [*rows, ""]


def _runtime_table(runtimes: list[RuntimeRun]) -> list[str]:
    """The deploy stage's verdict on each runtime and precision named (docs/runtimes.md)."""
    if not runtimes:
        return []
    rows = ["| runtime | verdict | not taken | time |", "|---|---|---|---|"]
    for run in runtimes:
        taken = ", ".join(f"`{name}`" for name in run.unsupported[:5]) + (
            ", …" if len(run.unsupported) > 5 else "")
        time = f"{run.seconds:.2f} s" if run.state != "not run here" else run.detail
        rows.append(f"| {run.shown} | {run.state} | {taken} | {time} |")
    return [*rows, ""]


def report_markdown(name: str, result: TargetResult | None, checking: bool = False) -> str:
    """The summary shown on hover and by ``onnxlens.showReport``."""
    if result is None:
        return f"**ONNX export: `{name}`** — " + ("checking…" if checking else "not checked yet")
    errors = [d for d in result.diagnostics if d.severity == "error"]
    status = "✗ does not export cleanly" if errors else "✓ exports"
    summary = result.summary
    lines = [f"**ONNX export: `{name}`** — {status}", ""]
    facts = _facts(summary, brief=False)
    if facts:
        lines += [" · ".join(facts), ""]
    lines += _io_table("input", summary.inputs)
    lines += _io_table("output", summary.outputs)
    operators = summary.operators
    if operators:
        shown = ", ".join(f"{op} ×{count}" for op, count in list(operators.items())[:12])
        more = f", … ({len(operators) - 12} more)" if len(operators) > 12 else ""
        lines += [f"Operators: {shown}{more}", ""]
    lines += _runtime_table(summary.runtimes)
    stages = []
    for stage in result.stages:
        if stage.name == "deploy" and not summary.runtimes:
            continue  # no runtime named besides ONNX Runtime's CPU provider: nothing to say
        mark = _STATE_MARKS[stage.state]
        detail = f" ({stage.reason})" if stage.reason else ""
        stages.append(f"{mark} {stage.name} {stage.seconds:.2f} s{detail}")
    lines += ["Stages: " + " · ".join(stages), ""]
    for diagnostic in result.diagnostics:
        start = diagnostic.location.range.start
        lines.append(f"- `{diagnostic.rule}` {diagnostic.location.path.name}:{start.line}: "
                     f"{diagnostic.message}")
    return "\n".join(lines).rstrip() + "\n"


def hover(target: Target, result: TargetResult | None, checking: bool, markdown: bool,
          positions: PositionConverter) -> types.Hover:
    text = report_markdown(target.name, result, checking)
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.Hover(contents=types.MarkupContent(kind=kind, value=text),
                       range=positions.range(target.path, target.definition))


# -- code actions ----------------------------------------------------------------------------

def _edit(uri: str, range_: types.Range, text: str) -> types.TextEdit:
    return types.TextEdit(range=range_, new_text=text)


def _fix_actions(uri: str, diagnostic: types.Diagnostic, positions: PositionConverter,
                 path: Any) -> list[types.CodeAction]:
    """The quick fixes the diagnostic carries (lsp_server/convert.py): each edit is on the
    diagnostic's document unless it names another file; the first fix tried and found working
    is the preferred one."""
    from exporter.reports.serialize import range_from_data

    data = diagnostic.data or {}
    actions = []
    preferred_given = False
    for fix in data.get("fixes") or []:
        changes: dict[str, list[types.TextEdit]] = {}
        for change in fix["edits"]:
            changed = Path(change["path"])
            edited = uri if changed == path else path_uri(changed)
            changes.setdefault(edited, []).append(_edit(
                uri, positions.range(changed if edited != uri else path,
                                     range_from_data(change["range"])), change["text"]))
        tried = bool(fix.get("tried"))
        title = (f"{fix['title']} (tried: the model then exports and matches)" if tried
                 else fix["title"])
        actions.append(types.CodeAction(
            title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
            edit=types.WorkspaceEdit(changes=changes), is_preferred=tried and not preferred_given))
        preferred_given = preferred_given or tried
    return actions


def translation_stub_action(uri: str, diagnostic: types.Diagnostic, target: Target,
                            lines: list[str], positions: PositionConverter
                            ) -> types.CodeAction | None:
    """ONNX201: an onnxscript function to fill in, registered in the pragma."""
    data = diagnostic.data or {}
    overload, arguments = data.get("overload"), data.get("arguments")
    if not overload or arguments is None or target.pragma is None:
        return None
    short = overload.split(".")[-2]
    function = f"{short}_translation"
    if any(re.match(rf"\s*def {function}\(", line) for line in lines):
        return None
    parameters = ", ".join(["x" if a == "self" else a for a in arguments])
    first = "x" if arguments and arguments[0] == "self" else (arguments[0] if arguments else "x")
    stub = (f"def {function}({parameters}):\n"
            f'    """ONNX translation of `{overload}`: replace the body with onnxscript '
            f'ops."""\n'
            f"    return op.Identity({first})  # TODO: the real computation\n\n\n")
    edits = []
    if not any(re.match(r"\s*from onnxscript import opset\d+ as op", line) for line in lines):
        at = types.Position(line=_import_line(lines), character=0)
        edits.append(_edit(uri, types.Range(start=at, end=at),
                           "from onnxscript import opset18 as op\n"))
    edits.append(_table_entry(uri, target, f"{overload}: {function}", positions))
    insert_at = types.Position(line=target.pragma.start.line - 1, character=0)
    edits.append(_edit(uri, types.Range(start=insert_at, end=insert_at), stub))
    return types.CodeAction(
        title=f"Add a custom ONNX translation stub for {data.get('operator', short)}",
        kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(changes={uri: edits}))


def _table_entry(uri: str, target: Target, entry: str,
                 positions: PositionConverter) -> types.TextEdit:
    """``entry`` added to the pragma's ``custom_translation_table``: first in a dict literal,
    beside the entries of another expression (``{**TABLE, entry}``: the user's table is
    kept), or the key added to the pragma."""
    table = target.options.get("custom_translation_table")
    if table is not None and table.source.startswith("{") and table.source != "{}":
        start = positions.range(target.path, table.range).start
        after_brace = types.Position(line=start.line, character=start.character + 1)
        return _edit(uri, types.Range(start=after_brace, end=after_brace), f"{entry}, ")
    if table is not None:
        kept = "" if table.source == "{}" else f"**{table.source}, "
        return _edit(uri, positions.range(target.path, table.range), f"{{{kept}{entry}}}")
    assert target.pragma is not None
    end = positions.range(target.path, target.pragma).end
    return _edit(uri, types.Range(start=end, end=end),
                 f",\n#     custom_translation_table={{{entry}}}")


def ignore_action(uri: str, diagnostic: types.Diagnostic, lines: list[str],
                  positions: PositionConverter, path: Any) -> types.CodeAction | None:
    """"Ignore ONNX201 on this line": an ``# onnxlens: ignore[...]`` comment on the line the
    finding is reported at (exporter/source/suppressions.py), added to one that is already there."""
    rule = str(diagnostic.code or "")
    number = diagnostic.range.start.line
    if not rule.startswith("ONNX") or rule == UNUSED_RULE or not 0 <= number < len(lines):
        return None
    text = lines[number]
    updated = with_rule_added(text, rule)
    if updated == text:
        return None  # the line already silences every rule
    if updated is None:
        updated = f"{text.rstrip()}  # onnxlens: ignore[{rule}]"
    end = types.Position(line=number, character=positions.column(path, number + 1,
                                                                   len(text) + 1))
    return types.CodeAction(
        title=f"Ignore {rule} on this line", kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(changes={uri: [_edit(
            uri, types.Range(start=types.Position(line=number, character=0), end=end),
            updated)]}))


def _import_line(lines: list[str]) -> int:
    """The 0-based line after the module's last top-level import."""
    last = 0
    for number, line in enumerate(lines):
        if line.startswith(("import ", "from ")):
            last = number + 1
        elif line and not line.startswith(("#", '"""', "'''")) and last:
            break
    return last


def code_actions(uri: str, diagnostics: list[types.Diagnostic], targets: dict[str, Target],
                 lines: list[str], positions: PositionConverter, path: Any
                 ) -> list[types.CodeAction]:
    """The quick fixes of ``diagnostics``; a diagnostic the client altered or made up (a range
    past the file, data of the wrong shape) loses its own actions only, never the others'."""
    actions: list[types.CodeAction] = []
    for diagnostic in diagnostics:
        if diagnostic.source != "onnxlens" or not isinstance(diagnostic.data, dict):
            continue
        actions += _isolated(_actions_of, uri, diagnostic, targets, lines, positions, path)
    # after every fix, as linters order them: silencing a finding is the last resort
    for diagnostic in diagnostics:
        if diagnostic.source == "onnxlens":
            ignore = _isolated(_ignore_actions, uri, diagnostic, lines, positions, path)
            actions += [a for a in ignore if a.title not in {b.title for b in actions}]
    return actions


def _actions_of(uri: str, diagnostic: types.Diagnostic, targets: dict[str, Target],
                lines: list[str], positions: PositionConverter, path: Any
                ) -> list[types.CodeAction]:
    assert isinstance(diagnostic.data, dict)
    actions = _fix_actions(uri, diagnostic, positions, path)
    target = targets.get(diagnostic.data.get("target", ""))
    if diagnostic.code == "ONNX201" and target is not None:
        stub = translation_stub_action(uri, diagnostic, target, lines, positions)
        if stub is not None:
            actions.append(stub)
    return actions


def _ignore_actions(uri: str, diagnostic: types.Diagnostic, lines: list[str],
                    positions: PositionConverter, path: Any) -> list[types.CodeAction]:
    action = ignore_action(uri, diagnostic, lines, positions, path)
    return [action] if action is not None else []


def _isolated(actions_of: Callable[..., list[types.CodeAction]], uri: str,
              diagnostic: types.Diagnostic, *rest: Any) -> list[types.CodeAction]:
    try:
        return actions_of(uri, diagnostic, *rest)
    except Exception as error:
        _log.warning("no quick fix for a malformed diagnostic (%s: %s): %r",
                     type(error).__name__, error, diagnostic)
        return []
