"""The client's liveness watch (export_worker/client.py) on a real worker: a worker that does
not answer because it works is waited for; one that does not answer and uses no CPU is
replaced (tests/lsp/test_reliability.py stops one with SIGSTOP)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from check_service.files import find_target
from export_worker import client as client_module
from export_worker.client import WorkerClient
from export_worker.messages import JobDone, JobRequest
from export_worker.process_tree import tree_cpu_seconds

#: CPU seconds the package's import takes (the job, the worker's probe and the worker itself
#: each import it once)
IMPORT_SECONDS = 3.0

MODEL = '''import torch

import slowpkg


# onnx-export: args=(torch.rand(4),)
class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * slowpkg.FACTOR
'''


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """A model whose "installed" package takes seconds of CPU to import: the worker imports it
    ahead after the first check, in its main loop, and answers no status query meanwhile."""
    package = tmp_path / "env" / "lib" / "site-packages" / "slowpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import time\n\n"
        f"_end = time.process_time() + {IMPORT_SECONDS}\n"
        "while time.process_time() < _end:\n    pass\n"
        "FACTOR = 2.0\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(package.parent), os.environ.get("PYTHONPATH")])))
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    return project


async def test_a_worker_busy_importing_ahead_is_not_replaced(workspace, monkeypatch):
    """It was: a CI run lost a transformers model to ONNX902 ("did not answer for 20 s and
    was replaced, twice") while the worker imported the model's packages ahead on a loaded
    machine. Here it answers nothing for about twice ``IMPORT_SECONDS``, over the 1 s the
    watch gives an answer."""
    monkeypatch.setattr(client_module, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(client_module, "LIVENESS_SECONDS", 1.0)
    client = WorkerClient(spare=False)
    await client.start()
    try:
        target = find_target(workspace / "model.py", "Scaled")
        outcome = await client.submit(JobRequest("check", target, str(workspace), timeout=120))
        assert isinstance(outcome, JobDone) and "slowpkg" in outcome.library_imports
        pid = client.pid
        status = await client.status(timeout=60)  # answered once the import ahead is done
        assert status is not None and "slowpkg" in status.warm_imports
        assert client.pid == pid  # the same worker, not a new one
    finally:
        await client.stop()


def test_a_process_trees_cpu_time_counts_its_children_and_ends_with_it():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time\n_end = time.process_time() "
                              "+ 0.5\nwhile time.process_time() < _end: pass\ninput()"],
                             stdin=subprocess.PIPE)
    try:
        own = tree_cpu_seconds(os.getpid())
        assert own is not None
        while (tree_cpu_seconds(child.pid) or 0.0) < 0.5:  # it spins, then waits
            assert child.poll() is None
        assert (tree_cpu_seconds(os.getpid()) or 0.0) >= own + 0.5  # the parent's tree too
    finally:
        child.communicate(b"\n")
    assert tree_cpu_seconds(child.pid) is None  # gone
