"""Parsing Python source safely from several threads at once."""

from __future__ import annotations

import ast
import threading
from typing import Any

# CPython 3.11 keeps the AST constructor's recursion counter in the interpreter, not the thread:
# a parse that starts while another thread is building its tree (a thread switch inside the
# constructor, e.g. in a garbage collection) leaves that thread's counter off, and its parse fails
# with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). Our own
# parses take turns; a library's parse in another thread can still interleave, hence one retry.
_ONE_PARSE_AT_A_TIME = threading.Lock()


def parse_python(source: str, **options: Any) -> Any:
    """``ast.parse``, one at a time in this process, once more after the spurious ``SystemError``
    above (the source is fine, the counter was off)."""
    with _ONE_PARSE_AT_A_TIME:
        try:
            return ast.parse(source, **options)
        except SystemError as error:
            if "recursion depth mismatch" not in str(error):
                raise
            return ast.parse(source, **options)
