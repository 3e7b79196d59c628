"""Writing the files a user asked for: into an existing directory, under a file name, never
through a symbolic link, atomically (a temporary file beside it, fsync, ``os.replace``).
Standard library only: the language server, which may run without onnx or torch, uses it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class UnsafePathError(ValueError):
    """A path would leave the directory the user chose, or is no file name."""


def output_path(destination: Path) -> Path:
    """``destination`` as a file path in an existing directory, or a clear error: a missing
    directory (FileNotFoundError), an empty name, a directory or a symbolic link
    (UnsafePathError)."""
    destination = Path(destination)
    if str(destination) in ("", "."):
        raise UnsafePathError("the output path is empty")
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
    return final


def write_text_atomically(destination: Path, text: str) -> Path:
    """Write a report: a temporary file beside it, fsync, ``os.replace``. The file gets the
    mode a plain ``open()`` would give it; on any failure the temporary file is removed and
    an existing file is left as it was."""
    final = output_path(destination)
    descriptor, temporary = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.",
                                             suffix=".tmp")
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, plain_file_mode())
        os.replace(temporary, final)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return final


def plain_file_mode() -> int:
    """The mode ``open()`` gives a new file under the process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
