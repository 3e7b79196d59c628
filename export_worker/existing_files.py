"""The last line of defence of "a check writes nothing the user did not ask for": in a job's
process, no file of the user's that existed before the job started is replaced or truncated,
however the code that does it was reached (an export call onnxlens did not intercept, a helper
in an installed package, a thread, a module imported ahead by the worker).

Python raises an audit event (``sys.addaudithook``, PEP 578) before it opens a file, renames
one or truncates one. A job's hook refuses, with ``PermissionError``, an open that truncates
(``O_TRUNC``: ``open(path, "w")``, ``Path.write_text``, ``onnx.save``), a rename or replace
onto, and a truncation of a regular file that existed before the job began (its inode changed
last before then), inside the workspace or the user's home (caches excepted) — unless it is
the file the job was asked to write (``save -o``: the model and its data file; ``graph
--output-dir``: that directory, which the command checked is a graph's own). Appending is
left alone, and so are files the job itself made. What runs outside Python (a subprocess, a
native library's own ``open``) is not seen: onnxlens intercepts the exporter's own writes
before they get here (docs/export-calls.md).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the audit events that replace or truncate a file, and where their path argument is
_TRUNCATING_OPEN = "open"
_RENAMES = ("os.rename",)  # os.replace raises os.rename too
_TRUNCATES = ("os.truncate",)


@dataclass(frozen=True)
class Protection:
    """Which files a job may not replace: the ones under ``roots`` (not under ``exempt``)
    whose inode changed last before ``started_ns``, except ``allowed`` files and files under
    ``allowed_directories`` (all real paths)."""

    started_ns: int
    roots: tuple[str, ...]
    exempt: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    allowed_directories: tuple[str, ...] = ()

    def refuses(self, path: str | bytes | os.PathLike[Any]) -> bool:
        real = os.path.realpath(os.fsdecode(path))
        if not _under(real, self.roots) or _under(real, self.exempt):
            return False
        if real in self.allowed or _under(real, self.allowed_directories):
            return False
        try:
            status = os.stat(real)
        except OSError:
            return False  # a new file
        return stat.S_ISREG(status.st_mode) and status.st_ctime_ns < self.started_ns


def _under(path: str, directories: tuple[str, ...]) -> bool:
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in directories)


def job_protection(workspace: str, kind: str, output: str | None) -> Protection:
    """The protection of a job of ``kind`` in ``workspace`` that writes ``output``."""
    home = Path.home()
    cache = os.environ.get("XDG_CACHE_HOME") or str(home / ".cache")
    allowed: tuple[str, ...] = ()
    directories: tuple[str, ...] = ()
    if output is not None and kind == "save":
        final = os.path.realpath(output)
        directory = os.path.dirname(final)
        # the model, and its data file (``model.onnx.<digest>.data``) beside it
        data_files = [os.path.join(directory, name) for name in _listing(directory)
                      if name.startswith(os.path.basename(final) + ".")]
        allowed = (final, *data_files)
    elif output is not None and kind == "graph":
        directories = (os.path.realpath(output),)
    return Protection(time.time_ns(), (os.path.realpath(workspace), os.path.realpath(home)),
                      (os.path.realpath(cache),), allowed, directories)


def _listing(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


_inside = threading.local()


def protect_existing_files(protection: Protection) -> None:
    """Refuse, for the rest of this process, what ``protection`` refuses (a job's process:
    an audit hook cannot be removed)."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if getattr(_inside, "active", False):
            return
        if event == _TRUNCATING_OPEN:
            path, flags = args[0], args[2]
            if not isinstance(flags, int) or not flags & os.O_TRUNC:
                return
        elif event in _RENAMES:
            path = args[1] if args[3] in (-1, None) else None
        elif event in _TRUNCATES:
            path = args[0]
        else:
            return
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a descriptor, or relative to a directory descriptor
        _inside.active = True
        try:
            refused = protection.refuses(path)
        finally:
            _inside.active = False
        if refused:
            raise PermissionError(
                errno.EACCES, "onnxlens: a check replaces no file that existed before it "
                "(run the code itself, outside onnxlens, to write it)", os.fsdecode(path))

    sys.addaudithook(hook)
