"""The model as it was built, again after each eager run onnxlens makes of it.

onnxlens runs the model in eager PyTorch for its comparisons (the load stage's forward, the
dynamic stage's runs at other sizes); the plain exporter never runs it first. A forward may
change the model's own state: count its calls, update a buffer in place, make a cache on its
first call, append to a list. The exporter must see the model as the user's export call gives
it, and every eager run must start from there (torch.export itself puts such state back after
tracing), so ``state_kept`` undoes what a run changed: each module's attributes beyond
``nn.Module``'s own (containers are copied, their items kept: lists, tuples, dicts, sets and
their subclasses, ``OrderedDict``, ``defaultdict``, ``deque``), the attributes of the plain
objects they hold (a state object whose counter the forward increments), its parameters,
buffers and submodules as registered, and the values of every tensor changed in place. An
output that is one of those tensors (a buffer the forward updates and returns) is copied
before, so the run's outputs keep the values it gave.

A lazy module (``nn.LazyLinear``) is the exception: its first forward gives its parameters their
size, as the export would, and it keeps what that forward made.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import logging
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

#: the attributes every module has (its registries, hooks, ``training``): not the model's state
_MODULE_OWN = frozenset(vars(nn.Module()))
#: the registries restored entry by entry (what a forward registered or replaced)
_REGISTRIES = ("_parameters", "_buffers", "_modules")
#: how deep nested containers are copied and compared (a container holding itself ends there)
_DEPTH = 6
_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)
#: values with a ``__dict__`` whose attributes are not the model's state
_NOT_STATE = (nn.Module, torch.Tensor, type, types.ModuleType, types.FunctionType,
              types.BuiltinFunctionType, types.MethodType)


@dataclass
class ModelState:
    """A model's state beyond its tensors' values (its modules' attributes and registries,
    the objects they hold), taken once and put back as often as needed. No tensor is copied:
    it costs what the model's Python objects do, not its weights."""

    states: list[_ModuleState | _ObjectState]

    @classmethod
    def of(cls, model: nn.Module) -> ModelState:
        modules = [_ModuleState.of(module) for module in model.modules()
                   if not _lazy(module) and not _scripted(module)]
        return cls([*modules, *_ObjectState.held_by(modules)])

    def restore(self) -> None:
        for state in self.states:
            try:
                state.restore()
            except Exception:  # a module whose registries cannot be written: left as it is
                logging.getLogger(__name__).debug("a module's state was not put back",
                                                  exc_info=True)


@contextlib.contextmanager
def state_kept(model: nn.Module, as_built: ModelState | None = None
               ) -> Iterator[TensorStates]:
    """Run the body (an eager run of ``model``), then put ``model``'s state back as it was;
    given ``as_built`` (taken before the first run), the run starts from it and ends there
    again: what the capture changed in objects torch.export does not restore (a counter in an
    object a submodule's list holds) is undone too. What it yields keeps the run's outputs
    apart from the state put back (``outputs_apart``)."""
    if as_built is not None:
        as_built.restore()
    state = as_built if as_built is not None else ModelState.of(model)
    tensors = TensorStates.of(model, state.states)
    try:
        yield tensors
    finally:
        state.restore()
        tensors.restore()


def _lazy(module: nn.Module) -> bool:
    return isinstance(module, LazyModuleMixin) and module.has_uninitialized_params()


def _scripted(module: nn.Module) -> bool:
    """A TorchScript module keeps its attributes and registries in TorchScript's own objects
    (read-only wrappers): its tensors' values are put back, nothing else."""
    return isinstance(module, torch.jit.ScriptModule)


def _is_container(value: Any) -> bool:
    return isinstance(value, _CONTAINERS)


def _copied(value: Any, depth: int = 0) -> Any:
    """``value`` with its containers rebuilt, of the same type (the items themselves kept);
    a container that cannot be copied is kept as it is."""
    if depth >= _DEPTH or not _is_container(value):
        return value
    try:
        if type(value) is tuple:
            return tuple(_copied(item, depth + 1) for item in value)
        result = copy.copy(value)  # a defaultdict keeps its factory, a deque its maxlen
        if isinstance(result, dict):
            for key in list(result):
                result[key] = _copied(result[key], depth + 1)
        elif isinstance(result, (list, collections.deque)):
            for index, item in enumerate(list(result)):
                result[index] = _copied(item, depth + 1)
        return result
    except Exception:  # a subclass whose copy fails
        return value


def _fingerprint(value: Any, depth: int = 0) -> Any:
    """What identifies ``value``'s content: the identity of each item, container by container
    (an item rebound or a container changed in place changes it)."""
    if depth >= _DEPTH or not _is_container(value):
        return id(value)
    if isinstance(value, dict):
        return ("dict", tuple((id(key), _fingerprint(item, depth + 1))
                              for key, item in value.items()))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(id(item) for item in value)))
    return (type(value).__name__, tuple(_fingerprint(item, depth + 1) for item in value))


