"""A checked model runs without a terminal: its stdin is empty (/dev/null), and nobody sees
a debugger prompt. ``breakpoint()`` and ``input()`` left in a model would read end-of-file
there, as in any process whose stdin is empty, and fail with an exception that says nothing
(pdb's ``BdbQuit``, ``EOFError: EOF when reading a line``). In a job process they raise
exceptions of the same kinds that say why, at the line of the call (ONNX002, ONNX003 or
ONNX004 by the stage that ran it)."""

from __future__ import annotations

import bdb
import builtins
import os
import sys
from typing import Any


class DebuggerUnavailable(bdb.BdbQuit):
    """``breakpoint()`` in a checked model."""


class TerminalUnavailable(EOFError):
    """``input()`` in a checked model, reading the job's empty stdin."""


_BREAKPOINT = ("breakpoint() stops in a debugger, which a checked model cannot do: onnxlens "
               "runs it without a terminal. Remove the call (or set PYTHONBREAKPOINT=0 where "
               "onnxlens runs to skip it)")
_INPUT = ("input() reads the terminal, which a checked model cannot do: onnxlens runs it with "
          "an empty stdin. Remove the call, or give the value another way")


def no_terminal() -> None:
    """Install the hooks (in a job process, once its stdin is /dev/null)."""
    original_input = builtins.input

    def breakpointhook(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get("PYTHONBREAKPOINT"):  # chosen by the user: 0 skips the call
            return sys.__breakpointhook__(*args, **kwargs)
        raise DebuggerUnavailable(_BREAKPOINT)

    def input(prompt: object = "") -> str:  # stands in for the builtin
        try:
            return original_input(prompt)
        except EOFError:
            if sys.stdin is not sys.__stdin__:  # the model's own stdin ran out
                raise
            raise TerminalUnavailable(_INPUT) from None

    sys.breakpointhook = breakpointhook
    builtins.input = input
