"""The state one target's check carries from stage to stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from exporter.diagnostics import Diagnostic, Location, Related
from exporter.source_map import Frame, Mapped, map_frames, parse_stack_trace
from exporter.targets import Target

if TYPE_CHECKING:
    from exporter.session import ExportSession


@dataclass
class Settings:
    """Check-wide defaults (CLI flags, ``[tool.onnxlens]``); pragmas override per target."""

    opset: int | None = None
    atol: float | None = None
    rtol: float | None = None
    timeout: float | None = None  # seconds per target; None: no limit
    # Check (and save) the model onnxscript's optimizer made, as torch.onnx.export does by
    # default; `onnxlens save --no-optimize` checks and saves the model as translated.
    optimize: bool = True


@dataclass
class CheckContext:
    target: Target
    workspace: Path
    session: ExportSession
    settings: Settings = field(default_factory=Settings)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    # Filled in by the stages, in order.
    module: ModuleType | None = None
    options: dict[str, Any] = field(default_factory=dict)
    model: Any = None
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    dynamic_shapes: Any = None
    eager_outputs: Any = None
    exported_program: Any = None
    draft_only: bool = False
    decomposed_program: Any = None
    onnx_program: Any = None
    # The ONNX model with its large initializers apart (external references to ``weights``,
    # by name; see weights_apart), and serialized once (None past protobuf's 2 GB limit)
    model_proto: Any = None
    weights: dict[str, Any] = field(default_factory=dict)
    model_bytes: bytes | None = None
    invalid_model: bool = False
    ort_session: Any = None
    ort_outputs: list[Any] | None = None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def weightless(self) -> bool:
        return self.target.weights == "none"

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)

    def map_frames(self, frames: list[Frame], hint: str | None = None) -> Mapped | None:
        return map_frames(frames, self.workspace, hint=hint, fallback=self.fallback_location())

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
        data: dict[str, Any] | None = None,
        related: tuple[Related, ...] = (),
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
            rule, message, location, target=self.target.name, related=chain,
            hint=hint, data=data or {},
        )
        self.diagnostics.append(diagnostic)
        return diagnostic
