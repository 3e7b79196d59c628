"""The export worker itself: fork safety of its warm-up, and its job protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import FIXTURES, REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_warm_up_starts_no_thread_pool_before_forking():
    plain = subprocess.Popen([sys.executable, "-c", "import torch, sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, env=ENV)
    worker = subprocess.Popen([sys.executable, "-m", "lsp_server.worker_main"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=ENV)
    try:
        ready = json.loads(worker.stdout.readline())
        assert ready["event"] == "ready"
        # Importing torch starts its threads; the warm-up export must add none (an OpenMP
        # pool in a process that forks would hang the children).
        assert _threads(worker.pid) <= _threads(plain.pid)

        request = {"id": "1", "op": "check", "file": str(FIXTURES / "clean" / "factory.py"),
                   "workspace": str(FIXTURES / "clean"), "target": "scaled", "timeout": 60}
        worker.stdin.write((json.dumps(request) + "\n").encode())
        worker.stdin.flush()
        answer = json.loads(worker.stdout.readline())
        assert answer["id"] == "1"
        (target,) = answer["answer"]["result"]["targets"]
        assert target["name"] == "scaled" and target["diagnostics"] == []
        assert _threads(worker.pid) <= _threads(plain.pid)  # the check ran in the fork
    finally:
        plain.communicate(b"", timeout=30)
        worker.stdin.write(b'{"op": "shutdown"}\n')
        worker.stdin.flush()
        worker.wait(timeout=30)
