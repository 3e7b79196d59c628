"""A fingerprint of the process-wide state a check can observe, so that a package whose
import changes it is never imported ahead by the worker (``export_worker.warm_imports``):
every later check, of any file, would inherit the change, and speed must never change a
verdict (a package setting ``torch.set_default_dtype(torch.float64)`` made unrelated files
fail and ``saveModel`` write float64 models).

``snapshot()`` is taken before and after an import (in the forked probe, and belt and braces
in the worker around its own warm imports); ``changes(before, after)`` names what differs.

What it covers:

* torch's global switches: default dtype and device, grad / inference / forward-grad mode,
  deterministic algorithms, thread counts, float32 matmul precision, the backends' flags
  (mkldnn, cudnn, cuBLAS/oneDNN TF32 and reduced precision, SDPA kernels, NNPACK, opt_einsum,
  the MHA fast path, BLAS/linalg backends, quantized engine), anomaly mode, autocast, the
  torch-function and dispatch mode stacks, print options, the autograd fallback mode;
* the random states a model's weights and inputs are drawn from (torch's, Python's
  ``random``, numpy's global one);
* every ``ConfigModule`` already imported (``torch._dynamo.config``,
  ``torch._inductor.config``, ``torch._export.config``, ``torch.fx.experimental._config``,
  ...), by value;
* registrations: the dispatcher's operators and its kernels per dispatch key, the Python
  kernels of ``torch.library`` (``_impls``, ``_defs``), fake/meta kernels
  (``register_fake``), custom op definitions, the decomposition tables, FakeTensor's op
  implementations, pytree node types, the global ``nn.Module`` hooks, and onnxscript's
  torchlib registry (the ONNX translations);
* patches, by object identity: the attributes of ``torch``, ``torch.Tensor`` (and
  ``TensorBase``), ``torch.nn.functional``, ``torch.nn`` and every ``nn`` module class,
  ``torch.onnx``, ``torch.export``, ``torch.fx``, ``torch.autograd``, ``torch.linalg``,
  ``torch.special``, ``torch.fft``, ``torch.nn.init``, ``builtins``; and which module object
  each name of ``sys.modules`` stands for;
* the process: ``os.environ``, the working directory, ``sys.path``, the import finders of
  ``sys.meta_path`` up to the standard path finder and those after it that existed before,
  ``sys.path_hooks``, the recursion limit, whether the garbage collector is enabled, the
  signal handlers (the job's timeouts use ``SIGALRM``);
* the levels of the ``torch``, ``onnxscript`` and ``onnx_ir`` loggers and
  ``logging.disable``: draft export collects its findings through torch's loggers;
* warnings filters whose action is ``"error"`` (a warning becomes an exception).

What it deliberately ignores, because no check can observe it:

* operators and kernels in a namespace that did not exist before the import
  (``torchvision::nms``): any code can reach them through ``torch.ops``, so a job watches
  for code that does without importing the package (``export_worker/namespace_watch.py``);
* what only the importing package's own code can reach: pytree
  registrations of types not defined by torch or the standard library (transformers'
  ``ModelOutput`` classes), the package's own ``sys.modules`` entries (transformers replaces
  ``sys.modules["transformers"]`` when its model modules load), an import finder appended
  after the standard path finder (it is asked only for names no installed package nor
  workspace file provides: transformers' legacy module aliases);
* an attribute that becomes the submodule of its name (``import torch._dynamo`` sets
  ``torch._dynamo``; torchvision's ``import torch.onnx.symbolic_helper`` replaces the alias
  of that name): the import system does so in any process that imports the submodule;
* config modules, loggers and ``sys.modules`` names that first appear with the import:
  they start with their defaults, as in a check that imports them;
* other warnings filters: every stage runs under ``warnings.simplefilter("ignore")``
  (``exporter/pipeline/runner.py``), and what a warning says is never part of a verdict;
* logging handlers, formatters and the levels of other libraries' loggers (transformers
  configures its own): they change what is printed, which a job sends to stderr;
* caches (``sys.path_importer_cache``, linecache, ``functools`` caches) and
  ``torch.fx.wrap``'s list (only ``symbolic_trace`` reads it; the checks use
  ``torch.export``);
* kernels a C++ extension registers over an existing one for the same operator and
  dispatch key: the dispatcher offers no cheap way to list them (``torch.library``'s
  Python registrations are covered).

Its cost: ≈20-25 ms per snapshot in a warmed-up worker (torch 2.13 and 2.14; two thirds of
it the dispatcher's registrations per dispatch key). The probe takes one before its imports
and one after each package whose modules' import ran code, so once per new package: 14 for
the ≈450 modules a transformers model brings (≈0.35 s, once per worker); the worker takes
two around its own warm imports.
"""

