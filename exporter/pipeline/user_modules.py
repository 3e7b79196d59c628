"""Import the user's file as their own code would be imported, and forget it afterwards.

The file's directory and the workspace root are importable (as when the user runs their code
from the project root). Every module the import adds to ``sys.modules`` from the workspace is
removed again, so the next check sees edited files afresh.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.util
import linecache
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from exporter.source.notebooks import ipython_names, is_notebook
from exporter.source.text import Sources
from exporter.source.traces import is_library_path


def _module_name(path: Path, workspace: Path) -> str:
    try:
        relative = path.resolve().relative_to(workspace.resolve()).with_suffix("")
        parts = [part for part in relative.parts if part.isidentifier()]
        if len(parts) == len(relative.parts) and all(
            (workspace / Path(*relative.parts[:i]) / "__init__.py").exists()
            for i in range(1, len(relative.parts))
        ):
            return ".".join(relative.parts)
    except ValueError:
        pass
    stem = path.stem if path.stem.isidentifier() else "user_module"
    existing = sys.modules.get(stem)
    if existing is not None and not _is_under(existing, workspace):
        return f"_onnxlens_user_{stem}"
    return stem


def _is_under(module: ModuleType, root: Path) -> bool:
    filename = getattr(module, "__file__", None)
    if not filename or is_library_path(Path(filename)):
        return False
    try:
        Path(filename).resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


@contextmanager
def isolated_import_path(path: Path, workspace: Path) -> Iterator[None]:
    """Make the file's directory and the workspace importable; undo on exit."""
    saved_path = list(sys.path)
    before = set(sys.modules)
    for entry in (str(workspace), str(path.parent)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path[:] = saved_path
        # Forget what the check imported from the workspace, so edits are seen next time;
        # modules imported before the check (e.g. by the program using onnxlens) stay.
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if module is None or _is_under(module, workspace) or name.startswith("_onnxlens_user_"):
                sys.modules.pop(name, None)


@contextmanager
def command_line_of(path: Path) -> Iterator[None]:
    """``sys.argv`` as ``python path`` sets it, while the user's code runs: a script that reads
    its command line (``argparse``'s ``parse_args()`` in a marked ``main``) sees none, as when
    the user runs it, not the worker's own options. Restored on exit."""
    saved = sys.argv
    sys.argv = [str(path)]
    try:
        yield
    finally:
        sys.argv = saved


@dataclass
class ImportedFile:
    """The module, and every class its top level built, by (name, first line): a class whose
    name a later statement rebinds is no longer reachable through the module."""

    module: ModuleType
    classes: dict[tuple[str, int], type] = field(default_factory=dict)


def import_file(path: Path, workspace: Path, sources: Sources) -> ImportedFile:
    """Execute ``path`` as a module (inside :func:`isolated_import_path`): the editor's text
    of it when ``sources`` holds that."""
    classes: dict[tuple[str, int], type] = {}
    with _classes_built_in(path, classes):
        module = _import(path, workspace, sources)
    return ImportedFile(module, classes)


@contextmanager
def _classes_built_in(path: Path, found: dict[tuple[str, int], type]) -> Iterator[None]:
    """Record the classes that code of ``path`` builds while the block runs."""
    build_class = builtins.__build_class__
    filename = str(path)

    def recording(body: Any, name: str, *bases: Any, **keywords: Any) -> Any:
        built = build_class(body, name, *bases, **keywords)
        code = getattr(body, "__code__", None)
        if code is not None and code.co_filename == filename:
            found[(name, code.co_firstlineno)] = built
        return built

    builtins.__build_class__ = recording  # type: ignore[assignment]
    try:
        yield
    finally:
        builtins.__build_class__ = build_class


class _NotebookLoader(importlib.abc.Loader):
    """Only gives a notebook's module a spec; :func:`_import` executes the cells."""

    def exec_module(self, module: ModuleType) -> None:  # pragma: no cover - never called
        raise ImportError("a notebook is executed by onnxlens, not imported")


def _import(path: Path, workspace: Path, sources: Sources) -> ModuleType:
    name = _module_name(path, workspace)
    spec = importlib.util.spec_from_file_location(
        name, path, loader=_NotebookLoader() if is_notebook(path) else None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if not sources.unsaved(path) and not is_notebook(path):
        spec.loader.exec_module(module)
    else:  # an unsaved editor buffer or a notebook's cells: run them under the file's name
        text = sources.read(path)
        if is_notebook(path):  # tracebacks quote the cell's line, not the .ipynb's JSON
            linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
            # `get_ipython()`, as in Jupyter: a stand-in whose methods do nothing
            module.__dict__.update(ipython_names(text))
        exec(compile(text, str(path), "exec"), module.__dict__)
    return module
