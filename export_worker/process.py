"""The warm export worker: ``python -m export_worker.process [--no-spare]``.

It imports torch, onnx, onnxscript and the whole check pipeline once and builds the exporter
session (the torchlib registry), then forks one process per job: whatever the warm-up built
is free for every job. A forked job starts warm but isolated: fresh user modules, killable on
cancellation, timeout or memory limit, and its crash is reported, not shared.

A process's first check costs more than its later ones (copy-on-write faults, onnxruntime's
import, caches torch fills on first use), so while no job runs the worker forks a *spare*
that checks a bundled model (``spare_model.py``) and then waits; the next job runs in it if
it is ready, else in a fresh fork as before. The spare never runs user code before its job.

Fork safety: this process runs no torch computation (its warm-up export traces with fake
tensors), so no OpenMP thread pool exists here when it forks; onnxruntime, whose import
starts a thread, is imported by each job. It multiplexes its pipes with ``selectors`` on one
thread.

A job ends when its process ends, and what it started ends with it: a job process (and the
worker) is a child subreaper, so orphans of the job's descendants stay in its tree; the job
kills its descendants before it exits, the worker kills the tree of a job it stops and every
child it did not fork itself (what a killed or crashed job left). The memory limit counts the
private memory of the whole tree (``export_worker.process_tree``).

Protocol: ``export_worker.messages``, one message per line: requests on stdin, events on the
original stdout (the jobs' own prints go to stderr; a job's stdin is /dev/null and it holds
neither end of the protocol). docs/architecture.md describes it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import gc
import os
import selectors
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from export_worker.messages import (
    RESTART_STATUS,
    WHOLE_LIMIT_LINE,
    Cancel,
    DecodeError,
    Event,
    FailureKind,
    JobAnswer,
    JobDone,
    JobError,
    JobFailed,
    JobProcess,
    JobRequest,
    Missing,
    Ready,
    Shutdown,
    SpareProcess,
    StatusQuery,
    WorkerStatus,
    answer_to_bytes,
    decode,
    done_to_bytes,
    encode,
    if_stopped_to_bytes,
    progress_frame,
    progress_to_bytes,
    read_job_lines,
    stopped_answer,
)
from export_worker.namespace_watch import NamespaceWatch, describe
from export_worker.no_terminal import no_terminal
from export_worker.process_tree import (
    TreeMemory,
    become_subreaper,
    children,
    end_descendants,
    kill_tree,
)
from export_worker.warm_imports import WarmImports, library_modules
from exporter.findings.result import CheckResult

SPARE_MODEL = Path(__file__).resolve().parent / "spare_model.py"
#: A job stops its own Python code at its timeout (ONNX901 located where it ran); code that
#: does not return to Python (a native loop) is killed this much later.
KILL_GRACE_SECONDS = 3.0
_PR_SET_PDEATHSIG = 1


@dataclass(eq=False)
class Job:
    id: str
    pid: int
    pipe: int  # read end of its answer pipe; -1 once at its end
    started: float
    deadline: float | None  # when it is killed (its time limit, and a grace)
    memory_limit: int | None
    #: its deadline once the whole limit took over from the load stage's, when that is later
    #: (the default limit bounds the model's own code, not the exporter's work)
    deadline_whole: float | None = None
    exited: int | None = None  # a pidfd: readable once the process ended (None: polled)
    output: bytearray = field(default_factory=bytearray)  # a line still being written
    answer: bytes | None = None  # the JSON of its JobAnswer, forwarded as it is
    if_stopped: bytes | None = None  # the JSON of the result that stands if it is killed
    library_imports: list[str] = field(default_factory=list)  # what its check imported
    failure: FailureKind | None = None
    memory: TreeMemory = field(default_factory=TreeMemory)
    peak_memory: int = 0  # bytes: the private memory of its process tree


@dataclass
class Spare:
    """A forked job process that warms up, then waits for its job on ``request``."""

    pid: int
    request: int  # write end: the job's request, one line of JSON
    ready: int  # read end: one byte once the warm-up is done
    answer: int  # read end: the job's answer, as for a freshly forked job
    warm: bool = False


def _no_tqdm_monitor() -> None:
    """torch.fx's Interpreter makes a (disabled) tqdm progress bar per run when tqdm is
    installed (transformers brings it), and tqdm starts a monitor thread with its first bar:
    a process that forks must run no threads (docs/architecture.md §4).
    ``monitor_interval = 0`` is tqdm's documented way to start none."""
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


