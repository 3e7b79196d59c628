"""Interrupting Python code at a time limit: a signal timer whose handler raises into whatever
runs. Only the main thread gets signals; elsewhere the block runs without a limit. Native code
that never returns to Python is not interrupted (the export worker kills such a process)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext


class Alarm:
    """The timer of an ``interrupting`` block, which the block may set again."""

    def __init__(self, timer: int | None) -> None:
        self._timer = timer

    def set(self, seconds: float) -> None:
        """Raise after ``seconds`` from now instead (at once if not positive)."""
        if self._timer is not None:
            signal.setitimer(self._timer, max(seconds, 1e-6))

    def remaining(self) -> float:
        """Seconds until it raises (0: it is not set)."""
        return signal.getitimer(self._timer)[0] if self._timer is not None else 0.0

    def cancel(self) -> None:
        """Never raise (the block then runs without a limit)."""
        if self._timer is not None:
            signal.setitimer(self._timer, 0)


@contextmanager
def interrupting(seconds: float, raised: type[BaseException], *,
                 cpu_time: bool = False) -> Iterator[Alarm]:
    """Raise ``raised`` into the block after ``seconds`` of wall-clock time (``ITIMER_REAL``,
    ``SIGALRM``), or of this process's CPU time with ``cpu_time`` (``ITIMER_PROF``,
    ``SIGPROF``): two timers of their own, so one kind can run inside the other."""
    if threading.current_thread() is not threading.main_thread():
        yield Alarm(None)
        return
    timer, signum = (signal.ITIMER_PROF, signal.SIGPROF) if cpu_time \
        else (signal.ITIMER_REAL, signal.SIGALRM)

    def expire(number: int, frame: object) -> None:
        raise raised

    previous = signal.signal(signum, expire)
    signal.setitimer(timer, seconds)
    try:
        yield Alarm(timer)
    finally:
        signal.setitimer(timer, 0)
        signal.signal(signum, previous)


#: what the exporter's work inside the user's code is not counted against (None: nothing)
_NOT_COUNTING: Callable[[], AbstractContextManager[None]] | None = None


@contextmanager
def exporters_work_not_counted(
        pause: Callable[[], AbstractContextManager[None]]) -> Iterator[None]:
    """While the block runs, ``exporter_working()`` enters ``pause()``
    (exporter/pipeline/model_code_limit.py)."""
    global _NOT_COUNTING
    previous, _NOT_COUNTING = _NOT_COUNTING, pause
    try:
        yield
    finally:
        _NOT_COUNTING = previous


def exporter_working() -> AbstractContextManager[None]:
    """Around the exporter's work inside the user's code (an export call the code makes):
    a limit on that code does not count it."""
    pause = _NOT_COUNTING
    return pause() if pause is not None else nullcontext()
