"""Warm third-party imports (export_worker/warm_imports.py) in a real worker: an installed
package a check imported is imported by the worker ahead of the next check; one whose import
starts a thread is not; a package that changes on disk is picked up by a new worker, and the
check runs there with the new code (a stale module would give a wrong verdict)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from export_worker.client import WorkerClient
from export_worker.messages import JobDone, JobRequest

MODEL = '''import torch

import branchpkg
import threadpkg


# onnx-export: args=(torch.rand(4) + 0.5,)
class Branchy(torch.nn.Module):
    def forward(self, x):
        if branchpkg.USE_I0:
            return torch.special.i0(x)
        return x * threadpkg.FACTOR
'''


def write_package(site: Path, name: str, source: str) -> None:
    package = site / name
    package.mkdir(parents=True, exist_ok=True)
    init = package / "__init__.py"
    init.write_text(source)
    later = init.stat().st_mtime + 10  # a change even within the file system's resolution
    os.utime(init, (later, later))


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """A model importing two "installed" packages (a directory named site-packages on
    PYTHONPATH, as a virtualenv's): one the worker may import ahead, one whose import starts a
    thread."""
    site = tmp_path / "env" / "lib" / "site-packages"
    write_package(site, "branchpkg", "USE_I0 = False\n")
    write_package(site, "threadpkg", "import threading, time\n\nFACTOR = 2.0\n"
                  "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    return project


async def check(client: WorkerClient, workspace: Path) -> JobDone:
    outcome = await client.submit(JobRequest("check", str(workspace / "model.py"),
                                             str(workspace), "Branchy", timeout=120))
    assert isinstance(outcome, JobDone), outcome
    return outcome


def rules(outcome: JobDone) -> list[str]:
    assert outcome.answer.result is not None
    (target,) = outcome.answer.result["targets"]
    return [d["rule"] for d in target["diagnostics"]]


async def test_installed_packages_are_imported_ahead_and_reimported_when_they_change(
        workspace):
    client = WorkerClient(spare=False)
    await client.start()
    try:
        first = await check(client, workspace)
        assert rules(first) == []
        assert {"branchpkg", "threadpkg"} <= set(first.answer.library_imports)
        status = await client.status()
        assert status is not None
        assert "branchpkg" in status.warm_imports
        assert "threadpkg" not in status.warm_imports  # it starts a thread; the worker forks
        pid = client.pid

        second = await check(client, workspace)
        assert rules(second) == []
        assert "branchpkg" not in second.answer.library_imports  # imported ahead
        assert "threadpkg" in second.answer.library_imports  # imported by the check again

        site = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0])
        write_package(site, "branchpkg", "USE_I0 = True\n")  # `pip install` a new version
        third = await check(client, workspace)
        assert rules(third) == ["ONNX201"]  # the new code, not the module imported ahead
        assert client.pid != pid  # a new worker took over and ran the check
    finally:
        await client.stop()


async def test_warm_imports_have_an_off_switch(workspace, monkeypatch):
    monkeypatch.setenv("ONNXLENS_SHORTCUTS_OFF", "warm-imports")
    client = WorkerClient(spare=False)
    await client.start()
    try:
        await check(client, workspace)
        status = await client.status()
        assert status is not None and status.warm_imports == []
        second = await check(client, workspace)
        assert "branchpkg" in second.answer.library_imports
    finally:
        await client.stop()