class Worker:
    def __init__(self, channel: BinaryIO, spare: bool = True) -> None:
        self.channel = channel
        self.jobs: dict[int, Job] = {}  # by pid
        self.selector = selectors.DefaultSelector()
        self.session: Any = None
        self.buffer = bytearray()
        self.use_spare = spare
        self.spare: Spare | None = None
        from exporter.toolchain import shortcuts

        self.warm_imports = WarmImports(shortcuts.enabled("warm-imports"))
        self.exit_status = 0

    # -- messages ------------------------------------------------------------------------

    def send(self, message: Event) -> None:
        self.send_line(encode(message))

    def send_line(self, line: bytes) -> None:
        """One message, encoded already (a job's answer or progress, forwarded)."""
        self.channel.write(line)
        self.channel.flush()

    # -- start-up --------------------------------------------------------------------------

    def warm_up(self) -> None:
        started = time.perf_counter()
        import torch

        # A job's models draw their random weights from the state a fresh Python process
        # starts with, as the plain exporter run by hand would (the warm-up draws too).
        fresh_random_state = torch.random.get_rng_state()
        from exporter.pipeline.session import ExportSession

        _no_tqdm_monitor()
        self.session = ExportSession()
        self.session.warm_up()  # also exports a tiny model: torch's caches warm
        _import_job_modules()
        torch.random.set_rng_state(fresh_random_state)
        # What exists now lives as long as the worker: out of the collector's reach, a job's
        # full collection does not traverse it (nor copy its pages).
        gc.freeze()
        from exporter.toolchain import shortcuts, status, torch_compat

        self.toolchain = status.current().report()
        warnings = [f"{shortcuts.ENVIRONMENT_VARIABLE} names no shortcut {name!r} (known: "
                    f"{', '.join(shortcuts.SHORTCUTS)})" for name in shortcuts.unknown_names()]
        warnings += [f"{torch_compat.ENVIRONMENT_VARIABLE} names no capability {name!r} "
                     f"(known: {', '.join(torch_compat.CAPABILITIES)})"
                     for name in torch_compat.unknown_names()]
        self.send(Ready(os.getpid(), round(time.perf_counter() - started, 3), self.toolchain,
                        warnings))

    # -- loop ------------------------------------------------------------------------------

    def serve(self) -> None:
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "requests")
        self._replace_spare()
        while True:
            for key, _ in self.selector.select(timeout=0.05):
                if key.data == "requests":
                    if not self._read_requests(key.fd):
                        self._shutdown()
                        return
                elif key.data == "spare":
                    self._spare_ready(key.fd)
                else:
                    self._job_event(key.fd, key.data)
            self._watch_jobs()
            self._end_orphans()

    def _read_requests(self, fd: int) -> bool:
        chunk = os.read(fd, 65536)
        if not chunk:
            return False
        self.buffer.extend(chunk)
        while b"\n" in self.buffer:
            line, _, rest = bytes(self.buffer).partition(b"\n")
            self.buffer = bytearray(rest)
            if not line.strip():
                continue
            try:
                request = decode(line)
            except DecodeError as error:  # a client bug: say so, keep serving
                print(f"onnxlens worker: {error}", file=sys.stderr)
                continue
            if not self._handle(request):
                return False
        return True

    def _handle(self, request: Any) -> bool:
        if isinstance(request, Shutdown):
            return False
        if isinstance(request, Cancel):
            self._kill(request.job, "cancelled")
        elif isinstance(request, StatusQuery):
            spare = self.spare
            self.send(WorkerStatus(
                request.id, os.getpid(),
                [JobProcess(job.id, job.pid) for job in self.jobs.values()],
                None if spare is None else SpareProcess(spare.pid, spare.warm),
                self.toolchain, list(self.warm_imports.imported)))
        elif isinstance(request, JobRequest):
            reason = self.warm_imports.restart_reason()
            if reason is not None:
                # It cannot forget a module (nor undo what importing one changed): a new
                # worker takes over, and the client runs the job there
                # (export_worker.warm_imports).
                print(f"onnxlens worker: {reason}; a new worker takes over", file=sys.stderr)
                self.exit_status = RESTART_STATUS
                return False
            self._start(request)
        return True

    def _start(self, request: JobRequest) -> None:
        handed = self._hand_to_spare(request)
        if handed is not None:
            pid, read_end = handed
        else:
            read_end, write_end = os.pipe()
            _flush_stdio()  # else the job would write out the worker's buffered output again
            pid = os.fork()
            if pid == 0:  # the job process
                os.close(read_end)
                self._run_child(request, write_end)  # never returns
            os.close(write_end)
        os.set_blocking(read_end, False)
        timeout, memory = request.timeout, request.memory_limit_mb
        now = time.monotonic()
        deadline = now + timeout + KILL_GRACE_SECONDS if timeout else None
        job = Job(request.id, pid, read_end, now,
                  now + request.load_timeout + KILL_GRACE_SECONDS if request.load_timeout
                  else deadline,
                  int(memory) * 1024 * 1024 if memory else None,
                  deadline_whole=deadline, exited=_pidfd(pid))
        self.jobs[pid] = job
        self.selector.register(read_end, selectors.EVENT_READ, job)
        if job.exited is not None:
            self.selector.register(job.exited, selectors.EVENT_READ, job)

    def _run_child(self, request: JobRequest, pipe: int) -> None:
        status = 0
        try:
            self._become_job_process()
            self._answer(request, pipe)
        except BaseException:
            status = 70
        finally:
            _end_job_process(status)

    def _become_job_process(self) -> None:
        gc.set_threshold(*JOB_GC_THRESHOLD)
        os.setpgid(0, 0)
        _die_with_parent()
        become_subreaper()  # what the job starts stays in its tree, to end with it
        self.selector.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._plain_stdio()

    def _plain_stdio(self) -> None:
        """The stdio of a plain Python process run with its output to the worker's stderr:
        stdin empty (/dev/null, not the worker's request pipe: a model reading stdin would
        read the protocol), sys.stdout and sys.stderr real text streams over descriptors 1
        and 2 (both the worker's stderr, since main). The protocol channel is closed here:
        nothing a job runs can write into it."""
        self.channel.close()
        devnull = os.open(os.devnull, os.O_RDONLY)
        if devnull != 0:
            os.dup2(devnull, 0)
            os.close(devnull)
        # The streams Python made at start-up (the worker's own: main keeps them)
        if sys.__stdin__ is not None:
            sys.stdin = sys.__stdin__
        if sys.__stdout__ is not None:
            sys.stdout = sys.__stdout__
        if sys.__stderr__ is not None:
            sys.stderr = sys.__stderr__
        no_terminal()

    def _answer(self, request: JobRequest, pipe: int) -> None:
        from export_worker.existing_files import job_protection, protect_existing_files
        from export_worker.jobs import run_job

        protect_existing_files(job_protection(request.workspace, request.kind, request.output))
        before = set(sys.modules)
        environment = dict(os.environ)  # before the user's code can change it
        watch = NamespaceWatch(self.warm_imports.namespace_owners)
        watch.start()

        def progress(result: CheckResult) -> None:
            _write_all(pipe, progress_to_bytes(result))

        def if_stopped(result: CheckResult) -> None:
            _write_all(pipe, if_stopped_to_bytes(result))

        def limit_lifted() -> None:
            _write_all(pipe, WHOLE_LIMIT_LINE)

        try:
            answer = run_job(self.session, request, progress if request.progress else None,
                             if_stopped, limit_lifted if request.load_timeout else None)
            if watch.reached():
                answer = _without_warm_imports(request, watch.reached(), environment)
        except BaseException as error:
            answer = JobError("".join(traceback.format_exception_only(type(error), error))
                              .strip(), internal=True)
        _write_all(pipe, answer_to_bytes(answer, library_modules(before)))

    # -- the spare -------------------------------------------------------------------------

    def _replace_spare(self) -> None:
        """Fork a new spare while nothing runs (its warm-up must not slow a running job)."""
        if not self.use_spare or self.spare is not None or self.jobs \
                or self.warm_imports.tainted:  # no fork from a changed state
            return
        request_read, request_write = os.pipe()
        ready_read, ready_write = os.pipe()
        answer_read, answer_write = os.pipe()
        _flush_stdio()
        pid = os.fork()
        if pid == 0:  # the spare
            for fd in (request_write, ready_read, answer_read):
                os.close(fd)
            self._run_spare(request_read, ready_write, answer_write)  # never returns
        for fd in (request_read, ready_write, answer_write):
            os.close(fd)
        self.spare = Spare(pid, request_write, ready_read, answer_read)
        self.selector.register(ready_read, selectors.EVENT_READ, "spare")

    def _run_spare(self, request_pipe: int, ready_pipe: int, answer_pipe: int) -> None:
        status = 0
        try:
            self._become_job_process()
            warm_spare(self.session)
            os.write(ready_pipe, b"1")
            os.close(ready_pipe)
            line = _read_line(request_pipe)
            if line:  # nothing: the worker let this spare go
                request = decode(line)
                assert isinstance(request, JobRequest)
                self._answer(request, answer_pipe)
        except BaseException:
            status = 70
        finally:
            _end_job_process(status)

    def _spare_ready(self, fd: int) -> None:
        spare = self.spare
        self.selector.unregister(fd)
        if spare is None or spare.ready != fd:  # pragma: no cover - defensive
            os.close(fd)
            return
        warm = os.read(fd, 1) == b"1"
        os.close(fd)
        spare.ready = -1
        if warm:
            spare.warm = True
        else:  # the spare died while warming up
            self._drop_spare()

    def _hand_to_spare(self, request: JobRequest) -> tuple[int, int] | None:
        """Give ``request`` to the spare if it is warm: (its pid, its answer pipe)."""
        spare = self.spare
        if spare is None or not spare.warm:
            return None
        if not _can_run(spare.pid):  # killed or stopped while idle: onnxlens's fault, never
            self._drop_spare()  # the model's; the job runs in a fresh fork
            return None
        self.spare = None
        try:
            _write_all(spare.request, encode(request))
        except OSError:  # it died meanwhile
            self.spare = spare
            self._drop_spare()
            return None
        os.close(spare.request)
        return spare.pid, spare.answer

    def _drop_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is None:
            return
        if spare.ready >= 0:
            self.selector.unregister(spare.ready)
            os.close(spare.ready)
        os.close(spare.request)
        os.close(spare.answer)
        _kill_group(spare.pid)
        with contextlib.suppress(ChildProcessError):  # reaped already
            os.waitpid(spare.pid, 0)

    def _job_event(self, fd: int, job: Job) -> None:
        if self.jobs.get(job.pid) is not job:  # it ended earlier in this round
            return
        if fd == job.pipe:
            self._read_job(job)
        else:  # its pidfd: the process ended
            self._end_if_exited(job)

    def _read_job(self, job: Job) -> None:
        if self._read_answer(job) is not None:
            return
        # Every holder closed it; the job ends when its process ends (it may still run)
        self._close_pipe(job)
        self._end_if_exited(job)

    def _read_answer(self, job: Job) -> bytes | None:
        """Read what the job wrote: b"" at the end of the pipe, None when nothing is there."""
        try:
            chunk = os.read(job.pipe, 1 << 20)
        except BlockingIOError:
            return None
        if chunk:
            job.output.extend(chunk)
            lines = read_job_lines(job.output)
            for result in lines.progress:
                self.send_line(progress_frame(job.id, result))
            job.answer = lines.answer or job.answer
            job.if_stopped = lines.if_stopped or job.if_stopped
            job.library_imports = lines.library_imports or job.library_imports
            if lines.whole_limit:
                job.deadline = job.deadline_whole
        return chunk

    def _close_pipe(self, job: Job) -> None:
        if job.pipe >= 0:
            self.selector.unregister(job.pipe)
            os.close(job.pipe)
            job.pipe = -1

    def _end_if_exited(self, job: Job) -> bool:
        """Finish ``job`` if its process ended, whoever still holds its answer pipe (a child
        it left): what it wrote before it ended is in the pipe already."""
        if os.waitid(os.P_PID, job.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return False  # still running
        _kill_group(job.pid)  # what it left in its group (an abrupt end), while its pid is held
        _, status = os.waitpid(job.pid, 0)
        while job.pipe >= 0 and self._read_answer(job):
            pass
        self._close_pipe(job)
        if job.exited is not None:
            self.selector.unregister(job.exited)
            os.close(job.exited)
        del self.jobs[job.pid]
        self._finish(job, status)
        self.warm_imports.import_pending()  # before the next fork, spare or job
        self._replace_spare()  # after the answer went out: forking takes a moment
        return True

    def _finish(self, job: Job, status: int) -> None:
        seconds = round(time.monotonic() - job.started, 3)
        peak_mb = job.peak_memory // (1024 * 1024)
        if job.failure == "timeout" and job.if_stopped is not None:
            # killed at its time limit (native code the job's own timer could not stop) after
            # the export was known to fail: that verdict stands, not a timeout
            self.send_line(done_to_bytes(job.id, stopped_answer(job.if_stopped), seconds,
                                         job.pid, peak_mb))
            return
        if job.failure is not None:
            self.send(JobFailed(job.id, job.failure, "", seconds, peak_mb))
            return
        answer = job.answer
        if answer is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            self.send(JobFailed(job.id, "crashed", _describe_status(status), seconds, peak_mb))
        else:
            self.warm_imports.learn(job.library_imports)
            self.send_line(done_to_bytes(job.id, answer, seconds, job.pid, peak_mb,
                                         job.library_imports))

    def _watch_jobs(self) -> None:
        now = time.monotonic()
        for job in list(self.jobs.values()):
            if self._end_if_exited(job) or job.failure is not None:
                continue
            if job.deadline is not None and now > job.deadline:
                self._kill(job.id, "timeout")
                continue
            used = job.memory.measure(job.pid)
            limit = job.memory_limit
            if limit is not None and used > limit:  # the estimate, read exactly
                used = job.memory.measure(job.pid, exact=True)
            job.peak_memory = max(job.peak_memory, used)
            if limit is not None and used > limit:
                self._kill(job.id, "memory")

    def _end_orphans(self) -> None:
        """Kill what a job left when it ended without ending its descendants (killed, or
        crashed): orphans of a job's tree become the worker's children (a subreaper), and
        every child the worker did not fork itself is one."""
        ours = set(self.jobs) | ({self.spare.pid} if self.spare is not None else set())
        for child in children(os.getpid()):
            if child in ours:
                continue
            kill_tree(child)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, os.WNOHANG)

    def _kill(self, job_id: str, failure: FailureKind) -> None:
        for job in self.jobs.values():
            if job.id == job_id and job.failure is None:
                job.failure = failure
                _kill_group(job.pid)
                kill_tree(job.pid)  # its descendants in other groups and sessions too

    def _shutdown(self) -> None:
        self._drop_spare()
        for job in list(self.jobs.values()):
            _kill_group(job.pid)
        end_descendants()  # the jobs' trees, and what they left


