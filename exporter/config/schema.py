"""Every onnxlens setting, declared once: its ``[tool.onnxlens]`` key, its language-server
name (and VS Code's ``onnxlens.*`` name), its CLI flag, its type, bounds, default and meaning.

The ``[tool.onnxlens]`` reader (``exporter/config/pyproject.py``) and the one options type
(``exporter/config/options.py``, whose defaults are these) validate with it; the CLI's flags of
settings are made from it (``onnxlens/options.py``, ``add_setting_flags``); tests check
``Options``, the table of docs/configuration.md and the extension's ``package.json`` against
it.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from typing import Any, Literal

from exporter.config.runtimes import (
    DEFAULT_PRECISIONS,
    DEFAULT_RUNTIMES,
    PRECISIONS,
    RUNTIMES,
    unknown_names,
)
from exporter.findings.rules import RULES, Severity

Kind = Literal["int", "float", "choice", "path", "rules", "globs", "severities", "names"]

#: never searched for targets (ruff's defaults, and where Python packages and builds live);
#: ``exclude`` replaces this list, ``extend-exclude`` adds to it
DEFAULT_EXCLUDE = (".*", "__pycache__", "venv", "env", "site-packages", "node_modules",
                   "build", "dist", "__pypackages__", "_build", "buck-out")


@dataclass(frozen=True)
class Setting:
    lsp: str  # the server's name; VS Code's is onnxlens.<vscode>
    kind: Kind
    default: Any  # the language server's (and VS Code's) default
    doc: str
    pyproject: str | None = None  # the [tool.onnxlens] key; None: editor only
    cli: str | None = None  # the `onnxlens check` flag, if any
    cli_default: Any = None  # when the CLI's default differs (a CI run may take longer)
    cli_help: str = ""  # the flag's help ({what}: what a job's limit stops)
    vscode: str | None = None  # when VS Code's name differs from ``lsp``
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()  # a "choice"'s values, or the names a "names" list takes
    noun: str = ""  # what a "names" list names, for its messages
    nullable: bool = False  # None means "the exporter's default"
    #: each workspace folder may set its own (a check follows its file's folder); the others
    #: are the session's, its first folder's (when checks start, how many run, the log)
    per_folder: bool = False

    @property
    def vscode_name(self) -> str:
        return f"onnxlens.{self.vscode or self.lsp}"

    def check(self, value: Any) -> tuple[Any, str | None]:
        """(the value, None), or (None, why not: "must be ..., not ...")."""
        if value is None and self.nullable:
            return None, None
        if self.kind in ("int", "float"):
            return self._number(value)
        if self.kind == "choice":
            if value in self.choices:
                return value, None
            return None, f"must be one of {', '.join(self.choices)}, not {value!r}"
        if self.kind == "path":
            if isinstance(value, str) and value.strip():
                return value, None
            return None, f"must be a directory path, not {value!r}"
        if self.kind == "names":
            return self._names(value)
        if self.kind == "severities":
            if not isinstance(value, dict):
                return None, f"must be {_SHAPES[self.kind]}, not {value!r}"
            return _severities(value)
        if not isinstance(value, list) or not all(isinstance(item, str) and item.strip()
                                                  for item in value):
            return None, f"must be {_SHAPES[self.kind]}, not {value!r}"
        if self.kind == "rules":
            unknown = [item for item in value if not _names_rules(item)]
            if unknown:
                return None, f"names no rule: {', '.join(map(repr, unknown))}"
            return [item.strip().upper() for item in value], None
        return list(value), None

    def _names(self, value: Any) -> tuple[Any, str | None]:
        known = ", ".join(self.choices)
        unknown = unknown_names(value, self.choices)
        if unknown is None:
            return None, f"must be a list of {self.noun} names ({known}), not {value!r}"
        if unknown:
            return None, (f"names no {self.noun}: {', '.join(map(repr, unknown))} (known: "
                          f"{known})")
        return list(dict.fromkeys(value)), None

    def _number(self, value: Any) -> tuple[Any, str | None]:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"must be a number, not {value!r}"
        if not math.isfinite(value):  # a NaN deadline would never fire
            return None, f"must be a finite number, not {_text(value)}"
        if self.kind == "int" and not float(value).is_integer():
            return None, f"must be a whole number, not {_text(value)}"
        low = -math.inf if self.minimum is None else self.minimum
        high = math.inf if self.maximum is None else self.maximum
        if not low <= value <= high:
            if math.isinf(high):
                return None, f"must be at least {_text(low)}, not {_text(value)}"
            return None, f"must be between {_text(low)} and {_text(high)}, not {_text(value)}"
        return (int(value) if self.kind == "int" else float(value)), None


_SHAPES = {"rules": "a list of rule ids or prefixes", "globs": "a list of glob patterns",
           "severities": 'a table of rule id = "error", "warning" or "info"'}


def _names_rules(pattern: str) -> bool:
    pattern = pattern.strip().upper()
    return pattern.startswith("ONNX") and any(rule.startswith(pattern) for rule in RULES)


def _severities(value: dict[Any, Any]) -> tuple[Any, str | None]:
    levels = {severity.value for severity in Severity}
    result = {}
    for rule, level in value.items():
        if not isinstance(rule, str) or not _names_rules(rule):
            return None, f"names no rule: {rule!r}"
        if level not in levels:
            return None, f"gives {rule} the severity {level!r} (use error, warning or info)"
        result[rule.strip().upper()] = level
    return result, None


def _text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() and abs(number) < 1e10 \
        else f"{number:g}"


#: With no ``timeoutSeconds`` set, the seconds the model's own code (the load stage: building
#: the model, its eager run) may take, in the editor and on the command line (a CI run may take
#: longer): an endless loop or a wait there is ONNX901. What is left once it ran is the
#: exporter's work on it, which ends where the plain exporter's does: it runs to its answer,
#: up to ``EXPORT_CEILING_SECONDS`` for the whole check (a timeout never stands where the
#: exporter would have answered, docs/rules/ONNX901.md).
DEFAULT_LOAD_SECONDS = 60.0
COMMAND_LINE_LOAD_SECONDS = 300.0
EXPORT_CEILING_SECONDS = 3600.0

SETTINGS = (
    Setting("trigger", "choice", "onSave", "`onSave`, `onType` (debounced) or `manual` "
            "(commands only)", pyproject="trigger", choices=("onSave", "onType", "manual")),
    Setting("debounceMs", "int", 500, "delay after the last keystroke with `onType`",
            minimum=0, maximum=60_000),
    Setting("timeoutSeconds", "float", None, "a check running longer is stopped (ONNX901); "
            "0 = no limit; unset: the model's own code (building it, its eager run) is "
            "stopped after 60 s (CLI: 300 s), then the export runs to its answer (up to an "
            "hour)", pyproject="timeout", cli="--timeout", nullable=True,
            cli_default="300 s for the model's own code",
            cli_help="stop {what} after this long: ONNX901 (default: `timeout` in "
            "[tool.onnxlens], else 300 s for the model's own code, building it and its eager "
            "run, then the export runs to its answer, up to an hour; 0 = no limit)",
            minimum=0, maximum=24 * 3600, per_folder=True),
    Setting("memoryLimitMB", "int", 4096, "a check using more is stopped (ONNX903)",
            pyproject="memory-limit-mb", cli="--memory-limit-mb", minimum=256,
            cli_default="no limit", cli_help="stop {what} when its process uses more memory: "
            "ONNX903 (default: `memory-limit-mb` in [tool.onnxlens], else no limit)",
            maximum=1024 * 1024, per_folder=True),
    Setting("fixBudgetSeconds", "float", 120.0, "after a target fails, the time spent trying "
            "the fixes that apply to its failure (docs/fixes.md); only fixes that worked are "
            "shown; 0 = none tried", pyproject="fix-budget", cli="--fix-budget", minimum=0,
            cli_help="after a target fails, try the fixes that apply to its failure for up "
            "to this long and show those that worked (default 120, or `fix-budget` in "
            "[tool.onnxlens]; 0 = none tried; docs/fixes.md)", maximum=24 * 3600, per_folder=True),
    Setting("maxConcurrentChecks", "int", 0, "checks that run at once; the rest wait, the "
            "document in front of you first (0: the number of cores)", minimum=0, maximum=256),
    Setting("memoryBudgetMB", "int", 0, "a check starts only while the memory the running "
            "ones are expected to need leaves room for it (0: half the memory available when "
            "the server starts)", minimum=0, maximum=1024 * 1024),
    Setting("diagnosticMode", "choice", "openFiles", "`openFiles` or `workspace` (every "
            "target in the workspace, checked in the background)",
            choices=("openFiles", "workspace")),
    Setting("atol", "float", None, "absolute tolerance against PyTorch (unset: by dtype)",
            pyproject="atol", minimum=0, nullable=True, per_folder=True),
    Setting("rtol", "float", None, "relative tolerance against PyTorch (unset: by dtype)",
            pyproject="rtol", minimum=0, nullable=True, per_folder=True),
    Setting("opset", "int", None, "ONNX opset version (unset: torch.onnx.export's)",
            pyproject="opset", minimum=7, nullable=True, per_folder=True),
    Setting("runtimes", "names", list(DEFAULT_RUNTIMES), "the runtimes the exported model "
            "is checked on besides ONNX Runtime's CPU provider, which every check runs: "
            "`openvino-cpu`, `ort-web`, `nnapi`, `coreml`, `cuda`, `tensorrt` "
            "(docs/runtimes.md)",
            pyproject="runtimes", cli="--runtimes", cli_help="comma-separated runtimes to "
            "check the exported model on as well: openvino-cpu, ort-web, nnapi, coreml, cuda, "
            "tensorrt "
            "(ort-cpu is always checked; "
            "docs/runtimes.md)", choices=tuple(RUNTIMES), noun="runtime", per_folder=True),
    Setting("precision", "names", list(DEFAULT_PRECISIONS), "the precisions the exported "
            "model is also checked at, converted by ONNX Runtime's tools, on each runtime: "
            "`fp16`, `int8` (fp32, the model as exported, is always checked; "
            "docs/runtimes.md)",
            pyproject="precision", cli="--precision", cli_help="comma-separated precisions to "
            "check the exported model at as well, on each runtime: fp16, int8 (fp32 is always "
            "checked; docs/runtimes.md)", choices=tuple(PRECISIONS), noun="precision",
            per_folder=True),
    Setting("select", "rules", [], "report only these rule ids or prefixes (empty: every "
            "rule on by default)", pyproject="select", cli="--select",
            cli_help="only these rule ids or prefixes, comma-separated (ONNX2: every "
            "translate rule); selects the rules that are off by default too", per_folder=True),
    Setting("ignore", "rules", [], "never report these rule ids or prefixes",
            pyproject="ignore", cli="--ignore",
            cli_help="leave out these rule ids or prefixes, comma-separated", per_folder=True),
    Setting("severity", "severities", {}, 'a rule\'s severity, e.g. `{ ONNX106 = "info" }`',
            pyproject="severity", cli="--severity",
            cli_help="a rule's severity (error, warning or info), e.g. ONNX106=info; over "
            "`severity` in [tool.onnxlens]", per_folder=True),
    Setting("exclude", "globs", list(DEFAULT_EXCLUDE), "files and directories never checked "
            "(globs; replaces the defaults)", pyproject="exclude", cli="--exclude",
            cli_help="comma-separated globs of files and directories never checked "
            "(replaces the defaults: hidden directories, venv, build, dist, node_modules, "
            "...)", per_folder=True),
    Setting("extendExclude", "globs", [], "more globs to exclude, beside the defaults",
            pyproject="extend-exclude", cli="--extend-exclude",
            cli_help="globs excluded beside the defaults (and `exclude`)", per_folder=True),
    Setting("sarifOutputDirectory", "path", None, "write `onnxlens.sarif` there after each "
            "check (unset: nothing is written)", pyproject="sarif-output",
            vscode="sarif.outputDirectory", nullable=True),
    Setting("logLevel", "choice", "info", "`error`, `warning`, `info` or `debug` "
            "(`window/logMessage`)", choices=("error", "warning", "info", "debug")),
)
BY_LSP = {setting.lsp: setting for setting in SETTINGS}
BY_PYPROJECT = {setting.pyproject: setting for setting in SETTINGS if setting.pyproject}


def is_excluded(relative_parts: tuple[str, ...], patterns: list[str],
                from_root: tuple[str, ...] | None = None) -> bool:
    """Whether a path matches a pattern: a pattern without ``/`` matches any one of
    ``relative_parts`` (a directory's or the file's name, below where the search started),
    one with ``/`` the whole path relative to the root (``from_root``, default the parts)."""
    whole = "/".join(relative_parts if from_root is None else from_root)
    for pattern in patterns:
        if "/" in pattern.strip("/"):
            if fnmatch.fnmatchcase(whole, pattern.strip("/")) or \
                    fnmatch.fnmatchcase(whole, pattern.strip("/") + "/*"):
                return True
        elif any(fnmatch.fnmatchcase(part, pattern.strip("/")) for part in relative_parts):
            return True
    return False
