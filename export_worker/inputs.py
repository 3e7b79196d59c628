"""What a check job reads: the inputs that decide whether its result may be reused.

A check job records the files it opens (an audit hook sees every open); the language server
reuses the result while every Python file it read from outside the installed packages still
has the same content (``lsp_server/reuse.py``). A check that read any other file (weights,
data) is never reused. What the job wrote itself, and what lies in a directory it made, is
not an input when read back: the deploy stage hands the model to OpenVINO, ONNX Runtime Web
and ONNX Runtime's quantizer through scratch files and reads their answers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from export_worker.messages import JobInputs
from exporter.source.traces import is_library_path

# The operating system's files: read by the toolchain (e.g. /etc/os-release), never by models.
_SYSTEM_ROOTS = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/lib/", "/lib64/", "/run/")


def digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


class InputRecorder:
    """Inside a check job: the files the check opens, except ``own`` (the target file when
    the request carries its text). ``inputs()`` is None when the result must not be reused."""

    def __init__(self, own: Path | None) -> None:
        self.own = str(own.resolve()) if own is not None else None
        self.modules: dict[str, str | None] = {}
        self.made: set[str] = set()  # files the job wrote and directories it made
        self.reusable = True
        self._busy = False
        sys.addaudithook(self._hook)  # lives as long as the job's process

    def inputs(self) -> JobInputs | None:
        if not self.reusable:
            return None
        modules = {path: known for path, known in self.modules.items() if known is not None}
        return JobInputs(modules) if len(modules) == len(self.modules) else None

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "os.mkdir" and isinstance(args[0], (str, bytes, os.PathLike)):
            self.made.add(os.path.abspath(os.fsdecode(args[0])))
            return
        if event != "open" or self._busy or not self.reusable:
            return
        self._busy = True  # reading a module to hash it opens it again
        try:
            self._opened(args[0], args[1], args[2])
        except Exception:  # never disturb the check; an unreadable input is not reused
            self.reusable = False
        finally:
            self._busy = False

    def _opened(self, file: Any, mode: str | None, flags: int) -> None:
        if isinstance(file, int):
            return  # an already open descriptor
        path = os.path.abspath(os.fsdecode(file))
        if not _reads_existing(mode, flags):
            self.made.add(path)  # what a check writes does not change what it found
            return
        if path == self.own or _ignored(path) or self._made_here(path):
            return
        source = _python_source(path)
        if source is None:
            self.reusable = False
        elif source not in self.modules and source != self.own:
            self.modules[source] = digest(source)


    def _made_here(self, path: str) -> bool:
        return path in self.made or any(path.startswith(made + os.sep) for made in self.made)


def _reads_existing(mode: str | None, flags: int | None) -> bool:
    """Whether an open can read what the file held before (not a write, not a new file)."""
    if mode is not None:
        return "r" in mode or ("a" in mode and "+" in mode)
    flags = flags or 0
    return flags & os.O_ACCMODE != os.O_WRONLY and not flags & (os.O_EXCL | os.O_TRUNC)


#: the standard library's zip archive on sys.path (it rarely exists; an import looks for it
#: again after ``importlib.invalidate_caches()``, which onnxruntime's quantizer calls)
_STDLIB_ZIP = os.path.join(sys.base_prefix, "lib",
                           f"python{sys.version_info.major}{sys.version_info.minor}.zip")


def _ignored(path: str) -> bool:
    return (path.startswith(_SYSTEM_ROOTS) or path == _STDLIB_ZIP
            or is_library_path(Path(path)))


def _python_source(path: str) -> str | None:
    """The Python source a read stands for (a cached ``.pyc`` stands for its ``.py``)."""
    if path.endswith(".py"):
        return path
    if path.endswith(".pyc"):
        try:
            return importlib.util.source_from_cache(path)
        except ValueError:
            return None
    return None


