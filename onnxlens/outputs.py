"""Where reports go: outputs refused before a check runs, reports written atomically, the
GitHub step summary."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from exporter.reports.render import display_path
from onnxlens.messages import UsageError


def write_atomically(path: Path, text: str) -> None:
    from exporter.reports.writing import UnsafePathError, write_text_atomically

    try:
        write_text_atomically(path, text)
    except (UnsafePathError, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise UsageError(f"{path}: {reason}") from error


def check_output_path(path: Path, inputs: list[Path], *, stream_ok: bool = True) -> None:
    """Refuse an output the report cannot be written to before the check runs (none of its
    work is lost): one that is an input of the run (a checked source file), one that is not a
    regular file (a device or a pipe is written to as a stream when ``stream_ok``, never
    replaced), and one in a directory where no file can be created."""
    from exporter.reports.writing import UnsafePathError, check_writable, is_stream, output_path

    try:
        output_path(path, stream_ok=stream_ok)
        if not (stream_ok and is_stream(path)):
            check_writable(path)
    except (UnsafePathError, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise UsageError(f"{path}: {reason}") from error
    for source in inputs:
        if path.exists() and source.exists() and os.path.samefile(path, source):
            raise UsageError(f"{path} is {display_path(source)}, an input of this run; "
                             "refusing to overwrite it")


def write_step_summary(diagnostics: list[Any], summary: str) -> None:
    """GitHub Actions: every finding in the step summary (annotations stop at 10 a kind)."""
    from exporter.reports.github import append_step_summary, step_summary

    destination = os.environ.get("GITHUB_STEP_SUMMARY")
    if not destination:
        return
    try:
        append_step_summary(Path(destination), step_summary(diagnostics, summary))
    except OSError as error:
        print(f"onnxlens: warning: cannot write the step summary {destination}: {error}",
              file=sys.stderr)
