"""A job's process tree on Linux, read from /proc: the processes a job's process started
(and theirs), ending them with it, and the memory they own.

Used by the worker (``export_worker.process``) and by the client when it kills a worker
(``export_worker.client``); it imports nothing heavy. Elsewhere than Linux it finds no
children and measures nothing (docs/architecture.md §4, "A job's processes").
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass, field

_PR_SET_CHILD_SUBREAPER = 36
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: a process's private memory is read exactly (smaps_rollup walks its page tables: ≈10 ms
#: per GB) at most this often, and at most 1/EXACT_SHARE of the time
EXACT_INTERVAL_SECONDS = 0.5
EXACT_SHARE = 20


def become_subreaper() -> None:
    """Orphans among this process's descendants become its children (not init's), so that
    they can be found and ended (Linux ``PR_SET_CHILD_SUBREAPER``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def children(pid: int) -> list[int]:
    """The children of ``pid`` (of each of its threads)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found += [int(child) for child in handle.read().split()]
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before their children."""
    found: list[int] = []
    waiting = children(pid)
    while waiting:
        child = waiting.pop()
        found.append(child)
        waiting += children(child)
    return found


def tree_cpu_seconds(pid: int) -> float | None:
    """The CPU time ``pid`` and the processes below it have used so far: each one's own and
    that of the children it reaped (/proc/PID/stat's utime, stime, cutime and cstime), so the
    sum does not drop when a child ends; None when ``pid`` cannot be read (gone, no /proc)."""
    total = 0.0
    for index, process in enumerate([pid, *descendants(pid)]):
        try:
            with open(f"/proc/{process}/stat", "rb") as handle:
                # the fields after the command's closing parenthesis: utime is the 14th
                fields = handle.read().rpartition(b")")[2].split()
            total += sum(int(field) for field in fields[11:15]) / _CLOCK_TICKS
        except (OSError, ValueError, IndexError):
            if index == 0:
                return None
    return total


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything below it (read just before, so that no pid read long
    ago is signalled)."""
    for process in [pid, *descendants(pid)]:
        try:
            os.kill(process, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


def end_descendants() -> None:
    """Kill and reap every descendant of this process (a subreaper: orphans among them are
    its children). Before a job process exits: nothing it started outlives it."""
    me = os.getpid()
    while found := children(me):
        for child in found:
            kill_tree(child)
        for child in found:
            try:
                os.waitpid(child, 0)
            except ChildProcessError:  # reaped meanwhile (the user's own handler)
                continue


def rss(pid: int) -> int:
    """Resident memory in bytes, shared pages included (cheap: /proc/PID/statm)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def private_memory(pid: int) -> int | None:
    """The memory only ``pid`` maps, in bytes (USS: Private_Clean + Private_Dirty + Swap of
    /proc/PID/smaps_rollup); not the pages it still shares copy-on-write with the process it
    was forked from. None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    total = 0
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        if name in (b"Private_Clean", b"Private_Dirty", b"Swap"):
            total += int(value.split()[0]) * 1024
    return total


@dataclass
class _Reading:
    private: int  # the last exact reading
    rss: int  # the RSS at that moment
    at: float
    cost: float


@dataclass
class TreeMemory:
    """The private memory of a process tree, followed while it runs: each process's exact
    private memory now and then, and in between its last exact reading plus what its RSS
    grew since (an allocation shows at once; a page copied on write, at the next exact
    reading)."""

    readings: dict[int, _Reading] = field(default_factory=dict)

    def measure(self, root: int, exact: bool = False) -> int:
        """The tree's private memory now, in bytes (``exact``: every process read exactly)."""
        now = time.monotonic()
        processes = [root, *descendants(root)]
        total = 0
        for pid in processes:
            reading = self.readings.get(pid)
            current = rss(pid)
            due = reading is None or exact or \
                now - reading.at >= max(EXACT_INTERVAL_SECONDS, EXACT_SHARE * reading.cost)
            if reading is not None and not due:
                total += reading.private + max(0, current - reading.rss)
                continue
            started = time.perf_counter()
            private = private_memory(pid)
            if private is None:  # it ended, or /proc has no smaps_rollup: its RSS
                total += current
                continue
            reading = _Reading(private, current, now, time.perf_counter() - started)
            self.readings[pid] = reading
            total += private
        for gone in set(self.readings) - set(processes):
            del self.readings[gone]
        return total
