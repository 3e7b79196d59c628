"""SARIF 2.1.0 from the same diagnostics every other output uses, built with ``sarif-om``:
a log a SARIF viewer shows in full (docs/cli.md, "SARIF"). Where results point is
``sarif_locations``; the rules and their pages, ``sarif_rules``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import attr
import sarif_om as sarif

from exporter import HOMEPAGE, __version__
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.fixes import FixEdit
from exporter.findings.result import CheckResult
from exporter.findings.rules import RULES, Severity
from exporter.reports.render import in_cell
from exporter.reports.sarif_locations import (
    SRCROOT,
    Artifacts,
    physical_location,
    region,
    target_location,
)
from exporter.reports.sarif_rules import LEVELS, descriptor
from exporter.source.notebooks import is_notebook
from exporter.source.text import line_text

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
#: runs[].automationDetails.id: GitHub code scanning keeps uploads of different categories
#: (the part before the last "/") apart, e.g. one per CI shard or per model directory
DEFAULT_CATEGORY = "onnxlens"


def automation_id(category: str) -> str:
    """``category/`` (SARIF 2.1.0 §3.17.4: the id of a run's automation, category first)."""
    return category if category.endswith("/") else f"{category}/"


def is_tool_failure(diagnostic: Diagnostic) -> bool:
    """ONNX9xx (a timeout, a crashed worker, no memory, a missing package, an internal
    error): onnxlens could not check, which says nothing of the model."""
    return RULES[diagnostic.rule].stage == "tool"


def build_log(result: CheckResult, root: Path, *, absolute_root: bool = False,
              category: str = DEFAULT_CATEGORY) -> sarif.SarifLog:
    rule_ids = sorted(RULES)
    rule_index = {rule_id: index for index, rule_id in enumerate(rule_ids)}
    artifacts = Artifacts(root, result.files)
    results = [_result(d, artifacts, rule_index) for d in result.diagnostics]
    tool_failures = [d for d in result.diagnostics if is_tool_failure(d)]
    run = sarif.Run(
        tool=sarif.Tool(driver=sarif.ToolComponent(
            name="onnxlens", version=__version__, semantic_version=__version__,
            information_uri=HOMEPAGE, rules=[descriptor(rule_id) for rule_id in rule_ids],
        )),
        results=results,
        automation_details=sarif.RunAutomationDetails(id=automation_id(category)),
        invocations=[sarif.Invocation(
            execution_successful=not tool_failures,
            tool_execution_notifications=[
                *(_notification(d, artifacts, rule_index) for d in tool_failures),
                *_nothing_checked(result)] or None,
        )],
        artifacts=artifacts.artifacts or None,
        column_kind="unicodeCodePoints",
        properties=_runtimes(result),
        original_uri_base_ids=(
            {SRCROOT: sarif.ArtifactLocation(uri=root.resolve().as_uri() + "/")}
            if absolute_root else None
        ),
    )
    return sarif.SarifLog(version="2.1.0", schema_uri=SCHEMA_URI, runs=[run])


def _runtimes(result: CheckResult) -> dict[str, Any] | None:
    """The deploy stage's table (docs/runtimes.md): each target's verdict on each runtime
    named besides ONNX Runtime's CPU provider and at each precision besides fp32, in the run's
    property bag."""
    table = [{"target": target.name, "runtime": run.runtime, "precision": run.precision,
              "state": run.state,
              "seconds": round(run.seconds, 3), "nodes": run.nodes,
              "unsupported": list(run.unsupported), "partitions": run.partitions,
              "detail": run.detail}
             for target in result.targets for run in target.summary.runtimes]
    return {"runtimes": table} if table else None


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


def _fingerprint(diagnostic: Diagnostic) -> str:
    text = line_text(diagnostic.location.path, diagnostic.location.range.start.line).strip()
    digest = hashlib.sha256(f"{diagnostic.rule}\0{diagnostic.target}\0{text}".encode())
    return f"{digest.hexdigest()[:16]}:1"


def _location(location: Location, artifacts: Artifacts, message: str | None = None,
              identifier: int | None = None,
              logical: sarif.LogicalLocation | None = None) -> sarif.Location:
    physical, properties = physical_location(location, artifacts)
    return sarif.Location(
        id=identifier if identifier is not None else -1,
        physical_location=physical,
        logical_locations=[logical] if logical else None,
        message=sarif.Message(text=message) if message else None,
        properties=properties,
    )


def message(diagnostic: Diagnostic) -> sarif.Message:
    """What the editor shows: the finding (in a notebook, after its cell and line), every
    fix tried and found working, the hint; as text and as Markdown."""
    cell = in_cell(diagnostic.location)
    where = f"cell {cell[0].number}, line {cell[1].start.line}: " if cell else ""
    count = f" (×{diagnostic.count})" if diagnostic.count > 1 else ""
    head = f"{where}{diagnostic.message}{count}"
    titles = [trial.candidate.title for trial in diagnostic.fixes]  # docs/fixes.md
    hint = [diagnostic.hint] if diagnostic.hint else []
    return sarif.Message(
        text="\n".join([head, *(f"Tried and works: {title}" for title in titles), *hint]),
        markdown="\n\n".join([head, *(f"**Tried and works:** {title}" for title in titles),
                               *hint]))


def _result(diagnostic: Diagnostic, artifacts: Artifacts,
            rule_index: dict[str, int]) -> sarif.Result:
    primary = _location(diagnostic.location, artifacts,
                        logical=target_location(diagnostic, artifacts))
    related = [_location(r.location, artifacts, r.message, index + 1)
               for index, r in enumerate(diagnostic.related)]
    chain = [r for r in diagnostic.related if r.message.startswith("called from")]
    frames = [sarif.StackFrame(location=_location(diagnostic.location, artifacts,
                                                  diagnostic.message))]
    frames += [sarif.StackFrame(location=_location(r.location, artifacts, r.message))
               for r in chain]
    flow_steps = list(reversed(frames))
    properties: dict[str, Any] = {"target": diagnostic.target, "stage": diagnostic.stage}
    if diagnostic.data.draft_capture:
        properties["draftCapture"] = True  # the later stages checked a draft-export graph
    if diagnostic.count > 1:
        properties["occurrences"] = diagnostic.count
    if diagnostic.hint:
        properties["hint"] = diagnostic.hint
    return sarif.Result(
        rule_id=diagnostic.rule,
        rule_index=rule_index[diagnostic.rule],
        level=LEVELS[Severity(diagnostic.severity)],
        message=message(diagnostic),
        locations=[primary],
        related_locations=related or None,
        stacks=[sarif.Stack(message=sarif.Message(text="Call chain from the export target"),
                            frames=frames)],
        code_flows=[sarif.CodeFlow(thread_flows=[sarif.ThreadFlow(locations=[
            sarif.ThreadFlowLocation(location=step.location) for step in flow_steps])])]
        if len(flow_steps) > 1 else None,
        fixes=_fixes(diagnostic, artifacts),
        partial_fingerprints={"primaryLocationLineHash": _fingerprint(diagnostic)},
        properties=properties,
    )


def _fixes(diagnostic: Diagnostic, artifacts: Artifacts) -> list[sarif.Fix] | None:
    """Every quick fix the editor offers (ONNX60x's rewrites, marking an export call's
    function so that it is checked) and every fix onnxlens tried and found working
    (docs/fixes.md), as SARIF ``fixes``; none in a notebook, whose cell text is a JSON
    string: no faithful text replacement."""
    edits: list[tuple[str, list[FixEdit]]] = [
        (fix.title, list(fix.edits)) for fix in diagnostic.quick_fixes]
    edits += [(f"{trial.candidate.title} (tried by onnxlens: the model then exports and "
               "matches ONNX Runtime)", list(trial.candidate.edits))
              for trial in diagnostic.fixes]
    fixes = [sarif.Fix(description=sarif.Message(text=title), artifact_changes=[
        sarif.ArtifactChange(artifact_location=artifacts.location(path), replacements=[
            sarif.Replacement(deleted_region=region(edit.range),
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


def _notification(diagnostic: Diagnostic, artifacts: Artifacts,
                  rule_index: dict[str, int]) -> sarif.Notification:
    """A tool failure in ``invocations[0]``: it is also a result, for GitHub code scanning
    and the viewers that show results only."""
    return sarif.Notification(
        message=message(diagnostic),
        level="error",
        locations=[_location(diagnostic.location, artifacts)],
        associated_rule=sarif.ReportingDescriptorReference(
            id=diagnostic.rule, index=rule_index[diagnostic.rule]),
    )


def _nothing_checked(result: CheckResult) -> list[sarif.Notification]:
    """A run that checked no target says why, as the text report's summary does: a log with
    no result is otherwise a clean run's."""
    nothing = result.nothing_checked
    if nothing is None:
        return []
    text = f"Nothing checked: {nothing.reason}"
    return [sarif.Notification(message=sarif.Message(text=text, markdown=text),
                               level=LEVELS[nothing.severity])]
