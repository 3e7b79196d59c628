"""Warm third-party imports: the installed packages a check imported (``transformers``,
``einops``, ...) are imported by the worker itself before it forks the next check, so that a
check re-imports only the user's own modules, as a warm Python process running the plain
exporter by hand does (docs/architecture.md §4).

Only packages from site-packages are learned, never the workspace's modules. A package is
imported into the worker only after a forked probe imported it and

* stayed on one thread (the worker forks, so it must run no threads), and
* changed no global state a check can observe (``export_worker.global_state``: torch's
  default dtype, its flags and registrations, patched torch functions, the random state,
  ``os.environ``...): every later check, of any file, would inherit the change, and speed
  must never change a verdict. A package setting ``torch.set_default_dtype(torch.float64)``
  when imported made unrelated files fail and ``saveModel`` write float64 models; such a
  package is imported by each check that uses it, as without the shortcut.

A package one of whose modules changed such state is refused whole; a module that started
a thread is refused with the modules below it (importing them imports it).
Belt and braces, the worker compares the same fingerprint before and after its own warm
imports; if it changed anyway, it forks nothing more from that state: at the next job
request it exits with ``RESTART_STATUS``. When the installed packages change (a
site-packages directory or a learned package's own file changes), the worker cannot forget
a module either, and exits the same way; the client starts a new worker and runs the job
there.

The shortcut ``warm-imports`` (``ONNXLENS_SHORTCUTS_OFF=warm-imports``) switches it off.
"""

from __future__ import annotations

import gc
import importlib
import itertools
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from export_worker import global_state
from export_worker.namespace_watch import operator_namespaces

#: a probe whose imports take longer is killed and its packages are not imported
PROBE_TIMEOUT_SECONDS = 120.0


#: never imported ahead: onnxruntime starts a thread when imported, and the worker forks
#: (every job imports it itself, docs/architecture.md §4); openvino imported by a probe would
#: run its telemetry (writes in ~/intel, a report over the network), which the deploy stage
#: keeps from running (exporter/pipeline/openvino_runner.py)
NEVER_AHEAD = frozenset({"onnxruntime", "openvino", "openvino_telemetry"})


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
        #: packages refused whole (importing them changed global state): their modules
        #: learned later are not probed again
        self._refused_packages: set[str] = set()
        self.pending: set[str] = set()
        self._stamps: dict[str, _Stamp | None] = {}
        #: why this process must fork no more checks: its own warm imports changed state a
        #: check can observe, though the probe saw no change (belt and braces)
        self.tainted: str | None = None
        #: the operator namespaces the warm imports registered, and whose import did it
        #: (``safe`` is sorted: torch's own submodules, learned too, come first as "torch")
        self.namespace_owners: dict[str, frozenset[str]] = {}

    def learn(self, names: Iterable[str]) -> None:
        if self.enabled:
            self.pending |= {name for name in names if _top(name) not in self._refused_packages
                             } - set(self.imported) - set(self.refused)

    def import_pending(self) -> None:
        """Import what was learned, as far as a forked probe could do so on one thread and
        without changing the global state a check can observe."""
        names, self.pending = sorted(self.pending), set()
        if not names or self.tainted:
            return
        started = time.perf_counter()
        safe, refused = _probe(names)
        if refused:
            self.refused.update(refused)
            self._refused_packages.update(_top(name) for name, why in refused.items()
                                          if why.startswith(_CHANGED))
            by_reason: dict[str, list[str]] = {}
            for name, why in refused.items():
                by_reason.setdefault(why, []).append(name)
            for why, modules in by_reason.items():
                print(f"onnxlens worker: not importing {_packages(modules)} ahead: {why}",
                      file=sys.stderr)
        self.pending = set(names) - set(safe) - set(refused)  # after a refusal: next time
        if not safe:
            return
        before = global_state.snapshot()
        for top, group in itertools.groupby(safe, key=_top):
            namespaces = operator_namespaces()
            for name in group:
                try:
                    importlib.import_module(name)
                except BaseException as error:  # the probe imported it; be safe all the same
                    self.refused[name] = f"{type(error).__name__}: {error}"
                    continue
                self.imported.append(name)
                self._stamp(name)
            # the namespaces it registered (export_worker/namespace_watch.py)
            for namespace in operator_namespaces() - namespaces:
                self.namespace_owners[namespace] = frozenset({top})
        changed = global_state.changes(before, global_state.snapshot(), set(map(_top, safe)))
        del before
        if changed:
            self.tainted = (f"importing {_packages(safe)} ahead changed what a check can "
                            f"observe, though the probe saw no change: "
                            f"{global_state.describe(changed)}")
            print(f"onnxlens worker: {self.tainted}; a new worker takes over at the next "
                  "check", file=sys.stderr)
            return
        gc.collect()
        gc.freeze()  # as after the warm-up: out of every job's collections
        print(f"onnxlens worker: imported {_packages(safe)} ahead of the next checks "
              f"({time.perf_counter() - started:.2f} s)", file=sys.stderr)

    def restart_reason(self) -> str | None:
        """Why this worker must not fork the next check (a new one must take over), if
        it must not."""
        if self.tainted:
            return self.tainted
        if self.stale():
            return "the installed packages changed"
        return None

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


