"""Writing the files a user asked for: into an existing directory, under a file name, never
through a symbolic link, atomically (a temporary file beside it, fsync, ``os.replace``).
Standard library only: the language server, which may run without onnx or torch, uses it."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path


class UnsafePathError(ValueError):
    """A path would leave the directory the user chose, or is no file name."""


def output_path(destination: Path, *, stream_ok: bool = False) -> Path:
    """``destination`` as a file path in an existing directory, or a clear error: a missing
    directory (FileNotFoundError), an empty name, a directory, a symbolic link or anything
    else that is not a regular file (UnsafePathError), which is never replaced. With
    ``stream_ok``, an existing character device or FIFO (``/dev/stdout``, ``/dev/null``, a
    pipe), also through a symbolic link, is accepted: it is written to as a stream."""
    destination = Path(destination)
    if str(destination) in ("", "."):
        raise UnsafePathError("the output path is empty")
    if stream_ok and is_stream(destination):
        return destination
    directory = destination.parent.resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"the directory {directory} does not exist")
    final = directory / destination.name
    if final.parent != directory or destination.name in ("", ".", ".."):
        raise UnsafePathError(f"{destination} is not a file name inside {directory}")
    if final.is_symlink():
        raise UnsafePathError(f"{final} is a symbolic link; refusing to write through it")
    if final.is_dir():
        raise UnsafePathError(f"{final} is a directory; give a file name inside it")
    kind = _special_kind(final)
    if kind:
        raise UnsafePathError(f"{final} is {kind}, not a regular file; refusing to replace it")
    return final


def is_stream(path: Path) -> bool:
    """An existing character device or FIFO (followed through symbolic links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _special_kind(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return ""
    for test, kind in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return ""


def check_writable(destination: Path) -> None:
    """Raise OSError (read-only file system, no permission) unless a file can be created
    beside ``destination``: asked before the work whose result it is meant to hold."""
    if is_stream(destination):
        return
    final = output_path(destination)
    descriptor, probe = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.",
                                         suffix=".probe")
    os.close(descriptor)
    os.unlink(probe)


def write_text_atomically(destination: Path, text: str, *, stream_ok: bool = True) -> Path:
    """Write a report: a temporary file beside it, fsync, ``os.replace``; a device or a pipe
    is written to as a stream instead (without ``stream_ok``: refused, as a symbolic link
    always is). A replaced file keeps its mode; a new one gets the mode a plain ``open()``
    would give it. On any failure the temporary file is removed and an existing file is left
    as it was."""
    final = output_path(destination, stream_ok=stream_ok)
    if is_stream(final):
        with open(final, "w", encoding="utf-8") as stream:
            stream.write(text)
        return final
    try:
        mode = stat.S_IMODE(os.stat(final).st_mode)
    except FileNotFoundError:
        mode = plain_file_mode()
    _remove_abandoned_temporaries(final)
    # the temporary file's name carries this process's id: a later write removes it when this
    # process died before it could (SIGKILL, a power cut)
    descriptor, temporary = tempfile.mkstemp(dir=final.parent,
                                             prefix=f".{final.name}.{os.getpid()}.",
                                             suffix=".tmp")
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, final)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return final


def _remove_abandoned_temporaries(final: Path) -> None:
    """Remove the temporary files (``.<name>.<pid>.<random>.tmp``) of earlier writes of the
    same file whose process no longer exists: never a file of another name."""
    pattern = re.compile(re.escape(f".{final.name}.") + r"(\d+)\.[A-Za-z0-9_]+\.tmp")
    with contextlib.suppress(OSError):
        for entry in os.scandir(final.parent):
            match = pattern.fullmatch(entry.name)
            if match and entry.is_file(follow_symlinks=False) \
                    and not process_exists(int(match.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def plain_file_mode() -> int:
    """The mode ``open()`` gives a new file under the process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
