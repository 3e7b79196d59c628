"""How a truth process starts: forked from a warm parent (the default), which spares every
target the seconds it takes to import the export toolchain, or a fresh interpreter.

``python -m tests.corpus.truth_process`` imports torch, onnx, onnxscript, onnxruntime and the
modules the exporter imports on its first call once (``PRELOAD``; nothing else runs in it),
then forks one child per request; the child runs
``python -m tests.corpus.truth``'s ``main`` exactly as a fresh interpreter started by
:func:`tests.corpus.truth.run_truth` would: the same working directory, environment and
``sys.path``, its own standard streams (files), its own session and process group (a timeout
kills whatever the model started). The parent is single-threaded, so a fork copies no lock
held by another thread.

This is a speed shortcut of the judge, so it has an off switch and an equivalence test:
``ONNXLENS_CORPUS_FORK=0`` starts a fresh interpreter per target, as before, and
``tests/corpus/test_truth_process.py`` checks that both give the same truth.
"""

from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.corpus.common import PYTHON, REPO, child_env

#: what every truth process imports before it reads its target (``tests/corpus/truth.py``):
#: the toolchain, and the modules ``torch.onnx.export`` imports on its first call (the
#: exporter's core, ``torch.export``'s tracer, dynamo, onnxscript's ATen library: ≈1.2 s of
#: a tiny model's 2 s first export, every target's). Imports only; a module a torch does not
#: have is skipped, and the child's export imports what it needs, as a fresh process's would.
PRELOAD = ("numpy", "torch", "torch.onnx", "onnx", "onnxscript", "onnxruntime",
           "torch.onnx._internal.exporter._core", "torch.export._trace", "torch._dynamo",
           "onnxscript.function_libs.torch_lib.ops")
SWITCH = "ONNXLENS_CORPUS_FORK"


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


@dataclass
class Finished:
    """What a truth process left: its exit code (None: killed at the timeout) and streams."""

    returncode: int | None
    stdout: str
    stderr: str


# -- the warm parent (its own process) -------------------------------------------------------

def serve() -> int:
    """Answer requests (one JSON line each on stdin) until stdin closes: fork a child for each,
    reply ``{"id", "pid"}`` when it started and ``{"id", "exit"}`` when it ended."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the child's own import reports it, as a fresh process's would
    from tests.corpus import truth

    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, None)
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.data is not None:
                request_id, pid = key.data
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                _reply({"id": request_id, "exit": os.waitstatus_to_exitcode(status)})
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return 0
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(truth.main, request)
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ,
                                  (request["id"], pid))
                _reply({"id": request["id"], "pid": pid})


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _child(main: Any, request: dict[str, Any]) -> None:
    """In the forked child: become a process of its own and run ``main``; never returns."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ["TMPDIR"] = tempfile.tempdir = request["tmpdir"]
        python_path = request.get("python_path") or []
        if python_path:  # where a fresh interpreter puts PYTHONPATH: after its first entry
            os.environ["PYTHONPATH"] = _python_path(python_path)
            sys.path[1:1] = python_path
        sys.argv = ["tests.corpus.truth", *request["argv"]]
        code = main(request["argv"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


# -- the client (the harness's process, any of its threads) ----------------------------------

class _Forker:
    """One warm parent, started on first use; requests from several threads at once."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [str(PYTHON), "-m", "tests.corpus.truth_process"], cwd=REPO, env=child_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.next_id = 0
        self.replies: dict[int, dict[str, Any]] = {}
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            message = json.loads(line)
            with self.arrived:
                self.replies.setdefault(message["id"], {}).update(message)
                self.arrived.notify_all()
        with self.arrived:  # the parent is gone: every waiter learns it
            self.replies.setdefault(-1, {})["gone"] = True
            self.arrived.notify_all()

    def _wait(self, request_id: int, key: str, timeout: float | None) -> Any:
        """The reply's ``key``; None at the timeout. Raises when the parent is gone first."""
        with self.arrived:
            self.arrived.wait_for(lambda: key in self.replies.get(request_id, {})
                                  or -1 in self.replies, timeout)
            value = self.replies.get(request_id, {}).get(key)
            if value is None and -1 in self.replies:
                raise RuntimeError(f"the truth's warm parent ended (exit "
                                   f"{self.process.poll()}); {SWITCH}=0 starts each target in "
                                   "a fresh interpreter")
            return value

    def run(self, argv: list[str], timeout: float, python_path: list[str],
            scratch: Path) -> Finished:
        out, err = scratch / "stdout", scratch / "stderr"
        with self.lock:
            request_id = self.next_id
            self.next_id += 1
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"id": request_id, "argv": argv,
                                                 "stdout": str(out), "stderr": str(err),
                                                 "tmpdir": str(scratch / "tmp"),
                                                 "python_path": python_path}) + "\n")
            self.process.stdin.flush()
        pid = self._wait(request_id, "pid", None)
        code = self._wait(request_id, "exit", timeout)
        killed = code is None
        if killed:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait(request_id, "exit", None)
        return Finished(None if killed else code, _read(out), _read(err))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


_forker: _Forker | None = None
_forker_lock = threading.Lock()


def _python_path(entries: list[str]) -> str:
    return os.pathsep.join(filter(None, [*entries, os.environ.get("PYTHONPATH", "")]))


def run_truth_process(argv: list[str], timeout: float,
                      python_path: list[str] | None = None) -> Finished:
    """``python -m tests.corpus.truth ARGV``: forked from the warm parent, or (switched off) in
    a fresh interpreter; ``python_path``: directories ahead on its ``PYTHONPATH`` (the
    "installed" packages of generated variants)."""
    with tempfile.TemporaryDirectory(prefix="onnxlens-truth-") as scratch:
        # the process's temporary files (its working directory, a huge model saved beside
        # it) go under its scratch, removed here when it ended, also when it was killed
        (Path(scratch) / "tmp").mkdir()
        if not enabled():
            return _run_fresh(argv, timeout, python_path or [], Path(scratch))
        global _forker
        with _forker_lock:
            if _forker is None or _forker.process.poll() is not None:
                _forker = _Forker()
            forker = _forker
        return forker.run(argv, timeout, python_path or [], Path(scratch))


def _run_fresh(argv: list[str], timeout: float, python_path: list[str],
               scratch: Path) -> Finished:
    """A fresh interpreter, in a session of its own as a forked child is (a timeout kills what
    the model started too)."""
    command = [str(PYTHON), "-m", "tests.corpus.truth", *argv]
    env = child_env({"TMPDIR": str(scratch / "tmp"),
                     **({"PYTHONPATH": _python_path(python_path)} if python_path else {})})
    with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            return Finished(None, stdout, stderr)
    return Finished(process.returncode, stdout, stderr)


if __name__ == "__main__":
    sys.exit(serve())
