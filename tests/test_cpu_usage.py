"""tests/cpu_usage.py counts the CPU of the processes a test leaves running (a module's
server, the corpus's warm truth parent) while they work, not only once they are reaped."""

from __future__ import annotations

import subprocess
import sys

from tests import cpu_usage

BURN_THEN_WAIT = ("import sys, time\n"
                  "end = time.process_time() + 0.5\n"
                  "while time.process_time() < end: pass\n"
                  "print('burnt', flush=True)\n"
                  "sys.stdin.read()\n")


def test_a_running_child_counts_before_it_ends():
    before = cpu_usage.cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BURN_THEN_WAIT], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        running = cpu_usage.cpu_seconds() - before
    finally:
        child.communicate("")
    assert running >= 0.45  # its half second of CPU, read while it still runs
    assert cpu_usage.cpu_seconds() - before >= running  # reaping it loses nothing