# A check allocates ≈100,000 objects, mostly kept for the job's life (graphs, fake tensors,
# metadata): at Python's default threshold (700) the collector runs ≈130 times and walks them
# again and again (≈35 ms for the benchmark encoder). It still runs, rarely.
JOB_GC_THRESHOLD = (50_000, 20, 20)


def _without_warm_imports(request: JobRequest, reached: Mapping[str, frozenset[str]],
                          environment: dict[str, str]) -> JobAnswer:
    """The job's answer from a worker of its own without warm imports: its code reached
    operators a warm import registered, which a plain process would not have
    (export_worker/namespace_watch.py). Its outcome stands for the job's."""
    from export_worker.single_job import run_single_job

    print(f"onnxlens worker: {request.target.name} reached {describe(reached)}, which its code "
          "does not import: checked again without the warm imports", file=sys.stderr)
    off = ",".join(filter(None, [environment.get("ONNXLENS_SHORTCUTS_OFF", ""),
                                 "warm-imports"]))
    os.environ.clear()
    os.environ.update({**environment, "ONNXLENS_SHORTCUTS_OFF": off})
    alone = dataclasses.replace(request, progress=False)
    outcome = run_single_job(alone, on_output=lambda line: print(line, file=sys.stderr)).outcome
    if isinstance(outcome, JobDone):
        return outcome.answer
    if outcome.failure in ("timeout", "memory"):  # its process was counted in this job's:
        while True:  # the worker's limit ends this job as it ended that one
            time.sleep(60)
    if outcome.failure == "crashed":
        os._exit(70)  # this job ends as that one did: its process died (ONNX902)
    raise RuntimeError(f"the check without the warm imports ended: {outcome.failure} "
                       f"{outcome.detail}".strip())
