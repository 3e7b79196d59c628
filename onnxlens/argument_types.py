"""argparse ``type=`` converters: a flag's text as the settings schema takes it, or the
schema's reason as a usage error."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from exporter.config.schema import Setting
from exporter.findings.rules import RULES


def rule_list(text: str) -> list[str]:
    items = [item.strip().upper() for item in text.split(",") if item.strip()]
    for item in items:
        if not re.fullmatch(r"ONNX\d{0,3}", item) or not any(r.startswith(item) for r in RULES):
            raise argparse.ArgumentTypeError(f"unknown rule id or prefix: {item}")
    return items


def setting_reader(setting: Setting) -> Callable[[str], Any]:
    """The ``type=`` of a setting's flag: its text read as the setting's kind, then checked
    by the settings schema (bounds; nan and inf are refused there)."""
    readers: dict[str, Callable[[str], Any]] = {
        "rules": rule_list, "globs": glob_list, "severities": severity_list,
        "names": name_list(setting)}
    if setting.kind in readers:
        return readers[setting.kind]
    kind: type = int if setting.kind == "int" else float
    what = f"{'a whole number' if kind is int else 'a number'} of {unit_of(setting)}"

    def read(text: str) -> Any:
        return kind(_number(text, kind, what, setting.lsp))

    return read


def unit_of(setting: Setting) -> str:
    """What a number setting counts, from its name (timeoutSeconds, memoryLimitMB)."""
    return "megabytes" if setting.lsp.endswith("MB") else "seconds"


def _number(text: str, kind: type, what: str, setting: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
    return checked(setting, value)


def checked(setting: str, value: Any) -> Any:
    """``value`` as the settings schema takes it, or the schema's reason as a usage error."""
    from exporter.config.schema import BY_LSP

    checked, problem = BY_LSP[setting].check(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return checked


def severity_list(text: str) -> dict[str, str]:
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        rule, equals, level = item.partition("=")
        if not equals:
            raise argparse.ArgumentTypeError(f"expected ID=LEVEL, not {item!r}")
        pairs[rule.strip()] = level.strip().lower()
    return dict(checked("severity", pairs))


def name_list(setting: Setting) -> Callable[[str], list[str]]:
    """A comma-separated list of the names a "names" setting takes (runtimes, precisions)."""
    return lambda text: list(checked(setting.lsp, [part.strip() for part in text.split(",")
                                                   if part.strip()]))


def glob_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def category(text: str) -> str:
    value = text.strip()
    if not value or any(character.isspace() for character in value):
        raise argparse.ArgumentTypeError(f"a category is one word without spaces, not {text!r}")
    return value



def job_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 256:
        raise argparse.ArgumentTypeError(f"must be between 1 and 256, not {text}")
    return value


def shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not I/N (e.g. 1/4): {text!r}")
    index, count = int(match[1]), int(match[2])
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"I must be between 1 and N: {text!r}")
    return index, count


def size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?i?B?)?\s*", text, re.I)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 10MB, 2GB, 4096)")
    unit = (match[2] or "").upper().replace("I", "").rstrip("B")
    return int(float(match[1]) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[unit])
