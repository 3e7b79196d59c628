"""A command's options (``exporter.config.options.Options``, the type the server and the worker
use too): the command line's defaults, then ``[tool.onnxlens]``, then the flags; and the
flags of a job's limits."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from exporter.config.options import Options, apply_all, from_pyproject
from exporter.config.pyproject import ProjectConfig
from exporter.config.schema import SETTINGS
from onnxlens.argument_types import setting_reader, unit_of

#: where the command line's default differs from the editor's: a CI run has no memory limit
#: (it checks models as big as the plain exporter can — the corpus's 300M-parameter
#: torchvision models passed 4096 MB; 0 is "no limit"); its model code has longer when no
#: timeout is set (``COMMAND_LINE_LOAD_SECONDS``, given to the jobs)
_COMMAND_LINE_MEMORY_LIMIT_MB = 0
#: flags that add to ``[tool.onnxlens]`` instead of replacing it
_ADDED_TO_THE_PROJECTS = ("severity", "extendExclude")


#: a flag's metavar by its setting's kind
_METAVARS = {"rules": "IDS", "globs": "GLOBS", "severities": "ID=LEVEL,..."}
#: the flags of a job's limits, which every command that runs a job takes
LIMITS = ("timeoutSeconds", "memoryLimitMB")


def add_setting_flags(command: argparse.ArgumentParser, what: str,
                      only: tuple[str, ...] | None = None) -> None:
    """The flags of the settings schema's settings that have one (``only``: these settings),
    each read and checked as the schema says; ``what``: what a limit stops, for the help."""
    for setting in SETTINGS:
        if setting.cli is None or (only is not None and setting.lsp not in only):
            continue
        command.add_argument(
            setting.cli, type=setting_reader(setting), default=None,
            metavar=setting.lsp.upper() if setting.kind == "names" else _METAVARS.get(
                setting.kind, unit_of(setting).upper().replace("MEGABYTES", "MB")),
            help=setting.cli_help.format(what=what))


def command_options(args: argparse.Namespace, config: ProjectConfig) -> Options:
    """The options a command runs with: its defaults, ``[tool.onnxlens]`` (already checked
    by ``load_config``), then each flag given (``--severity`` and ``--extend-exclude`` add to
    the project's; the others replace)."""
    options, _ = apply_all(replace(Options(), memoryLimitMB=_COMMAND_LINE_MEMORY_LIMIT_MB),
                           [("[tool.onnxlens]", from_pyproject(config.values))])
    given: dict[str, Any] = {}
    for setting in SETTINGS:
        value = getattr(args, _destination(setting.cli), None) if setting.cli else None
        if value is None:
            continue
        if setting.lsp in _ADDED_TO_THE_PROJECTS:
            project = getattr(options, setting.lsp)
            value = {**project, **value} if isinstance(project, dict) else [*project, *value]
        given[setting.lsp] = value
    return replace(options, **given)


def _destination(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")
