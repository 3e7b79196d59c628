"""Where the exports a check runs write: a scratch directory of the check's own, never the
user's tree (docs/export-calls.md, "Nothing is written").

A file the check's exports write to ``/home/me/proj/model.onnx`` is written to
``<scratch>/home/me/proj/model.onnx`` instead: the scratch directory mirrors absolute paths,
so the external data written beside a model lands beside its copy. While the check runs the
user's code, a read of a path that has such a copy (``open``, ``os.stat`` and so
``os.path.exists``/``getsize``, ``pathlib``, ``onnx.load``, ``onnx.checker.check_model``,
``onnxruntime.InferenceSession``) reads the copy: the script sees the file it just exported.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from typing import TypeVar

#: the functions the redirections stand in for, as they were before any of them was replaced
ORIGINAL_STAT = os.stat

PathArgument = str | bytes | os.PathLike
_Argument = TypeVar("_Argument")


def _absolute(path: object) -> str | None:
    """``path`` as an absolute path; None when it is not a path (a file object, a descriptor)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        return None
    try:
        return os.path.abspath(os.fsdecode(os.fspath(path)))
    except (TypeError, ValueError):
        return None


def _stat_mode(path: str) -> int | None:
    try:
        return ORIGINAL_STAT(path).st_mode
    except (OSError, ValueError):
        return None


class ScratchFiles:
    """The scratch directory of one check (made when first written to) and the copies in it."""

    def __init__(self) -> None:
        self.directory: str | None = None
        self._lock = threading.Lock()

    def _within(self, absolute: str) -> bool:
        return self.directory is not None and (
            absolute == self.directory or absolute.startswith(self.directory + os.sep))

    def _mirror(self, absolute: str) -> str:
        assert self.directory is not None
        drive, rest = os.path.splitdrive(absolute)
        return os.path.join(self.directory, drive.replace(":", "").strip("\\/"),
                            rest.lstrip("\\/"))

    def _made(self) -> None:
        with self._lock:
            if self.directory is None:
                self.directory = os.path.realpath(tempfile.mkdtemp(prefix="onnxlens-exports-"))

    def file(self, path: PathArgument) -> PathArgument:
        """Where a write to the file ``path`` goes: its copy in the scratch directory. A path
        whose directory does not exist is left as it is: the write fails as it would without
        the check, and writes nothing."""
        absolute = _absolute(path)
        if absolute is None or self._within(absolute):
            return path
        mode = _stat_mode(os.path.dirname(absolute))
        if mode is None or not stat.S_ISDIR(mode):
            return path
        self._made()
        copy = self._mirror(absolute)
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        return copy

    def folder(self, path: PathArgument) -> PathArgument:
        """Where a write into the directory ``path`` goes (torch.onnx.export's
        ``artifacts_dir``): its copy, made."""
        absolute = _absolute(path)
        if absolute is None or self._within(absolute):
            return path
        self._made()
        copy = self._mirror(absolute)
        os.makedirs(copy, exist_ok=True)
        return copy

    def copy_of(self, path: object) -> str | None:
        """The copy a read of ``path`` sees, when the check's exports wrote one."""
        if self.directory is None:
            return None
        absolute = _absolute(path)
        if absolute is None or self._within(absolute):
            return None
        copy = self._mirror(absolute)
        return copy if _stat_mode(copy) is not None else None

    def seen(self, path: _Argument) -> _Argument | str:
        """``path``, or the copy a read of it sees."""
        copy = self.copy_of(path)
        return path if copy is None else copy

    def remove(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
