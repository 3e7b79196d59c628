"""What a check returns: per-target stage statuses, diagnostics and a model summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, Range
from exporter.findings.fixes import FixCandidate, FixTrial
from exporter.findings.rules import Severity

STAGES = ("load", "capture", "translate", "validate", "runtime", "numerics", "dynamic")


class StageState(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass
class StageStatus:
    name: str
    state: StageState
    seconds: float = 0.0
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state.value,
                "seconds": round(self.seconds, 4), "reason": self.reason}


@dataclass
class TargetResult:
    name: str
    path: Path
    definition: Range
    stages: list[StageStatus] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    # edits that may fix the failure, for the front end to try (docs/fixes.md) ...
    fix_candidates: list[FixCandidate] = field(default_factory=list)
    # ... and what each trial gave
    fix_trials: list[FixTrial] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d.severity == Severity.ERROR for d in self.diagnostics)

    def stage(self, name: str) -> StageStatus | None:
        return next((status for status in self.stages if status.name == name), None)


@dataclass(frozen=True)
class NothingChecked:
    """Why a check checked no target (no file found, no target marked, a shard holding none):
    every report says it, so that a run over nothing never passes as a clean one. An error
    when the user asked for targets (``onnxlens check --require-targets``)."""

    files_read: int
    reason: str
    severity: Severity = Severity.WARNING

    @property
    def line(self) -> str:
        """``warning: nothing checked: 1 file read, no target: ...``"""
        return f"{self.severity.value}: nothing checked: {self.reason}"


@dataclass
class CheckResult:
    """Result of checking files: file-level diagnostics plus one entry per target."""

    targets: list[TargetResult] = field(default_factory=list)
    file_diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    nothing_checked: NothingChecked | None = None  # set by the command line's check

    @property
    def diagnostics(self) -> list[Diagnostic]:
        found = list(self.file_diagnostics)
        for target in self.targets:
            found.extend(target.diagnostics)
        return found

    @property
    def has_errors(self) -> bool:
        return any(d.severity == Severity.ERROR for d in self.diagnostics)

    def extend(self, other: CheckResult) -> None:
        self.targets.extend(other.targets)
        self.file_diagnostics.extend(other.file_diagnostics)
        self.files.extend(other.files)
