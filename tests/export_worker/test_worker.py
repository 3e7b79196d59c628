"""The export worker itself: fork safety of its warm-up, and its job protocol."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from check_service.files import find_target
from export_worker.messages import (
    JobDone,
    JobFailed,
    JobRequest,
    Message,
    Ready,
    Shutdown,
    StatusQuery,
    WorkerStatus,
    decode,
    encode,
)
from export_worker.process import JOB_GC_THRESHOLD, KILL_GRACE_SECONDS
from tests.conftest import FIXTURES, REPO

# Two intra-op threads whatever the run's OMP_NUM_THREADS (scripts/test.sh sets 1): with one,
# torch starts no OpenMP pool at all and the fork-safety test below could not fail.
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"}


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_warm_up_starts_no_thread_pool_before_forking():
    plain = subprocess.Popen([sys.executable, "-c", "import torch, sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, env=ENV)
    worker = subprocess.Popen([sys.executable, "-m", "export_worker.process"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=ENV)
    try:
        ready = decode(worker.stdout.readline())
        assert isinstance(ready, Ready)
        # Importing torch starts its threads; the warm-up export must add none (an OpenMP
        # pool in a process that forks would hang the children).
        assert _threads(worker.pid) <= _threads(plain.pid)

        request = JobRequest("check", find_target(FIXTURES / "clean" / "factory.py", "scaled"),
                             str(FIXTURES / "clean"), timeout=60, id="1")
        worker.stdin.write(encode(request))
        worker.stdin.flush()
        answer = decode(worker.stdout.readline())
        assert isinstance(answer, JobDone) and answer.id == "1"
        (target,) = answer.answer.result.targets
        assert target.name == "scaled" and target.diagnostics == []
        assert _threads(worker.pid) <= _threads(plain.pid)  # the check ran in the fork
    finally:
        plain.communicate(b"", timeout=30)
        worker.stdin.write(encode(Shutdown()))
        worker.stdin.flush()
        worker.wait(timeout=30)


class _Worker:
    """The worker over its JSON-lines protocol."""

    def __init__(self, spare: bool, stderr: Any = subprocess.DEVNULL) -> None:
        env = {**ENV, "ONNXLENS_WORKER_SPARE": "1" if spare else "0"}
        self.process = subprocess.Popen([sys.executable, "-m", "export_worker.process"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=stderr, env=env)
        assert isinstance(self.receive(), Ready)

    def send(self, message: Message) -> None:
        self.process.stdin.write(encode(message))
        self.process.stdin.flush()

    def receive(self) -> Message:
        return decode(self.process.stdout.readline())

    def status(self) -> WorkerStatus:
        self.send(StatusQuery("status"))
        status = self.receive()
        assert isinstance(status, WorkerStatus)
        return status

    def wait_for_warm_spare(self, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spare = self.status().spare
            if spare and spare.warm:
                return spare.pid
            time.sleep(0.2)
        raise AssertionError("no warm spare")

    def check(self, job_id: str, workspace: str, target: str,
              timeout: float = 120) -> JobDone:
        folder = REPO / "tests" / "lsp" / "fixtures" / workspace  # shared with the server tests
        self.send(JobRequest("check", find_target(folder / "model.py", target), str(folder),
                             timeout=timeout, id=job_id))
        answer = self.receive()
        assert isinstance(answer, JobDone)
        return answer

    def close(self) -> None:
        self.send(Shutdown())
        self.process.wait(timeout=30)


def _probe_message(answer: JobDone) -> str:
    (target,) = answer.answer.result.targets
    (diagnostic,) = target.diagnostics
    assert diagnostic.rule == "ONNX003"
    return diagnostic.message


def test_jobs_run_in_the_warm_spare_which_looks_like_a_fresh_fork_to_user_code():
    worker = _Worker(spare=True)
    try:
        spare = worker.status().spare  # forked right after "ready": still warming up
        assert spare is not None and not spare.warm
        fresh = worker.check("1", "probe", "Probe")
        assert fresh.pid != spare.pid  # not warm yet: a fresh fork ran the job

        assert worker.wait_for_warm_spare() == spare.pid  # the spare was kept
        in_spare = worker.check("2", "probe", "Probe")
        assert in_spare.pid == spare.pid  # now the spare ran it...
        assert worker.wait_for_warm_spare() != spare.pid  # ...and a new one took its place
        with contextlib.suppress(ProcessLookupError):
            os.kill(spare.pid, 0)
            raise AssertionError("the spare that ran the job is still alive")
    finally:
        worker.close()
    # The warm-up's model is gone and torch's random state is the one the fork started with;
    # both collect garbage rarely (a check allocates much and keeps most of it).
    assert "spare_model_loaded=False" in _probe_message(in_spare)
    assert f"gc_threshold={JOB_GC_THRESHOLD[0]}" in _probe_message(in_spare)
    assert _probe_message(in_spare) == _probe_message(fresh)


def test_shutdown_ends_the_spare():
    worker = _Worker(spare=True)
    spare_pid = worker.wait_for_warm_spare()
    worker.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(spare_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("the spare outlived the worker")


def _stdio(answer: JobDone) -> Any:
    """What the ``stdio`` fixture saw of its process (it says so in its ONNX003)."""
    message = _probe_message(answer)
    found = re.search(r"stdio (\{.*\})", message)
    assert found, message
    return ast.literal_eval(found.group(1))


def test_a_job_sees_the_stdio_of_a_plain_process(tmp_path):
    """Issue 24: a job's sys.stdout and sys.stderr are real streams over file descriptors 1
    and 2 (``fileno``, ``buffer``, ``reconfigure``: ``faulthandler.enable()`` and a subprocess
    given ``sys.stdout`` work), both the worker's stderr; its stdin is empty (/dev/null, not
    the worker's request pipe), and neither end of the protocol is open in it. The same in a
    fresh fork and in the spare."""
    log = tmp_path / "worker.log"
    with log.open("wb") as stderr:
        worker = _Worker(spare=True, stderr=stderr)
    try:
        protocol = {f"pipe:[{os.fstat(pipe.fileno()).st_ino}]"
                    for pipe in (worker.process.stdin, worker.process.stdout)}
        fresh = worker.check("1", "stdio", "Stdio")
        spare_pid = worker.wait_for_warm_spare()
        in_spare = worker.check("2", "stdio", "Stdio")
        reads_stdin = worker.check("3", "stdio", "ReadsStdin", timeout=20)
    finally:
        worker.close()
    assert in_spare.pid == spare_pid != fresh.pid
    for answer in (fresh, in_spare):
        stdio = _stdio(answer)
        assert stdio["streams"] == [("TextIOWrapper", fd, True, True) for fd in (0, 1, 2)]
        descriptors = stdio["descriptors"]
        assert (descriptors[0], descriptors[1], descriptors[2]) == \
            ("/dev/null", str(log), str(log))
        assert not protocol & set(descriptors.values()), descriptors
    # sys.stdin.readline() in forward reads EOF, never a request meant for the worker
    (target,) = reads_stdin.answer.result.targets
    assert target.diagnostics == []
    assert {stage.state.value for stage in target.stages[:-1]} == {"passed"}
    assert target.stages[-1].name == "deploy" and target.stages[-1].state.value == "skipped"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP])
def test_a_spare_killed_or_stopped_while_idle_never_fails_a_job(signum):
    """Issue 39: the spare's death is onnxlens's fault, never the model's: the next job runs
    in a fresh fork and passes (it was a false ONNX902, or an ONNX901 for a stopped spare)."""
    worker = _Worker(spare=True)
    try:
        spare = worker.wait_for_warm_spare()
        os.kill(spare, signum)
        while _state(spare) not in ("T", "Z", "gone"):  # the signal has landed (while idle)
            time.sleep(0.01)
        answer = worker.check("1", "probe", "Probe", timeout=60)
        assert answer.pid != spare
        assert _probe_message(answer)  # the probe's own ONNX003: the model ran to its end
    finally:
        if signum == signal.SIGSTOP:
            with contextlib.suppress(ProcessLookupError):
                os.kill(spare, signal.SIGKILL)
        worker.close()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


SLOW_EXPORT = '''import time

import torch


# onnx-export: args=(torch.randn(2, 4),)
class SlowToExport(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():  # eager runs at once, the export takes a while
            time.sleep(6)
        return x * 2


# onnx-export: args=(torch.randn(2, 4),)
class NativeLoop(torch.nn.Module):
    def forward(self, x):
        return x + sum(range(10**15))


# onnx-export:
def script():
    torch.onnx.export(SlowToExport(), (torch.randn(2, 4),), "first.onnx", dynamo=True)
    torch.onnx.export(torch.nn.ReLU(), (torch.randn(2, 4),), "second.onnx", dynamo=True)
'''


def test_the_default_limit_kills_the_models_own_code_and_waits_for_the_exporter(tmp_path):
    """A job with a ``load_timeout`` (no timeout set) is killed at it while the model's own
    code runs (here a native loop its timer cannot interrupt: 2 s + the grace, not the whole
    limit), and outlives it once the model ran, or while an earlier export call of the
    script's runs inside that code: an export slower than the load limit and its grace is
    answered, not killed (issue 42)."""
    model = tmp_path / "model.py"
    model.write_text(SLOW_EXPORT)
    worker = _Worker(spare=False)
    try:
        def job(job_id: str, name: str) -> Any:
            worker.send(JobRequest("check", find_target(model, name), str(tmp_path),
                                   timeout=600, load_timeout=2, id=job_id))
            return worker.receive()

        slow = job("1", "SlowToExport")
        native = job("2", "NativeLoop")
        earlier = job("3", "script@23")
    finally:
        worker.close()
    assert isinstance(earlier, JobDone), earlier
    (target,) = earlier.answer.result.targets
    assert target.diagnostics == [] and target.ok
    assert next(s for s in target.stages if s.name == "load").seconds > 6
    assert isinstance(slow, JobDone), slow
    (target,) = slow.answer.result.targets
    assert target.diagnostics == [] and target.ok
    assert next(s for s in target.stages if s.name == "capture").seconds > 6
    assert isinstance(native, JobFailed) and native.failure == "timeout", native
    assert native.seconds < 2 + KILL_GRACE_SECONDS + 3
