"""The plain exporter's verdict on one target: what a user gets from
``torch.onnx.export(..., dynamo=True)`` and ONNX Runtime, with nothing of onnxlens in between.

    python -m tests.corpus.truth FILE TARGET_NAME [--root DIR]

prints one JSON object (a :class:`TruthResult`). Only the target's *annotation* is read with
onnxlens's static discovery (``exporter.source.targets.discover``, which executes nothing);
every option is evaluated here, in the module's namespace, and the export runs exactly as a
user would write it: import the file, build the model and its inputs, ``model.eval()``, export
with only the options the annotation gives, create a CPU ``InferenceSession`` from the model
proto, run it on fresh copies of the example inputs and compare with eager PyTorch (run on its
own fresh copies, with a copy of the model taken before the export; an output that depends on
random numbers drawn in both, PyTorch's program and the ONNX model, by shape only: ONNX
Runtime draws its own). When the annotation
declares dynamic dimensions, eager PyTorch and ONNX Runtime run again at the lower bound of
every declared range (never below 2: torch.export treats sizes 0 and 1 apart) and at a larger
size, the example inputs tiled (or cut) along every declared axis so that their values stay
valid (ids in range, masks keep their pattern); a size at which eager PyTorch itself fails is
not the exporter's problem and is skipped. A named dimension (a ``Dim``, a string,
``Dim.DYNAMIC``; not ``Dim.AUTO``) that the plain exporter's own program fixed to one size fails.
Where its program (``range_constraints``) holds for a narrower range than declared
(torch.onnx.export narrows it silently, from torch.export's suggested fixes, and its model does
not check it), both runtimes run again at the sizes just outside that range, within the
declared one: ONNX Runtime failing or differing from PyTorch there fails; PyTorch itself
failing there is the model's own bound, not the exporter's problem. Every declared axis whose
declared range holds 1 (a string, ``Dim.AUTO``, ``Dim.DYNAMIC``, a ``Dim`` with ``min`` 0 or 1)
runs at 1 too, the usual deployment batch, judged the same way. An export call's target is
judged inside the call itself, in its caller's context (``_in_the_call``), then the function
is unwound; a call whose model is an ExportedProgram exports it as it is, eager PyTorch runs
its ``module()``, and its declared dimensions are the axes its graph keeps as one symbol, over
its ``range_constraints``.

:func:`run_truth` runs that in a subprocess (the module's ``main``) with a timeout and caches
the result under ``~/.cache/onnxlens/truth/``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import functools
import importlib.util
import inspect
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.source.python_syntax import parse_python
from tests.corpus.common import (
    CACHE,
    PRECISION_VARIABLE,
    REPO,
    RUNTIMES_VARIABLE,
    dumps,
    file_hash,
    from_json,
    sha256,
    versions,
)
from tests.corpus.truth_process import run_truth_process

# The phases in the order they run; a failure is attributed to the first phase that fails.
LOAD_PHASES = ("import", "annotation", "build", "eager")
EXPORT_PHASES = ("capture", "translate", "export")  # "export": raised outside torch's wrappers
PHASES = (*LOAD_PHASES, *EXPORT_PHASES, "checker", "ort_session", "ort_run", "mismatch",
          "dynamic")
PHASE_MARK = "onnxlens-corpus-phase:"
DEFAULT_TIMEOUT = 300.0
# (atol, rtol) of the comparison by dtype when the target gives none: onnxlens's documented
# defaults; integers and booleans must match exactly.
TOLERANCES = {"float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2), "float32": (1e-4, 1e-3),
              "float64": (1e-7, 1e-5)}
_MESSAGE_LINES = 6
#: the runtime names the `runtimes` key takes (docs/runtimes.md)
#: the share of an output's largest magnitude each precision may lose (docs/runtimes.md)
_PRECISION_BUDGETS = {"fp16": 1e-2, "int8": 5e-2}
_RUNTIMES = ("ort-cpu", "openvino-cpu", "ort-web", "nnapi", "coreml", "cuda", "tensorrt")
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)(?:, in (\S+))?')


@dataclass
class Frame:
    path: str
    line: int
    function: str


@dataclass
class ErrorInfo:
    type: str
    message: str  # the first lines
    frames: list[Frame]  # the traceback, outermost first
    message_frames: list[Frame] = field(default_factory=list)  # `File "...", line N` in the text


@dataclass
class Failure:
    phase: str
    errors: list[ErrorInfo]  # the exception raised, then its __cause__ (or __context__) chain

    @property
    def headline(self) -> str:
        if not self.errors:
            return self.phase
        first = self.errors[-1] if self.phase in EXPORT_PHASES else self.errors[0]
        line = first.message.splitlines()[0] if first.message else ""
        return f"{first.type}: {line}"[:200]


@dataclass
class OutputCheck:
    index: int
    dtype: str
    eager_shape: list[int]
    ort_shape: list[int]
    atol: float
    rtol: float
    max_abs: float = 0.0
    max_rel: float = 0.0
    non_finite_only_in_ort: bool = False
    matched: bool = True


@dataclass
class SizeRun:
    sizes: dict[str, int]  # "input[axis]" -> size, for the declared axes
    why: str = ""  # "lower bound", "larger"
    outputs: list[OutputCheck] = field(default_factory=list)
    problem: str = ""  # why it did not match ("" when it did)


@dataclass
class MobileTruth:
    """What ONNX Runtime's mobile usability checker makes of the plain model for NNAPI or
    CoreML: the nodes of the graph it judges (after ONNX Runtime's basic optimizations), and
    the operator of each node the provider would leave to the CPU."""

    nodes: int
    left: list[str] = field(default_factory=list)
    #: for each node left out, the frames of the stack trace the exporter recorded in the
    #: plain model's node it is or was fused from (ONNX Runtime names a fused node after it)
    traces: list[list[Frame]] = field(default_factory=list)


@dataclass
class TruthResult:
    path: str
    target: str
    status: str  # ok | failed | skipped | timeout | crashed
    exported: bool = False
    failure: Failure | None = None
    note: str = ""
    example: SizeRun | None = None
    lower_bound: SizeRun | None = None
    other_size: SizeRun | None = None
    size_one: SizeRun | None = None
    #: the annotation's other runtimes, each run by itself on the plain model (openvino-cpu)
    runtimes: dict[str, SizeRun] = field(default_factory=dict)
    runtime_seconds: dict[str, float] = field(default_factory=dict)  # read to last run
    #: the annotation's mobile providers, judged by ONNX Runtime's checker on the plain model
    mobile: dict[str, MobileTruth] = field(default_factory=dict)
    export_seconds: float = 0.0
    ort_seconds: float = 0.0
    eager_seconds: float = 0.0
    wall_seconds: float = 0.0
    cached: bool = False
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class PhaseFailed(Exception):
    def __init__(self, phase: str, error: BaseException | None = None, message: str = ""):
        super().__init__(phase)
        self.phase = phase
        self.error = error
        self.message = message


# -- describing failures ---------------------------------------------------------------------

def _frames(trace: Any) -> list[Frame]:
    return [Frame(str(Path(entry.filename)), entry.lineno or 0, entry.name)
            for entry in traceback.extract_tb(trace)]


def error_chain(error: BaseException) -> list[ErrorInfo]:
    chain: list[ErrorInfo] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        chain.append(ErrorInfo(
            type=f"{type(current).__module__}.{type(current).__qualname__}",
            message="\n".join(text.strip().splitlines()[:_MESSAGE_LINES])[:2000],
            frames=_frames(current.__traceback__),
            message_frames=[Frame(match[1], int(match[2]), match[3] or "")
                            for match in _FILE_LINE.finditer(text)],
        ))
        current = current.__cause__ or (None if current.__suppress_context__
                                        else current.__context__)
    return chain


def _export_phase(error: BaseException) -> str:
    from torch.onnx._internal.exporter import _errors

    if isinstance(error, _errors.TorchExportError):
        return "capture"
    if isinstance(error, _errors.ConversionError):
        return "translate"
    return "export"


@contextlib.contextmanager
def _phase(name: str) -> Iterator[None]:
    print(PHASE_MARK, name, file=sys.stderr, flush=True)
    try:
        yield
    except PhaseFailed:
        raise
    except (Exception, SystemExit) as error:
        phase = _export_phase(error) if name == "export" else name
        raise PhaseFailed(phase, error) from error


# -- loading the target ----------------------------------------------------------------------

@dataclass
class Built:
    model: Any
    args: tuple
    kwargs: dict[str, Any]
    kwargs_given: bool
    options: dict[str, Any]
    #: the ExportedProgram the call exports (``model`` is then its module), else None
    program: Any = None
    #: the inputs as the annotation wrote them (args, kwargs), when torch.onnx.export splits
    #: them otherwise (a dict last in ``args`` is the keyword inputs): given to it unchanged,
    #: while the model runs with them split (``args``, ``kwargs``), as the export does
    written: tuple[tuple, Any] | None = None
    #: the outputs drawn from random numbers, in PyTorch and in the ONNX model (set once
    #: exported): ONNX Runtime draws its own, so they are compared by shape only
    random_outputs: frozenset[int] = frozenset()
    #: for each flattened example input, whether the exported program made it a constant
    #: (a static number, None: no ONNX input); None until exported, or when unknown
    constant_inputs: tuple[bool, ...] | None = None


_KEPT = "__corpus_target__"


def _import(path: Path, root: Path, target: Any) -> Any:
    """Import the file as its own module. When the target's name is defined again further down
    (the later definition shadows it), the annotated definition is also kept aside."""
    for entry in (str(root), str(path.parent)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    name = path.stem if path.stem.isidentifier() else "user_module"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    tree = parse_python(path.read_text(encoding="utf-8"), filename=str(path))
    definitions = [index for index, node in enumerate(tree.body)
                   if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                   and node.name == target.symbol]
    annotated = [i for i in definitions if tree.body[i].lineno == target.definition.start.line]
    if len(definitions) < 2 or not annotated:
        spec.loader.exec_module(module)
        return module
    keep = parse_python(f"{_KEPT} = {target.symbol}").body[0]
    tree.body.insert(annotated[0] + 1, ast.copy_location(keep, tree.body[annotated[0]]))
    exec(compile(ast.fix_missing_locations(tree), str(path), "exec"), module.__dict__)
    return module


class _NotReached(Exception):
    """The function returned without making the target's call: nothing to judge."""


class _CallReached(BaseException):
    """Unwinds the function from the target's call (recorded before: what swallows this, a
    bare ``except`` or a thread's end, changes nothing)."""


def _function_codes(function: Any) -> set[Any]:
    """The code of ``function`` and of every lambda, local function and comprehension in it."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    found: set[Any] = set()
    pending = [code] if code is not None else []
    while pending:
        current = pending.pop()
        if current not in found:
            found.add(current)
            pending += [c for c in current.co_consts if inspect.iscode(c)]
    return found


def _in_the_call(path: Path, root: Path, target: Any, judge: Callable[[Built], None]) -> None:
    """Import the file and run the target's function as a user runs it, until the call made
    from the target's line (in the function, code nested in it, or a thread it starts); there,
    inside the call, ``judge`` the call's arguments as torch.onnx.export takes them
    (``_export_call_built``), then unwind the function. The plain exporter runs inside its
    caller's context (``@torch.inference_mode()``, ``torch.no_grad()``, ``torch.autocast``,
    the default dtype and device a ``with`` block set, the modules' modes as they are there),
    and so does the judge: nothing of it is named here. What ``judge`` raises is raised once
    the function is unwound (the function's own ``except`` never sees it). The other calls
    export as they do without the check (their files land in the run's working directory,
    see ``evaluate``)."""
    import torch

    original = torch.onnx.export
    signature = inspect.signature(original)
    codes: set[Any] = set()
    reached: list[BaseException | None] = []
    running = False  # the function runs (a call made at import is not the target's)

    def replacement(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        while frame is not None and not (frame.f_code in codes or (
                frame.f_code.co_filename, frame.f_code.co_name) == (str(path), target.symbol)):
            frame = frame.f_back  # type: ignore[assignment]
        # line 0: the function's first call, from whichever line (made in another file's helper)
        if reached or (running and frame is not None
                       and target.export_call_line in (0, frame.f_lineno)):
            if not reached:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                torch.onnx.export = original  # the judge's own export is the plain one
                try:
                    judge(_export_call_built(dict(bound.arguments)))
                    reached.append(None)
                except BaseException as error:  # raised once the function is unwound
                    reached.append(error)
                finally:
                    torch.onnx.export = replacement
            raise _CallReached
        return original(*args, **kwargs)

    # what the script sees of torch.onnx.export is the original's (timm asks its signature)
    functools.update_wrapper(replacement, original)
    replacement.__signature__ = signature  # type: ignore[attr-defined]
    torch.onnx.export = replacement
    command_line = sys.argv
    sys.argv = [str(path)]  # as ``python path`` runs it: argparse sees no options
    try:
        with _phase("import"):
            module = _import(path, root, target)
        with _phase("build"):
            function = getattr(module, target.symbol)
            codes.update(_function_codes(function))
            running = True
            try:
                function()
            except (_CallReached, Exception, SystemExit):
                if not reached:
                    raise
    finally:
        torch.onnx.export = original
        sys.argv = command_line
    if not reached:
        raise _NotReached(f"the call at line {target.export_call_line} was not reached"
                          if target.export_call_line else "no export call was made")
    if reached[0] is not None:
        raise reached[0]


def _export_call_built(call: dict[str, Any]) -> Built:
    """A torch.onnx.export call of the script, as torch.onnx.export runs it with
    ``dynamo=True``: the inputs split by torch's own helper, ``dynamic_axes`` converted by
    torch's own converter (docs/export-calls.md: a ``dynamo=False`` call is judged as it runs
    without it, which is what onnxlens checks)."""
    import torch
    from torch.onnx._internal.exporter import _compat, _dynamic_shapes

    with _phase("build"):
        model, args = call["model"], call["args"]
        program = model if isinstance(model, torch.export.ExportedProgram) else None
        if program is not None:  # exported as it is (its dynamic dimensions its own)
            model = program.module()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"the call exports a {type(model).__name__}")
        # inputs torch.export cannot take (a list, None, a dict) are given to the export as
        # the call gives them, where it fails; the eager model runs with them as a tuple
        written = None if isinstance(args, (tuple, torch.Tensor)) else (args, call["kwargs"])
        if written is not None:
            args = tuple(args) if isinstance(args, list) else ()
        args, kwargs = _compat._get_torch_export_args(
            (args,) if isinstance(args, torch.Tensor) else tuple(args), call["kwargs"])
        dynamic_shapes = call["dynamic_shapes"] if program is None else None
        if program is None and dynamic_shapes is None and call["dynamic_axes"] is not None:
            dynamic_shapes, args, kwargs = _dynamic_shapes.from_dynamic_axes_to_dynamic_shapes(
                model, args, kwargs, dynamic_axes=call["dynamic_axes"],
                input_names=call["input_names"], output_names=set(call["output_names"] or ()))
    options = {"dynamic_shapes": dynamic_shapes, "opset": call["opset_version"],
               "input_names": call["input_names"], "output_names": call["output_names"],
               "custom_translation_table": call["custom_translation_table"],
               "training": model.training}
    return Built(model, tuple(args), dict(kwargs or {}), bool(kwargs), options, program,
                 written=written)


def _load(path: Path, root: Path, target: Any) -> Built:
    import torch
    from torch.onnx._internal.exporter import _compat

    with _phase("import"):
        module = _import(path, root, target)
    options: dict[str, Any] = {}
    with _phase("annotation"):
        for key, option in target.options.items():
            if key in ("name", "weights", "training"):
                options[key] = target.literal(key)
            else:  # compiled at the pragma's line, for the traceback
                text = "\n" * (option.range.start.line - 1) + option.source
                options[key] = eval(compile(text, str(path), "eval"), vars(module))
        unknown = set(options.get("runtimes") or ()) - set(_RUNTIMES)
        if unknown:
            raise ValueError(f"`runtimes` names no runtime: {sorted(unknown)}")
        unknown = set(options.get("precision") or ()) - set(_PRECISION_BUDGETS) - {"fp32"}
        if unknown:
            raise ValueError(f"`precision` names no precision: {sorted(unknown)}")
    with _phase("build"):
        factory = vars(module).get(_KEPT) or getattr(module, target.symbol)
        args, kwargs = options.get("args"), options.get("kwargs")
        if target.kind == "class":
            model = factory(**options.get("init", {}))
        else:
            model = factory()
            if isinstance(model, tuple):
                model, *rest = model
                args = rest[0] if args is None else args
                if len(rest) > 1 and kwargs is None:
                    kwargs = rest[1]
        # inputs of the module's own that torch.export cannot take (not a tuple): exported
        # as `torch.onnx.export(model)` reads them, where it fails
        unreadable = None
        if target.exportable_module:
            if args is None:
                args, own_kwargs = model.example_arguments()
                kwargs = own_kwargs if kwargs is None else kwargs
                unreadable = None if isinstance(args, tuple) else ((), None)
            if "dynamic_shapes" not in options:
                options["dynamic_shapes"] = model.dynamic_shapes()
            for key in ("input_names", "output_names"):
                if key not in options:
                    options[key] = getattr(model, key)()
        if args is None and kwargs is not None:
            args = ()  # inputs by keyword only: torch.onnx.export(model, (), kwargs=...)
        if args is None:
            raise ValueError("the target has no example inputs")
        if not isinstance(args, tuple):
            args = tuple(args) if isinstance(args, list) else (args,)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"the target built a {type(model).__name__}, not a torch.nn.Module")
        model = model.train() if options.get("training") else model.eval()
        split_args, split_kwargs = _compat._get_torch_export_args(args, kwargs)
    if unreadable is not None:
        return Built(model, args, dict(kwargs or {}), kwargs is not None, options,
                     written=unreadable)
    if len(split_args) != len(args):
        return Built(model, tuple(split_args), dict(split_kwargs or {}), True, options,
                     written=(args, kwargs))
    return Built(model, args, dict(kwargs or {}), kwargs is not None, options)


# -- comparing -------------------------------------------------------------------------------

def _flat_tensors(value: Any) -> list[Any]:
    import torch
    from torch.utils import _pytree

    leaves, _ = _pytree.tree_flatten(value)
    flat = []
    for leaf in leaves:
        if leaf is None:
            continue
        if isinstance(leaf, torch.Tensor) and leaf.is_complex():
            leaf = torch.view_as_real(leaf.resolve_conj())
        flat.append(leaf)
    return flat


def _to_numpy(value: Any) -> Any:
    import numpy as np
    import torch

    if not isinstance(value, torch.Tensor):
        return np.asarray(value)
    tensor = value.detach().cpu()
    if tensor.layout != torch.strided:  # a sparse input is a dense input of the ONNX model
        tensor = tensor.to_dense()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def _tolerance(dtype: str, options: dict[str, Any]) -> tuple[float, float]:
    atol, rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    return float(options.get("atol", atol)), float(options.get("rtol", rtol))


def _compare(eager: Any, ort_outputs: list[Any], built: Built, run: SizeRun) -> None:
    """Each output against PyTorch's into ``run``; an output drawn from random numbers by
    shape only (ONNX Runtime draws its own)."""
    import numpy as np
    import torch

    expected = _flat_tensors(eager)
    if len(expected) != len(ort_outputs):
        run.problem = (f"PyTorch returns {len(expected)} values, ONNX Runtime "
                       f"{len(ort_outputs)} outputs")
        return
    for index, (want, got) in enumerate(zip(expected, ort_outputs)):
        dtype = str(want.dtype).replace("torch.", "") if isinstance(want, torch.Tensor) \
            else np.asarray(want).dtype.name
        want_array = _to_numpy(want).astype(np.float64)
        got_array = np.asarray(got).astype(np.float64)
        atol, rtol = _tolerance(dtype, built.options)
        check = OutputCheck(index, dtype, list(want_array.shape), list(got_array.shape),
                            atol, rtol)
        run.outputs.append(check)
        if want_array.shape != got_array.shape:
            check.matched = False
            run.problem = run.problem or (f"output {index} has shape {list(got_array.shape)} "
                                          f"in ONNX Runtime, {list(want_array.shape)} in PyTorch")
            continue
        if index in built.random_outputs:
            continue
        finite = np.isfinite(want_array) & np.isfinite(got_array)
        check.non_finite_only_in_ort = bool((np.isfinite(want_array)
                                             & ~np.isfinite(got_array)).any())
        if finite.any():
            difference = np.abs(want_array - got_array)[finite]
            check.max_abs = float(difference.max())
            check.max_rel = float((difference / np.maximum(np.abs(want_array[finite]),
                                                           1e-12)).max())
        close = np.isclose(got_array, want_array, atol=atol, rtol=rtol, equal_nan=True)
        check.matched = bool(close.all()) and not check.non_finite_only_in_ort
        if not check.matched and not run.problem:
            run.problem = (f"output {index} ({dtype}) differs: max abs {check.max_abs:.3g}, "
                           f"max rel {check.max_rel:.3g} (atol {atol:g}, rtol {rtol:g})"
                           + ("; non-finite only in ONNX Runtime"
                              if check.non_finite_only_in_ort else ""))


def _random_outputs(program: Any) -> frozenset[int]:
    """The program's tensor outputs whose value depends on a node that draws random numbers:
    an operator torch tags ``nondeterministic_seeded``, unless its ``train``/``training``
    argument is false or its dropout probability is 0."""
    import torch

    def draws(node: Any) -> bool:
        op = node.target
        if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload) \
                or torch.Tag.nondeterministic_seeded not in op.tags:
            return False
        values = {}
        for position, argument in enumerate(op._schema.arguments):
            if position < len(node.args) and not argument.kwarg_only:
                values[argument.name] = node.args[position]
            elif argument.name in node.kwargs:
                values[argument.name] = node.kwargs[argument.name]
            elif argument.has_default_value():
                values[argument.name] = argument.default_value
        if values.get("train", True) is False or values.get("training", True) is False:
            return False
        probabilities = [values.get("dropout_p"), values.get("dropout")]
        if op._schema.name.endswith("dropout"):
            probabilities.append(values.get("p"))
        return not any(type(p) in (int, float) and p == 0 for p in probabilities)

    random: set[Any] = set()
    for node in program.graph.nodes:
        if draws(node) or any(parent in random for parent in node.all_input_nodes):
            random.add(node)
    # the ONNX model's outputs: every user output but a constant (None, or a number)
    outputs = [spec.arg.name for spec in program.graph_signature.output_specs
               if spec.kind.name == "USER_OUTPUT"
               and type(spec.arg).__name__ != "ConstantArgument"]
    random_names = {node.name for node in random}
    return frozenset(index for index, name in enumerate(outputs) if name in random_names)


def _onnx_random_outputs(proto: Any) -> frozenset[int]:
    """The ONNX model's outputs that depend on an operator drawing random numbers (``Dropout``
    unless its ``training_mode`` is a constant false), in a subgraph or local function too."""
    import onnx

    drawing = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
               "Multinomial", "Bernoulli"}
    functions = {(f.domain, f.name): f for f in proto.functions}
    false = {tensor.name for tensor in proto.graph.initializer
             if tensor.data_type == onnx.TensorProto.BOOL and tensor.data_location == 0
             and onnx.numpy_helper.to_array(tensor).size == 1
             and not onnx.numpy_helper.to_array(tensor).any()}
    false |= {node.output[0] for node in proto.graph.node if node.op_type == "Constant"
              for a in node.attribute if a.name == "value" and a.t.data_type == 9
              and onnx.numpy_helper.to_array(a.t).size == 1
              and not onnx.numpy_helper.to_array(a.t).any()}

    def draws(node: Any, seen: frozenset[Any]) -> bool:
        if node.op_type in drawing or (node.op_type == "Dropout" and len(node.input) > 2
                                       and node.input[2] and node.input[2] not in false):
            return True
        key = (node.domain, node.op_type)
        inner = list(functions[key].node) if key in functions and key not in seen else []
        for attribute in node.attribute:
            for graph in ([attribute.g] if attribute.HasField("g") else attribute.graphs):
                inner += list(graph.node)
        return any(draws(n, seen | {key}) for n in inner)

    random: set[str] = set()
    for node in proto.graph.node:
        if draws(node, frozenset()) or any(name in random for name in node.input):
            random.update(node.output)
    return frozenset(index for index, output in enumerate(proto.graph.output)
                     if output.name in random)


def _constant_inputs(exported_program: Any) -> tuple[bool, ...]:
    from torch.export.graph_signature import ConstantArgument, InputKind

    return tuple(isinstance(spec.arg, ConstantArgument)
                 for spec in exported_program.graph_signature.input_specs
                 if spec.kind == InputKind.USER_INPUT)


def _feeds(session: Any, built: Built, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The example inputs as the ONNX model's inputs: each flattened input the exported
    program did not make a constant (a tensor, or an int of a dynamic dimension, fed as
    ``ONNXProgram.__call__`` feeds a number: int64, float32); without the program, tensors."""
    import numpy as np
    import torch
    from torch.utils import _pytree

    leaves = _pytree.tree_leaves(_fresh((args, kwargs)))
    constant_inputs = built.constant_inputs
    if constant_inputs is not None and len(constant_inputs) == len(leaves):
        given = [leaf for leaf, constant in zip(leaves, constant_inputs) if not constant]
    else:
        given = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    names = [value.name for value in session.get_inputs()]
    if len(names) != len(given):
        raise ValueError(f"the ONNX model has {len(names)} inputs but the example inputs "
                         f"give {len(given)}")
    numbers = {bool: np.bool_, int: np.int64, float: np.float32}
    return {name: np.asarray(value, dtype=numbers[type(value)]) if type(value) in numbers
            else _to_numpy(_flat_tensors(value)[0]) for name, value in zip(names, given)}


