"""Reading user source text and turning ``ast`` offsets into character columns."""

from __future__ import annotations

import ast
import io
import os
import re
import stat
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from exporter.findings.diagnostics import Diagnostic, Location, Range
from exporter.source.notebooks import (
    NotebookCodeTooBig,
    NotebookError,
    NotebookModule,
    NotPythonNotebook,
    is_notebook,
    notebook_module,
)


def without_bom(text: str) -> str:
    """A client may send a file's UTF-8 byte order mark as the text's first character; Python
    reads a file without it (``tokenize.open``), and compiling it as text fails."""
    return text.removeprefix("\ufeff")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """Lines as Python and LSP count them: broken at ``\n``, ``\r\n`` and ``\r`` only.
    ``str.splitlines`` also breaks at form feeds, U+2028, U+0085 and others, which shifts
    every later line of a file that holds one (in a string, or a line of only ``\f``)."""
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":  # a final line break ends the last line, it opens no new one
        lines.pop()
    return lines


#: the largest Python file onnxlens reads (docs/cli.md, "check"): a bigger one, or one
#: that is not a regular file (a FIFO, a device, a socket), is reported, never read
MAX_SOURCE_BYTES = 10 * 1024 * 1024
#: the largest notebook file onnxlens reads: its outputs (a plot's PNG, base64) may be big;
#: its code cells, what a check reads, are held to MAX_SOURCE_BYTES (docs/notebooks.md)
MAX_NOTEBOOK_BYTES = 256 * 1024 * 1024


class UnreadableSource(OSError):
    """A file onnxlens does not read: not a regular file, bigger than MAX_SOURCE_BYTES (a
    notebook: MAX_NOTEBOOK_BYTES, or code cells bigger than MAX_SOURCE_BYTES).
    Its text is the reason, as in "The file cannot be read: it is a FIFO, ..."."""


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular file is ("a FIFO"), None for a regular file."""
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def source_bytes(path: Path) -> bytes:
    """A Python file's bytes, read only from a regular file of at most MAX_SOURCE_BYTES (a
    notebook: MAX_NOTEBOOK_BYTES): a FIFO (``mkfifo model.py``) blocked the reader for ever,
    ``/dev/zero`` was read until the kernel killed the process. Opened without blocking, then
    tested, so a file swapped for a FIFO between a test and the open cannot block either."""
    limit, what = (MAX_NOTEBOOK_BYTES, "notebooks") if is_notebook(path) \
        else (MAX_SOURCE_BYTES, "Python files")
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(descriptor, "rb", closefd=True) as handle:
        status = os.fstat(descriptor)
        kind = special_kind(status.st_mode)
        if kind is not None:
            raise UnreadableSource(f"it is {kind}, and onnxlens reads only regular files")
        data = b"" if status.st_size > limit else handle.read(limit + 1)
    if status.st_size > limit or len(data) > limit:
        raise UnreadableSource(
            f"it is {_megabytes(max(status.st_size, len(data)))}, and onnxlens reads {what} "
            f"of at most {_megabytes(limit)}")
    return data


def _megabytes(count: int) -> str:
    return f"{count / (1024 * 1024):.1f} MB"


def decode_source(data: bytes) -> str:
    """Python source text from its bytes, as ``tokenize.open`` reads a file: by its PEP 263
    encoding declaration or BOM, with universal newlines."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    with io.TextIOWrapper(io.BytesIO(data), encoding, line_buffering=True) as text:
        return text.read()


def read_source(path: Path) -> str:
    """Read a Python file honouring its PEP 263 encoding declaration; a notebook's code cells
    as one module (exporter/source/notebooks.py). Raises UnreadableSource for a file that is
    not regular or too big (source_bytes), NotebookError for a notebook that is not one."""
    if is_notebook(path):
        return read_notebook(path).text
    return decode_source(source_bytes(path))


def read_notebook(path: Path) -> NotebookModule:
    """The notebook's module (cached while the file's mtime and size stay). Raises
    UnreadableSource for a file that is not regular, bigger than MAX_NOTEBOOK_BYTES or whose
    code cells are bigger than MAX_SOURCE_BYTES (its outputs do not count), NotebookError for
    a file that is not a notebook (NotPythonNotebook: not a Python one)."""
    status = path.stat()
    return _cached_notebook(str(path), status.st_mtime_ns, status.st_size)


@lru_cache(maxsize=64)
def _cached_notebook(path: str, mtime_ns: int, size: int) -> NotebookModule:
    try:
        return notebook_module(source_bytes(Path(path)), max_code_bytes=MAX_SOURCE_BYTES)
    except NotebookCodeTooBig as error:
        raise UnreadableSource(
            f"its code cells are {_megabytes(error.size)}, and onnxlens reads at most "
            f"{_megabytes(error.limit)} of a notebook's code") from None


def notebook_at(path: Path) -> NotebookModule | None:
    """The notebook's module when ``path`` is a readable notebook, else None (what the
    reports use to locate a line by cell)."""
    if not is_notebook(path):
        return None
    try:
        return read_notebook(path)
    except (OSError, NotebookError):
        return None


@lru_cache(maxsize=256)
def _cached_lines(path: str, mtime_ns: int) -> tuple[str, ...]:
    try:
        return tuple(split_lines(read_source(Path(path))))
    except (OSError, SyntaxError, UnicodeDecodeError, NotebookError):
        return ()