def _import_job_modules() -> None:
    """What a job imports (≈0.1 s in every job otherwise)."""
    import export_worker.jobs  # noqa: F401 - the job runner, result serialization
    import exporter.pipeline.runner  # noqa: F401 - the stages, onnx's checker


def warm_spare(session: Any) -> None:
    """Check the bundled model once in this (spare) process: onnxruntime's import and first
    session, copy-on-write faults and torch's first-use caches are paid before the job.
    torch's random state is put back, so the job's models start from the same state as in a
    fresh fork."""
    import torch

    state = torch.random.get_rng_state()
    try:
        session.check_file(SPARE_MODEL, SPARE_MODEL.parent)
    except Exception:  # a spare that could not warm up still serves its job
        pass
    finally:
        torch.random.set_rng_state(state)
        for name, module in list(sys.modules.items()):
            if getattr(module, "__file__", None) == str(SPARE_MODEL):
                del sys.modules[name]
        # What the warm-up left (filled caches) out of the job's collections, as in warm_up
        gc.collect()
        gc.freeze()


def _end_job_process(status: int) -> None:
    """A job process's (or a spare's) end: what it printed reaches the worker's stderr, and
    nothing it started outlives it."""
    _flush_stdio()
    try:
        end_descendants()
    finally:
        os._exit(status)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` ends (Linux ≥ 5.3), else None: the
    worker's loop then notices within its 50 ms poll."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _flush_stdio() -> None:
    """Before a fork (the child would write the buffered output again) and before a job's
    ``os._exit`` (which flushes nothing): what was printed reaches the worker's stderr."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # closed or replaced by the user's code: nothing to flush
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _can_run(pid: int) -> bool:
    """Whether the process ``pid`` is alive and not stopped (``/proc/<pid>/stat``'s state;
    without /proc, as on macOS, assumed)."""
    if not os.path.exists("/proc/self/stat"):
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("T", "t", "Z", "X", "x")


def _read_line(fd: int) -> bytes:
    """Up to a newline (not EOF: forks made meanwhile hold copies of the write end)."""
    data = bytearray()
    while not data.endswith(b"\n") and (chunk := os.read(fd, 1 << 16)):
        data.extend(chunk)
    os.close(fd)
    return bytes(data).strip()


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            continue


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"killed by signal {name}"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"ended with status {status}"


def _die_with_parent() -> None:
    """Linux: the job process gets SIGKILL when the worker dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m export_worker.process")
    parser.add_argument("--no-spare", action="store_true",
                        help="keep no warm spare process (for clients that submit jobs at once)")
    args = parser.parse_args(argv)
    # The protocol owns a copy of the original stdout; descriptor 1 becomes stderr, so that
    # anything else printed (here or in a job, by Python or native code) goes to stderr.
    # sys.stdout stays the real stream over descriptor 1, as the jobs' user code expects.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    spare = not args.no_spare and os.environ.get("ONNXLENS_WORKER_SPARE", "1") != "0"
    worker = Worker(channel, spare=spare)
    become_subreaper()  # orphans of a job's tree become children of the worker, to be ended
    try:
        worker.warm_up()
    except ImportError as error:
        worker.send(Missing(str(error)))
        return
    worker.serve()
    sys.exit(worker.exit_status)


if __name__ == "__main__":
    main()
