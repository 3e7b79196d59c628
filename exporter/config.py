"""Project defaults from ``[tool.onnxlens]`` in the workspace's ``pyproject.toml``."""

from __future__ import annotations

import math
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
# (minimum, maximum) of the numbers: finite, and a deadline or limit a check can keep
BOUNDS = {"opset": (7, math.inf), "atol": (0, math.inf), "rtol": (0, math.inf),
          "timeout": (0, 24 * 3600), "memory-limit-mb": (256, 1024 * 1024)}


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
        problem = _out_of_bounds(key, config.values.get(key))
        if problem:
            config.problems.append(f"{pyproject}: `{key}` in [tool.onnxlens] {problem}; ignored")
            del config.values[key]
    return config


def _out_of_bounds(key: str, value: Any) -> str | None:
    if key not in BOUNDS or value is None:
        return None
    low, high = BOUNDS[key]
    if not math.isfinite(value):
        return f"must be a finite number, not {_text(value)}"
    if not low <= value <= high:
        return f"must be between {_text(low)} and {_text(high)}, not {_text(value)}"
    return None


def _text(number: float) -> str:
    return str(number) if isinstance(number, int) else f"{number:g}"
