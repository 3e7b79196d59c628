"""Stage 1: import the module, evaluate the annotation, build the target, run eager forward."""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
import types
from pathlib import Path
from typing import Any

import torch

from exporter.config.runtimes import PRECISIONS, RUNTIMES, unknown_names
from exporter.findings.diagnostics import Location, Range
from exporter.pipeline.context import CheckContext, Loaded
from exporter.pipeline.converted_axes import ConvertedAxes, converted_axes
from exporter.pipeline.example_inputs import as_torch_splits, fresh_copy
from exporter.pipeline.intercepted_calls import (
    CallSite,
    InterceptedCall,
    Interception,
    converted_dynamic_shapes,
    export_inputs,
    intercepting,
)
from exporter.pipeline.model_state import ModelState, state_kept
from exporter.pipeline.stages.base import StageFailed
from exporter.pipeline.target_options import EVALUATED_KEYS
from exporter.pipeline.user_modules import ImportedFile, import_file
from exporter.source.targets import ANY_LINE
from exporter.source.traces import exception_frames

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # torch.onnx colours its errors' steps


def _describe(error: BaseException) -> str:
    """The user's own message as it is (the reports escape what a terminal would act on)."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _first_sentence(error: BaseException) -> str:
    """``error``'s type and the first sentence of its message, without torch.onnx's colours
    (torch.onnx.export's errors go on with the steps of exporting and what to do next)."""
    described = _ANSI_ESCAPE.sub("", _describe(error))
    end = described.find(". ")
    return described[:end + 1] if end > 0 else described


def run(ctx: CheckContext) -> None:
    target = ctx.target
    # Every torch.onnx.export the user's code makes while the target loads is intercepted:
    # the target's own call is caught, the others export as the plain exporter does, writing
    # into a scratch directory (exporter/pipeline/intercepted_calls.py)
    site = CallSite(target.path, target.symbol, target.export_call_line) \
        if target.export_call_line is not None else None
    with intercepting(site) as interception:
        imported = _import(ctx)
        _evaluate_options(ctx, imported.module)
        model, args, kwargs, dynamic_shapes = _build(ctx, _definition(ctx, imported),
                                                     interception)
    # An export call's model runs in the call's own context from here on, as the plain
    # exporter runs it (exporter/pipeline/call_context.py; the runner enters it around the
    # later stages)
    call = interception.reached
    call_context = call.context if call is not None else None
    if call_context is not None and call_context.describe():
        ctx.summary.call_context = call_context.describe()
    as_built = ModelState.of(model)
    try:
        with call_context.entered() if call_context is not None else contextlib.nullcontext():
            eager_outputs = _eager_forward(ctx, model, args, kwargs, as_built)
    finally:  # also for a model that fails in eager PyTorch (ONNX004)
        ctx.summary.parameters = _parameter_count(model)
    given = call["model"] if call is not None else None
    ctx.loaded = Loaded(imported.module, model, args, kwargs, dynamic_shapes, eager_outputs,
                        call_context, _converted_axes(ctx, call), as_built,
                        given if isinstance(given, torch.export.ExportedProgram) else None)


def _import(ctx: CheckContext) -> ImportedFile:
    try:
        imported = import_file(ctx.target.path, ctx.workspace, ctx.sources)
    except SyntaxError as error:
        ctx.report("ONNX002", f"Importing the module failed: {_describe(error)}",
                   _syntax_location(ctx, error))
        raise StageFailed from error
    except (Exception, SystemExit) as error:
        ctx.report("ONNX002", f"Importing the module failed: {_describe(error)}",
                   ctx.map_frames(exception_frames(error)))
        raise StageFailed from error
    return imported


def _definition(ctx: CheckContext, imported: ImportedFile) -> Any:
    """The class or function the target's own definition made. The module holds a later
    binding of the same name instead when one follows (two top-level ``class A``): then the
    class built at the target's lines is taken; a rebound function cannot be reached."""
    target = ctx.target
    if target.rebound_at is None:
        factory = getattr(imported.module, target.symbol, None)
        if factory is None:
            ctx.report("ONNX003", f"`{target.symbol}` is not defined after importing the module.")
            raise StageFailed
        return factory
    if target.kind == "class":
        built = [cls for (name, line), cls in imported.classes.items()
                 if name == target.symbol
                 and target.first_line <= line <= target.definition.start.line]
        if built:
            return built[-1]
    else:
        function = _plain_function(ctx, imported.module)
        if function is not None:
            return function
    ctx.report("ONNX001", f"`{target.symbol}` is bound again at line {target.rebound_at}, so "
               "after the import the name no longer refers to this definition and it cannot "
               "be checked; give one of them another name.")
    raise StageFailed


def _syntax_location(ctx: CheckContext, error: SyntaxError) -> Location | None:
    if not error.filename or not error.lineno:
        return None
    column = max(error.offset or 1, 1)
    end = error.end_offset if error.end_offset and error.end_offset > column else column + 1
    if error.end_lineno and error.end_lineno != error.lineno:
        end = column + 1
    return Location(Path(error.filename), Range.of(error.lineno, column, error.lineno, end))


def _device_context(ctx: CheckContext) -> contextlib.AbstractContextManager[Any]:
    return torch.device("meta") if ctx.weightless else contextlib.nullcontext()


def _evaluate_options(ctx: CheckContext, module: types.ModuleType) -> None:
    namespace = vars(module)
    failed = False
    for key in EVALUATED_KEYS:
        option = ctx.target.options.get(key)
        if option is None:
            continue
        try:
            with _device_context(ctx):
                ctx.options.set(key, eval(compile(option.source, str(ctx.target.path),
                                                  "eval"), namespace))
        except (Exception, SystemExit) as error:
            ctx.report("ONNX001", f"Evaluating `{key}={option.source}` raised {_describe(error)}",
                       Location(ctx.target.path, option.range))
            failed = True
    if "training" in ctx.target.options:
        ctx.options.set("training", ctx.target.literal("training"))
    if failed:
        raise StageFailed
    _check_option_types(ctx)


def _check_option_types(ctx: CheckContext) -> None:
    expectations: dict[str, tuple[type | tuple[type, ...], str]] = {
        "args": (tuple, "a tuple of example inputs, e.g. `args=(torch.randn(2, 8),)`"),
        "kwargs": (dict, "a dict of keyword example inputs"),
        "init": (dict, "a dict of constructor keyword arguments"),
        "custom_translation_table": (dict, "a dict {torch op: onnxscript function}"),
        "opset": (int, "an int"),
        "atol": ((int, float), "a number"),
        "rtol": ((int, float), "a number"),
    }
    bad = False
    for key, (kind, description) in expectations.items():
        value = ctx.options.get(key)
        if key in ctx.options.given and not isinstance(value, kind):
            ctx.report("ONNX001", f"`{key}` must be {description}, not {type(value).__name__}.",
                       ctx.option_location(key))
            bad = True
    for key, known, noun in (("runtimes", RUNTIMES, "runtime"),
                             ("precision", PRECISIONS, "precision")):
        if key in ctx.options.given:
            bad = _check_names(ctx, key, known, noun) or bad
    if bad:
        raise StageFailed


def _check_names(ctx: CheckContext, key: str, known: dict[str, str], noun: str) -> bool:
    """Whether the pragma's list of names ``key`` (``runtimes``, ``precision``) is bad
    (reported); a good one becomes a tuple."""
    value = getattr(ctx.options, key)
    unknown = unknown_names(value, known)
    if unknown is None:
        problem = f"must be a list of {noun} names, not {type(value).__name__}"
    elif unknown:
        problem = f"names no {noun}: {', '.join(map(repr, unknown))}"
    else:
        setattr(ctx.options, key, tuple(dict.fromkeys(value)))
        return False
    ctx.report("ONNX001", f"`{key}` {problem} (known: {', '.join(known)}).",
               ctx.option_location(key))
    return True


def _plain_function(ctx: CheckContext, module: types.ModuleType) -> Any:
    """The target's own function when a later definition took its name: rebuilt from its
    code object in the module's namespace, as ``def`` would make it. Only for a function with
    no decorator and no parameters (what ``def`` adds beyond the code is then nothing)."""
    target = ctx.target
    if target.first_line != target.definition.start.line:
        return None  # decorated
    try:
        code = compile(ctx.sources.read(target.path), str(target.path), "exec")
    except (SyntaxError, ValueError, OSError):
        return None
    for constant in code.co_consts:
        if (isinstance(constant, types.CodeType) and constant.co_name == target.symbol
                and constant.co_firstlineno == target.first_line
                and not (constant.co_argcount or constant.co_kwonlyargcount
                         or constant.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS))
                and not constant.co_freevars):
            return types.FunctionType(constant, vars(module), target.symbol)
    return None


