"""Warm third-party imports: the installed packages a check imported (``transformers``,
``einops``, ...) are imported by the worker itself before it forks the next check, so that a
check re-imports only the user's own modules, as a warm Python process running the plain
exporter by hand does (docs/architecture.md §4).

Only packages from site-packages are learned, never the workspace's modules. A package is
imported into the worker only after a forked probe imported it and stayed on one thread (the
worker forks, so it must run no threads). When the installed packages change (a site-packages
directory or a learned package's own file changes), the worker cannot forget a module: it
exits with ``RESTART_STATUS`` and the client starts a new one and runs the job there.

The shortcut ``warm-imports`` (``ONNXLENS_SHORTCUTS_OFF=warm-imports``) switches it off.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: the worker's exit status when the installed packages changed under its warm imports
RESTART_STATUS = 75  # EX_TEMPFAIL
#: a probe whose imports take longer is killed and its packages are not imported
PROBE_TIMEOUT_SECONDS = 120.0


#: never imported ahead: onnxruntime starts a thread when imported, and the worker forks
#: (every job imports it itself, docs/architecture.md §4)
NEVER_AHEAD = frozenset({"onnxruntime"})


def library_modules(before: set[str]) -> list[str]:
    """The modules from site-packages (a virtualenv's or the interpreter's installed
    packages) imported since ``sys.modules`` held the names ``before``: submodules too, since
    packages such as transformers import their models' modules lazily."""
    found = []
    for name in set(sys.modules) - before:
        top = name.partition(".")[0]
        if top in NEVER_AHEAD:
            continue
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and ("site-packages" in Path(file).parts or "dist-packages" in Path(file).parts):
            found.append(name)
    return sorted(found)


@dataclass(frozen=True)
class _Stamp:
    path: str
    mtime_ns: int
    size: int

    @staticmethod
    def of(path: str) -> _Stamp | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return _Stamp(path, stat.st_mtime_ns, stat.st_size)


class WarmImports:
    """The worker's learned packages: which are imported, which were refused, and the
    files whose change makes them stale."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.imported: list[str] = []
        self.refused: dict[str, str] = {}  # name: why
        self.pending: set[str] = set()
        self._stamps: dict[str, _Stamp | None] = {}

    def learn(self, names: Iterable[str]) -> None:
        if self.enabled:
            self.pending |= set(names) - set(self.imported) - set(self.refused)

    def import_pending(self) -> None:
        """Import what was learned, as far as a forked probe could do so on one thread."""
        names, self.pending = sorted(self.pending), set()
        if not names:
            return
        started = time.perf_counter()
        safe, refused, why = _probe(names)
        if refused:
            self.refused.update(dict.fromkeys(refused, why))
            print(f"onnxlens worker: not importing {_packages(refused)} ahead: {why}",
                  file=sys.stderr)
        self.pending = set(names) - set(safe) - set(refused)  # after a refusal: next time
        for name in safe:
            try:
                importlib.import_module(name)
            except BaseException as error:  # the probe imported it; be safe all the same
                self.refused[name] = f"{type(error).__name__}: {error}"
                continue
            self.imported.append(name)
            self._stamp(name)
        gc.collect()
        gc.freeze()  # as after the warm-up: out of every job's collections
        if safe:
            print(f"onnxlens worker: imported {_packages(safe)} ahead of the next checks "
                  f"({time.perf_counter() - started:.2f} s)", file=sys.stderr)

    def stale(self) -> bool:
        """Whether a learned package, or a site-packages directory holding one, changed."""
        return any(_Stamp.of(path) != stamp for path, stamp in self._stamps.items())

    def _stamp(self, name: str) -> None:
        """Watch the module's top-level package file and the directory holding it."""
        file = getattr(sys.modules.get(name.partition(".")[0]), "__file__", None)
        if not file:
            return
        path = Path(file)
        package_root = path.parent if path.name == "__init__.py" else path
        for watched in (str(path), str(package_root.parent)):
            self._stamps.setdefault(watched, _Stamp.of(watched))


def _packages(modules: list[str]) -> str:
    """``transformers (412 modules), yaml (20 modules)``: a log line, not hundreds of names."""
    counts: dict[str, int] = {}
    for name in modules:
        top = name.partition(".")[0]
        counts[top] = counts.get(top, 0) + 1
    return ", ".join(top if count == 1 else f"{top} ({count} modules)"
                     for top, count in sorted(counts.items()))


def _probe(names: list[str]) -> tuple[list[str], list[str], str]:
    """Import ``names`` one by one in a forked child: (those imported on one thread before
    the first that was not, the refused ones, why)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            for name in names:
                try:
                    importlib.import_module(name)
                except BaseException:
                    os.write(write_end, f"failed {name}\n".encode())
                    continue
                if _thread_count() > 1:
                    os.write(write_end, f"threads {name}\n".encode())
                    break
                os.write(write_end, f"ok {name}\n".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    report = _read_until_exit(read_end, pid)
    safe = [name for verdict, name in report if verdict == "ok"]
    failed = [name for verdict, name in report if verdict == "failed"]
    threads = [name for verdict, name in report if verdict == "threads"]
    if threads:
        return safe, failed + threads, "importing it starts a thread, and the worker forks"
    if len(report) < len(names):  # the probe died or hung on the next name
        return safe, [*failed, names[len(report)]], "importing it ended its process"
    return safe, failed, "importing it failed"


def _read_until_exit(fd: int, pid: int) -> list[tuple[str, str]]:
    """The probe's report lines; a probe past ``PROBE_TIMEOUT_SECONDS`` is killed."""
    data = bytearray()
    deadline = time.monotonic() + PROBE_TIMEOUT_SECONDS
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            chunk = None
        if chunk:
            data.extend(chunk)
        elif chunk == b"":
            break
        elif time.monotonic() > deadline:
            os.kill(pid, 9)
            break
        else:
            time.sleep(0.01)
    os.close(fd)
    os.waitpid(pid, 0)
    lines = [line.split(" ", 1) for line in data.decode().splitlines()]
    return [(verdict, name) for verdict, name in lines]


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()
