"""A document's export targets and its lines, read once per version of an open document and
shared by its check, CodeLens, hover and the commands."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

from pygls.workspace import TextDocument

from exporter.source.targets import Discovery, Target, discover
from exporter.source.text import read_source, source_lines, split_lines
from lsp_server.convert import path_of, path_uri

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _Discovered:
    """A document's targets, found (or being found, in a thread) for one version of it."""

    version: int
    text: str
    future: asyncio.Future[tuple[Discovery, float]]


def _discover_timed(path: Path, text: str | None) -> tuple[Discovery, float]:
    """Run in a thread: the targets of ``text`` (None: the file's saved text), and the
    seconds it took."""
    started = time.perf_counter()
    if text is None:
        try:
            text = read_source(path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            return Discovery([], []), 0.0  # a check of the file says why it cannot be read
    return discover(path, text), time.perf_counter() - started


class TargetDiscovery:
    """``open_document``: the open document of a uri, if any; ``log``: the client's log."""

    def __init__(self, open_document: Callable[[str], TextDocument | None],
                 log: Callable[[str, str], None]) -> None:
        self._open_document = open_document
        self._log = log
        # per open document: its targets and its lines, for its current version only
        self._discoveries: dict[str, _Discovered] = {}
        self._lines: dict[str, tuple[str, tuple[str, ...]]] = {}

    async def targets(self, uri: str) -> list[Target]:
        return (await self.discovered(uri)).targets

    async def discovered(self, uri: str, version: int | None = None,
                         text: str | None = None) -> Discovery:
        """The targets of ``uri`` as ``text`` (its ``version``) holds them; without a text,
        the open document's, else the saved file's. Found in a thread, so that the server
        answers other requests meanwhile, and once per version of an open document, for
        its check, CodeLens, hover and commands alike (a 4.5 MB file with 2,000 targets
        held every request, even ``onnxlens/status``, for minutes)."""
        document = self._open_document(uri)
        if text is None and document is not None:
            version, text = document.version, document.source
        known = self._discoveries.get(uri)
        if known is None or known.version != version or text is None \
                or (known.text is not text and known.text != text):
            future = asyncio.get_running_loop().run_in_executor(
                None, _discover_timed, path_of(uri), text)
            future.add_done_callback(lambda done: self._discovery_done(uri, version, done))
            if version is None or text is None or document is None:
                return (await asyncio.shield(future))[0]  # a file nobody opened: not kept
            known = self._discoveries[uri] = _Discovered(version, text, future)
        return (await asyncio.shield(known.future))[0]

    def _discovery_done(self, uri: str, version: int | None,
                        done: asyncio.Future[tuple[Discovery, float]]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            log.error("finding the targets of %s failed", uri, exc_info=error)
            return
        found, seconds = done.result()
        self._log(f"found {len(found.targets)} target(s) in {path_of(uri).name} "
                  f"v{version} in {seconds:.2f} s", "debug")

    def lines_of(self, path: Path) -> tuple[str, ...]:
        """The lines of the open document (split once per version of its text: a CodeLens
        request split a 4.5 MB document twice per target), else of the saved file."""
        document = self._open_document(path_uri(path))
        if document is None:
            return source_lines(path)
        source = document.source
        known = self._lines.get(document.uri)
        if known is None or known[0] is not source:
            known = self._lines[document.uri] = (source, tuple(split_lines(source)))
        return known[1]

    def forget(self, uri: str) -> None:
        """A closed document: its targets and lines are no longer kept."""
        self._discoveries.pop(uri, None)
        self._lines.pop(uri, None)