def _fresh(value: Any) -> Any:
    return copy.deepcopy(value)


# -- dynamic dimensions ----------------------------------------------------------------------

#: torch.export treats sizes 0 and 1 apart: a declared range is judged from 2 up
SMALLEST_JUDGED_SIZE = 2


@dataclass
class DeclaredAxis:
    label: str  # "x[0]"
    axis: int
    low: int
    high: int
    named: bool = True  # False for Dim.AUTO (the user let torch decide)


def _bounds(dim: Any) -> tuple[int, int]:
    low = getattr(dim, "min", None)
    high = getattr(dim, "max", None)
    return (int(low) if isinstance(low, int) else 0,
            int(high) if isinstance(high, int) else 1 << 62)


def declared_axes(model: Any, args: tuple, kwargs: dict[str, Any],
                  spec: Any) -> dict[int, list[DeclaredAxis]]:
    """``id(tensor)`` -> the axes of that input tensor the ``dynamic_shapes`` spec declares
    dynamic (a string, a ``Dim``, ``Dim.AUTO`` or ``Dim.DYNAMIC``; ``Dim.STATIC`` is not)."""
    import torch

    if not spec:
        return {}
    bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    if isinstance(spec, dict) and all(isinstance(key, str) for key in spec):
        pairs = [(name, value, spec.get(name)) for name, value in bound.items()]
    else:
        pairs = [(name, value, sub) for (name, value), sub in zip(bound.items(), spec)]
    found: dict[int, list[DeclaredAxis]] = {}

    def walk(label: str, value: Any, sub: Any) -> None:
        if sub is None:
            return
        if isinstance(value, torch.Tensor):
            items = sub.items() if isinstance(sub, dict) else enumerate(sub)
            axes = [DeclaredAxis(f"{label}[{axis}]", int(axis), *_bounds(dim),
                                 named=dim is not torch.export.Dim.AUTO)
                    for axis, dim in items
                    if dim is not None and dim is not torch.export.Dim.STATIC
                    and not isinstance(dim, int)]
            if axes:
                found[id(value)] = axes
        elif isinstance(value, dict) and isinstance(sub, dict):
            for key, item in value.items():
                walk(f"{label}.{key}", item, sub.get(key))
        elif isinstance(value, (list, tuple)) and isinstance(sub, (list, tuple)):
            for index, (item, item_sub) in enumerate(zip(value, sub)):
                walk(f"{label}[{index}]", item, item_sub)

    for name, value, sub in pairs:
        if inspect.signature(model.forward).parameters[name].kind == inspect.Parameter.VAR_KEYWORD:
            for key, item in value.items():
                walk(key, item, sub.get(key) if isinstance(sub, dict) else None)
        else:
            walk(name, value, sub)
    return found