from __future__ import annotations

import builtins
import gc
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

#: additions to a table: refused, or ignored when ...
REFUSE = "refuse"
NEW_NAMESPACE = "new-namespace"  # ... the operator's namespace did not exist before
OWN_TYPE = "own-type"  # ... the type is not torch's nor the standard library's
MODULE_VALUE = "module-value"  # ... the new attribute holds a module
NEW_KEY = "new-key"  # ... always: only the keys present before are compared

SYS_MODULES = "sys.modules"


@dataclass
class Table:
    """Entries compared by value (an identity, for objects); ``tags`` marks the keys whose
    addition the policy ``OWN_TYPE`` or ``MODULE_VALUE`` ignores ("ignorable")."""

    entries: Mapping[Any, Any]
    additions: str = REFUSE
    tags: Mapping[Any, str] = field(default_factory=dict)


@dataclass
class Snapshot:
    values: dict[str, Any]
    tables: dict[str, Table]
    namespaces: frozenset[str]  # the dispatcher's operator namespaces


def snapshot() -> Snapshot:
    values: dict[str, Any] = {}
    tables: dict[str, Table] = {}
    _process(values, tables)
    torch = sys.modules.get("torch")
    namespaces: frozenset[str] = frozenset()
    if torch is not None:
        _torch_switches(torch, values)
        _random_states(torch, values)
        _configs(tables)
        namespaces = _registrations(torch, tables)
        _patches(torch, tables)
    _logging(tables, values)
    return Snapshot(values, tables, namespaces)


def changes(before: Snapshot, after: Snapshot, own: Collection[str] = ()) -> list[str]:
    """What differs, one phrase each (``torch.get_default_dtype(): torch.float32 ->
    torch.float64``); empty when nothing a check can observe changed. ``own``: the top-level
    packages imported meanwhile, whose own ``sys.modules`` entries may be replaced."""
    found = []
    for name, old in before.values.items():
        if name not in after.values:
            continue
        new = after.values[name]
        if not _equal(old, new):
            found.append(f"{name}: {_short(old)} -> {_short(new)}")
    for name, table in before.tables.items():
        if name not in after.tables:
            continue
        new = after.tables[name]
        if name == SYS_MODULES and own:
            table, new = _without(table, own), _without(new, own)
        found.extend(_table_changes(name, table, new, before.namespaces))
    return found


def describe(found: list[str], limit: int = 3) -> str:
    more = f" (and {len(found) - limit} more)" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more


# -- comparing ---------------------------------------------------------------------------


def _equal(old: Any, new: Any) -> bool:
    try:
        return bool(old == new)
    except Exception:  # e.g. arrays: compared by their text
        return repr(old) == repr(new)


def _short(value: Any, width: int = 60) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _table_changes(name: str, old: Table, new: Table, namespaces: frozenset[str]) -> list[str]:
    replaced = [key for key, value in old.entries.items()
                if key in new.entries and not _equal(value, new.entries[key])
                and not (old.additions == MODULE_VALUE and new.tags.get(key) == "ignorable")]
    removed = [key for key in old.entries if key not in new.entries]
    added = [key for key in new.entries if key not in old.entries
             and not _ignorable(old.additions, key, new.tags.get(key, ""), namespaces)]
    found = []
    for verb, keys in (("changed", replaced), ("removed", removed), ("added", added)):
        if keys:
            shown = ", ".join(sorted(map(str, keys))[:3])
            more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
            found.append(f"{name}: {verb} {shown}{more}")
    return found


def _without(table: Table, packages: Collection[str]) -> Table:
    return Table({name: value for name, value in table.entries.items()
                  if str(name).partition(".")[0] not in packages}, table.additions, table.tags)


def _ignorable(policy: str, key: Hashable, tag: str, namespaces: frozenset[str]) -> bool:
    if policy == NEW_NAMESPACE:  # keys are operator names, "aten::add.Tensor"
        return _namespace(str(key)) not in namespaces
    if policy in (OWN_TYPE, MODULE_VALUE):
        return tag == "ignorable"
    return policy == NEW_KEY


