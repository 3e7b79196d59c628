"""Project defaults from ``[tool.onnxlens]`` in the workspace's ``pyproject.toml``, checked
against the settings schema (``exporter/config/schema.py``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.config.schema import BY_PYPROJECT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


@dataclass
class ProjectConfig:
    root: Path
    values: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def find_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` with a pyproject.toml or .git, else start."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
            return candidate
    return directory


def load_config(root: Path) -> ProjectConfig:
    config = ProjectConfig(root)
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return config
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        config.problems.append(f"{pyproject}: cannot read [tool.onnxlens]: {reason}")
        return config
    section = data.get("tool", {}).get("onnxlens", {}) if isinstance(data.get("tool"), dict) \
        else {}
    if not isinstance(section, dict):
        config.problems.append(f"{pyproject}: [tool.onnxlens] must be a table; ignored")
        return config
    for key, value in section.items():
        setting = BY_PYPROJECT.get(key)
        if setting is None:
            config.problems.append(f"{pyproject}: unknown key `{key}` in [tool.onnxlens] "
                                   f"(known: {', '.join(sorted(BY_PYPROJECT))})")
            continue
        checked, problem = setting.check(value)
        if problem:
            config.problems.append(f"{pyproject}: `{key}` in [tool.onnxlens] {problem}; "
                                   "ignored")
        else:
            config.values[key] = checked
    return config