def _build(ctx: CheckContext, factory: Any, interception: Interception
           ) -> tuple[torch.nn.Module, tuple, dict[str, Any], Any]:
    """The model in eval (or training) mode, its example args and kwargs, its dynamic shapes."""
    try:
        with _device_context(ctx):
            built = _call_factory(ctx, factory, interception)
    except StageFailed:
        raise
    except (Exception, SystemExit) as error:
        what = "Constructing" if ctx.target.kind == "class" else "Calling"
        ctx.report("ONNX003", f"{what} `{ctx.target.symbol}` raised {_describe(error)}",
                   ctx.map_frames(exception_frames(error)))
        raise StageFailed from error
    model, args, kwargs = built
    if not isinstance(model, torch.nn.Module):
        ctx.report("ONNX003", f"`{ctx.target.symbol}` gave a {type(model).__name__}, "
                   "not a torch.nn.Module.")
        raise StageFailed
    if ctx.target.export_call_line is None:  # an export call's modules keep their modes
        model = model.train() if ctx.options.training else model.eval()
    dynamic_shapes = None
    if "dynamic_shapes" in ctx.options.given:
        dynamic_shapes = ctx.options.dynamic_shapes
    elif ctx.target.exportable_module:
        dynamic_shapes = model.dynamic_shapes()
    for key in ("input_names", "output_names"):
        if key not in ctx.options.given and ctx.target.exportable_module:
            ctx.options.set(key, getattr(model, key)())
    return model, args, kwargs, dynamic_shapes