def _identities(items: Iterable[tuple[Hashable, Any]]) -> dict[Hashable, int]:
    return {key: id(value) for key, value in items}


def _call(values: dict[str, Any], name: str, getter: Callable[[], Any]) -> None:
    try:
        values[name] = getter()
    except Exception:  # not in this torch: nothing to compare
        pass


# -- the parts ---------------------------------------------------------------------------


def _process(values: dict[str, Any], tables: dict[str, Table]) -> None:
    tables["os.environ"] = Table(dict(os.environ))
    _call(values, "os.getcwd()", os.getcwd)
    values["sys.path"] = list(sys.path)
    # A finder appended after the standard PathFinder is asked only for the names no
    # installed package nor workspace file provides (transformers' own legacy aliases).
    finders = [_object_name(finder) for finder in sys.meta_path]
    standard = next((index for index, finder in enumerate(sys.meta_path)
                     if finder is _path_finder()), len(finders) - 1)
    values["sys.meta_path"] = finders[:standard + 1]
    tables["sys.meta_path (after PathFinder)"] = Table(dict.fromkeys(finders[standard + 1:]),
                                                       NEW_KEY)
    values["sys.path_hooks"] = [id(hook) for hook in sys.path_hooks]
    values["sys.getrecursionlimit()"] = sys.getrecursionlimit()
    values["gc.isenabled()"] = gc.isenabled()
    tables["signal handlers"] = Table(_identities(
        (number.name, signal.getsignal(number)) for number in signal.valid_signals()
        if isinstance(number, signal.Signals)))
    tables["builtins"] = Table(_identities(vars(builtins).items()))
    tables[SYS_MODULES] = Table(_identities(list(sys.modules.items())), NEW_KEY)
    values["warnings.filters (error)"] = [
        entry for entry in warnings.filters if entry[0] == "error"]


def _object_name(thing: Any) -> str:
    kind = thing if isinstance(thing, type) else type(thing)
    return f"{kind.__module__}.{kind.__qualname__} at {id(thing):#x}"


def _path_finder() -> Any:
    import importlib.machinery

    return importlib.machinery.PathFinder


def _torch_switches(torch: Any, values: dict[str, Any]) -> None:
    C = torch._C
    getters: dict[str, Callable[[], Any]] = {
        "torch.get_default_dtype()": torch.get_default_dtype,
        "torch.get_default_device()": lambda: str(torch.get_default_device()),
        "torch.is_grad_enabled()": torch.is_grad_enabled,
        "torch.is_inference_mode_enabled()": torch.is_inference_mode_enabled,
        "forward-mode AD": C._is_fwd_grad_enabled,
        "torch.are_deterministic_algorithms_enabled()":
            torch.are_deterministic_algorithms_enabled,
        "deterministic algorithms: warn only":
            torch.is_deterministic_algorithms_warn_only_enabled,
        "deterministic: fill uninitialized memory":
            C._get_deterministic_fill_uninitialized_memory,
        "torch.get_num_threads()": torch.get_num_threads,
        "torch.get_num_interop_threads()": torch.get_num_interop_threads,
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
        "torch.is_anomaly_enabled()": torch.is_anomaly_enabled,
        "torch.is_anomaly_check_nan_enabled()": torch.is_anomaly_check_nan_enabled,
        "torch.is_autocast_enabled('cpu')": lambda: torch.is_autocast_enabled("cpu"),
        "torch.get_autocast_dtype('cpu')": lambda: torch.get_autocast_dtype("cpu"),
        "torch.is_autocast_cache_enabled()": torch.is_autocast_cache_enabled,
        "autocast (any device)": C._is_any_autocast_enabled,
        "torch function modes": C._len_torch_function_stack,
        "torch dispatch modes": C._len_torch_dispatch_stack,
        "torch function enabled": C._is_torch_function_enabled,
        "autograd multithreading": C._is_multithreading_enabled,
        "autograd view replay": C._is_view_replay_enabled,
        "autograd fallback mode": C._get_autograd_fallback_mode,
        "torch.backends.opt_einsum.enabled": lambda: torch.backends.opt_einsum.enabled,
        "torch.backends.opt_einsum.strategy": lambda: torch.backends.opt_einsum.strategy,
        "torch.backends.mha.get_fastpath_enabled()":
            torch.backends.mha.get_fastpath_enabled,
        "torch print options": lambda: dict(vars(torch._tensor_str.PRINT_OPTS)),
    }
    for flag in ("mkldnn_enabled", "mkldnn_deterministic", "cudnn_enabled", "cudnn_benchmark",
                 "cudnn_deterministic", "cudnn_allow_tf32", "cublas_allow_tf32",
                 "cublas_allow_fp16_reduced_precision_reduction",
                 "cublas_allow_bf16_reduced_precision_reduction",
                 "cublas_allow_fp16_accumulation", "cpu_allow_fp16_reduced_precision_reduction",
                 "onednn_allow_tf32", "flash_sdp_enabled", "mem_efficient_sdp_enabled",
                 "math_sdp_enabled", "cudnn_sdp_enabled", "overrideable_sdp_enabled",
                 "math_sdp_allow_fp16_bf16_reduction", "sdp_priority_order", "nnpack_enabled",
                 "qengine", "blas_preferred_backend", "linalg_preferred_backend"):
        getter = getattr(C, f"_get_{flag}", None)
        if getter is not None:
            getters[f"torch backends: {flag}"] = getter
    for backend, operation in (("generic", "all"), ("cuda", "all"), ("cuda", "matmul"),
                               ("cuda", "conv"), ("cuda", "rnn"), ("mkldnn", "all"),
                               ("mkldnn", "matmul"), ("mkldnn", "conv"), ("mkldnn", "rnn")):
        getters[f"fp32 precision: {backend} {operation}"] = _fp32_precision(C, backend,
                                                                           operation)
    for name, getter in getters.items():
        _call(values, name, getter)


