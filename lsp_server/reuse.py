"""Reusing a check's result when nothing it read has changed.

A check job records the files it opens (an audit hook sees every open). Its result is reused
for an identical request (file, document text, target, settings, limits) to the same worker
process while every Python file it read from outside the installed packages still has the
same content (sha256). A check that read any other file (weights, data) is never reused.
What a check learns without reading a file (an existence test, a directory listing, the
environment) is not tracked: ``onnxlens.restartWorker`` forgets every result.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict

from export_worker.inputs import digest
from export_worker.messages import JobDone, JobOutcome, JobRequest
from exporter import shortcuts


class ResultCache:
    """In the server: check outcomes by request and worker process, while their inputs are
    unchanged."""

    def __init__(self, limit: int = 32) -> None:
        self.limit = limit
        self.entries: OrderedDict[str, JobDone] = OrderedDict()
        self.reused = 0
        self.checked = 0

    def get(self, request: JobRequest, worker: str) -> JobDone | None:
        if not shortcuts.enabled("result-reuse"):
            return None
        key = _key(request, worker)
        outcome = self.entries.get(key)
        if outcome is None:
            return None
        modules = (outcome.answer.inputs or {}).get("modules", {})
        if any(digest(path) != known for path, known in modules.items()):
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        self.reused += 1
        return outcome

    def put(self, request: JobRequest, worker: str, outcome: JobOutcome) -> None:
        self.checked += 1
        if not isinstance(outcome, JobDone) or outcome.answer.inputs is None:
            return
        self.entries[_key(request, worker)] = outcome
        while len(self.entries) > self.limit:
            self.entries.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()


def _key(request: JobRequest, worker: str) -> str:
    return json.dumps({**dataclasses.asdict(request), "id": None, "worker": worker},
                      sort_keys=True)
