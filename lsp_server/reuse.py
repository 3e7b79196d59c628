"""Reusing a check's result when nothing it read has changed.

A check job records the files it opens (an audit hook sees every open). Its result is reused
for an identical request (file, document text, target, settings, limits) to the same worker
process while every Python file it read from outside the installed packages still has the
same content (sha256), and no package was installed, upgraded or removed since: the
modification times of the interpreter's site-packages directories are unchanged (pip and uv
add and remove entries there; a result was reused after a package the model imports
changed). A check that read any other file (weights, data) is never reused. Not tracked: an
installed package's file edited in place (the warm worker holds its modules anyway), and
what a check learns without reading a file (an existence test, a directory listing, the
environment): ``onnxlens.restartWorker`` forgets every result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections import OrderedDict
from pathlib import Path

from export_worker.inputs import digest
from export_worker.messages import CheckAnswer, JobDone, JobOutcome, JobRequest
from exporter.toolchain import shortcuts


class ResultCache:
    """In the server: check outcomes by request and worker process, while their inputs are
    unchanged."""

    def __init__(self, limit: int = 32) -> None:
        self.limit = limit
        self.entries: OrderedDict[str, tuple[JobDone, Installed]] = OrderedDict()
        self.reused = 0
        self.checked = 0
        # the last document text and its digest: the requests of a document's targets share
        # its text, hashed once (a key holding 4.5 MB of text, made twice per target, held
        # the server for seconds per target)
        self._text: tuple[str, str] = ("", _digest_text(""))

    def get(self, request: JobRequest, worker: str) -> JobDone | None:
        if not shortcuts.enabled("result-reuse"):
            return None
        key = self._key(request, worker)
        entry = self.entries.get(key)
        if entry is None:
            return None
        outcome, installed = entry
        answer = outcome.answer
        modules = answer.inputs.modules \
            if isinstance(answer, CheckAnswer) and answer.inputs else {}
        if installed != installed_packages() \
                or any(digest(path) != known for path, known in modules.items()):
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        self.reused += 1
        return outcome

    def put(self, request: JobRequest, worker: str, outcome: JobOutcome,
            installed: Installed) -> None:
        """``installed``: ``installed_packages()`` from before the job ran."""
        self.checked += 1
        if not isinstance(outcome, JobDone) or not isinstance(outcome.answer, CheckAnswer) \
                or outcome.answer.inputs is None:
            return
        self.entries[self._key(request, worker)] = (outcome, installed)
        while len(self.entries) > self.limit:
            self.entries.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()


    def _key(self, request: JobRequest, worker: str) -> str:
        text = request.text
        if text is not None and text is not self._text[0]:
            self._text = (text, _digest_text(text))
        digest = self._text[1] if text is not None else None
        return json.dumps({**dataclasses.asdict(request), "id": None, "text": digest,
                           "worker": worker}, sort_keys=True, default=str)  # paths


#: (site-packages directory, its modification time) for each on the interpreter's path
Installed = tuple[tuple[str, int], ...]


def installed_packages() -> Installed:
    """What changes when a package is installed, upgraded or removed: the modification times
    of the site-packages directories (the worker runs this interpreter, with this path)."""
    stamps = []
    for entry in sys.path:
        if not {"site-packages", "dist-packages"} & set(Path(entry).parts):
            continue
        try:
            stamps.append((entry, os.stat(entry).st_mtime_ns))
        except OSError:
            continue
    return tuple(stamps)


def _digest_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
