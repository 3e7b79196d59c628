"""The one options type of onnxlens: every setting of the schema (``schema.py``) as a
typed field whose default is the schema's, and the overlay that reads them from
``[tool.onnxlens]``, the editor's settings or the command line (a bad value is named and the
value below it kept). ``ExportOptions``, the part that changes a check's result, travels to
the export worker with each job and reaches the pipeline's stages.

Precedence, lowest first: the defaults, ``[tool.onnxlens]`` in the workspace's
pyproject.toml, then the editor's settings (``initializationOptions.settings``, then
``workspace/configuration``) or the command line's flags.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, replace
from typing import Any

from exporter.config.runtimes import DEFAULT_PRECISIONS, DEFAULT_RUNTIMES
from exporter.config.schema import BY_LSP, BY_PYPROJECT


def _schema_default(name: str) -> Any:
    """The schema's default of setting ``name``, as a dataclass field (each default is
    written once, in the schema)."""
    default = BY_LSP[name].default
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default))
    return field(default=default)


@dataclass(frozen=True)
class ExportOptions:
    """What changes a check's result besides the code (None: torch.onnx.export's default);
    a target's pragma overrides each."""

    opset: int | None = None
    atol: float | None = None
    rtol: float | None = None
    # the runtimes besides ONNX Runtime's CPU provider that the deploy stage checks
    runtimes: tuple[str, ...] = DEFAULT_RUNTIMES
    # the precisions the deploy stage converts the model to and checks on each runtime
    precision: tuple[str, ...] = DEFAULT_PRECISIONS
    # Check (and save) the model onnxscript's optimizer made, as torch.onnx.export does by
    # default; `onnxlens save --no-optimize` checks and saves the model as translated.
    optimize: bool = True


@dataclass(frozen=True)
class Options:
    """Every setting, under its language-server name (tests check the fields against the
    schema)."""

    trigger: str = _schema_default("trigger")
    debounceMs: int = _schema_default("debounceMs")
    timeoutSeconds: float | None = _schema_default("timeoutSeconds")
    memoryLimitMB: int = _schema_default("memoryLimitMB")
    fixBudgetSeconds: float = _schema_default("fixBudgetSeconds")
    maxConcurrentChecks: int = _schema_default("maxConcurrentChecks")
    memoryBudgetMB: int = _schema_default("memoryBudgetMB")
    diagnosticMode: str = _schema_default("diagnosticMode")
    atol: float | None = _schema_default("atol")
    rtol: float | None = _schema_default("rtol")
    opset: int | None = _schema_default("opset")
    runtimes: list[str] = _schema_default("runtimes")
    precision: list[str] = _schema_default("precision")
    select: list[str] = _schema_default("select")
    ignore: list[str] = _schema_default("ignore")
    severity: dict[str, str] = _schema_default("severity")
    exclude: list[str] = _schema_default("exclude")
    extendExclude: list[str] = _schema_default("extendExclude")
    sarifOutputDirectory: str | None = _schema_default("sarifOutputDirectory")
    logLevel: str = _schema_default("logLevel")

    @property
    def excluded(self) -> list[str]:
        return [*self.exclude, *self.extendExclude]

    @property
    def export(self) -> ExportOptions:
        return ExportOptions(self.opset, self.atol, self.rtol, tuple(self.runtimes),
                             tuple(self.precision))


def _flatten(raw: dict[str, Any]) -> dict[str, Any]:
    flat = dict(raw)
    sarif = flat.pop("sarif", None)
    if isinstance(sarif, dict) and "outputDirectory" in sarif:
        flat["sarifOutputDirectory"] = sarif["outputDirectory"]
    return flat


def apply(base: Options, raw: Any, origin: str) -> tuple[Options, list[str]]:
    """Overlay ``raw`` (a dict of camelCase keys) on ``base``; returns problems found."""
    options, problems = _overlay(base, raw)
    return options, [f"{origin}: {problem}" for problem in problems]


def apply_all(base: Options, sources: list[tuple[str, Any]]) -> tuple[Options, list[str]]:
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


def _overlay(base: Options, raw: Any) -> tuple[Options, list[str]]:
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
            kept = "using the default" if default is None else f"using {default!r}"
            problems.append(f"`{setting.vscode_name}` {problem}; {kept}")
        else:
            changes[name] = checked
    return replace(base, **changes), problems


def from_pyproject(values: dict[str, Any]) -> dict[str, Any]:
    """``[tool.onnxlens]`` keys (kebab-case, as ruff and mypy use) as settings names."""
    return {BY_PYPROJECT[key].lsp: value for key, value in values.items()
            if key in BY_PYPROJECT}


def names() -> list[str]:
    return [f.name for f in fields(Options)]
