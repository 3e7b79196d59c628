"""Work-done progress (``window/workDoneProgress``) the user can cancel, when the client
supports it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer


@dataclass
class Progress:
    token: str
    cancelled: Any  # the future pygls resolves when the user cancels, if any


class ProgressReporter:
    def __init__(self, server: LanguageServer, supported: Callable[[], bool]) -> None:
        self._server = server
        self._supported = supported  # the client's capabilities are known at initialize

    async def begin(self, title: str, message: str | None) -> Progress | None:
        if not self._supported():
            return None
        tokens = self._server.work_done_progress
        token = new_token()
        try:
            # Shielded: a check cancelled meanwhile must not cancel pygls' own future.
            await asyncio.shield(tokens.create_async(token))
        except Exception:
            return None
        tokens.begin(token, types.WorkDoneProgressBegin(title=title, message=message,
                                                        cancellable=True))
        return Progress(token, tokens.tokens.get(token))

    def report(self, progress: Progress, message: str) -> None:
        self._server.work_done_progress.report(progress.token,
                                               types.WorkDoneProgressReport(message=message))

    def end(self, progress: Progress, message: str) -> None:
        self._server.work_done_progress.end(progress.token,
                                            types.WorkDoneProgressEnd(message=message))


async def with_progress(reporter: ProgressReporter, title: str,
                        work: Callable[[], Awaitable[Any]]) -> Any:
    """Run a command's work inside work-done progress that the user can cancel."""
    progress = await reporter.begin(title, None)
    task = asyncio.ensure_future(work())
    if progress and progress.cancelled is not None:
        progress.cancelled.add_done_callback(lambda _: task.cancel())
    try:
        result = await task
    except asyncio.CancelledError:
        if progress:
            reporter.end(progress, "Cancelled")
        raise
    if progress:
        reporter.end(progress, "Done")
    return result


def new_token() -> str:
    return f"onnxlens-{uuid.uuid4().hex[:12]}"
