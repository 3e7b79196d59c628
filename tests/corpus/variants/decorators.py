"""Locations through any decorator (ONNX2xx): an operator without an ONNX translation on every
tested torch, reached from ``forward`` directly or through 1–3 helpers, each function under a
stack of 1–3 decorators (0–3 on a helper) — torch's context managers used as decorators,
``torch.compiler.disable``, a ``functools.wraps`` wrapper, a decorator factory, a
``contextlib.contextmanager`` and a ``ContextDecorator`` defined in the file. Each variant
draws the operator, how deep it is, whether each helper is a method, a function of the file or
a function of another file, each function's decorators, names, shapes and argument names;
``line`` is the failing operator's line (in the file that holds it: the target's, or the other
file, ``files``)."""

from __future__ import annotations

import random

from tests.corpus.variants.common import Variant

#: operators whose translation fails (``ConversionError``) on torch 2.13.0, 2.14.1 and 2.15.0
#: (checked with the plain exporter on each); ``{a}``: the argument, positive
OPERATORS = ("torch.special.bessel_j0({a})", "torch.special.i0({a})", "torch.special.i1e({a})",
             "torch.digamma({a})", "torch.lgamma({a})",
             "torch.special.chebyshev_polynomial_t({a}, 3)", "torch.polygamma(1, {a})")
#: decorators that leave the verdict as it is (``torch.compiler.disable(recursive=False)``
#: fails the capture instead: not here). The last four are defined in the file that uses them.
DECORATORS = ("@torch.no_grad()", "@torch.inference_mode()",
              '@torch.autocast("cpu", enabled=False)', "@torch.set_grad_enabled(False)",
              "@torch.enable_grad()", "@torch.compiler.disable", "@passthrough",
              '@tagged("features")', "@quiet_scope()", "@Traced()")
#: how many calls deep the operator is (0: in ``forward`` itself)
DEPTHS = (0, 1, 2, 3)
#: decorators stacked on ``forward`` / on a helper
FORWARD_STACKS = (1, 2, 3)
HELPER_STACKS = (0, 1, 2, 3)
#: where a helper is: a method of the model, a function of the target's file, a function of
#: another file (and then the functions below it too: that file does not import the target's)
KINDS = ("method", "function", "imported")
HELPER_NAMES = ("basis", "expand", "features", "transform", "_project")
ARGUMENTS = ("x", "inputs", "hidden")
SHAPES = ((4, 8), (2, 3, 5), (16,), (3, 7))
COUNT = 15

_DEFINITIONS = {
    "@passthrough": (
        "def passthrough(fn):\n"
        "    @functools.wraps(fn)\n"
        "    def wrapper(*args, **kwargs):\n"
        "        return fn(*args, **kwargs)\n\n"
        "    return wrapper\n"),
    '@tagged("features")': (
        "def tagged(tag):\n"
        "    def decorate(fn):\n"
        "        @functools.wraps(fn)\n"
        "        def wrapper(*args, **kwargs):\n"
        "            wrapper.calls.append(tag)\n"
        "            return fn(*args, **kwargs)\n\n"
        "        wrapper.calls = []\n"
        "        return wrapper\n\n"
        "    return decorate\n"),
    "@quiet_scope()": (
        "@contextlib.contextmanager\n"
        "def quiet_scope():\n"
        "    yield\n"),
    "@Traced()": (
        "class Traced(contextlib.ContextDecorator):\n"
        "    def __enter__(self):\n"
        "        return self\n\n"
        "    def __exit__(self, *exc):\n"
        "        return False\n"),
}


class _File:
    """The text of one file being generated: its decorator definitions and functions."""

    def __init__(self) -> None:
        self.used: list[str] = []  # the custom decorators it uses, in order
        self.functions: list[str] = []

    def decorate(self, stack: list[str], indent: str) -> str:
        for decorator in stack:
            if decorator in _DEFINITIONS and decorator not in self.used:
                self.used.append(decorator)
        return "".join(f"{indent}{decorator}\n" for decorator in stack)

    def preamble(self) -> tuple[str, str]:
        imports = []
        if any(d in ("@passthrough", '@tagged("features")') for d in self.used):
            imports.append("import functools\n")
        if any(d in ("@quiet_scope()", "@Traced()") for d in self.used):
            imports.insert(0, "import contextlib\n")
        definitions = "".join(f"\n\n{_DEFINITIONS[d]}" for d in self.used)
        return "".join(imports) + ("\n" if imports else "") + "import torch\n", definitions


