"""Which checks run now. Opening a folder of models must not start one check process per file
on a 2-core machine (eight small transformers models at once took 4 GB and 14 s for every
file, the one in front of the user included): at most ``slots`` checks run at once, a check
starts only while the memory the running ones are expected to need leaves room for its own,
and the rest wait in priority order, the document in front of the user first."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: a target's expected peak memory before its first check has been measured
UNMEASURED_CHECK_MB = 1024

#: A folder opened at once arrives as one didOpen after another, each read on its own: the
#: first documents would take the places before the one in front of the user is even queued.
#: So a just-opened document's check waits until no document was opened for this long (at
#: most OPEN_SETTLE_MAX_SECONDS), and nothing is admitted meanwhile. Edits and saves do not
#: start such a wait (a check they request during one waits for its end).
OPEN_SETTLE_SECONDS = 0.05
OPEN_SETTLE_MAX_SECONDS = 0.5

#: lower sorts first: (rank, tie-break); rank 0 is the active editor's document
Priority = tuple[int, float]


@dataclass(eq=False)
class _Ticket:
    uri: str
    estimate_mb: int
    order: int
    admitted: asyncio.Future[None] = field(repr=False)
    #: queued while documents are being opened: not shown as queued until that settles
    settling: bool = False


def default_slots() -> int:
    return os.cpu_count() or 1


def default_budget_mb() -> int:
    """Half of the memory available now (Linux's MemAvailable, else the physical memory)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20 // 2
    except (ValueError, OSError, AttributeError):
        return 4096


class CheckQueue:
    """Admits checks in ``priority`` order: at most ``slots`` at once, and a check only while
    the running checks' estimates plus its own fit in ``budget_mb`` (a check larger than the
    whole budget runs alone). A check never overtakes one of higher priority: the head of
    the queue waits for memory rather than be starved by smaller checks behind it.
    ``on_change`` is called whenever the waiting order may have changed."""

    def __init__(self, priority: Callable[[str], Priority], on_change: Callable[[], None],
                 slots: int = 1, budget_mb: int = 4096) -> None:
        self.priority = priority
        self.on_change = on_change
        self.slots = slots
        self.budget_mb = budget_mb
        self.waiting: list[_Ticket] = []
        self.running: list[_Ticket] = []
        self.most_running = 0  # the largest number of checks that ran at once
        self._orders = itertools.count()
        self._admit_soon: asyncio.Handle | None = None
        self._settled: asyncio.TimerHandle | None = None
        self._settling_since: float | None = None

    def configure(self, slots: int, budget_mb: int) -> None:
        self.slots, self.budget_mb = max(1, slots), max(1, budget_mb)
        self.reorder()

    @contextlib.asynccontextmanager
    async def slot(self, uri: str, estimate_mb: int, opened: bool = False
                   ) -> AsyncIterator[None]:
        """Wait for room to check a target of ``uri``, then hold it until the block ends.
        A cancelled wait leaves the queue at once (a closed or edited document). ``opened``:
        the document was just opened (see OPEN_SETTLE_SECONDS)."""
        ticket = _Ticket(uri, estimate_mb, next(self._orders),
                         asyncio.get_running_loop().create_future())
        self.waiting.append(ticket)
        if opened:
            ticket.settling = True
            self._settle()
        self.reorder()
        try:
            await ticket.admitted
        except asyncio.CancelledError:
            if ticket in self.waiting:
                self.waiting.remove(ticket)
                self.on_change()
            else:  # admitted just as it was cancelled
                self._release(ticket)
            raise
        try:
            yield
        finally:
            self._release(ticket)

    def position(self, uri: str) -> int | None:
        """1 for the document whose check starts next, …; None when none of its checks waits."""
        documents: list[str] = []
        for ticket in self._in_order():
            if not ticket.settling and ticket.uri not in documents:
                documents.append(ticket.uri)
        return documents.index(uri) + 1 if uri in documents else None

    def reorder(self) -> None:
        """Priorities changed (another editor is active) or room was made: admit what fits,
        once the messages already received have been handled and documents are no longer
        being opened."""
        if self._settled is not None:
            return  # admission comes when documents are no longer being opened
        if self._admit_soon is None:
            self._admit_soon = asyncio.get_running_loop().call_soon(self._admit)

    def _settle(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._settling_since is None:
            self._settling_since = now
        if self._settled is not None:
            self._settled.cancel()
        self._settled = loop.call_at(min(now + OPEN_SETTLE_SECONDS,
                                         self._settling_since + OPEN_SETTLE_MAX_SECONDS),
                                     self._end_settling)

    def _end_settling(self) -> None:
        self._settled, self._settling_since = None, None
        for ticket in self.waiting:
            ticket.settling = False
        self.reorder()

    def _release(self, ticket: _Ticket) -> None:
        if ticket in self.running:
            self.running.remove(ticket)
        self.reorder()

    def _in_order(self) -> list[_Ticket]:
        return sorted(self.waiting, key=lambda t: (self.priority(t.uri), t.order))

    def _admit(self) -> None:
        self._admit_soon = None
        for ticket in self._in_order():
            if len(self.running) >= self.slots:
                break
            expected = sum(t.estimate_mb for t in self.running)
            if self.running and expected + ticket.estimate_mb > self.budget_mb:
                break
            self.waiting.remove(ticket)
            self.running.append(ticket)
            self.most_running = max(self.most_running, len(self.running))
            if not ticket.admitted.done():
                log.debug("check admitted: %s (%d running, %d waiting)", ticket.uri,
                          len(self.running), len(self.waiting))
                ticket.admitted.set_result(None)
        self.on_change()


@dataclass
class Focus:
    """What the user is looking at, for the queue's order: the active and visible editors
    when the client says so (``onnxlens/editors``, sent by the VS Code extension), else
    the open documents most recently opened or changed first."""

    active: str | None = None
    visible: frozenset[str] = frozenset()
    touched: dict[str, int] = field(default_factory=dict)
    _stamps: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    def touch(self, uri: str) -> None:
        self.touched[uri] = next(self._stamps)

    def forget(self, uri: str) -> None:
        """A closed document: its recency no longer counts."""
        self.touched.pop(uri, None)

    def priority(self, uri: str, is_open: bool) -> Priority:
        if uri == self.active:
            return (0, 0)
        recency = -self.touched.get(uri, -1)
        if uri in self.visible:
            return (1, recency)
        if is_open:
            return (2, recency)
        return (3, 0)  # workspace mode: a file nobody opened
