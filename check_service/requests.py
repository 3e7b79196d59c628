"""One job for one target, built one way for the CLI and the server (``JobRequest``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from check_service.outcomes import Limits
from export_worker.messages import JobKind, JobRequest
from exporter.config.options import Options
from exporter.config.schema import DEFAULT_LOAD_SECONDS, EXPORT_CEILING_SECONDS
from exporter.source.notebooks import CellSource
from exporter.source.targets import Target


def job_limits(settings: Options, load_default: float = DEFAULT_LOAD_SECONDS) -> Limits:
    """A job's time and memory limits (0 in the settings: no limit). A timeout the user set
    bounds the whole check; without one the model's own code has ``load_default`` seconds
    (the front end's), and the exporter's stages run to their answer, up to a ceiling."""
    memory = settings.memoryLimitMB or None
    if settings.timeoutSeconds is not None:
        return Limits(settings.timeoutSeconds or None, memory)
    return Limits(EXPORT_CEILING_SECONDS, memory, load_timeout_seconds=load_default)


def job_request(kind: JobKind, target: Target, workspace: Path, settings: Options, *,
                text: str | None = None, notebook_cells: Sequence[CellSource] = (),
                load_default: float = DEFAULT_LOAD_SECONDS, **fields: Any) -> JobRequest:
    """A ``kind`` job on ``target`` with the limits and export options of ``settings``;
    ``text``: the editor's text of the file (None: the file on disk); ``fields``: the job
    kind's own (``JobRequest``); ``load_default``: as in ``job_limits``."""
    limits = job_limits(settings, load_default)
    return JobRequest(kind, target, str(workspace), text=text,
                      notebook_cells=list(notebook_cells), settings=settings.export,
                      timeout=limits.timeout_seconds, memory_limit_mb=limits.memory_limit_mb,
                      load_timeout=limits.load_timeout_seconds,
                      **fields)