def _call_factory(ctx: CheckContext, factory: Any,
                  interception: Interception) -> tuple[Any, tuple, dict[str, Any]]:
    if ctx.target.export_call_line is not None:
        return _from_export_call(ctx, factory, interception)
    args = ctx.options.args
    kwargs = ctx.options.kwargs
    if ctx.target.kind == "class":
        model = factory(**(ctx.options.init or {}))
    else:
        produced = factory()
        model = produced
        if isinstance(produced, tuple):
            if not 2 <= len(produced) <= 3:
                ctx.report("ONNX003", f"`{ctx.target.symbol}()` returned a tuple of "
                           f"{len(produced)}; return a module, (module, args) or "
                           "(module, args, kwargs).")
                raise StageFailed
            model = produced[0]
            args = produced[1] if args is None else args
            if len(produced) == 3 and kwargs is None:
                kwargs = produced[2]
    if args is None and ctx.target.exportable_module and isinstance(model, torch.nn.Module):
        args, kwargs_from_model = model.example_arguments()
        _refuse_inputs_not_a_tuple(ctx, args, from_module=True)
        kwargs = kwargs if kwargs is not None else kwargs_from_model
    if args is None and kwargs is not None:
        args = ()  # a model whose inputs are all keywords: torch.onnx.export(m, (), kwargs=...)
    if args is None:
        ctx.report("ONNX001", f"`{ctx.target.name}` has no example inputs: add "
                   "`args=(...)` or `kwargs={...}` to the pragma (or return (module, args) "
                   "from the function).",
                   Location(ctx.target.path, ctx.target.pragma or ctx.target.definition))
        raise StageFailed
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    split_args, split_kwargs = as_torch_splits(args, kwargs)
    if len(split_args) < len(args):  # at the pragma's inputs, else the target's name
        _refuse_keywords_forward_cannot_take(
            ctx, model, split_args, split_kwargs,
            Location(ctx.target.path, ctx.target.pragma) if ctx.options.args is not None
            and ctx.target.pragma is not None else None)
    return model, split_args, split_kwargs


