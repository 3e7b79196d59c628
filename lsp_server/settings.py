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
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"{origin}: the onnxlens settings must be an object, not {raw!r}"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in _flatten(raw).items():
        setting = BY_LSP.get(name)
        if setting is None:
            problems.append(f"{origin}: unknown setting `onnxlens.{name}` (ignored)")
            continue
        checked, problem = setting.check(value)
        if problem:
            default = getattr(base, name)
            problems.append(f"{origin}: `{setting.vscode_name}` {problem}; using {default!r}")
        else:
            changes[name] = checked
    return replace(base, **changes), problems


def from_pyproject(values: dict[str, Any]) -> dict[str, Any]:
    """``[tool.onnxlens]`` keys (kebab-case, as ruff and mypy use) as server settings."""
    return {BY_PYPROJECT[key].lsp: value for key, value in values.items()
            if key in BY_PYPROJECT}


def names() -> list[str]:
    return [f.name for f in fields(Settings)]
