"""Shared bits of the differential corpus: paths, the toolchain's versions, the cache, and
turning the corpus's dataclasses into JSON and back."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import types
import typing
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
# The interpreter running the corpus (the project's venv, wherever ONNXLENS_VENV put it)
PYTHON = Path(sys.executable)
ONNXLENS = PYTHON.parent / "onnxlens"
CACHE = Path(os.environ.get("ONNXLENS_CORPUS_CACHE",
                            Path.home() / ".cache" / "onnxlens")).expanduser()
#: comma-separated runtimes every target of a run is also judged on (docs/runtimes.md), as if
#: each annotation named them: onnxlens gets ``--runtimes``, the truth runs them on its own
RUNTIMES_VARIABLE = "ONNXLENS_CORPUS_RUNTIMES"
#: comma-separated precisions every target of a run is also judged at (docs/runtimes.md), the
#: same way: onnxlens gets ``--precision``, the truth converts and runs them on its own
PRECISION_VARIABLE = "ONNXLENS_CORPUS_PRECISION"
TOOLCHAIN = ("torch", "transformers", "onnxscript", "onnxruntime", "onnx")

T = TypeVar("T")


@cache
def versions() -> dict[str, str]:
    """The installed versions of the export toolchain (read without importing it)."""
    found = {}
    for name in TOOLCHAIN:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def file_hash(path: Path) -> str:
    return sha256(path.read_bytes())


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every subprocess: no bytecode written next to the sources (the
    fixtures and examples are checked in place), one thread pool per core whose idle threads
    sleep instead of spinning (truth and onnxlens run side by side)."""
    env = dict(os.environ)
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
                "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error",
                "HF_HUB_OFFLINE": "1"})
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see scripts/test.sh: spinning threads
    env.update(extra or {})
    return env


# -- JSON <-> dataclasses --------------------------------------------------------------------

def to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def from_json(kind: type[T], data: Any) -> T:
    """Rebuild ``kind`` (a dataclass, possibly nested, with list/optional fields) from JSON."""
    return _convert(kind, data)


def _convert(kind: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        return _convert(options[0], data) if len(options) == 1 else data
    if origin in (list, tuple):
        (item,) = typing.get_args(kind)[:1] or (Any,)
        converted = [_convert(item, value) for value in data]
        return converted if origin is list else tuple(converted)
    if origin is dict:
        _, item = typing.get_args(kind)
        return {key: _convert(item, value) for key, value in data.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        names = {f.name for f in dataclasses.fields(kind)}
        return kind(**{key: _convert(hints[key], value)
                       for key, value in data.items() if key in names})
    if kind is Path:
        return Path(data)
    return data


def dumps(value: Any) -> str:
    return json.dumps(to_json(value), sort_keys=True)