def _refuse_keywords_forward_cannot_take(ctx: CheckContext, model: Any, args: tuple,
                                         kwargs: dict[str, Any],
                                         where: Location | None) -> None:
    """torch.onnx.export read a dict last in ``args`` (with no keyword inputs given) as the
    keyword inputs ``kwargs``; when ``forward`` cannot take them so (a dict meant as its
    positional input), the model fails with the inputs the export gives it: said with the
    reason, where the eager run would only say that ``forward`` got an unexpected keyword."""
    if not isinstance(model, torch.nn.Module):
        return
    try:
        inspect.signature(model.forward).bind(*args, **kwargs)
    except TypeError as error:
        names = ", ".join(f"`{name}`" for name in kwargs)
        ctx.report("ONNX004", "The model fails with the example inputs as torch.onnx.export "
                   f"reads them: it takes the dict last in them as the keyword inputs "
                   f"({names}), and `forward` cannot take them so: {error}.", where,
                   hint="To give that dict as a positional input, end the inputs with an "
                   "empty dict of keyword inputs: `args=(..., {})`.")
        raise StageFailed from error
    except ValueError:  # no signature to bind to (a builtin): capture decides
        return


def _refuse_inputs_not_a_tuple(ctx: CheckContext, given: Any, *,
                               from_module: bool = False) -> None:
    """torch.onnx.export wraps one tensor given as ``args`` in a tuple and gives torch.export
    the rest as it is (an ExportableModule's ``example_arguments()`` without even that);
    torch.export takes only a tuple, so a list (which the TorchScript exporter took) or None
    stops the capture, and a dict fails before it, where torch.onnx reads the inputs by
    position: ONNX105, as the capture's own failures, said before the eager run (which would
    run the model with inputs the export never gives it)."""
    if isinstance(given, tuple) or (isinstance(given, torch.Tensor) and not from_module):
        return
    what = "None" if given is None else f"a {type(given).__name__}"
    reason = ("it reads the inputs by position and fails with `KeyError: -1`"
              if isinstance(given, dict) else "torch.export stops with \"Expecting `args` to be a "
              f"tuple of example positional inputs, got {type(given)}\"")
    if isinstance(given, torch.Tensor):
        reason = ("it is not wrapped in a tuple, as a tensor given as `args` is, and the "
                  "export fails")
    if from_module:
        message = ("torch.onnx.export takes the example inputs `example_arguments()` returns "
                   f"as a tuple, and `{ctx.target.symbol}.example_arguments()` returns {what} "
                   f"as them: {reason}.")
        hint = "Return `(args, kwargs)` with `args` a tuple: `return (x, y), None`."
    else:
        message = ("torch.onnx.export takes the example inputs `args` as a tuple (or one "
                   f"tensor), and this call gives {what}: {reason}.")
        hint = ("Give the inputs as a tuple: `(x, y)`, or `tuple(inputs)`; keyword inputs go "
                "in `kwargs={...}`.")
    ctx.report("ONNX105", message, hint=hint)
    raise StageFailed


