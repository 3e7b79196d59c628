"""Typed server settings with defaults; a bad value is named in a message and the default
is used instead.

Precedence: defaults < ``[tool.onnxlens]`` in the workspace's pyproject.toml <
``initializationOptions.settings`` < ``workspace/configuration`` (section ``onnxlens``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

TRIGGERS = ("onSave", "onType", "manual")
MAX_TIMEOUT_SECONDS = 24 * 3600  # one check; longer is a typo, not a model
MAX_MEMORY_MB = 1024 * 1024
LOG_LEVELS = ("error", "warning", "info", "debug")


@dataclass(frozen=True)
class Settings:
    trigger: str = "onSave"
    debounceMs: int = 500
    timeoutSeconds: float = 60.0
    memoryLimitMB: int = 4096
    atol: float | None = None
    rtol: float | None = None
    opset: int | None = None
    sarifOutputDirectory: str | None = None
    logLevel: str = "info"
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)


def _number(value: Any, *, integer: bool, minimum: float, name: str,
            maximum: float = math.inf) -> tuple[Any, str | None]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"`onnxlens.{name}` must be a number, not {value!r}"
    if not math.isfinite(value):  # a NaN deadline would never fire
        return None, f"`onnxlens.{name}` must be a finite number, not {value!r}"
    if integer and not float(value).is_integer():
        return None, f"`onnxlens.{name}` must be a whole number, not {value!r}"
    if value < minimum:
        return None, f"`onnxlens.{name}` must be at least {minimum:g}, not {value!r}"
    if value > maximum:
        return None, f"`onnxlens.{name}` must be at most {maximum:g}, not {value!r}"
    return (int(value) if integer else float(value)), None


def _check(name: str, value: Any) -> tuple[Any, str | None]:
    """Validate one setting: (value, None) or (None, message)."""
    if name == "trigger":
        if value in TRIGGERS:
            return value, None
        return None, f"`onnxlens.trigger` must be one of {', '.join(TRIGGERS)}, not {value!r}"
    if name == "logLevel":
        if value in LOG_LEVELS:
            return value, None
        return None, f"`onnxlens.logLevel` must be one of {', '.join(LOG_LEVELS)}, not {value!r}"
    if name == "debounceMs":
        return _number(value, integer=True, minimum=0, name=name)
    if name == "timeoutSeconds":
        return _number(value, integer=False, minimum=1, maximum=MAX_TIMEOUT_SECONDS, name=name)
    if name == "memoryLimitMB":
        return _number(value, integer=True, minimum=256, maximum=MAX_MEMORY_MB, name=name)
    if name in ("atol", "rtol"):
        return (None, None) if value is None else _number(value, integer=False, minimum=0,
                                                          name=name)
    if name == "opset":
        return (None, None) if value is None else _number(value, integer=True, minimum=7,
                                                          name=name)
    if name == "sarifOutputDirectory":
        if value is None or (isinstance(value, str) and value.strip()):
            return value, None
        return None, "`onnxlens.sarif.outputDirectory` must be a directory path"
    if name in ("select", "ignore"):
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value, None
        return None, f"`onnxlens.{name}` must be a list of rule ids or prefixes"
    return None, f"unknown setting `onnxlens.{name}`"


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
    known = {f.name for f in fields(Settings)}
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in _flatten(raw).items():
        if name not in known:
            problems.append(f"{origin}: unknown setting `onnxlens.{name}` (ignored)")
            continue
        checked, problem = _check(name, value)
        if problem:
            default = getattr(base, name)
            problems.append(f"{origin}: {problem}; using {default!r}")
        else:
            changes[name] = checked
    return replace(base, **changes), problems


_PYPROJECT_KEYS = {"opset": "opset", "atol": "atol", "rtol": "rtol", "select": "select",
                   "ignore": "ignore", "timeout": "timeoutSeconds", "trigger": "trigger",
                   "sarif-output": "sarifOutputDirectory", "memory-limit-mb": "memoryLimitMB"}


def from_pyproject(values: dict[str, Any]) -> dict[str, Any]:
    """``[tool.onnxlens]`` keys (kebab-case, as ruff and mypy use) as server settings."""
    return {_PYPROJECT_KEYS[key]: value for key, value in values.items()
            if key in _PYPROJECT_KEYS}
