"""What a check does with the ``torch.onnx.export`` calls of the user's code
(docs/export-calls.md): while a target loads (its module imported, a notebook's cells run, its
function called), every call is intercepted, in any thread.

* A function's own call that is the target (the call made from the target's line) is caught
  with its arguments, bound as ``torch.onnx.export`` binds them, and the function is unwound
  there. The call is the target's wherever the function's code swallows the unwinding
  (``except BaseException``, a bare ``except``) and in a thread the function starts; every
  later call unwinds too.
* Every other call exports as the plain exporter does and returns its ``ONNXProgram`` (or
  raises what it raises), so the code after it runs as it does without the check; but what
  it writes (``f``, ``artifacts_dir``), what ``ONNXProgram.save`` and ``onnx.save`` write,
  goes to the check's scratch directory, and reads of those paths see the copies there
  (exporter/pipeline/scratch_files.py). Nothing lands in the user's tree.

What the call's arguments mean is the installed torch's: the example inputs are split as
``torch/onnx/_internal/exporter/_compat.py`` splits them (a trailing dict is the keyword
inputs) and ``dynamic_axes`` is converted by torch's own converter, as ``export_compat`` does.
The plain exporter runs inside the caller's context; the target's call is recorded with it (grad
and inference mode, autocast, default dtype and device: exporter/pipeline/call_context.py) and
with the train/eval mode of each of the model's modules, both as they are at the call: the
code that unwinding runs (a ``with`` block's exit, a ``finally``) may change them.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import io
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import torch

from exporter.pipeline.call_context import CallContext
from exporter.pipeline.example_inputs import as_torch_splits
from exporter.pipeline.scratch_files import ORIGINAL_STAT, ScratchFiles
from exporter.pipeline.timers import exporter_working
from exporter.source.targets import ANY_LINE


@dataclass(frozen=True)
class InterceptedCall:
    """A ``torch.onnx.export`` call's arguments, every parameter bound (defaults included),
    the context it was made in, and the train/eval mode of each module of its model then."""

    arguments: dict[str, Any]
    context: CallContext
    module_modes: tuple[tuple[torch.nn.Module, bool], ...] = ()
    caller: tuple[Path, int] | None = None  # the file and line of the torch.onnx.export call

    def __getitem__(self, name: str) -> Any:
        return self.arguments[name]

    def restore_module_modes(self) -> None:
        """Each module of the model back in the mode it was in at the call."""
        for module, training in self.module_modes:
            module.training = training


@dataclass(frozen=True)
class CallSite:
    """The target's call: made from ``line`` of ``function`` (a top-level function of
    ``path``), or of code nested in it (a lambda, a local function, in another thread);
    ``ANY_LINE``: the first call made from any of its lines."""

    path: Path
    function: str
    line: int


class _Reached(BaseException):
    """Unwinds the user's function from the intercepted call (a BaseException, so that the
    user's ``except Exception`` does not swallow it; what does swallow it changes nothing: the
    call is recorded before)."""


class Interception:
    """The state of one target's loading: its call once reached, the errors the other calls'
    real exports raised, the scratch directory their files went to."""

    def __init__(self, site: CallSite | None) -> None:
        self.site = site
        self.scratch = ScratchFiles()
        self.reached: InterceptedCall | None = None
        self.export_errors: list[BaseException] = []
        # the target's own call, when torch.onnx.export's signature refused its arguments:
        # the error and the line of the call
        self.refused_target: tuple[TypeError, int] | None = None
        self._codes: frozenset[CodeType] = frozenset()
        self._running = False

    def call_reaching(self, function: Callable[[], Any]) -> InterceptedCall | None:
        """Run ``function()`` until it makes the target's call: that call; None when it
        returns (or raises) without making it. Raises what the function raises before."""
        self._codes = _nested_codes(inspect.unwrap(function))
        self._running = True
        try:
            function()
        except _Reached:
            pass
        except (Exception, SystemExit):
            if self.reached is None:
                raise
        finally:
            self._running = False
        return self.reached

    def raised_by_export(self, error: BaseException) -> bool:
        """Whether ``error`` is (or was raised from) what an intercepted call's export raised."""
        seen: set[int] = set()
        current: BaseException | None = error
        while current is not None and id(current) not in seen:
            if any(current is raised for raised in self.export_errors):
                return True
            seen.add(id(current))
            current = current.__cause__ or current.__context__
        return False

    def _is_target(self, frame: FrameType | None) -> bool:
        """Whether the call comes from the target's line: the innermost frame of the target's
        function (or of code nested in it) is at that line."""
        site = self.site
        if site is None or not self._running:
            return False
        filename = str(site.path)
        while frame is not None:
            code = frame.f_code
            if code in self._codes or (code.co_filename == filename
                                       and code.co_name == site.function):
                return site.line in (ANY_LINE, frame.f_lineno)
            frame = frame.f_back
        return False

    def export(self, original: Callable[..., Any], frame: FrameType | None,
               args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            bound = _EXPORT_SIGNATURE.bind(*args, **kwargs)
        except TypeError as error:  # as torch.onnx.export's own signature raises it
            self.export_errors.append(error)
            if frame is not None and self._is_target(frame):
                self.refused_target = (error, frame.f_lineno)
            raise
        if self._running and self.reached is not None:
            raise _Reached  # the target's call was made: what follows does not run
        if self._is_target(frame):
            bound.apply_defaults()
            model = bound.arguments["model"]
            modes = tuple((module, module.training) for module in model.modules()) \
                if isinstance(model, torch.nn.Module) else ()
            caller = (Path(frame.f_code.co_filename), frame.f_lineno) \
                if frame is not None else None
            self.reached = InterceptedCall(dict(bound.arguments), CallContext.current(), modes,
                                           caller)
            raise _Reached
        arguments = bound.arguments
        if isinstance(arguments.get("f"), (str, bytes, os.PathLike)):
            arguments["f"] = self.scratch.file(arguments["f"])
        arguments["artifacts_dir"] = self.scratch.folder(arguments.get("artifacts_dir", "."))
        _redirect_runtime_reads()
        try:
            with exporter_working():  # the exporter's time, not the model code's
                return original(*bound.args, **bound.kwargs)
        except (Exception, SystemExit) as error:
            self.export_errors.append(error)
            raise


_EXPORT_SIGNATURE = inspect.signature(torch.onnx.export)
_ACTIVE: Interception | None = None


def _nested_codes(function: Any) -> frozenset[CodeType]:
    """The code of ``function`` and of every function, lambda and comprehension in it."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, CodeType):
        return frozenset()
    found: set[CodeType] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        if current not in found:
            found.add(current)
            pending += [c for c in current.co_consts if isinstance(c, CodeType)]
    return frozenset(found)


class _Replacements:
    """Attributes replaced while an interception is active, restored afterwards. Each
    replacement looks like what it replaces to the user's code (name, docstring, module,
    ``__wrapped__`` and signature): code that inspects ``torch.onnx.export`` before calling it
    (timm's ``onnx_export`` asks its signature for ``dynamic_shapes``) does what it does
    without the check."""

    def __init__(self) -> None:
        self._saved: list[tuple[object, str, Any]] = []

    def replace(self, owner: object, name: str, value: Any) -> None:
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        setattr(owner, name, _looking_like(original, value))

    def restore(self) -> None:
        while self._saved:
            owner, name, value = self._saved.pop()
            setattr(owner, name, value)


def _looking_like(original: Any, replacement: Any) -> Any:
    """``replacement`` with ``original``'s name, docstring, module, attributes and signature
    (``__signature__`` too: ``inspect.getfullargspec`` does not follow ``__wrapped__``)."""
    functools.update_wrapper(replacement, original)
    try:
        replacement.__signature__ = inspect.signature(original)
    except (TypeError, ValueError):  # a builtin without one: its wrapper says so
        pass
    return replacement


_RUNTIME: _Replacements | None = None


def _redirect_runtime_reads() -> None:
    """``onnxruntime.InferenceSession(path)`` reads the copy too: replaced once a call is
    about to write (onnxruntime is imported then, not by every check: it starts a thread)."""
    global _RUNTIME
    if _RUNTIME is not None or _ACTIVE is None:
        return
    _RUNTIME = _Replacements()
    import onnxruntime

    session_class = onnxruntime.InferenceSession
    original_init = session_class.__init__

    def init(self: Any, path_or_bytes: Any, *args: Any, **kwargs: Any) -> None:
        active = _ACTIVE
        if active is not None:
            path_or_bytes = active.scratch.seen(path_or_bytes)
        original_init(self, path_or_bytes, *args, **kwargs)

    _RUNTIME.replace(session_class, "__init__", init)


@contextmanager
def intercepting(site: CallSite | None) -> Iterator[Interception]:
    """While the block runs, every ``torch.onnx.export`` call is intercepted (the module
    attribute is replaced, and so the names modules bind it to while the block runs: a
    ``from torch.onnx import export`` of the user's module too), and the writes and reads
    of the scratch directory are redirected. ``site``: the target's own call, if any."""
    global _ACTIVE, _RUNTIME
    import onnx
    import onnx.checker

    interception = Interception(site)
    original_export = torch.onnx.export
    original_save = torch.onnx.ONNXProgram.save
    original_save_model = onnx.save_model
    original_check = onnx.checker.check_model
    original_load_model = onnx.load_model
    original_open = builtins.open
    original_hook = threading.excepthook

    def export(*args: Any, **kwargs: Any) -> Any:
        active = _ACTIVE
        if active is None:
            return original_export(*args, **kwargs)
        return active.export(original_export, sys._getframe(1), args, kwargs)

    def save(self: Any, destination: Any, *args: Any, **kwargs: Any) -> None:
        active = _ACTIVE
        if active is not None:
            destination = active.scratch.file(destination)
            _redirect_runtime_reads()
        original_save(self, destination, *args, **kwargs)

    def save_model(proto: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        active = _ACTIVE
        if active is not None:
            f = active.scratch.file(f)
            _redirect_runtime_reads()
        original_save_model(proto, f, *args, **kwargs)

    def load_model(f: Any, *args: Any, **kwargs: Any) -> Any:
        active = _ACTIVE  # the copy's path: its external data is read from beside it
        return original_load_model(active.scratch.seen(f) if active is not None else f,
                                   *args, **kwargs)

    def check_model(model: Any, *args: Any, **kwargs: Any) -> None:
        active = _ACTIVE
        original_check(active.scratch.seen(model) if active is not None else model,
                       *args, **kwargs)

    def open_(file: Any, *args: Any, **kwargs: Any) -> Any:
        active = _ACTIVE
        return original_open(active.scratch.seen(file) if active is not None else file,
                             *args, **kwargs)

    def stat(path: Any, *args: Any, dir_fd: int | None = None, **kwargs: Any) -> Any:
        active = _ACTIVE
        if active is not None and dir_fd is None:
            path = active.scratch.seen(path)
        return ORIGINAL_STAT(path, *args, dir_fd=dir_fd, **kwargs)

    def excepthook(arguments: Any) -> None:
        if not isinstance(arguments.exc_value, _Reached):  # a thread that made the call
            original_hook(arguments)

    replaced = _Replacements()
    for owner, name, value in ((torch.onnx, "export", export),
                               (torch.onnx.ONNXProgram, "save", save),
                               (onnx, "save_model", save_model), (onnx, "save", save_model),
                               (onnx, "load_model", load_model), (onnx, "load", load_model),
                               (onnx.checker, "check_model", check_model),
                               (builtins, "open", open_), (io, "open", open_),
                               (os, "stat", stat), (threading, "excepthook", excepthook)):
        replaced.replace(owner, name, value)
    _ACTIVE = interception
    try:
        yield interception
    finally:
        _ACTIVE = None
        replaced.restore()
        if _RUNTIME is not None:
            _RUNTIME.restore()
            _RUNTIME = None
        interception.scratch.remove()


def export_inputs(call: InterceptedCall) -> tuple[tuple, dict[str, Any]]:
    """The example inputs, split as torch.onnx.export splits them."""
    args = call["args"]
    if isinstance(args, torch.Tensor):
        args = (args,)
    return as_torch_splits(tuple(args), call["kwargs"])


def converted_dynamic_shapes(call: InterceptedCall, model: torch.nn.Module, args: tuple,
                             kwargs: dict[str, Any]) -> tuple[Any, tuple, dict[str, Any]]:
    """``dynamic_shapes``, or what torch makes of ``dynamic_axes`` when only that is given
    (with the inputs reordered as torch reorders them). Raises what torch raises."""
    if call["dynamic_shapes"] is not None or call["dynamic_axes"] is None:
        return call["dynamic_shapes"], args, kwargs
    import warnings

    from torch.onnx._internal.exporter import _dynamic_shapes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ONNX602 says it statically
        shapes, args, converted_kwargs = _dynamic_shapes.from_dynamic_axes_to_dynamic_shapes(
            model, args, kwargs, dynamic_axes=call["dynamic_axes"],
            input_names=call["input_names"], output_names=set(call["output_names"] or ()))
    return shapes, args, dict(converted_kwargs or {})
