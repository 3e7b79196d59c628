"""Typed server settings with defaults; a bad value is named in a message and the default
is used instead. Names, types, bounds and defaults come from the settings schema
(``exporter/settings_schema.py``).

Precedence: defaults < ``[tool.onnxlens]`` in the workspace's pyproject.toml <
``initializationOptions.settings`` < ``workspace/configuration`` (section ``onnxlens``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from exporter.settings_schema import BY_LSP, BY_PYPROJECT, DEFAULT_EXCLUDE


@dataclass(frozen=True)
class Settings:
    trigger: str = "onSave"
    debounceMs: int = 500
    timeoutSeconds: float = 60.0
    memoryLimitMB: int = 4096
    maxConcurrentChecks: int = 0
    memoryBudgetMB: int = 0
    diagnosticMode: str = "openFiles"
    atol: float | None = None
    rtol: float | None = None
    opset: int | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, str] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extendExclude: list[str] = field(default_factory=list)
    sarifOutputDirectory: str | None = None
    logLevel: str = "info"

    @property
    def excluded(self) -> list[str]:
        return [*self.exclude, *self.extendExclude]


def _flatten(raw: dict[str, Any]) -> dict[str, Any]:
    flat = dict(raw)
    sarif = flat.pop("sarif", None)
    if isinstance(sarif, dict) and "outputDirectory" in sarif:
        flat["sarifOutputDirectory"] = sarif["outputDirectory"]
    return flat


def apply(base: Settings, raw: Any, origin: str) -> tuple[Settings, list[str]]:
    """Overlay ``raw`` (a dict of camelCase keys) on ``base``; returns problems found."""
    settings, problems = _overlay(base, raw)
    return settings, [f"{origin}: {problem}" for problem in problems]


def apply_all(base: Settings, sources: list[tuple[str, Any]]) -> tuple[Settings, list[str]]:
    """Overlay each ``(origin, raw)`` in order of precedence. A problem found in more than
    one source is named once, under the last: VS Code sends its settings as
    ``initializationOptions`` and answers ``workspace/configuration`` with the same
    values, and each bad one was shown twice."""
    problems: dict[str, str] = {}
    for origin, raw in sources:
        base, found = _overlay(base, raw)
        for problem in found:
            problems.pop(problem, None)
            problems[problem] = f"{origin}: {problem}"
    return base, list(problems.values())


def _overlay(base: Settings, raw: Any) -> tuple[Settings, list[str]]:
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"the onnxlens settings must be an object, not {raw!r}"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in _flatten(raw).items():
        setting = BY_LSP.get(name)
        if setting is None:
            problems.append(f"unknown setting `onnxlens.{name}` (ignored)")
            continue
        checked, problem = setting.check(value)
        if problem:
            default = getattr(base, name)
            problems.append(f"`{setting.vscode_name}` {problem}; using {default!r}")
        else:
            changes[name] = checked
    return replace(base, **changes), problems


def from_pyproject(values: dict[str, Any]) -> dict[str, Any]:
    """``[tool.onnxlens]`` keys (kebab-case, as ruff and mypy use) as server settings."""
    return {BY_PYPROJECT[key].lsp: value for key, value in values.items()
            if key in BY_PYPROJECT}


def names() -> list[str]:
    return [f.name for f in fields(Settings)]
