"""The state one target's check carries from stage to stage: the target and its options, the
diagnostics, and one typed product per stage that made one (``Loaded``, ``Captured``,
``Translated``, ``Validated``, ``Ran``). A stage reads the products of the stages before it and
sets its own only when it succeeded, so a later stage runs only on what really exists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from exporter.config.options import ExportOptions
from exporter.findings.diagnostics import Diagnostic, FindingData, Location, Related
from exporter.findings.fixes import FixCandidate
from exporter.findings.result import ModelSummary
from exporter.findings.rules import Severity
from exporter.pipeline.target_options import TargetOptions
from exporter.source.targets import Target
from exporter.source.text import Sources
from exporter.source.traces import Frame, Mapped, map_frames, parse_stack_trace

if TYPE_CHECKING:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    from exporter.pipeline.call_context import CallContext
    from exporter.pipeline.converted_axes import ConvertedAxes
    from exporter.pipeline.dynamic_dims import Narrowed
    from exporter.pipeline.model_state import ModelState
    from exporter.pipeline.registries import Registries
    from exporter.toolchain.torch_compat import DraftFailure


@dataclass(frozen=True)
class Loaded:
    """The load stage's product: the model built from the target, in eval (or training) mode
    (an export call's: in the modes it had at the call), its example inputs as the user wrote
    them, and what eager PyTorch made of them."""

    module: ModuleType
    model: torch.nn.Module
    args: tuple
    kwargs: dict[str, Any]
    dynamic_shapes: Any  # as the user gave them (string dims included)
    eager_outputs: Any
    # an export call's context (grad and inference mode, autocast, default dtype and device):
    # the later stages run in it, as the plain exporter does; None for other targets
    call_context: CallContext | None = None
    # an export call's inputs that torch's conversion of `dynamic_axes` gave another input's
    # entry (the messages on dynamic dimensions say so); None when it moved nothing
    converted_axes: ConvertedAxes | None = None
    # the model's Python state as built (before the first eager run): every eager run starts
    # from it (exporter/pipeline/model_state.py)
    as_built: ModelState | None = None
    # the program an export call exports when its model is a torch.export.ExportedProgram
    # (``model`` is then its module): torch.onnx.export translates it without capturing
    given_program: torch.export.ExportedProgram | None = None


@dataclass(frozen=True)
class Captured:
    """The capture stage's product: the graph torch.onnx.export's capture made, or a draft
    export's graph (unsound where it guessed) when every strategy failed."""

    program: torch.export.ExportedProgram
    strategy: str  # "non-strict", "strict", "draft", or "given" (an ExportedProgram exported)
    # declared dynamic dimensions the graph is valid for over a narrower range (ONNX107)
    narrowed: tuple[Narrowed, ...] = ()

    @property
    def draft_only(self) -> bool:
        return self.strategy == "draft"


@dataclass(frozen=True)
class Translated:
    """The translate stage's product: the ONNX program, and its model with the large
    initializers apart (external references to ``weights``, by name; see weights_apart),
    serialized once (``model_bytes`` is None past protobuf's 2 GB limit)."""

    onnx_program: torch.onnx.ONNXProgram
    model_proto: onnx.ModelProto
    weights: dict[str, np.ndarray]
    model_bytes: bytes | None


@dataclass(frozen=True)
class Validated:
    """The validate stage's verdict: onnx.checker and strict shape inference passed."""

    valid: bool


@dataclass(frozen=True)
class Ran:
    """The runtime stage's product: an ONNX Runtime session and its outputs on the example."""

    session: ort.InferenceSession
    outputs: list[np.ndarray]


@dataclass(frozen=True)
class StrictRecapture:
    """What the draft export with every declared dimension strictly dynamic reported: its
    failures and the files their stacks name (None: it failed, or its report is unreadable);
    exporter/pipeline/strict_recapture.py."""

    report: tuple[list[DraftFailure], dict[int, str]] | None


@dataclass
class CheckContext:
    target: Target
    workspace: Path
    registries: Registries  # the session's: built once per opset in a process
    defaults: ExportOptions = field(default_factory=ExportOptions)  # a pragma overrides them
    timeout: float | None = None  # seconds for the whole check; None: no limit
    # seconds the load stage (the model's own code: building it, its eager run) may take
    # when shorter than ``timeout``: the default limit, which lets the exporter answer
    load_timeout: float | None = None
    # told when the whole limit takes over from ``load_timeout`` (the worker's kill deadline)
    limit_lifted: Callable[[], None] | None = None
    sources: Sources = field(default_factory=Sources)  # the editor's text of the file, if any
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # the defaults' values, then the pragma's (evaluated at load) or the export call's
    options: TargetOptions = field(init=False)
    summary: ModelSummary = field(default_factory=ModelSummary)
    # edits a stage found worth trying for its finding (exporter/pipeline/fix_candidates.py)
    fix_candidates: list[FixCandidate] = field(default_factory=list)
    # the strict re-capture both guard searches read (exporter/pipeline/strict_recapture.py)
    strict_recapture: StrictRecapture | None = None
    # shows findings known before their stage ends (the language server publishes them early);
    # given the stage's name and the findings so far. Set by the runner when someone listens.
    early: Callable[[str, list[Diagnostic]], None] | None = None
    # the export's failure as torch's first error says it, once every capture strategy failed:
    # the verdict is known, and what follows (the draft export, the later stages on its
    # graph) only adds findings; a check stopped at its time limit then ends with its verdict
    # (exporter/pipeline/runner.py)
    known_failure: list[Diagnostic] | None = None
    # from then on, the search for more problems ends at this moment of the process's CPU
    # time (time.process_time(); None: no budget), after this many seconds of it
    # (exporter/pipeline/after_verdict.py)
    after_verdict_deadline: float | None = None
    after_verdict_budget: float = 0.0

    # The stages' products, in order (None: the stage did not run or did not succeed).
    loaded: Loaded | None = None
    captured: Captured | None = None
    # the graph that was translated, torch.onnx's decomposition of the captured one
    decomposed: torch.export.ExportedProgram | None = None
    translated: Translated | None = None
    validated: Validated | None = None
    ran: Ran | None = None

    # For the stages that run only after the one that makes the product (pipeline.STAGES says
    # which): the product, never None there.
    def need_loaded(self) -> Loaded:
        return _present(self.loaded, "load")

    def need_captured(self) -> Captured:
        return _present(self.captured, "capture")

    def need_translated(self) -> Translated:
        return _present(self.translated, "translate")

    def need_ran(self) -> Ran:
        return _present(self.ran, "runtime")

    def __post_init__(self) -> None:
        self.options = TargetOptions.defaulting_to(self.defaults)

    @property
    def weightless(self) -> bool:
        return self.target.weights == "none"

    def map_frames(self, frames: list[Frame], hint: str | None = None) -> Mapped | None:
        return map_frames(frames, self.workspace, hint=hint, fallback=self.fallback_location(),
                          lines_of=self.sources.lines)

    def map_stack_trace(self, stack_trace: str | None, hint: str | None = None) -> Mapped | None:
        return self.map_frames(parse_stack_trace(stack_trace), hint)

    def fallback_location(self) -> Location:
        return Location(self.target.path, self.target.definition)

    def option_location(self, key: str) -> Location:
        option = self.target.options.get(key)
        if option is not None:
            return Location(self.target.path, option.range)
        return self.fallback_location()

    def report(
        self,
        rule: str,
        message: str,
        where: Mapped | Location | None = None,
        *,
        hint: str | None = None,
        data: FindingData | None = None,
        related: tuple[Related, ...] = (),
        severity: Severity | None = None,
    ) -> Diagnostic:
        """Record a diagnostic; with no user location it lands on the target's name."""
        if isinstance(where, Mapped):
            location, chain = where.location, where.related
            if where.library_note:
                message = f"{message} ({where.library_note})"
        else:
            location, chain = where or self.fallback_location(), ()
        chain = chain + related
        if location.path != self.target.path:
            chain = (*chain, Related(
                Location(self.target.path, self.target.definition),
                f"while checking the export target `{self.target.name}`"))
        diagnostic = Diagnostic(
            rule, message, location, target=self.target.name, severity=severity,
            related=chain, hint=hint, data=data or FindingData(),
        )
        self.diagnostics.append(diagnostic)
        return diagnostic


_Product = TypeVar("_Product")


def _present(product: _Product | None, stage: str) -> _Product:
    if product is None:
        raise RuntimeError(f"the {stage} stage made nothing to work on")  # a pipeline bug
    return product
