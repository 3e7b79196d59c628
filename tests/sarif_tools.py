"""Offline SARIF 2.1.0 validation for the tests.

Both validators come pinned from npm via ``tools/sarif`` (run ``tools/sarif/install.sh``):
the SARIF 2.1.0 JSON schema shipped in ``@microsoft/sarif-multitool-<platform>`` and the
Microsoft SARIF Multitool binary itself.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Any

import jsonschema

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SARIF_TOOLS_DIR = REPO_ROOT / "tools" / "sarif"
_PACKAGE_DIR = SARIF_TOOLS_DIR / "node_modules" / "@microsoft" / f"sarif-multitool-{sys.platform}"
_INSTALL_HINT = "run tools/sarif/install.sh to install the pinned SARIF tools"


def schema_path() -> pathlib.Path:
    """Path of the SARIF 2.1.0 JSON schema installed under tools/sarif/node_modules."""
    return _PACKAGE_DIR / "sarif-2.1.0.json"


def multitool_path() -> pathlib.Path:
    """Path of the SARIF Multitool binary installed under tools/sarif/node_modules."""
    return _PACKAGE_DIR / ("Sarif.Multitool.exe" if sys.platform == "win32" else "Sarif.Multitool")


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    path = schema_path()
    if not path.is_file():
        raise RuntimeError(f"SARIF schema not found at {path}: {_INSTALL_HINT}")
    schema = json.loads(path.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)  # the draft "$schema" declares
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def validate_with_schema(log: dict[str, Any]) -> list[str]:
    """Validate a SARIF log against the SARIF 2.1.0 JSON schema; return the error messages."""
    errors = sorted(_validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message}" for e in errors]


def _message_text(result: dict[str, Any], rules: list[dict[str, Any]]) -> str:
    """The text of a multitool result, formatting its rule's messageStrings template."""
    message = result.get("message", {})
    if "text" in message:
        return str(message["text"])
    rule = next((r for r in rules if r.get("id") == result.get("ruleId")), {})
    template = rule.get("messageStrings", {}).get(message.get("id"), {}).get("text")
    args = [str(a) for a in message.get("arguments", [])]
    try:
        return template.format(*args) if template else f"{message.get('id')}: {args}"
    except (IndexError, KeyError, ValueError):
        return f"{template} {args}"


#: what a SARIF viewer needs (issue 41): no Multitool warning either, e.g. SARIF2005 (no
#: informationUri); its notes (SARIF2006: a URI unreachable offline, ...) are not counted
ERRORS_AND_WARNINGS = ("error", "warning")


def validate_with_multitool(sarif_path: pathlib.Path, timeout: float = 120.0,
                            levels: tuple[str, ...] = ("error",),
                            rule_kind: str | None = None) -> list[str]:
    """Run ``Sarif.Multitool validate`` on a SARIF file; return its error-level findings."""
    found = validate_many_with_multitool([sarif_path], timeout, levels, rule_kind)
    return found[pathlib.Path(sarif_path).resolve()]


def validate_many_with_multitool(
    sarif_paths: list[pathlib.Path], timeout: float = 300.0,
    levels: tuple[str, ...] = ("error",), rule_kind: str | None = None,
) -> dict[pathlib.Path, list[str]]:
    """Validate several SARIF files in one Multitool run (it starts slowly); errors by file.

    The tool exits 0 even when it finds errors, so its own SARIF output is parsed: each
    result whose level (or its rule's default level) is in ``levels`` ("error" by default;
    ``ERRORS_AND_WARNINGS``), and each error-level tool notification, becomes one
    ``"<ruleId>: <message>"`` string. ``rule_kind="Ghas"``: GitHub code scanning's rules
    (``--rule-kind Ghas``) instead of the SARIF specification's.
    """
    paths = [pathlib.Path(p).resolve() for p in sarif_paths]
    for sarif_path in paths:
        if not sarif_path.is_file():
            raise FileNotFoundError(sarif_path)
    tool = multitool_path()
    if not tool.is_file() or not os.access(tool, os.X_OK):
        raise RuntimeError(f"SARIF Multitool not found at {tool}: {_INSTALL_HINT}")
    env = {**os.environ}
    env.setdefault("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")  # no ICU needed
    env.setdefault("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
    with tempfile.TemporaryDirectory(prefix="sarif-validate-") as tmp:
        out = pathlib.Path(tmp) / "validation.sarif"
        cmd = [str(tool), "validate", *map(str, paths), "--output", str(out)]
        if "note" in levels:
            cmd += ["--level", "Error;Warning;Note"]
        if rule_kind:
            cmd += ["--rule-kind", rule_kind]
        proc = subprocess.run(
            cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if not out.is_file():
            raise RuntimeError(
                f"SARIF Multitool wrote no output (exit {proc.returncode}):\n"
                f"{proc.stdout}\n{proc.stderr}"
            )
        report = json.loads(out.read_text(encoding="utf-8-sig"))
    errors: dict[pathlib.Path, list[str]] = {path: [] for path in paths}
    for run in report.get("runs", []):
        rules = run.get("tool", {}).get("driver", {}).get("rules", [])
        defaults = {r.get("id"): r.get("defaultConfiguration", {}).get("level") for r in rules}
        for res in run.get("results", []):
            level = res.get("level") or defaults.get(res.get("ruleId")) or "warning"
            if level in levels:
                where = _result_file(res, paths)
                errors[where].append(f"{res.get('ruleId')}: {_message_text(res, rules)}")
        for inv in run.get("invocations", []):
            for note in inv.get("toolExecutionNotifications", []) + inv.get(
                "toolConfigurationNotifications", []
            ):
                if note.get("level", "warning") == "error":
                    message = f"notification: {note.get('message', {}).get('text')}"
                    for found in errors.values():
                        found.append(message)
    return errors


def _result_file(result: dict[str, Any], paths: list[pathlib.Path]) -> pathlib.Path:
    """The validated file a Multitool result is about (its first location's artifact)."""
    for location in result.get("locations", []):
        uri = location.get("physicalLocation", {}).get("artifactLocation", {}).get("uri", "")
        for path in paths:
            if uri == path.as_uri() or uri.endswith("/" + path.name):
                return path
    return paths[0]
