"""Check results as plain JSON data and back: how the export worker hands results to the
language server (which never imports torch)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, FindingData, Location, Range, Related
from exporter.findings.fixes import FixCandidate, FixEdit, FixTrial, QuickFix
from exporter.findings.result import (
    CheckResult,
    ModelSummary,
    NumericsRun,
    RuntimeRun,
    StageState,
    StageStatus,
    TargetResult,
    TensorSummary,
)
from exporter.findings.rules import Severity
from exporter.source.targets import PragmaOption, Target


def range_to_data(range_: Range) -> list[int]:
    return [range_.start.line, range_.start.column, range_.end.line, range_.end.column]


def range_from_data(data: list[int]) -> Range:
    return Range.of(*data)


def _location_to_data(location: Location) -> dict[str, Any]:
    return {"path": str(location.path), "range": range_to_data(location.range)}


def _location_from_data(data: dict[str, Any]) -> Location:
    return Location(Path(data["path"]), range_from_data(data["range"]))


def diagnostic_to_data(diagnostic: Diagnostic) -> dict[str, Any]:
    return {
        "rule": diagnostic.rule,
        "message": diagnostic.message,
        "location": _location_to_data(diagnostic.location),
        "target": diagnostic.target,
        "severity": Severity(diagnostic.severity).value,
        "related": [{"location": _location_to_data(r.location), "message": r.message}
                    for r in diagnostic.related],
        "hint": diagnostic.hint,
        "count": diagnostic.count,
        "data": diagnostic.data.as_json(),
        "quick_fixes": [{"title": fix.title, "edits": edits_to_data(fix.edits)}
                        for fix in diagnostic.quick_fixes],
        "fixes": [trial_to_data(trial) for trial in diagnostic.fixes],
    }


def diagnostic_from_data(data: dict[str, Any]) -> Diagnostic:
    return Diagnostic(
        data["rule"], data["message"], _location_from_data(data["location"]),
        target=data["target"], severity=Severity(data["severity"]),
        related=tuple(Related(_location_from_data(r["location"]), r["message"])
                      for r in data["related"]),
        hint=data["hint"], count=data["count"], data=FindingData(**data["data"]),
        quick_fixes=tuple(QuickFix(fix["title"], edits_from_data(fix["edits"]))
                          for fix in data["quick_fixes"]),
        fixes=tuple(trial_from_data(trial) for trial in data["fixes"]),
    )


def edits_to_data(edits: tuple[FixEdit, ...]) -> list[dict[str, Any]]:
    return [{"path": str(edit.path), "range": range_to_data(edit.range), "text": edit.text}
            for edit in edits]


def edits_from_data(data: list[dict[str, Any]]) -> tuple[FixEdit, ...]:
    return tuple(FixEdit(Path(edit["path"]), range_from_data(edit["range"]), edit["text"])
                 for edit in data)


def candidate_to_data(candidate: FixCandidate) -> dict[str, Any]:
    return {
        "key": candidate.key, "title": candidate.title, "source": candidate.source,
        "edits": edits_to_data(candidate.edits),
        "answers": None if candidate.answers is None
        else [candidate.answers[0], range_to_data(candidate.answers[1])],
    }


def candidate_from_data(data: dict[str, Any]) -> FixCandidate:
    answers = data["answers"]
    return FixCandidate(
        data["key"], data["title"], data["source"], edits_from_data(data["edits"]),
        None if answers is None else (answers[0], range_from_data(answers[1])))


def trial_to_data(trial: FixTrial) -> dict[str, Any]:
    return {"candidate": candidate_to_data(trial.candidate), "verdict": trial.verdict,
            "seconds": round(trial.seconds, 3), "detail": trial.detail}


def trial_from_data(data: dict[str, Any]) -> FixTrial:
    return FixTrial(candidate_from_data(data["candidate"]), data["verdict"], data["seconds"],
                    data["detail"])


def summary_to_data(summary: ModelSummary) -> dict[str, Any]:
    """Every field, None and empty ones too (the JSON report's ``summary``, docs/cli.md)."""
    return dataclasses.asdict(summary)


def summary_from_data(data: dict[str, Any]) -> ModelSummary:
    return ModelSummary(**{
        **data,
        "inputs": [TensorSummary(v["name"], v["dtype"], tuple(v["shape"]))
                   for v in data["inputs"]],
        "outputs": [TensorSummary(v["name"], v["dtype"], tuple(v["shape"]))
                    for v in data["outputs"]],
        "numerics": [NumericsRun(**run) for run in data["numerics"]],
        "runtimes": [RuntimeRun(**{**run, "unsupported": tuple(run["unsupported"])})
                     for run in data.get("runtimes", [])]})


def target_to_data(target: TargetResult) -> dict[str, Any]:
    return {
        "name": target.name,
        "path": str(target.path),
        "definition": range_to_data(target.definition),
        "stages": [status.as_dict() for status in target.stages],
        "diagnostics": [diagnostic_to_data(d) for d in target.diagnostics],
        "summary": summary_to_data(target.summary),
        "fix_candidates": [candidate_to_data(c) for c in target.fix_candidates],
        "fix_trials": [trial_to_data(t) for t in target.fix_trials],
    }


def target_from_data(data: dict[str, Any]) -> TargetResult:
    return TargetResult(
        name=data["name"], path=Path(data["path"]),
        definition=range_from_data(data["definition"]),
        stages=[StageStatus(s["name"], StageState(s["state"]), s["seconds"], s["reason"])
                for s in data["stages"]],
        diagnostics=[diagnostic_from_data(d) for d in data["diagnostics"]],
        summary=summary_from_data(data["summary"]),
        fix_candidates=[candidate_from_data(c) for c in data["fix_candidates"]],
        fix_trials=[trial_from_data(t) for t in data["fix_trials"]],
    )


def export_target_to_data(target: Target) -> dict[str, Any]:
    """A target as the front end found it, for the job that checks it (the worker does not
    look for it again)."""
    return {
        "name": target.name, "path": str(target.path), "kind": target.kind,
        "symbol": target.symbol, "definition": range_to_data(target.definition),
        "exportable_module": target.exportable_module,
        "pragma": range_to_data(target.pragma) if target.pragma is not None else None,
        "options": {key: {"source": option.source, "range": range_to_data(option.range)}
                    for key, option in target.options.items()},
        "first_line": target.first_line, "rebound_at": target.rebound_at,
        "export_call_line": target.export_call_line,
    }


def export_target_from_data(data: dict[str, Any]) -> Target:
    pragma = data["pragma"]
    return Target(
        name=data["name"], path=Path(data["path"]), kind=data["kind"], symbol=data["symbol"],
        definition=range_from_data(data["definition"]),
        exportable_module=data["exportable_module"],
        pragma=range_from_data(pragma) if pragma is not None else None,
        options={key: PragmaOption(key, option["source"], range_from_data(option["range"]))
                 for key, option in data["options"].items()},
        first_line=data["first_line"], rebound_at=data["rebound_at"],
        export_call_line=data["export_call_line"],
    )


def result_to_data(result: CheckResult) -> dict[str, Any]:
    return {
        "targets": [target_to_data(t) for t in result.targets],
        "file_diagnostics": [diagnostic_to_data(d) for d in result.file_diagnostics],
        "files": [str(p) for p in result.files],
    }


def result_from_data(data: dict[str, Any]) -> CheckResult:
    return CheckResult(
        targets=[target_from_data(t) for t in data["targets"]],
        file_diagnostics=[diagnostic_from_data(d) for d in data["file_diagnostics"]],
        files=[Path(p) for p in data["files"]],
    )