def _from_export_call(ctx: CheckContext, function: Any,
                      interception: Interception) -> tuple[Any, tuple, dict[str, Any]]:
    """The model and inputs of the function's torch.onnx.export call at the target's line;
    the call's options become the check's (docs/export-calls.md)."""
    line = ctx.target.export_call_line
    the_call = "its first export call" if line == ANY_LINE else f"the export call at line {line}"
    try:
        call = interception.call_reaching(function)
    except (Exception, SystemExit) as error:
        if not interception.raised_by_export(error):
            raise
        if interception.refused_target is not None:  # the target's call itself
            refused, refused_line = interception.refused_target
            ctx.report("ONNX003", f"The torch.onnx.export call at line {refused_line} does "
                       f"not take its arguments ({_first_sentence(refused).rstrip('.')}): "
                       f"`{ctx.target.symbol}()` stops there, as it does when run.",
                       ctx.map_frames(exception_frames(error)))
            raise StageFailed from error
        # an earlier call, exported as the plain exporter does, failed: so does the script
        ctx.report("ONNX003", f"An earlier torch.onnx.export call raised "
                   f"{_first_sentence(error)} `{ctx.target.symbol}()` stops there, as it does "
                   f"when run, and never reaches {the_call}.",
                   ctx.map_frames(exception_frames(error)))
        raise StageFailed from error
    if call is None and line == ANY_LINE:
        ctx.report("ONNX001", f"`{ctx.target.name}` has no example inputs and made no "
                   "torch.onnx.export call: add `args=(...)` to the pragma, return (module, "
                   "args) from the function, or export in it.",
                   Location(ctx.target.path, ctx.target.pragma or ctx.target.definition))
        raise StageFailed
    if call is None:
        ctx.report("ONNX005", f"The export call at line {line} is not checked: "
                   f"`{ctx.target.symbol}()` returned without reaching it.")
        raise StageFailed
    model = call["model"]
    # each module as it was at the call (code run while unwinding, a `with` block's exit or a
    # `finally`, may have set another mode)
    call.restore_module_modes()
    program = model if isinstance(model, torch.export.ExportedProgram) else None
    if program is not None:  # exported as it is; eager PyTorch runs its module
        model = program.module()
    if not isinstance(model, torch.nn.Module):
        ctx.report("ONNX003", f"{the_call.capitalize()} exports a {type(model).__name__}; "
                   "onnxlens checks the export of a torch.nn.Module or an ExportedProgram.")
        raise StageFailed
    given = call["args"]
    _refuse_inputs_not_a_tuple(ctx, given)
    args, kwargs = export_inputs(call)
    if len(args) < (1 if isinstance(given, torch.Tensor) else len(given)):
        _refuse_keywords_forward_cannot_take(ctx, model, args, kwargs, None)
    if program is None:  # a program's dynamic dimensions are its own
        try:
            dynamic_shapes, args, kwargs = converted_dynamic_shapes(call, model, args, kwargs)
        except (Exception, SystemExit) as error:
            ctx.report("ONNX001", "torch.onnx.export cannot convert this call's "
                       f"`dynamic_axes` to `dynamic_shapes`: {_describe(error)}")
            raise StageFailed from error
        if dynamic_shapes is not None:
            ctx.options.set("dynamic_shapes", dynamic_shapes)
    for key, option in (("opset_version", "opset"), ("input_names", "input_names"),
                        ("output_names", "output_names"),
                        ("custom_translation_table", "custom_translation_table")):
        if call[key] is not None:
            ctx.options.set(option, call[key])
    ctx.options.set("training", model.training)  # torch.onnx.export keeps the modules' modes
    return model, args, kwargs


def _converted_axes(ctx: CheckContext, call: InterceptedCall | None) -> ConvertedAxes | None:
    """What torch's conversion of the call's ``dynamic_axes`` gave another input's entry."""
    if call is None or not isinstance(call["model"], torch.nn.Module):
        return None
    try:
        return converted_axes(call, call["model"], *export_inputs(call), ctx.sources)
    except Exception:  # only the messages' wording depends on it: never the check
        logging.getLogger(__name__).debug("explaining the dynamic_axes failed", exc_info=True)
        return None


_META_LIMITATIONS = ("meta tensor", "'Meta' backend", "meta device")


def _parameter_count(model: torch.nn.Module) -> int:
    """The model's parameters, once the forward ran: a lazy module's (``nn.LazyLinear``) are
    made by its first forward; one the forward did not reach has no size yet and is left out."""
    return sum(p.numel() for p in model.parameters()
               if not isinstance(p, torch.nn.parameter.UninitializedParameter))


def _needs_values(error: BaseException) -> bool:
    """Whether ``error`` is a meta tensor's lack of values, not a problem of the model."""
    text = str(error)
    return isinstance(error, (RuntimeError, NotImplementedError)) and any(
        phrase in text for phrase in _META_LIMITATIONS)


def _eager_forward(ctx: CheckContext, model: torch.nn.Module, args: tuple,
                   kwargs: dict[str, Any], as_built: ModelState) -> Any:
    """The model's outputs on a fresh copy of the example; a failure here ends the check
    (capture would only fail the same way)."""
    args, kwargs = fresh_copy(args, kwargs)
    try:
        # the exporter sees the model as built
        with torch.no_grad(), state_kept(model, as_built) as kept:
            return kept.outputs_apart(model(*args, **kwargs))
    except (Exception, SystemExit) as error:
        if ctx.weightless and _needs_values(error):
            # weights="none" runs the forward on meta tensors, which hold no values: code that
            # reads one (`.item()`, as transformers' mask helpers do outside tracing) cannot
            # run eagerly here but may export well. Capture decides; no eager outputs are
            # needed (the stages that compare them need real weights).
            return None
        ctx.report("ONNX004", f"The model fails in eager PyTorch with the example inputs: "
                   f"{_describe(error)}", ctx.map_frames(exception_frames(error)))
        raise StageFailed from error
