"""Calls made from several threads at once while the interpreter switches threads inside
CPython 3.11's AST constructor, whose recursion counter the threads share
(python/cpython#106905): what makes a plain ``ast.parse`` fail with "SystemError: AST constructor
recursion depth mismatch" on a fine source."""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def threads_switching_inside_the_ast_constructor() -> Iterator[None]:
    """Every few allocations a garbage collection runs, and it hands the interpreter to another
    thread: a thread switch while a tree is being built, as in a busy process."""
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()

    def let_another_thread_run(phase: str, info: dict[str, int]) -> None:
        time.sleep(0)

    gc.set_threshold(10)
    sys.setswitchinterval(1e-6)
    gc.callbacks.append(let_another_thread_run)
    try:
        yield
    finally:
        gc.callbacks.remove(let_another_thread_run)
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)


def errors_from_threads(call: Callable[[], object], times: int = 30) -> list[str]:
    """The ``SystemError``s of ``call`` made ``times`` times in each of three threads, each at a
    different stack depth (the counter starts at the caller's depth), while threads switch
    inside the AST constructor."""
    errors: list[str] = []

    def at_depth(depth: int) -> None:
        if depth:
            at_depth(depth - 1)
            return
        try:
            call()
        except SystemError as error:
            errors.append(str(error))

    def work(depth: int) -> None:
        for _ in range(times):
            at_depth(depth)

    threads = [threading.Thread(target=work, args=(depth,)) for depth in (1, 7, 15)]
    with threads_switching_inside_the_ast_constructor():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return errors
