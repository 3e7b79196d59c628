"""Project defaults from ``[tool.onnxlens]`` in the workspace's ``pyproject.toml``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KNOWN_KEYS = {"opset": int, "atol": float, "rtol": float, "select": list, "ignore": list,
              "timeout": float,
              # used by the language server only
              "trigger": str, "sarif-output": str, "memory-limit-mb": int}


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
    except (OSError, tomllib.TOMLDecodeError) as error:
        config.problems.append(f"{pyproject}: cannot read [tool.onnxlens]: {error}")
        return config
    section = data.get("tool", {}).get("onnxlens", {})
    for key, value in section.items():
        expected = KNOWN_KEYS.get(key)
        if expected is None:
            config.problems.append(f"{pyproject}: unknown key `{key}` in [tool.onnxlens] "
                                   f"(known: {', '.join(sorted(KNOWN_KEYS))})")
        elif expected is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            config.values[key] = float(value)
        elif not isinstance(value, expected) or isinstance(value, bool):
            config.problems.append(f"{pyproject}: `{key}` in [tool.onnxlens] must be "
                                   f"{expected.__name__}, not {type(value).__name__}; ignored")
        else:
            config.values[key] = value
    return config
