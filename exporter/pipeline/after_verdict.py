"""onnxlens's search for more problems once the export is known to fail (the draft export and
the later stages on its graph) runs on a budget of its own.

The plain exporter stops at its first error; onnxlens then runs a draft export to find every
capture problem at once, and checks the draft's graph. On most models that costs about what
the failed capture cost; on some it is ten times that (a detection model's draft export
spent 180 s in sympy after an 18 s capture), so the budget follows the failed capture's own
time: ``max(MINIMUM_SECONDS, FACTOR × capture)``, both in the process's CPU time. When it is
spent, the verdict (torch's first error, already known) is the answer and the stage says the
search was cut short. The verdict never depends on the budget: only the list of further
problems can be shorter. The shortcut ``after-verdict-budget``
(exporter/toolchain/shortcuts.py) switches it off."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from exporter.pipeline.timers import interrupting
from exporter.toolchain import shortcuts

MINIMUM_SECONDS = 30.0
FACTOR = 2.0


class BudgetSpent(BaseException):
    """Raised into the search when its budget is spent (a BaseException: no ``except
    Exception`` in torch or in a stage mistakes it for a problem of the model)."""


def deadline_after(capture_seconds: float) -> float | None:
    """The moment the search for more problems ends, in this process's CPU time
    (``time.process_time()``), counted from now; ``capture_seconds`` is CPU time too. None
    with the shortcut off.

    CPU time, not wall time: what a check lists must not depend on what else the machine
    runs (a busy CI runner, other checks beside it)."""
    if not shortcuts.enabled("after-verdict-budget"):
        return None
    return time.process_time() + max(MINIMUM_SECONDS, FACTOR * capture_seconds)


def why_stopped(budget_seconds: float) -> str:
    return (f"onnxlens's search for more problems after the verdict was stopped at its budget "
            f"({budget_seconds:.0f} s of CPU time, twice the failed capture's or at least "
            f"{MINIMUM_SECONDS:.0f} s): there may be others")


@contextmanager
def spending(deadline: float | None) -> Iterator[None]:
    """Raise ``BudgetSpent`` into the block once this process's CPU time reaches ``deadline``
    (exporter/pipeline/timers.py: a CPU-time timer, while the check's own wall-clock limit,
    another timer, keeps running)."""
    if deadline is None:
        yield
        return
    left = deadline - time.process_time()
    if left <= 0:
        raise BudgetSpent
    with interrupting(left, BudgetSpent, cpu_time=True):
        yield