def _fp32_precision(C: Any, backend: str, operation: str) -> Callable[[], Any]:
    return lambda: C._get_fp32_precision_getter(backend, operation)


def _random_states(torch: Any, values: dict[str, Any]) -> None:
    import random

    values["torch random state"] = bytes(torch.random.get_rng_state().numpy())
    values["Python random state"] = random.getstate()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        _call(values, "numpy random state",
              lambda: tuple(item.tobytes() if hasattr(item, "tobytes") else item
                            for item in numpy_random.get_state()))


def _configs(tables: dict[str, Table]) -> None:
    config_module = sys.modules.get("torch.utils._config_module")
    kind = getattr(config_module, "ConfigModule", None)
    if kind is None:
        return
    for name, module in list(sys.modules.items()):
        if isinstance(module, kind):
            try:
                tables[name] = Table(module.get_config_copy())
            except Exception:
                continue


def _namespace(name: str) -> str:
    """"aten::add.Tensor" and torch.library's "aten/add.Tensor/CPU": "aten"."""
    return name.partition("::")[0].partition("/")[0]


def _op_table(names: Iterable[str]) -> Table:
    return Table(dict.fromkeys(names, True), NEW_NAMESPACE)


def _registrations(torch: Any, tables: dict[str, Table]) -> frozenset[str]:
    C = torch._C
    op_names = C._dispatch_get_all_op_names()
    tables["dispatcher operators"] = _op_table(op_names)
    for key in C.DispatchKey.__members__:
        try:
            registered = C._dispatch_get_registrations_for_dispatch_key(key)
        except Exception:
            continue
        if registered:
            tables[f"{key} kernels"] = _op_table(registered)
    library = sys.modules.get("torch.library")
    if library is not None:
        tables["torch.library impls"] = _op_table(getattr(library, "_impls", ()))
        tables["torch.library defs"] = _op_table(getattr(library, "_defs", ()))
    registry = getattr(sys.modules.get("torch._library.simple_registry"), "singleton", None)
    if registry is not None:
        fake = {}  # entries are made on lookup too: only those with a kernel count
        for name, holder in list(getattr(registry, "_data", {}).items()):
            kernel = getattr(getattr(holder, "fake_impl", None), "kernel", None)
            if kernel is not None:
                fake[name] = id(kernel)
        tables["fake kernels"] = Table(fake, NEW_NAMESPACE)
    custom = sys.modules.get("torch._library.custom_ops")
    if custom is not None:
        tables["custom ops"] = _op_table(dict(getattr(custom, "OPDEFS", {})))
    decomp = sys.modules.get("torch._decomp")
    if decomp is not None:
        for kind, table in list(getattr(decomp, "global_decomposition_table", {}).items()):
            tables[f"{kind} decompositions"] = _overload_table(table)
    fake_impls = sys.modules.get("torch._subclasses.fake_impls")
    if fake_impls is not None:
        tables["FakeTensor op implementations"] = _overload_table(
            getattr(fake_impls, "op_implementations_dict", {}))
    torchlib = sys.modules.get("onnxscript.function_libs.torch_lib.registration")
    default = getattr(getattr(torchlib, "default_registry", None), "_registry", None)
    if isinstance(default, dict):
        tables["onnxscript torchlib"] = Table(
            {name: (id(function), len(function.overloads), len(function.complex))
             for name, function in default.items()},
            NEW_NAMESPACE)
    pytree = sys.modules.get("torch.utils._pytree")
    if pytree is not None:
        tables["pytree nodes"] = _type_table(getattr(pytree, "SUPPORTED_NODES", {}))
        tables["pytree constants"] = _type_table(
            dict.fromkeys(getattr(pytree, "CONSTANT_NODES", ())))
    fx_pytree = sys.modules.get("torch.fx._pytree")
    if fx_pytree is not None:
        tables["fx pytree nodes"] = _type_table(getattr(fx_pytree, "SUPPORTED_NODES", {}))
    hooks = sys.modules.get("torch.nn.modules.module")
    if hooks is not None:
        for name, value in vars(hooks).items():
            if name.startswith("_global_") and isinstance(value, dict):
                tables[f"nn.Module {name}"] = Table(_identities(value.items()))
    return frozenset(map(_namespace, op_names))


