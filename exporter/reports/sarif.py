"""SARIF 2.1.0 from the same diagnostics every other output uses, built with ``sarif-om``.

URIs are relative to ``%SRCROOT%`` (the check's root) so that no absolute path of the
user's machine lands in the log unless ``absolute_root=True`` is asked for.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import attr
import sarif_om as sarif

from exporter import __version__
from exporter.findings.diagnostics import Diagnostic, Location, Range
from exporter.findings.fixes import FixEdit
from exporter.findings.result import CheckResult
from exporter.findings.rules import RULES, Severity
from exporter.reports.render import in_cell
from exporter.source.notebooks import CodeCell, is_notebook, raw_range
from exporter.source.text import line_text

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
#: runs[].automationDetails.id: GitHub code scanning keeps uploads of different categories
#: (the part before the last "/") apart, e.g. one per CI shard or per model directory
DEFAULT_CATEGORY = "onnxlens"


def automation_id(category: str) -> str:
    """``category/`` (SARIF 2.1.0 §3.17.4: the id of a run's automation, category first)."""
    return category if category.endswith("/") else f"{category}/"


def build_log(result: CheckResult, root: Path, *, absolute_root: bool = False,
              category: str = DEFAULT_CATEGORY) -> sarif.SarifLog:
    rule_ids = sorted(RULES)
    rule_index = {rule_id: index for index, rule_id in enumerate(rule_ids)}
    results = [_result(d, root, rule_index) for d in result.diagnostics]
    tool_failures = [d for d in result.diagnostics if d.rule.startswith("ONNX9")]
    run = sarif.Run(
        tool=sarif.Tool(driver=sarif.ToolComponent(
            name="onnxlens", version=__version__, semantic_version=__version__,
            rules=[_descriptor(rule_id) for rule_id in rule_ids],
        )),
        results=results,
        automation_details=sarif.RunAutomationDetails(id=automation_id(category)),
        invocations=[sarif.Invocation(
            execution_successful=not tool_failures,
            tool_execution_notifications=[_notification(d, root) for d in tool_failures] or None,
        )],
        column_kind="unicodeCodePoints",
        original_uri_base_ids=(
            {SRCROOT: sarif.ArtifactLocation(uri=root.resolve().as_uri() + "/")}
            if absolute_root else None
        ),
    )
    return sarif.SarifLog(version="2.1.0", schema_uri=SCHEMA_URI, runs=[run])


def to_dict(value: Any) -> Any:
    """Serialize sarif-om objects with their schema property names, omitting unset fields."""
    if attr.has(type(value)):
        out = {}
        for field in attr.fields(type(value)):
            item = getattr(value, field.name)
            if item is None or (item == -1 and field.default == -1):
                continue
            out[field.metadata.get("schema_property_name", field.name)] = to_dict(item)
        return out
    if isinstance(value, list):
        return [to_dict(item) for item in value]
    if isinstance(value, dict):
        return {key: to_dict(item) for key, item in value.items()}
    return value


def sarif_dict(result: CheckResult, root: Path, *, absolute_root: bool = False,
               category: str = DEFAULT_CATEGORY) -> dict[str, Any]:
    return to_dict(build_log(result, root, absolute_root=absolute_root, category=category))


def _descriptor(rule_id: str) -> sarif.ReportingDescriptor:
    rule = RULES[rule_id]
    return sarif.ReportingDescriptor(
        id=rule.id, name=rule.name,
        short_description=sarif.MultiformatMessageString(text=rule.summary),
        full_description=sarif.MultiformatMessageString(text=rule.description),
        help=sarif.MultiformatMessageString(
            text=rule.fix, markdown=f"{rule.fix}\n\n[Rule documentation]({rule.doc_url})"
            if rule.doc_url else f"{rule.fix}\n\nRun `onnxlens rule {rule.id}` for the "
            "rule's page."),
        help_uri=rule.doc_url,  # only a published page: a log travels to other machines
        default_configuration=sarif.ReportingConfiguration(level=_LEVELS[rule.severity]),
        properties={"stage": rule.stage},
    )


def _artifact(path: Path, root: Path) -> sarif.ArtifactLocation:
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return sarif.ArtifactLocation(uri=path.resolve().as_uri())
    return sarif.ArtifactLocation(uri=relative.as_posix(), uri_base_id=SRCROOT)


def _region(range_: Range) -> sarif.Region:
    return sarif.Region(start_line=range_.start.line, start_column=range_.start.column,
                        end_line=range_.end.line, end_column=range_.end.column)


def _location(location: Location, root: Path, message: str | None = None,
              identifier: int | None = None) -> sarif.Location:
    region, properties = _region(location.range), None
    cell = in_cell(location)
    if cell is not None:
        region, properties = _notebook_region(*cell)
    return sarif.Location(
        id=identifier if identifier is not None else -1,
        physical_location=sarif.PhysicalLocation(
            artifact_location=_artifact(location.path, root), region=region),
        message=sarif.Message(text=message) if message else None,
        properties=properties,
    )


def _notebook_region(cell: CodeCell, range_: Range) -> tuple[sarif.Region, dict[str, int]]:
    """SARIF has no notebook cells: the region is where the cell's text is in the .ipynb
    file's JSON (what GitHub code scanning and SARIF viewers open), and the location's
    properties say the cell and the line and column within it (docs/notebooks.md)."""
    properties = {"cell": cell.number, "cellLine": range_.start.line,
                  "cellColumn": range_.start.column}
    raw = raw_range(cell, range_)
    return (_region(raw) if raw else sarif.Region(start_line=1)), properties


def _fingerprint(diagnostic: Diagnostic) -> str:
    text = line_text(diagnostic.location.path, diagnostic.location.range.start.line).strip()
    digest = hashlib.sha256(f"{diagnostic.rule}\0{diagnostic.target}\0{text}".encode())
    return f"{digest.hexdigest()[:16]}:1"


def _result(diagnostic: Diagnostic, root: Path, rule_index: dict[str, int]) -> sarif.Result:
    primary = _location(diagnostic.location, root)
    related = [_location(r.location, root, r.message, index + 1)
               for index, r in enumerate(diagnostic.related)]
    chain = [r for r in diagnostic.related if r.message.startswith("called from")]
    frames = [sarif.StackFrame(location=_location(diagnostic.location, root, diagnostic.message))]
    frames += [sarif.StackFrame(location=_location(r.location, root, r.message)) for r in chain]
    flow_steps = list(reversed(frames))
    properties: dict[str, Any] = {"target": diagnostic.target, "stage": diagnostic.stage}
    if diagnostic.data.get("draft_capture"):
        properties["draftCapture"] = True  # the later stages checked a draft-export graph
    if diagnostic.count > 1:
        properties["occurrences"] = diagnostic.count
    if diagnostic.hint:
        properties["hint"] = diagnostic.hint
    return sarif.Result(
        rule_id=diagnostic.rule,
        rule_index=rule_index[diagnostic.rule],
        level=_LEVELS[Severity(diagnostic.severity)],
        message=sarif.Message(text=diagnostic.message),
        locations=[primary],
        related_locations=related or None,
        stacks=[sarif.Stack(message=sarif.Message(text="Call chain from the export target"),
                            frames=frames)],
        code_flows=[sarif.CodeFlow(thread_flows=[sarif.ThreadFlow(locations=[
            sarif.ThreadFlowLocation(location=step.location) for step in flow_steps])])]
        if len(flow_steps) > 1 else None,
        fixes=_fixes(diagnostic, root),
        partial_fingerprints={"primaryLocationLineHash": _fingerprint(diagnostic)},
        properties=properties,
    )


def _fixes(diagnostic: Diagnostic, root: Path) -> list[sarif.Fix] | None:
    """A quick fix's edit (``data["fix"]``: ONNX60x's rewrites) and every fix onnxlens tried
    and found working (docs/fixes.md), as SARIF ``fixes``; none in a notebook, whose cell
    text is a JSON string: no faithful text replacement."""
    edits: list[tuple[str, list[FixEdit]]] = []
    replacement = diagnostic.data.get("fix")
    if replacement:
        edits.append((replacement["title"], [FixEdit(Path(replacement["path"]),
                                                     replacement["range"], replacement["text"])]))
    edits += [(f"{trial.candidate.title} (tried by onnxlens: the model then exports and "
               "matches ONNX Runtime)", list(trial.candidate.edits))
              for trial in diagnostic.fixes]
    fixes = [sarif.Fix(description=sarif.Message(text=title), artifact_changes=[
        sarif.ArtifactChange(artifact_location=_artifact(path, root), replacements=[
            sarif.Replacement(deleted_region=_region(edit.range),
                              inserted_content=sarif.ArtifactContent(text=edit.text))
            for edit in group])
        for path, group in _by_path(changes).items()])
        for title, changes in edits if not any(is_notebook(e.path) for e in changes)]
    return fixes or None


def _by_path(edits: list[FixEdit]) -> dict[Path, list[FixEdit]]:
    grouped: dict[Path, list[FixEdit]] = {}
    for edit in edits:
        grouped.setdefault(edit.path, []).append(edit)
    return grouped


def _notification(diagnostic: Diagnostic, root: Path) -> sarif.Notification:
    return sarif.Notification(
        message=sarif.Message(text=diagnostic.message),
        level="error",
        locations=[_location(diagnostic.location, root)],
        descriptor=sarif.ReportingDescriptorReference(id=diagnostic.rule),
    )
