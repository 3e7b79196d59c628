"""Why ``onnxlens check`` checked no target: what it read and what to do, in every report's
words, so that a run over nothing (a mistyped path, an empty directory, files with no marked
model) is never taken for a clean one. A warning by default, as ruff's "No Python files found";
an error with ``--require-targets`` (exit 5, as pytest's "no tests collected")."""

from __future__ import annotations

from pathlib import Path

from exporter.findings.result import CheckResult, NothingChecked
from exporter.findings.rules import Severity
from exporter.reports.render import display_path
from exporter.source.notebooks import is_notebook

#: ``onnxlens check --require-targets`` when no target was checked
EXIT_NOTHING_CHECKED = 5
_HOW_TO_MARK = "mark a model with `# onnx-export:` or see docs/targets.md"


def nothing_checked(given: list[Path], read: list[Path], result: CheckResult, *,
                    shard: tuple[int, int] | None, required: bool) -> NothingChecked | None:
    """None when a target was checked; else what was read and why nothing was checked.
    ``given``: the paths on the command line; ``read``: the files found under them."""
    if result.targets:
        return None
    severity = Severity.ERROR if required else Severity.WARNING
    if not read:
        where = ", ".join(f"`{display_path(path)}`" for path in given)
        return NothingChecked(0, f"no Python file or notebook in {where} (directories are "
                              "searched for *.py and *.ipynb, without what `exclude` "
                              "matches: docs/cli.md)", severity)
    files = f"{len(read)} file{'' if len(read) == 1 else 's'} read"
    if shard is not None:
        return NothingChecked(len(read), f"{files}, shard {shard[0]}/{shard[1]} holds none "
                              "of their targets", severity)
    unreadable = {d.location.path for d in result.file_diagnostics}
    if unreadable:
        why = "the finding above says why" if len(unreadable) == 1 \
            else "the findings above say why"
        return NothingChecked(len(read), f"{files}, no target could be loaded ({why})",
                              severity)
    others = [path for path in read if path.suffix != ".py" and not is_notebook(path)]
    aside = (f" ({display_path(others[0])} is neither a Python file nor a notebook)"
             if others else "")
    return NothingChecked(len(read), f"{files}, no target: {_HOW_TO_MARK}{aside}", severity)
