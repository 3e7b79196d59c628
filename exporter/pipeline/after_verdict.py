"""onnxlens's search for more problems once the export is known to fail (the draft export and
the later stages on its graph) runs on a time budget of its own.

The plain exporter stops at its first error; onnxlens then runs a draft export to find every
capture problem at once, and checks the draft's graph. On most models that costs about what
the failed capture cost; on some it is ten times that (a detection model's draft export
spent 180 s in sympy after an 18 s capture), so the budget follows the failed capture's own
time: ``max(MINIMUM_SECONDS, FACTOR × capture)``. When it is spent, the verdict (torch's first
error, already known) is the answer and the stage says the search was cut short. The verdict
never depends on the budget: only the list of further problems can be shorter. The shortcut
``after-verdict-budget`` (exporter/toolchain/shortcuts.py) switches it off."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from exporter.toolchain import shortcuts

MINIMUM_SECONDS = 30.0
FACTOR = 2.0


class BudgetSpent(BaseException):
    """Raised into the search when its budget is spent (a BaseException: no ``except
    Exception`` in torch or in a stage mistakes it for a problem of the model)."""


def deadline_after(capture_seconds: float) -> float | None:
    """The moment (``time.monotonic()``) the search for more problems ends, counted from now:
    None with the shortcut off."""
    if not shortcuts.enabled("after-verdict-budget"):
        return None
    return time.monotonic() + max(MINIMUM_SECONDS, FACTOR * capture_seconds)


def why_stopped(budget_seconds: float) -> str:
    return (f"onnxlens's search for more problems after the verdict was stopped at its budget "
            f"({budget_seconds:.0f} s, from the failed capture's time): there may be others")


@contextmanager
def spending(deadline: float | None) -> Iterator[None]:
    """Raise ``BudgetSpent`` into the block at ``deadline``. The check's own time limit (an
    ``ITIMER_REAL`` timer set by exporter/pipeline/runner.py) keeps its handler and the
    time it has left; when it ends first, it fires as it would have. Only in the main
    thread (signals), as that limit."""
    if deadline is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise BudgetSpent
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= left:
        yield  # the check's time limit comes first
        return

    def spent(signum: int, frame: object) -> None:
        raise BudgetSpent

    started = time.monotonic()
    outer_handler = signal.signal(signal.SIGALRM, spent)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, outer_handler)
        if outer_left:  # the check's limit, less the time spent here (at least a moment)
            signal.setitimer(signal.ITIMER_REAL,
                             max(outer_left - (time.monotonic() - started), 0.001))
