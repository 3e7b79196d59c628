"""One check of a document (lsp_server/checks.py), with a stand-in for the session and its
worker: the check runs with the settings of the moment it started, whatever changes while
its jobs run."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from check_service.file_check import FileCheck
from check_service.files import FileTargets
from export_worker.messages import JobFailed, JobRequest
from exporter.config.options import Options
from exporter.findings.diagnostics import Diagnostic
from lsp_server.admission import Focus
from lsp_server.checks import Checker
from lsp_server.convert import path_uri
from lsp_server.discovery import TargetDiscovery

SOURCE = "import torch\n\n\n# onnx-export: args=(torch.randn(2),)\nclass Slow(torch.nn.Module):\n" \
         "    def forward(self, x):\n        return x\n"


class _Worker:
    """Holds each job until ``release`` is set, then says it ran out of time."""

    def __init__(self) -> None:
        self.requests: list[JobRequest] = []
        self.submitted = asyncio.Event()
        self.release = asyncio.Event()

    def identity(self) -> str:
        return "stand-in/0"

    async def submit(self, request: JobRequest, on_progress: Any = None) -> JobFailed:
        self.requests.append(request)
        self.submitted.set()
        await self.release.wait()
        return JobFailed(request.id, "timeout", seconds=request.timeout or 0.0)


class _Session:
    """What the scheduler uses of the session (lsp_server/checks.py, CheckHost)."""

    def __init__(self) -> None:
        self.settings = Options()
        self.settings_loaded = asyncio.Event()
        self.settings_loaded.set()
        self.discovery = TargetDiscovery(lambda uri: None, lambda message, level: None)
        self.worker = _Worker()
        self.progress_reporter: Any = None  # no document is open: no progress
        self.published: list[list[Diagnostic]] = []

    def is_open(self, uri: str) -> bool:
        return False

    def is_excluded(self, path: Path) -> bool:
        return False

    def file_check(self, found: FileTargets, settings: Options) -> FileCheck:
        return FileCheck(found, found.path.parent, settings, unsaved=True)

    def settings_for(self, path: Path) -> Options:
        return self.settings

    def filter(self, diagnostics: list[Diagnostic], path: Path) -> list[Diagnostic]:
        return diagnostics

    def replace_diagnostics(self, origin: str, version: int | None,
                            diagnostics: list[Diagnostic]) -> None:
        self.published.append(diagnostics)

    def after_check(self) -> None: ...
    def check_ended(self, uri: str) -> None: ...
    def notify_state(self) -> None: ...
    def refresh_code_lens(self) -> None: ...


async def test_a_check_keeps_the_settings_it_started_with(tmp_path):
    """The timeout changed while the job ran: the job had the old one, and the message says
    the old one (it named the new limit, which the job never had)."""
    path = tmp_path / "model.py"
    path.write_text(SOURCE)
    session = _Session()
    session.settings = replace(session.settings, timeoutSeconds=30.0)
    checker = Checker(session, Focus())
    checker.configure(1, 1 << 20)
    task = checker.request(path_uri(path), 1, SOURCE)
    await asyncio.wait_for(session.worker.submitted.wait(), 60)
    session.settings = replace(session.settings, timeoutSeconds=5.0, fixBudgetSeconds=0.0)
    session.worker.release.set()
    await asyncio.wait_for(task, 60)
    (request,) = session.worker.requests
    assert request.timeout == 30.0
    (shown,) = session.published[-1]
    assert shown.rule == "ONNX901"
    assert "did not finish within 30 s" in shown.message