def _call(kind: str, name: str, argument: str, here: str, library: str) -> str:
    """How a function in ``here`` ("method", "function", "imported") calls the helper."""
    owner = "self" if here == "method" else "module"
    if kind == "method":
        return f"{owner}.{name}({argument})"
    if kind == "imported" and here != "imported":
        return f"{library}.{name}({owner}, {argument})"
    return f"{name}({owner}, {argument})"


def decorators_variants(count: int = COUNT) -> list[Variant]:
    variants = []
    for i in range(count):
        draw = random.Random(f"decorators-{i}").choice
        operator, depth, argument, shape = draw(OPERATORS), draw(DEPTHS), draw(ARGUMENTS), \
            draw(SHAPES)
        forward_stack = [draw(DECORATORS) for _ in range(draw(FORWARD_STACKS))]
        kinds = [draw(KINDS) for _ in range(depth)]
        stacks = [[draw(DECORATORS) for _ in range(draw(HELPER_STACKS))] for _ in range(depth)]
        bases = [draw(HELPER_NAMES) for _ in range(depth)]
        names = [f"{base}_{level + 1}" for level, base in enumerate(bases)]
        # a function below an imported one is in the other file too
        placed = list(kinds)
        for level in range(1, depth):
            if placed[level - 1] == "imported" and placed[level] == "function":
                placed[level] = "imported"
        library = f"decorators_{i:02d}_ops"
        failing = operator.format(a=argument)
        main, other = _File(), _File()
        methods = []
        for level in range(depth):
            here = placed[level]
            last = level == depth - 1
            body = (f"return {failing}" if last else
                    f"return {_call(placed[level + 1], names[level + 1], argument, here, library)}"
                    " + 1")
            if here == "method":
                methods.append(f"\n{main.decorate(stacks[level], '    ')}"
                               f"    def {names[level]}(self, {argument}):\n        {body}\n")
            else:
                into = other if here == "imported" else main
                into.functions.append(f"\n\n{into.decorate(stacks[level], '')}"
                                      f"def {names[level]}(module, {argument}):\n    {body}\n")
        forward_body = (f"return {failing}" if depth == 0 else
                        f"return {_call(placed[0], names[0], argument, 'method', library)} * 2")
        forward = (f"{main.decorate(forward_stack, '    ')}"
                   f"    def forward(self, {argument}):\n        {forward_body}\n")
        name = f"variant.decorators.{i:02d}"
        imports, definitions = main.preamble()
        if "imported" in placed:
            imports += f"\nimport {library}\n"
        size = ", ".join(map(str, shape))
        source = (
            f'"""Generated by tests/corpus/variants/decorators.py: `{failing}` {depth} call(s) '
            f'deep, forward under {" ".join(forward_stack)}."""\n\n'
            f"{imports}{definitions}{''.join(main.functions)}\n\n"
            f'# onnx-export: name="{name}", args=(torch.rand({size}) + 0.5,)\n'
            f"class Decorated{i:02d}(torch.nn.Module):\n"
            f"{forward}{''.join(methods)}")
        files: tuple[tuple[str, str], ...] = ()
        if "imported" in placed:
            other_imports, other_definitions = other.preamble()
            files = ((f"{library}.py",
                      f'"""The helpers of {name} (tests/corpus/variants/decorators.py)."""\n\n'
                      f"{other_imports}{other_definitions}{''.join(other.functions)}"),)
        holder = files[0][1] if depth and placed[-1] == "imported" else source
        line = next(number for number, text in enumerate(holder.splitlines(), 1)
                    if f"return {failing}" in text)
        choices = (operator, f"depth={depth}", f"stack={len(forward_stack)}",
                   *(f"helper_stack={len(stack)}" for stack in stacks),
                   *(f"kind={kind}" for kind in kinds), *forward_stack,
                   *(decorator for stack in stacks for decorator in stack),
                   *(f"name={base}" for base in bases), f"argument={argument}",
                   f"shape={shape}")
        variants.append(Variant("decorators", name, source, line, choices, files=files))
    return variants


def failing_file(variant: Variant) -> str:
    """The file (relative to the variants' root) that holds the failing operator's call."""
    operator = variant.choices[0].split("(")[0]
    return next((relative for relative, text in variant.files if f"return {operator}(" in text),
                variant.file_name)