def source_lines(path: Path) -> tuple[str, ...]:
    """The lines of ``path`` on disk (cached while its mtime stays); none if unreadable."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return ()
    return _cached_lines(str(path), mtime)


#: the lines of a file as a check sees them (``Sources.lines``; default: on disk)
LinesOf = Callable[[Path], tuple[str, ...]]


@dataclass(frozen=True)
class Sources:
    """The source text one check reads: the user's editor's text of one file (a snapshot of
    the unsaved buffer, sent with the job), every other file from disk."""

    unsaved_path: Path | None = None
    unsaved_lines: tuple[str, ...] = ()
    unsaved_text: str = ""

    @classmethod
    def with_unsaved(cls, path: Path, text: str) -> Sources:
        text = without_bom(text)
        return cls(path.resolve(), tuple(split_lines(text)), text)

    def unsaved(self, path: Path) -> bool:
        return self.unsaved_path is not None and path.resolve() == self.unsaved_path

    def read(self, path: Path) -> str:
        return self.unsaved_text if self.unsaved(path) else read_source(path)

    def lines(self, path: Path) -> tuple[str, ...]:
        return self.unsaved_lines if self.unsaved(path) else source_lines(path)


def line_text(path: Path, line: int, lines_of: LinesOf = source_lines) -> str:
    lines = lines_of(path)
    return lines[line - 1] if 0 < line <= len(lines) else ""


def decoding_problem(path: Path) -> Diagnostic | None:
    """Why the file is not checked (``read_checked``), None when it reads fine."""
    read = read_checked(path)
    return read if isinstance(read, Diagnostic) else None


def read_checked(path: Path) -> str | Diagnostic:
    """The file's text, read and decoded once (a notebook's: its code cells as one module), or
    why it is not checked, at its line 1: ONNX002 where the file's bytes do not match its
    encoding (Python could not import it, even if an editor shows it with the bad bytes
    replaced), the file cannot be read or is not a notebook; ONNX005 (info) for a notebook
    whose kernel is not Python."""
    raw = b""
    try:
        if is_notebook(path):
            return read_notebook(path).text
        raw = source_bytes(path)
        return decode_source(raw)
    except NotPythonNotebook as error:
        return Diagnostic("ONNX005", f"The notebook is not checked: {error}.",
                          Location(path, Range.of(1, 1, 1, 2)), target="",
                          hint="Nothing to fix: its cells are not Python. Exclude it "
                               "(`extend-exclude`) to silence this.")
    except NotebookError as error:
        return Diagnostic("ONNX002", f"The notebook cannot be read: {error}; it is not checked.",
                          Location(path, Range.of(1, 1, 1, 2)), target="",
                          hint="Open and save it in Jupyter or VS Code to repair it, or "
                               "exclude it (`extend-exclude`).")
    except UnreadableSource as error:
        return Diagnostic("ONNX002", f"The file cannot be read: {error}; it is not checked.",
                          Location(path, Range.of(1, 1, 1, 2)), target="",
                          hint=_UNREADABLE_NOTEBOOK_HINT if is_notebook(path) else
                          "Exclude it (`extend-exclude`), or keep the model in a regular "
                          f"Python file of at most {_megabytes(MAX_SOURCE_BYTES)}.")
    except OSError as error:
        return Diagnostic("ONNX002", f"The file cannot be read: {error}",
                          Location(path, Range.of(1, 1, 1, 2)), target="")
    except (UnicodeDecodeError, SyntaxError) as error:
        offset = getattr(error, "start", 0) or 0
        line = raw[:offset].count(b"\n") + 1
        column = len(raw[:offset].rsplit(b"\n", 1)[-1].decode("utf-8", "replace")) + 1
        return Diagnostic("ONNX002", f"The file cannot be read: {error}",
                          Location(path, Range.of(line, column, line, column + 1)), target="",
                          hint="Save the file as UTF-8, or declare its encoding in a "
                               "`# -*- coding: ... -*-` line.")


_UNREADABLE_NOTEBOOK_HINT = (
    "Exclude it (`extend-exclude`), or clear its big outputs or move code into a module it "
    f"imports: onnxlens reads notebooks of at most {_megabytes(MAX_NOTEBOOK_BYTES)} whose code "
    f"cells hold at most {_megabytes(MAX_SOURCE_BYTES)} (outputs do not count).")


def char_column(text: str, byte_offset: int) -> int:
    """Convert a 0-based UTF-8 byte offset within ``text`` to a 0-based character offset."""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def node_range(node: ast.AST, lines: tuple[str, ...] | list[str]) -> Range:
    """The 1-based, end-exclusive character range of an ``ast`` node."""
    start_line = node.lineno  # type: ignore[attr-defined]
    end_line = node.end_lineno or start_line  # type: ignore[attr-defined]
    start_text = lines[start_line - 1] if start_line <= len(lines) else ""
    end_text = lines[end_line - 1] if end_line <= len(lines) else ""
    start_col = char_column(start_text, node.col_offset)  # type: ignore[attr-defined]
    end_offset = node.end_col_offset  # type: ignore[attr-defined]
    end_col = char_column(end_text, end_offset) if end_offset is not None else len(end_text)
    return Range.of(start_line, start_col + 1, end_line, end_col + 1)


def whole_line_range(path: Path, line: int, lines_of: LinesOf = source_lines) -> Range:
    """The range of a line's text without its indentation."""
    text = line_text(path, line, lines_of)
    indent = len(text) - len(text.lstrip())
    end = max(len(text.rstrip()), indent) + 1
    return Range.of(line, indent + 1, line, end)
