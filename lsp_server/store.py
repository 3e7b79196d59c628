"""What the server knows about the last check of each document: target results for
CodeLens and hover, and diagnostics held per (file, origin document) and published from one
place, so that a re-check clears what it no longer finds, on every file it had reported on."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from exporter.findings.diagnostics import Diagnostic
from exporter.findings.result import TargetResult


@dataclass
class DocumentState:
    """The latest check requested for a document and the latest results published."""

    requested_version: int | None = None
    checking: bool = False
    targets: dict[str, TargetResult] = field(default_factory=dict)
    version: int | None = None


class DiagnosticsStore:
    def __init__(self) -> None:
        # (file uri, origin uri) -> diagnostics found in that file by checking origin
        self._entries: dict[tuple[str, str], list[Diagnostic]] = {}

    def replace(self, origin: str, by_file: dict[str, list[Diagnostic]]) -> set[str]:
        """Swap in the origin's new diagnostics; returns every file uri to re-publish."""
        stale = {file for (file, owner) in self._entries if owner == origin}
        for file in stale:
            del self._entries[(file, origin)]
        for file, diagnostics in by_file.items():
            if diagnostics:
                self._entries[(file, origin)] = diagnostics
        return stale | set(by_file)

    def clear(self) -> set[str]:
        """Forget every diagnostic; returns every file uri to re-publish (empty)."""
        files = {file for file, _ in self._entries}
        self._entries.clear()
        return files

    def for_file(self, file: str) -> list[Diagnostic]:
        found: list[Diagnostic] = []
        for (owner_file, _), diagnostics in sorted(self._entries.items()):
            if owner_file == file:
                found.extend(diagnostics)
        return found

    def all(self) -> list[Diagnostic]:
        return [d for diagnostics in self._entries.values() for d in diagnostics]


def group_by_file(diagnostics: list[Diagnostic], uri_of) -> dict[str, list[Diagnostic]]:
    grouped: dict[str, list[Diagnostic]] = defaultdict(list)
    for diagnostic in diagnostics:
        grouped[uri_of(diagnostic.location.path)].append(diagnostic)
    return dict(grouped)