def _declared(built: Built) -> dict[int, list[DeclaredAxis]]:
    """The declared axes: the annotation's or the call's ``dynamic_shapes``, or for an
    ExportedProgram the axes its graph keeps as one symbol, over its ``range_constraints``
    (what the user declared to ``torch.export.export``)."""
    if built.program is None:
        return declared_axes(built.model, built.args, built.kwargs,
                             built.options.get("dynamic_shapes"))
    import torch

    program = built.program
    leaves = torch.utils._pytree.tree_leaves((built.args, built.kwargs))
    specs = [spec for spec in program.graph_signature.input_specs
             if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    found: dict[int, list[DeclaredAxis]] = {}
    for leaf, spec in zip(leaves, specs):  # a constant input is a ConstantArgument
        name = getattr(spec.arg, "name", "")
        value = placeholders[name].meta.get("val") if name in placeholders else None
        if not isinstance(leaf, torch.Tensor) or value is None:
            continue
        axes = []
        for axis, size in enumerate(value.shape):
            bounds = program.range_constraints.get(getattr(getattr(size, "node", None), "expr",
                                                           None))
            if isinstance(size, torch.SymInt) and bounds is not None:
                upper = _number(bounds.upper)
                high = int(upper) if upper < 1 << 62 else 1 << 62
                axes.append(DeclaredAxis(f"{name}[{axis}]", axis, int(bounds.lower), high))
        if axes:
            found[id(leaf)] = axes
    return found


# Another size for a declared axis of example size n: twice the example (the example
# concatenated with itself), else one more (with its own first slice appended), else one less.
_OTHER_SIZES: tuple[Callable[[int, DeclaredAxis], int], ...] = (
    lambda n, axis: 2 * n, lambda n, axis: n + 1, lambda n, axis: n - 1 if n > 2 else n)


def _lower_bound(n: int, axis: DeclaredAxis) -> int:
    return max(axis.low, SMALLEST_JUDGED_SIZE)


def _tile(tensor: Any, axis: int, size: int) -> Any:
    import torch

    length = tensor.shape[axis]
    if size <= length:
        return tensor.narrow(axis, 0, size).clone()
    copies = -(-size // length)
    return torch.cat([tensor] * copies, dim=axis).narrow(axis, 0, size).clone()


def _resized(args: tuple, kwargs: dict[str, Any], declared: dict[int, list[DeclaredAxis]],
             rule: Callable[[int, DeclaredAxis], int],
             ) -> tuple[tuple, dict[str, Any], dict[str, int]] | None:
    import torch
    from torch.utils import _pytree

    sizes: dict[str, int] = {}
    changed = False

    def resize(value: Any) -> Any:
        nonlocal changed
        if not isinstance(value, torch.Tensor) or id(value) not in declared:
            return value
        for axis in declared[id(value)]:
            if axis.axis >= value.dim():
                continue
            size = rule(int(value.shape[axis.axis]), axis)
            if not axis.low <= size <= axis.high:
                raise ValueError(f"{axis.label}: {size} is outside the declared range")
            changed = changed or size != value.shape[axis.axis]
            sizes[axis.label] = size
            value = _tile(value, axis.axis, size)
        return value

    try:
        new_args, new_kwargs = _pytree.tree_map(resize, (args, kwargs))
    except ValueError:
        return None
    return (tuple(new_args), dict(new_kwargs), sizes) if changed else None


# -- the run ---------------------------------------------------------------------------------

def _export_kwargs(built: Built) -> dict[str, Any]:
    """Only what the annotation gives, under torch.onnx.export's names."""
    given: dict[str, Any] = {"kwargs": _fresh(built.kwargs)} if built.kwargs_given else {}
    if built.written is not None:
        given = {} if built.written[1] is None else {"kwargs": _fresh(built.written[1])}
    names = {"dynamic_shapes": "dynamic_shapes", "opset": "opset_version",
             "input_names": "input_names", "output_names": "output_names",
             "custom_translation_table": "custom_translation_table"}
    for key, argument in names.items():
        if built.options.get(key) is not None:
            given[argument] = built.options[key]
    return given


def evaluate(path: Path, root: Path, target: Any) -> TruthResult:
    """The truth, run as from an empty working directory of its own, so that the files a
    script writes (its other exports) land there, where it reads them back, and not in the
    corpus's files."""
    import tempfile

    result = TruthResult(str(path), target.name, "ok", versions=versions())
    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory(prefix="onnxlens-truth-") as scratch:
            os.chdir(scratch)
            try:
                _evaluate(path, root, target, result)
            finally:
                os.chdir(cwd)
    except _NotReached as not_reached:
        result.status, result.note = "skipped", str(not_reached)
    except PhaseFailed as failed:
        result.status = "failed"
        errors = error_chain(failed.error) if failed.error is not None else [
            ErrorInfo("", failed.message, [])]
        result.failure = Failure(failed.phase, errors)
    return result


def _evaluate(path: Path, root: Path, target: Any, result: TruthResult) -> None:
    if getattr(target, "export_call_line", None) is not None:
        _in_the_call(path, root, target, lambda built: _judge(built, result))
    else:
        _judge(_load(path, root, target), result)


def _judge(built: Built, result: TruthResult) -> None:
    import onnx
    import onnxruntime as ort
    import torch

    with _phase("eager"):
        # a lazy module's copy would draw other weights at its first forward than the export
        # gives the model itself (nn.LazyLinear): its eager run follows the export instead
        lazy = any(torch.nn.parameter.is_lazy(p) for p in built.model.parameters())
        # inputs torch.export cannot take: the export fails first, as in the script
        unreadable = built.written is not None and not isinstance(built.written[0],
                                                                  (tuple, torch.Tensor))
        try:
            reference = None if lazy or unreadable else copy.deepcopy(built.model)
        except Exception:
            reference = None  # the model cannot be copied: eager runs after the export
        if reference is not None:
            started = time.perf_counter()
            with torch.no_grad():
                eager = _fresh(reference)(*_fresh(built.args), **_fresh(built.kwargs))
            result.eager_seconds = time.perf_counter() - started
    started = time.perf_counter()
    try:
        with _phase("export"):
            program = torch.onnx.export(
                built.model if built.program is None else built.program,
                _fresh(built.args if built.written is None else built.written[0]),
                dynamo=True, **_export_kwargs(built))
            proto = program.model_proto
    finally:
        result.export_seconds = time.perf_counter() - started
    result.exported = True
    if program.exported_program is not None:
        built.random_outputs = (_random_outputs(program.exported_program)
                                & _onnx_random_outputs(proto))
        built.constant_inputs = _constant_inputs(program.exported_program)
    if reference is None:
        with _phase("eager"), torch.no_grad():
            reference = built.model
            eager = built.model(*_fresh(built.args), **_fresh(built.kwargs))
    # A model past protobuf's 2 GB cannot be checked or loaded from memory: as a user does,
    # save it with external data and check and load the file.
    saved = _saved_if_huge(program, proto)
    with _phase("checker"):
        onnx.checker.check_model(saved or proto, full_check=True)
    with _phase("ort_session"):
        started = time.perf_counter()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(saved or proto.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
    with _phase("ort_run"):
        outputs = session.run(None, _feeds(session, built, built.args, built.kwargs))
        result.ort_seconds = time.perf_counter() - started
    result.example = SizeRun({})
    _compare(eager, outputs, built, result.example)
    if result.example.problem:
        raise PhaseFailed("mismatch", message=result.example.problem)
    _other_size(built, reference, session, result)
    _narrowed_ranges(built, program, reference, session)
    _on_mobile(built, saved, proto, result)
    _on_openvino(built, saved, proto, eager, session, result)
    _on_ort_web(built, saved, proto, eager, session, result)
    _at_precisions(built, saved, proto, eager, session)


def _on_mobile(built: Built, saved: str | None, proto: Any, result: TruthResult) -> None:
    """When the annotation names ``nnapi`` or ``coreml``: the plain model as ONNX Runtime's
    mobile usability checker reads it by default (``analyze_model``: optimized at the basic
    level, shapes inferred with its own helper, each provider's partitions with fixed input
    sizes required, CoreML's ML Program table), the nodes it would leave to the CPU."""
    named = [name for name in ("nnapi", "coreml") if name in _named_runtimes(built)]
    if not named:
        return
    from onnxruntime.tools.mobile_helpers import usability_checker
    from onnxruntime.tools.onnx_model_utils import ModelProtoWithShapeInfo, optimize_model

    path = Path(saved or "plain.onnx")
    if saved is None:
        path.write_bytes(proto.SerializeToString())
    optimized = Path("mobile") / path.name
    optimized.parent.mkdir(exist_ok=True)
    optimize_model(path, optimized, use_external_initializers=True)
    shaped = ModelProtoWithShapeInfo(optimized).model_with_shape_info
    plain = {node.name: node for node in proto.graph.node}
    for name in named:
        info = (usability_checker.check_nnapi_partitions(shaped, True) if name == "nnapi" else
                usability_checker.check_coreml_partitions(
                    shaped, True, "coreml_supported_mlprogram_ops.md"))
        taken = {node.name for group in info.supported_groups for node in group}
        left = [node for node in shaped.graph.node if node.name not in taken]
        result.mobile[name] = MobileTruth(
            info.num_nodes, sorted(node.op_type for node in left),
            [_trace(plain.get(node.name) or plain.get(node.name.split("/")[0]))
             for node in left])


def _trace(node: Any) -> list[Frame]:
    """The frames of the stack trace the exporter recorded in ``node`` (none for None)."""
    text = _with_traces("", [node]) if node is not None else ""
    return [Frame(path, int(line), function or "")
            for path, line, function in _FILE_LINE.findall(text)]


class RuntimeFailed(Exception):
    """A runtime refused or failed the model; the message ends with the stack traces the
    exporter recorded in the nodes the runtime's message names."""


def _on_openvino(built: Built, saved: str | None, proto: Any, eager: Any, session: Any,
                 result: TruthResult) -> None:
    """When the annotation names ``openvino-cpu``: the plain model read, compiled (at the
    model's own precision, not the CPU's bfloat16) and run by OpenVINO on its own, and its
    outputs compared with PyTorch's."""
    import numpy as np

    if "openvino-cpu" not in _named_runtimes(built):
        return
    with _phase("openvino"):
        # without its telemetry (a usage count in ~/intel, an event sent over the network):
        # openvino falls back to its stub when the package does not import
        if "openvino" not in sys.modules:
            sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]
        import openvino as ov

        path = saved or "plain.onnx"
        if saved is None:
            Path(path).write_bytes(proto.SerializeToString())
        started = time.perf_counter()
        try:
            core = ov.Core()
            compiled = core.compile_model(core.read_model(path), "CPU",
                                          {"EXECUTION_MODE_HINT": "ACCURACY"})
            answers = compiled(_feeds(session, built, built.args, built.kwargs))
        except Exception as error:
            raise RuntimeFailed(_with_traces(str(error), _named_nodes(str(error), proto))) \
                from None
        finally:
            result.runtime_seconds["openvino-cpu"] = time.perf_counter() - started
    run = SizeRun({}, why="openvino-cpu")
    result.runtimes["openvino-cpu"] = run
    _compare(eager, [np.asarray(answers[output]) for output in compiled.outputs],
             built, run)
    if run.problem:
        differing = next(check.index for check in run.outputs if not check.matched)
        name = proto.graph.output[differing].name
        producers = [node for node in proto.graph.node if name in node.output]
        raise PhaseFailed("openvino_mismatch", message=_with_traces(run.problem, producers))


def _named_runtimes(built: Built) -> list[str]:
    return list(built.options.get("runtimes") or
                os.environ.get(RUNTIMES_VARIABLE, "").split(","))


def _ort_web_modules() -> str | None:
    """Where onnxruntime-web is installed: where onnxlens's docs say to put it."""
    for candidate in (os.environ.get("ONNXLENS_ORT_WEB_MODULES"),
                      str(REPO / "tools" / "ort-web" / "node_modules")):
        if candidate and (Path(candidate) / "onnxruntime-web").is_dir():
            return candidate
    return None


def _on_ort_web(built: Built, saved: str | None, proto: Any, eager: Any, session: Any,
                result: TruthResult) -> None:
    """When the annotation names ``ort-web``: the plain model run by ONNX Runtime Web's
    WebAssembly backend under Node.js, through this judge's own small runner
    (``ort_web_truth.cjs``), and its outputs compared with PyTorch's."""
    import subprocess

    import numpy as np

    modules = _ort_web_modules()
    if "ort-web" not in _named_runtimes(built) or saved is not None or modules is None:
        return
    with _phase("ort_web"):
        scratch = Path("ort-web")
        scratch.mkdir(exist_ok=True)
        (scratch / "model.onnx").write_bytes(proto.SerializeToString())
        feeds = _feeds(session, built, built.args, built.kwargs)
        (scratch / "inputs.json").write_text(json.dumps([
            {"name": name, "type": "bool" if array.dtype == np.bool_ else str(array.dtype),
             "dims": list(array.shape),
             "values": [str(v) for v in array.ravel().tolist()] if array.dtype == np.int64
             else array.astype(np.float64 if array.dtype.kind == "f" else np.int64)
             .ravel().tolist()}
            for name, array in feeds.items()]))
        started = time.perf_counter()
        done = subprocess.run(["node", str(Path(__file__).with_name("ort_web_truth.cjs")),
                               str(scratch)], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "NODE_PATH": modules})
        result.runtime_seconds["ort-web"] = time.perf_counter() - started
        if not (scratch / "result.json").is_file():
            raise RuntimeError(f"node exited {done.returncode}: {done.stderr[-2000:]}")
        answer = json.loads((scratch / "result.json").read_text())
        if "error" in answer:
            raise RuntimeFailed(_with_traces(answer["error"], _named_nodes(answer["error"],
                                                                           proto)))
    outputs = []
    for output in answer["outputs"]:
        values = [float(v) if isinstance(v, str) else v for v in output["values"]]
        kind = output["type"]
        array = (np.array(values, np.uint16).view(np.float16) if kind == "float16"
                 else np.array([int(v) for v in output["values"]], np.int64) if kind == "int64"
                 else np.array(values, np.bool_ if kind == "bool" else kind))
        outputs.append(array.reshape(output["dims"]))
    run = SizeRun({}, why="ort-web")
    result.runtimes["ort-web"] = run
    _compare(eager, outputs, built, run)
    if run.problem:
        differing = next(check.index for check in run.outputs if not check.matched)
        name = proto.graph.output[differing].name
        producers = [node for node in proto.graph.node if name in node.output]
        raise PhaseFailed("ort_web_mismatch", message=_with_traces(run.problem, producers))


def _at_precisions(built: Built, saved: str | None, proto: Any, eager: Any,
                   session: Any) -> None:
    """For each precision the annotation names besides fp32: the plain model converted by
    ONNX Runtime's own tools as their documentation shows (fp16: the float16 converter,
    inputs and outputs kept float32; int8: static QDQ quantization calibrated on the example
    inputs), run in ONNX Runtime's CPU provider, each output weighed against PyTorch's."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    named = [name for name in built.options.get("precision")
             or os.environ.get(PRECISION_VARIABLE, "").split(",") if name not in ("", "fp32")]
    if not named or saved is not None:
        return
    feeds = _feeds(session, built, built.args, built.kwargs)
    expected = [_to_numpy(value) for value in _flat_tensors(eager)]
    for precision in named:
        with _phase("precision"):
            if precision == "fp16":
                from onnxruntime.transformers.float16 import convert_float_to_float16

                converted = convert_float_to_float16(proto, keep_io_types=True)
            else:
                from onnxruntime.quantization import (
                    CalibrationDataReader,
                    QuantFormat,
                    QuantType,
                    quantize_static,
                )

                class Once(CalibrationDataReader):
                    def __init__(self) -> None:
                        self.left = [feeds]

                    def get_next(self) -> Any:
                        return self.left.pop() if self.left else None

                quantize_static(proto, "int8.onnx", Once(), quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
                converted = onnx.load("int8.onnx")
            variant = ort.InferenceSession(converted.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
            outputs = variant.run(None, feeds)
        for index, (want, got) in enumerate(zip(expected, outputs)):
            if index in built.random_outputs:
                continue
            want64, got64 = want.astype(np.float64), np.asarray(got).astype(np.float64)
            if want.dtype.kind != "f":  # integers and booleans must match exactly
                want64 = np.where(want64 == got64, 0.0, np.inf)
                got64 = np.zeros_like(want64)
            finite = np.isfinite(want64) & np.isfinite(got64)
            overflow = bool((~np.isfinite(got64) & np.isfinite(want64)).any())
            scale = float(np.abs(want64[finite]).max(initial=0.0))
            error = float(np.abs(want64[finite] - got64[finite]).max(initial=0.0))
            if overflow or error > _PRECISION_BUDGETS[precision] * max(scale, 1e-12):
                name = proto.graph.output[index].name
                producers = [node for node in proto.graph.node if name in node.output]
                raise PhaseFailed("precision_loss", message=_with_traces(
                    f"at {precision} output {name} is off by {error:.3g} of {scale:.3g}"
                    + (" (infinity or NaN)" if overflow else ""), producers))


def _named_nodes(message: str, proto: Any) -> list[Any]:
    """The nodes a runtime's message names: by node name, or by ``OpType-version``."""
    return [node for node in proto.graph.node
            if re.search(rf"(?<![\w.]){re.escape(node.name)}(?![\w.])", message)
            or re.search(rf"\b{re.escape(node.op_type)}-\d+\b", message)]


def _with_traces(message: str, nodes: list[Any]) -> str:
    traces = [entry.value for node in nodes for entry in node.metadata_props
              if entry.key == "pkg.torch.onnx.stack_trace"]
    return "\n".join([message, *traces])


_PROTOBUF_LIMIT = 2**31 - 1


def _saved_if_huge(program: Any, proto: Any) -> str | None:
    """The path of the model saved with external data, when it is too big for protobuf."""
    try:
        if proto.ByteSize() <= _PROTOBUF_LIMIT:
            return None
    except Exception:  # protobuf refuses even to size a message past its limit
        pass
    import tempfile

    # the process ends after one target; its temporary directory goes with it
    # (tests/corpus/truth_process.py)
    directory = tempfile.mkdtemp(prefix="truth-")
    path = str(Path(directory) / "model.onnx")
    program.save(path, external_data=True)
    return path


def _other_size(built: Built, reference: Any, session: Any, result: TruthResult) -> None:
    """The run at the lower bound of the declared ranges, then at a larger size (the first
    of ``_OTHER_SIZES`` eager PyTorch takes)."""

    with _phase("dynamic"):
        declared = _declared(built)
    if not declared:
        return
    eager_failures = []
    candidates = [("lower bound", _lower_bound)] + [("larger", rule) for rule in _OTHER_SIZES]
    for why, rule in candidates:
        if why == "larger" and result.other_size is not None:
            break
        resized = _resized(built.args, built.kwargs, declared, rule)
        if resized is None:
            continue
        args, kwargs, sizes = resized
        run = SizeRun(sizes, why)
        eager_error = _run_both(built, reference, session, args, kwargs, run)
        if eager_error:  # the model itself does not take this size
            eager_failures.append(f"{sizes}: {eager_error}")
            continue
        if why == "lower bound":
            result.lower_bound = run
        else:
            result.other_size = run
        if run.problem:
            raise PhaseFailed("dynamic", message=f"at {sizes} ({why}): {run.problem}")
    _size_one(built, reference, session, declared, result)
    if result.lower_bound is None and result.other_size is None:
        result.note = ("dynamic dims not checked: eager PyTorch fails at every other size "
                       "tried (" + "; ".join(eager_failures)[:500] + ")") if eager_failures \
            else "dynamic dims not checked: no other size within the declared ranges"


def _run_both(built: Built, reference: Any, session: Any, args: tuple, kwargs: dict[str, Any],
              run: SizeRun) -> str:
    """Eager PyTorch, then ONNX Runtime, on these inputs, compared into ``run`` (its
    ``problem`` says what differs); PyTorch's error when it fails itself (the model's own
    domain: ONNX Runtime is not run), else ""."""
    import torch

    try:
        with torch.no_grad():
            eager = copy.deepcopy(reference)(*_fresh(args), **_fresh(kwargs))
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"{type(error).__name__}: {first}"
    with _phase("dynamic"):
        outputs = session.run(None, _feeds(session, built, args, kwargs))
    _compare(eager, outputs, built, run)
    return ""


def _size_one(built: Built, reference: Any, session: Any,
              declared: dict[int, list[DeclaredAxis]], result: TruthResult) -> None:
    """Every declared axis whose declared range holds 1 (the usual deployment batch) at 1: a
    size torch.export treats apart (0/1 specialization), which the user declared all the
    same. ONNX Runtime failing or differing from PyTorch there fails; PyTorch itself failing
    there is the model's own domain."""

    resized = _resized(built.args, built.kwargs, declared,
                       lambda n, axis: 1 if axis.low <= 1 <= axis.high else n)
    if resized is None:
        return
    args, kwargs, sizes = resized
    run = SizeRun(sizes, "size 1")
    if _run_both(built, reference, session, args, kwargs, run):
        return  # PyTorch itself fails at 1
    result.size_one = run
    if run.problem:
        raise PhaseFailed("dynamic", message=f"at {sizes} (size 1): {run.problem}")


def _narrowed_ranges(built: Built, program: Any, reference: Any, session: Any) -> None:
    """A named dimension fixed to one size fails; a range narrower than declared is run just
    outside it (see the module's docstring)."""
    from torch.utils import _pytree

    with _phase("dynamic"):
        declared = _declared(built)
        exported = getattr(program, "exported_program", None)
        if not declared or exported is None:
            return
        given = (built.args, built.kwargs) if built.kwargs_given else (built.args,)
        leaves = _pytree.tree_leaves(given)
        inputs = set(exported.graph_signature.user_inputs)
        placeholders = [n for n in exported.graph.nodes
                        if n.op == "placeholder" and n.name in inputs]
        if len(leaves) != len(placeholders):
            return
        constraints = exported.range_constraints
    outside: dict[str, tuple[str, set[int]]] = {}  # symbol -> (an axis label, sizes to run)
    symbol_of: dict[tuple[int, int], str] = {}  # (id(leaf), axis) -> symbol
    for leaf, node in zip(leaves, placeholders):
        for axis in declared.get(id(leaf), []):
            shape = getattr(node.meta.get("val"), "shape", None)
            if shape is None or axis.axis >= len(shape):
                continue
            if isinstance(shape[axis.axis], int):
                if not axis.named:
                    continue
                # Fixed to one size: the ONNX model is static there (plain torch.export would
                # have raised "Constraints violated"), even where eager fails at every other size.
                raise PhaseFailed("dynamic", message=(
                    f"{axis.label}: declared dynamic, but torch.onnx.export's program fixed it "
                    f"to {shape[axis.axis]}"))
            expression = getattr(getattr(shape[axis.axis], "node", None), "expr", None)
            bounds = constraints.get(expression)
            if bounds is None:
                continue  # an expression: the runs at other sizes judge
            symbol_of[(id(leaf), axis.axis)] = str(expression)
            low, high = _number(bounds.lower), _number(bounds.upper)
            declared_low = max(axis.low, SMALLEST_JUDGED_SIZE)
            declared_high = float("inf") if axis.high >= 1 << 62 else axis.high
            sizes = {int(size) for size, inside in ((low - 1, low > declared_low),
                                                    (high + 1, high < declared_high))
                     if inside and size != float("inf")}
            if sizes:
                label, known = outside.setdefault(str(expression), (axis.label, set()))
                known.update(sizes)
    for symbol, (label, sizes) in outside.items():
        for size in sorted(sizes):
            _run_outside(built, reference, session, declared, symbol_of, symbol, size, label)


def _run_outside(built: Built, reference: Any, session: Any,
                 declared: dict[int, list[DeclaredAxis]], symbol_of: dict[tuple[int, int], str],
                 symbol: str, size: int, label: str) -> None:
    """Both runtimes with every axis of ``symbol`` at ``size`` (the others as in the example);
    ONNX Runtime failing or differing from PyTorch fails the dynamic phase."""
    import torch
    from torch.utils import _pytree

    def resize(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            for axis in declared.get(id(value), []):
                if symbol_of.get((id(value), axis.axis)) == symbol:
                    value = _tile(value, axis.axis, size)
        return value

    args, kwargs = _pytree.tree_map(resize, (built.args, built.kwargs))
    run = SizeRun({label: size}, "outside the narrowed range")
    if _run_both(built, reference, session, tuple(args), dict(kwargs), run):
        return  # the model's own bound: not the exporter's problem
    if run.problem:
        raise PhaseFailed("dynamic", message=f"at {label}={size} (outside the range "
                          f"torch.onnx.export narrowed the dimension to): {run.problem}")


def _number(bound: Any) -> float:
    try:
        return float(bound)
    except (TypeError, ValueError):
        return float("inf")


# -- entry points ----------------------------------------------------------------------------

def find_target(path: Path, name: str) -> Any:
    from exporter.source.targets import discover

    found = discover(path, path.read_text(encoding="utf-8"))
    for target in found.targets:
        if target.name == name:
            return target
    raise SystemExit(f"{path}: no target named {name!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.truth")
    parser.add_argument("file", type=Path)
    parser.add_argument("target")
    parser.add_argument("--root", type=Path, default=None,
                        help="the workspace root (importable; default: the file's directory)")
    options = parser.parse_args(argv)
    path = options.file.resolve()
    root = (options.root or path.parent).resolve()
    target = find_target(path, options.target)
    # Whatever the model prints goes to stderr: stdout carries the JSON result only.
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    if target.weights == "none":
        result = TruthResult(str(path), target.name, "skipped", note='weights="none"',
                             versions=versions())
    else:
        result = evaluate(path, root, target)
    sys.stdout.flush()
    with os.fdopen(real_stdout, "w") as out:
        out.write(dumps(result) + "\n")
    return 0


@functools.cache
def _own_hash() -> str:
    """The hash of this module's code: its syntax tree without docstrings (comments are not in
    it), so that a reworded docstring keeps the cached truth, which takes an hour to rebuild."""
    tree = parse_python(Path(__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, documented) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:]
    return sha256(ast.dump(tree))


def cache_key(path: Path, target: str) -> str:
    return sha256(json.dumps({"versions": versions(), "file": file_hash(path), "target": target,
                              "truth": _own_hash(),
                              "runtimes": os.environ.get(RUNTIMES_VARIABLE, ""),
                              "precision": os.environ.get(PRECISION_VARIABLE, "")},
                             sort_keys=True))


def run_truth(path: Path, target: str, root: Path, *, timeout: float = DEFAULT_TIMEOUT,
              use_cache: bool = True, python_path: tuple[Path, ...] = ()) -> TruthResult:
    """The truth of one target, from the cache or from a process of its own
    (``tests/corpus/truth_process.py``); ``python_path``: directories of "installed" packages
    ahead on its ``PYTHONPATH`` (not in the cache's key: the file names what they hold)."""
    cache_file = CACHE / "truth" / f"{cache_key(path, target)}.json"
    if use_cache and cache_file.is_file():
        result = from_json(TruthResult, json.loads(cache_file.read_text()))
        result.cached = True
        return result
    started = time.perf_counter()
    process = run_truth_process([str(path), target, "--root", str(root)], timeout,
                                [str(directory) for directory in python_path])
    if process.returncode is None:
        return TruthResult(str(path), target, "timeout", note=f"no result after {timeout:g} s "
                           f"(in phase {_last_phase(process.stderr)})", wall_seconds=timeout,
                           versions=versions())
    wall = time.perf_counter() - started
    lines = process.stdout.strip().splitlines()
    try:
        result = from_json(TruthResult, json.loads(lines[-1]))
    except (IndexError, ValueError):
        phase = _last_phase(process.stderr)
        tail = "\n".join(process.stderr.strip().splitlines()[-_MESSAGE_LINES:])
        result = TruthResult(str(path), target, "crashed", failure=Failure(phase, [ErrorInfo(
            f"exit status {process.returncode}", tail, [])]), versions=versions())
    result.wall_seconds = wall
    if result.status in ("ok", "failed", "skipped"):
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache_file.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(dumps(result))
        os.replace(temporary, cache_file)
    return result


def _last_phase(stderr: str) -> str:
    phases = [line.split(PHASE_MARK, 1)[1].strip() for line in stderr.splitlines()
              if PHASE_MARK in line]
    return phases[-1] if phases else "import"


if __name__ == "__main__":
    sys.exit(main())
