"""Work in a forked child of a warm benchmark process, its answer over a pipe."""

from __future__ import annotations

import os
from collections.abc import Callable


def in_fork(work: Callable[[], bytes]) -> tuple[bytes, int]:
    """``work()``'s bytes, written by a forked child, and the child's exit status (no bytes:
    it ended before answering, e.g. native code aborted it)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.write(write_end, work())
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 1 << 20):
        data += chunk
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return data, os.waitstatus_to_exitcode(status)
