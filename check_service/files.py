"""A file's targets: its text read and decoded once, its targets found once (statically,
``exporter.source.targets``: nothing of the file runs here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from exporter.findings.diagnostics import Diagnostic
from exporter.source.targets import Discovery, Target, discover
from exporter.source.text import read_checked


@dataclass
class FileTargets:
    """What one read of a file found: its text, its targets and what the file alone shows
    (a malformed pragma; ONNX002 for a file that cannot be read, which has no targets)."""

    path: Path
    text: str
    targets: list[Target] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @classmethod
    def of(cls, path: Path, text: str, found: Discovery) -> FileTargets:
        return cls(path, text, list(found.targets), list(found.diagnostics))


class TargetNotFound(LookupError):
    """The file holds no target of that name (or cannot be read: ``found.diagnostics``)."""

    def __init__(self, name: str, found: FileTargets) -> None:
        super().__init__(name)
        self.name = name
        self.found = found


def file_targets(path: Path, only: frozenset[str] | None = None) -> FileTargets:
    """The targets of the file at ``path`` (resolved), those named in ``only`` if given."""
    path = path.resolve()
    text = read_checked(path)
    if isinstance(text, Diagnostic):
        return FileTargets(path, "", diagnostics=[text])
    found = FileTargets.of(path, text, discover(path, text))
    if only is not None:
        found.targets = [t for t in found.targets if t.name in only]
    return found


def find_target(path: Path, name: str) -> Target:
    """The target ``name`` of ``path``; raises ``TargetNotFound``."""
    found = file_targets(path)
    target = next((t for t in found.targets if t.name == name), None)
    if target is None:
        raise TargetNotFound(name, found)
    return target