def _overload_table(table: Mapping[Any, Any]) -> Table:
    return Table({str(op): id(function) for op, function in list(table.items())}, NEW_NAMESPACE)


def _type_table(table: Mapping[Any, Any]) -> Table:
    entries = {}
    tags = {}
    for kind, value in list(table.items()):
        key = f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind)}"
        entries[key] = (id(kind), id(value))
        tags[key] = "" if _torch_or_standard(kind) else "ignorable"
    return Table(entries, OWN_TYPE, tags)


def _torch_or_standard(kind: Any) -> bool:
    top = str(getattr(kind, "__module__", "")).partition(".")[0]
    return top in ("torch", "builtins") or top in sys.stdlib_module_names


#: modules whose attributes a package could patch (when imported)
PATCHABLE_MODULES = ("torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.onnx",
                     "torch.export", "torch.fx", "torch.autograd", "torch.linalg",
                     "torch.special", "torch.fft", "torch.random", "torch.serialization")


def _patches(torch: Any, tables: dict[str, Table]) -> None:
    for name in PATCHABLE_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            tables[name] = _attribute_table(vars(module), name)
    classes: list[tuple[str, type]] = [("torch.Tensor", torch.Tensor),
                                       ("torch._C.TensorBase", torch._C.TensorBase)]
    nn = sys.modules.get("torch.nn")
    if nn is not None:
        classes += [(f"torch.nn.{name}", value) for name, value in list(vars(nn).items())
                    if isinstance(value, type) and value.__module__.startswith("torch.")]
    for name, kind in classes:
        tables[name] = _attribute_table(vars(kind))


def _attribute_table(namespace: Mapping[str, Any], owner: str = "") -> Table:
    """Attributes by identity; ``owner``'s attributes that are its submodules of the same
    name are marked: importing ``torch.onnx.symbolic_helper`` sets one, as it would in the
    check that imports it."""
    items = list(namespace.items())
    return Table(_identities(items), MODULE_VALUE,
                 {name: "ignorable" for name, value in items if isinstance(value, ModuleType)
                  and getattr(value, "__name__", None) == f"{owner}.{name}"})


def _logging(tables: dict[str, Table], values: dict[str, Any]) -> None:
    values["logging.disable level"] = logging.root.manager.disable
    levels: dict[Hashable, Any] = {"root": logging.root.level}
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and \
                name.partition(".")[0] in ("torch", "onnxscript", "onnx_ir"):
            levels[name] = (logger.level, logger.disabled, logger.propagate)
    tables["torch loggers"] = Table(levels, NEW_KEY)
