"""One job for one target, built one way for the CLI and the server (``JobRequest``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from check_service.outcomes import Limits
from export_worker.messages import JobKind, JobRequest
from exporter.config.options import Options
from exporter.source.notebooks import CellSource
from exporter.source.targets import Target


def job_limits(settings: Options) -> Limits:
    """A job's time and memory limits (0 in the settings: no limit)."""
    return Limits(settings.timeoutSeconds or None, settings.memoryLimitMB or None)


def job_request(kind: JobKind, target: Target, workspace: Path, settings: Options, *,
                text: str | None = None, notebook_cells: Sequence[CellSource] = (),
                **fields: Any) -> JobRequest:
    """A ``kind`` job on ``target`` with the limits and export options of ``settings``;
    ``text``: the editor's text of the file (None: the file on disk); ``fields``: the job
    kind's own (``JobRequest``)."""
    limits = job_limits(settings)
    return JobRequest(kind, target, str(workspace), text=text,
                      notebook_cells=list(notebook_cells), settings=settings.export,
                      timeout=limits.timeout_seconds, memory_limit_mb=limits.memory_limit_mb,
                      **fields)
