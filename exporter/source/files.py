"""Which Python files a check looks at: the ``*.py`` files (and Jupyter notebooks) below a
directory that no ``exclude``/``extend-exclude`` glob matches, and a cheap test for whether a
file may hold export targets. No torch: the language server's workspace mode uses it too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from exporter.config.schema import is_excluded
from exporter.source.notebooks import (
    NOTEBOOK_SUFFIX,
    NotPythonNotebook,
    is_notebook,
    notebook_problem,
)
from exporter.source.text import source_bytes

#: a file without one of these has no export target and no export call (read before parsing)
TARGET_MARKERS = ("onnx-export", "ExportableModule", "torch.onnx", "onnx.export")


def python_files_below(directory: Path, root: Path, excluded: list[str],
                       notebooks: bool = True) -> Iterator[Path]:
    """The ``*.py`` files (with ``notebooks``, ``*.ipynb`` too) below ``directory``, sorted,
    without those an excluded glob matches (relative to ``directory`` and, for globs with
    ``/``, to ``root``, as ruff does). An excluded directory is never walked into: a
    workspace's virtualenv costs nothing."""
    resolved_directory = directory.resolve()

    def skipped(path: Path) -> bool:
        below = path.relative_to(directory).parts
        resolved = resolved_directory.joinpath(*below)
        from_root = resolved.relative_to(root).parts if resolved.is_relative_to(root) \
            else below
        return is_excluded(below, excluded, from_root)

    suffixes = (".py", NOTEBOOK_SUFFIX) if notebooks else (".py",)
    for current, subdirectories, files in os.walk(directory):
        here = Path(current)
        subdirectories[:] = sorted(name for name in subdirectories
                                   if not skipped(here / name))
        for name in sorted(files):
            if name.endswith(suffixes) and not skipped(here / name):
                yield here / name


def might_have_targets(path: Path) -> bool:
    """False only for a readable file without a target marker (a file that cannot be read,
    is not a regular file or is too big, is kept: its check says why; it is never read). A
    file named ``*.ipynb`` that is not a notebook (not JSON, no ``cells``) is kept too: its
    check says so (it was left out without a word, "Checked 0 target(s) in 0 file(s)")."""
    try:
        text = source_bytes(path)
    except OSError:
        return True
    if any(marker.encode() in text for marker in TARGET_MARKERS):
        return True
    if not is_notebook(path):
        return False
    problem = notebook_problem(text)
    return problem is not None and not isinstance(problem, NotPythonNotebook)
