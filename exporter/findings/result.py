"""What a check returns: per-target stage statuses, diagnostics and a model summary."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from exporter.findings.diagnostics import Diagnostic, Range
from exporter.findings.fixes import FixCandidate, FixTrial
from exporter.findings.rules import Severity

STAGES = ("load", "capture", "translate", "validate", "runtime", "numerics", "dynamic", "deploy")


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


@dataclass(frozen=True)
class TensorSummary:
    """An input or output of the ONNX graph (symbolic dimensions by name)."""

    name: str
    dtype: str  # numpy's name; "?" when the graph does not say
    shape: tuple[int | str, ...]


@dataclass(frozen=True)
class NumericsRun:
    """One comparison of ONNX Runtime's outputs with PyTorch's: at which inputs, whether they
    matched, and the output that differed most when they did not."""

    situation: str
    matched: bool
    output: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    atol: float | None = None
    rtol: float | None = None


@dataclass(frozen=True)
class RuntimeRun:
    """The deploy stage's check of one runtime at one precision (docs/runtimes.md): ``state``
    is ``matches`` (ran, outputs match PyTorch), ``differs``, ``fails`` (did not load, compile
    or run), ``not run here``, or for a provider judged from its operator table, ``supported``
    (every node) or ``falls back`` (some nodes to the CPU); ``unsupported``: the ONNX nodes it
    could not take."""

    runtime: str
    state: str
    seconds: float = 0.0
    nodes: int | None = None  # the runtime's own graph, when it loaded the model
    unsupported: tuple[str, ...] = ()
    detail: str = ""
    partitions: int | None = None  # the runtime's subgraphs, where nodes fall back to the CPU
    precision: str = "fp32"  # the model as exported, or a precision variant of it

    @property
    def shown(self) -> str:
        """The runtime, and the precision when it is not the export's own."""
        return self.runtime if self.precision == "fp32" else f"{self.runtime} {self.precision}"


@dataclass
class ModelSummary:
    """What a check measured of the model, each field set by the stage that knows it (None or
    empty: that stage did not get that far, or the fact does not apply)."""

    parameters: int | None = None  # load
    #: load: what an intercepted torch.onnx.export call ran under that differs from the defaults
    call_context: list[str] | None = None
    capture_strategy: str | None = None  # capture: strict, non-strict, draft
    nodes: int | None = None  # translate: the ONNX graph's
    opset: int | None = None
    inputs: list[TensorSummary] = field(default_factory=list)
    outputs: list[TensorSummary] = field(default_factory=list)
    operators: dict[str, int] = field(default_factory=dict)  # op type -> count, most first
    initializer_bytes: int | None = None  # None: a weightless check
    ort_run_ms: float | None = None  # runtime: one run of ONNX Runtime
    numerics: list[NumericsRun] = field(default_factory=list)  # numerics, dynamic
    dynamic_not_run: list[str] = field(default_factory=list)  # sizes PyTorch itself refused
    runtimes: list[RuntimeRun] = field(default_factory=list)  # deploy

    def copy(self) -> ModelSummary:
        """A copy whose lists later stages do not extend."""
        return replace(self, inputs=list(self.inputs), outputs=list(self.outputs),
                       operators=dict(self.operators), numerics=list(self.numerics),
                       dynamic_not_run=list(self.dynamic_not_run),
                       runtimes=list(self.runtimes))


@dataclass
class TargetResult:
    name: str
    path: Path
    definition: Range
    stages: list[StageStatus] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    summary: ModelSummary = field(default_factory=ModelSummary)
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
