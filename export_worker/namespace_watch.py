"""Operators a warm import registered, reached by a check whose code never imports their
package: the warm imports' one leak, closed by checking that target again without them.

A package the worker imports ahead (``export_worker/warm_imports.py``) may register operators
in a namespace of its own (``torchvision::nms``, ``newop_ns::twice``). ``global_state`` lets
such a package be imported ahead, since its own code is what calls them; but
``torch.ops.<namespace>`` reaches them from any code. A check whose code uses
``torch.ops.newop_ns.twice`` without importing the package would find the operator in the
warm worker, where a plain process raises ``AttributeError`` (a wrong cause: ONNX201 instead
of ONNX004).

A job watches for it: it records the packages its code imports (every ``import`` statement and
``importlib.import_module`` call, cached modules too) and every first lookup of a namespace a
warm import registered (``torch.ops.<namespace>``; the worker's cached lookups are dropped at
the job's start) by code other than the toolchain's (torch's decompositions and onnxlens's
caches enumerate every namespace). A namespace looked up while none of the packages whose
warm import registered it was imported is *reached*; the job is then checked again in a worker
without warm imports (``export_worker/process.py``), whose answer is the verdict. Looking a
namespace up through a package that imported its owner at its own import, ahead, counts as
reached too: a second check costs time, never a verdict.

A ``torch.library.Library`` of such a namespace made by such code is reached too: defining it
again raises where a plain process would not. Not covered: ``torch._C`` lookups by name.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

#: a namespace -> the top-level packages whose warm import registered it
Owners = Mapping[str, frozenset[str]]


def operator_namespaces() -> frozenset[str]:
    """The dispatcher's operator namespaces now (``aten``, ``prims``, ``torchvision``...);
    none before torch is imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return frozenset()
    return frozenset(name.partition("::")[0] for name in torch._C._dispatch_get_all_op_names())


class NamespaceWatch:
    """Started in a job process before the user's code runs; never stopped (the process
    ends with its job)."""

    def __init__(self, owners: Owners) -> None:
        self.owners = dict(owners)
        self.imported: set[str] = set()  # top-level names the job's code imported
        self._reached: dict[str, frozenset[str]] = {}

    def start(self) -> None:
        if not self.owners:
            return
        import torch

        self._watch_imports()
        ops = torch.ops
        for namespace in self.owners:
            ops.__dict__.pop(namespace, None)  # so that a lookup reaches __getattr__
        look_up: Callable[[Any, str], Any] = type(ops).__getattr__
        watch = self

        def watched_lookup(self: Any, name: str) -> Any:
            owners = watch.owners.get(name)
            if owners is not None and not owners & watch.imported \
                    and not _toolchain(sys._getframe(1).f_globals.get("__name__", "")):
                watch._reached.setdefault(name, owners)
            return look_up(self, name)

        type(ops).__getattr__ = watched_lookup
        self._watch_libraries(torch.library.Library)

    def _watch_libraries(self, library: Any) -> None:
        """A ``torch.library.Library(ns, ...)`` of a warm import's namespace, by code that did
        not import it: ``"DEF"`` raises there (the namespace is taken), not in a plain
        process."""
        create = library.__init__
        watch = self

        def watched_create(self: Any, ns: str, kind: str, *args: Any, **kwargs: Any) -> None:
            owners = watch.owners.get(ns)
            if owners is not None and not owners & watch.imported \
                    and not _toolchain(sys._getframe(1).f_globals.get("__name__", "")):
                watch._reached.setdefault(ns, owners)
            create(self, ns, kind, *args, **kwargs)

        library.__init__ = watched_create

    def reached(self) -> dict[str, frozenset[str]]:
        """The namespaces looked up while no package that registered them was imported."""
        return dict(self._reached)

    def _watch_imports(self) -> None:
        plain_import = builtins.__import__
        import_module = importlib.import_module
        imported = self.imported

        def watched_import(name: str, globals: Any = None, locals: Any = None,
                           fromlist: Any = (), level: int = 0) -> Any:
            if level == 0 and name:
                imported.add(name.partition(".")[0])
            return plain_import(name, globals, locals, fromlist, level)

        def watched_import_module(name: str, package: str | None = None) -> Any:
            if not name.startswith("."):
                imported.add(name.partition(".")[0])
            return import_module(name, package)

        builtins.__import__ = watched_import
        importlib.import_module = watched_import_module


#: code that looks every namespace up (torch.export's decompositions, onnxlens's caches): in
#: a plain process it would see the same packages' namespaces only had they been imported,
#: which changes what it enumerates, not what the user's code can call
_TOOLCHAIN = frozenset({"torch", "onnxscript", "onnx_ir", "onnx", "onnxruntime", "exporter",
                        "export_worker"})


def _toolchain(module: str) -> bool:
    return module.partition(".")[0] in _TOOLCHAIN


def describe(reached: Mapping[str, frozenset[str]]) -> str:
    """``torch.ops.newop_ns (registered by newop_pkg)``, for the worker's log."""
    return ", ".join(f"torch.ops.{namespace} (registered by {', '.join(sorted(owners))})"
                     for namespace, owners in sorted(reached.items()))