#: the reasons a probe gives, by its report's verdict
_WHY = {
    "failed": "importing it failed",
    "threads": "importing it starts a thread, and the worker forks",
    "changed": "importing it changes global state a check can observe ({})",
}
_CHANGED = _WHY["changed"].partition("(")[0]


def _top(name: str) -> str:
    return name.partition(".")[0]


def _probe(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import ``names`` package by package in a forked child: (the modules of the packages
    it imported on one thread and without an observable change before the first that was
    not, the refused ones: why). A package whose modules' import changed global state is
    refused whole; a module whose import started a thread is refused with its submodules."""
    names = sorted(names)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            _probe_child(names, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    report = _read_until_exit(read_end, pid)
    checked = {name for verdict, name, _ in report if verdict == "checked"}
    tried = [(verdict, name) for verdict, name, _ in report
             if verdict in ("ok", "failed", "threads")]
    safe = [name for verdict, name in tried if verdict == "ok" and _top(name) in checked]
    refused: dict[str, str] = {}
    for verdict, name, detail in report:
        if verdict in ("failed", "threads"):
            refused[name] = _WHY[verdict]
        if verdict == "threads":  # importing its submodules imports it
            refused.update({module: f"{_WHY[verdict]}, as {name} does" for module in names
                            if module.startswith(f"{name}.")})
        elif verdict == "changed":  # ``name``: a top-level package
            refused.update({module: _WHY[verdict].format(detail) for module in names
                            if _top(module) == name})
    stopped = bool(report) and report[-1][0] in ("threads", "changed")  # on purpose
    if len(tried) < len(names) and not stopped:  # the probe died or hung on the next name
        refused[names[len(tried)]] = "importing it ended its process"
    return safe, refused


def _probe_child(names: list[str], pipe: int) -> None:
    """One line per module (``ok``, ``failed``, ``threads``: the end), then per package
    ``checked``, or ``changed`` with what changed (the end). The fingerprint is compared
    once per package, and only if importing its modules ran code (≈20 ms each)."""
    before = global_state.snapshot()
    for top, modules in itertools.groupby(names, key=_top):
        ran = False
        for name in modules:
            ran = ran or name not in sys.modules  # else importing it runs no code
            try:
                importlib.import_module(name)
                verdict = "ok"
            except BaseException:
                verdict = "failed"
            if _thread_count() > 1:
                os.write(pipe, f"threads {name}\n".encode())
                return
            os.write(pipe, f"{verdict} {name}\n".encode())
        if ran:
            after = global_state.snapshot()
            changed = global_state.changes(before, after, {top})
            if changed:
                detail = " ".join(global_state.describe(changed).split())
                os.write(pipe, f"changed {top} {detail}\n".encode())
                return
            before = after
        os.write(pipe, f"checked {top}\n".encode())


def _read_until_exit(fd: int, pid: int) -> list[tuple[str, str, str]]:
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
    lines = [line.split(" ", 2) for line in data.decode(errors="replace").splitlines()]
    return [(line[0], line[1], line[2] if len(line) > 2 else "") for line in lines
            if len(line) >= 2]


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()