def _items(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.values()
    elif _is_container(value):
        yield from value


def _tensors_in(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < _DEPTH and _is_container(value):
        for item in _items(value):
            yield from _tensors_in(item, depth + 1)


def _plain_objects_in(value: Any, depth: int = 0) -> Iterator[Any]:
    """The objects with attributes of their own that ``value`` is or holds (not modules,
    tensors, classes, functions or modules of code)."""
    if depth >= _DEPTH:
        return
    if _is_container(value):
        for item in _items(value):
            yield from _plain_objects_in(item, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, _NOT_STATE):
        yield value


@dataclass
class _ModuleState:
    module: nn.Module
    attributes: dict[str, Any]  # beyond nn.Module's own, containers copied
    fingerprints: dict[str, Any]
    registries: dict[str, dict[str, Any]]
    non_persistent: set[str]

    @classmethod
    def of(cls, module: nn.Module) -> _ModuleState:
        own = {name: value for name, value in vars(module).items() if name not in _MODULE_OWN}
        return cls(module, {name: _copied(value) for name, value in own.items()},
                   {name: _fingerprint(value) for name, value in own.items()},
                   {name: dict(getattr(module, name)) for name in _REGISTRIES},
                   set(module._non_persistent_buffers_set))

    def restore(self) -> None:
        now = vars(self.module)
        for name in [name for name in now if name not in _MODULE_OWN]:
            if name not in self.attributes:
                del now[name]  # made by the run
        for name, value in self.attributes.items():
            if name not in now or _fingerprint(now[name]) != self.fingerprints[name]:
                now[name] = _copied(value)  # the saved copy stays as taken, for the next time
        for name, entries in self.registries.items():
            registry = getattr(self.module, name)
            if registry.keys() != entries.keys() \
                    or any(registry[key] is not item for key, item in entries.items()):
                registry.clear()
                registry.update(entries)
        if self.module._non_persistent_buffers_set != self.non_persistent:
            self.module._non_persistent_buffers_set.clear()
            self.module._non_persistent_buffers_set.update(self.non_persistent)


@dataclass
class _ObjectState:
    """The attributes of a plain object a module holds (and of those it holds in turn)."""

    value: Any
    attributes: dict[str, Any]  # containers copied
    fingerprints: dict[str, Any]

    @classmethod
    def held_by(cls, modules: list[_ModuleState]) -> list[_ObjectState]:
        found: dict[int, _ObjectState] = {}
        pending = [(item, 0) for state in modules for value in state.attributes.values()
                   for item in _plain_objects_in(value)]
        while pending:
            value, depth = pending.pop()
            if id(value) in found or depth >= _DEPTH:
                continue
            try:
                own = dict(vars(value))
            except TypeError:
                continue
            found[id(value)] = cls(value, {name: _copied(item) for name, item in own.items()},
                                   {name: _fingerprint(item) for name, item in own.items()})
            pending += [(item, depth + 1) for attribute in own.values()
                        for item in _plain_objects_in(attribute)]
        return list(found.values())

    def restore(self) -> None:
        now = vars(self.value)
        if now.keys() == self.attributes.keys() and all(
                _fingerprint(now[name]) == print_ for name, print_ in self.fingerprints.items()):
            return
        now.clear()
        now.update({name: _copied(value) for name, value in self.attributes.items()})


@dataclass
class TensorStates:
    """The values of the model's tensors, for those a run changes in place (``_version``
    counts a tensor's in-place changes; an inference tensor, made under
    ``torch.inference_mode``, counts none: its values are compared)."""

    saved: list[tuple[torch.Tensor, int | None, torch.Tensor]]

    @classmethod
    def of(cls, model: nn.Module, modules: list[_ModuleState | _ObjectState]
           ) -> TensorStates:
        found: dict[int, torch.Tensor] = {}
        candidates = [*model.parameters(), *model.buffers()]
        for state in modules:
            for value in state.attributes.values():
                candidates.extend(_tensors_in(value))
        for tensor in candidates:
            if nn.parameter.is_lazy(tensor) or tensor.is_meta:
                continue  # no values to change (weights="none"), or a lazy size to come
            found.setdefault(id(tensor), tensor)
        with torch.no_grad():
            return cls([(tensor, _version(tensor), tensor.detach().clone())
                        for tensor in found.values()])

    def outputs_apart(self, outputs: Any) -> Any:
        """``outputs`` with a copy of each tensor that shares memory with the model's own (a
        buffer the forward updates and returns, or a view of it): putting the state back
        would otherwise change the outputs the run gave."""
        shared = {_storage(tensor) for tensor, _, _ in self.saved} - {None}

        def apart(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and _storage(value) in shared:
                return value.detach().clone()
            return value

        return torch.utils._pytree.tree_map(apart, outputs)

    def restore(self) -> None:
        with torch.no_grad():
            for tensor, version, values in self.saved:
                if not _changed(tensor, version, values):
                    continue
                try:
                    _put_back(tensor, values)
                except RuntimeError:  # a tensor that cannot be written (a view of itself)
                    logging.getLogger(__name__).debug("a tensor's values were not put back",
                                                      exc_info=True)


def _storage(tensor: torch.Tensor) -> int | None:
    """Where a dense tensor's values live (its views share it); None for a tensor that has no
    storage of its own (sparse, meta)."""
    if tensor.layout != torch.strided or tensor.is_meta:
        return None
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
        return None


def _changed(tensor: torch.Tensor, version: int | None, values: torch.Tensor) -> bool:
    if version is None:  # an inference tensor: its values tell
        return tensor.shape != values.shape or tensor.dtype != values.dtype \
            or not torch.equal(tensor, values)
    return tensor._version != version


def _put_back(tensor: torch.Tensor, values: torch.Tensor) -> None:
    if tensor.shape == values.shape and tensor.dtype == values.dtype:
        # an inference tensor changes only in inference mode (which inference_mode(False)
        # would not keep grad-free: it enables grad)
        with torch.inference_mode() if tensor.is_inference() else contextlib.nullcontext():
            tensor.copy_(values)
    else:
        tensor.data = values.clone()


def _version(tensor: torch.Tensor) -> int | None:
    return None if tensor.is_inference() else tensor._version
