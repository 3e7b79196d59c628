"""Warm imports without side effects (``export_worker/warm_imports.py``): onnxlens's worker
imports ahead the installed packages an earlier check imported, but never one whose import
changes global state a check can observe, else later, unrelated checks change verdict. Each
variant is a file whose target imports an "installed" package (a site-packages directory
beside the variants' root, on ``PYTHONPATH`` for onnxlens and the truth) with an
import-time side effect, and one or two unrelated target files of the variant's folder,
checked after it in the same onnxlens process (the corpus's order), whose verdict would
change if the side effect leaked into their process. Each variant draws the side effect
(the default dtype, grad mode, deterministic algorithms, a backend flag, a kernel registered
over an ATen operator, a patched ``torch.nn.functional`` function, an environment variable,
the recursion limit), where the package does it (its ``__init__`` or a submodule), how the
file imports it, the unrelated models (among those the side effect would change), names
and sizes. ``line`` is 0: every target is right only where nothing leaked."""

from __future__ import annotations

import random

from tests.corpus.variants.common import Variant

#: side effect: (the package's statements, the unrelated models it would change). A model is
#: a class body after ``class {cls}(nn.Module):``, then the pragma's ``args``; ``{size}``,
#: ``{arg}``: its input's size and name. Each is right with torch's defaults.
EFFECTS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "default dtype": ("torch.set_default_dtype(torch.float64)\n", (
        ("    def __init__(self):\n        super().__init__()\n"
         "        self.linear = nn.Linear({size}, 3)\n\n"
         "    def forward(self, {arg}):\n        return torch.relu(self.linear({arg}))\n",
         "torch.ones(2, {size}, dtype=torch.float32)"),
        ("    def __init__(self):\n        super().__init__()\n"
         "        self.register_buffer(\"weight\", torch.randn({size}, {size}))\n\n"
         "    def forward(self, {arg}):\n        return {arg} @ self.weight\n",
         "torch.rand(3, {size}, dtype=torch.float32)"))),
    "grad mode": ("torch.set_grad_enabled(False)\n", (
        ("    def forward(self, {arg}):\n"
         "        if torch.is_grad_enabled():  # no check while it trains\n"
         "            return {arg} * 2\n"
         "        if bool(torch.isfinite({arg}).all()):\n"
         "            return {arg} * 2\n"
         "        return torch.zeros_like({arg})\n", "torch.randn(2, {size})"),)),
    "deterministic": ("torch.use_deterministic_algorithms(True)\n", (
        ("    def forward(self, {arg}):\n"
         "        if torch.are_deterministic_algorithms_enabled():\n"
         "            return torch.special.i0({arg})  # a reproducible reference kernel\n"
         "        return torch.cos({arg})\n", "torch.randn(2, {size})"),)),
    "backend flag": ("torch.backends.mha.set_fastpath_enabled(False)\n", (
        ("    def forward(self, {arg}):\n"
         "        if not torch.backends.mha.get_fastpath_enabled():\n"
         "            return torch.special.i0({arg})  # the portable path\n"
         "        return torch.tanh({arg})\n", "torch.randn(2, {size})"),)),
    "aten kernel": ("LIBRARY = torch.library.Library(\"aten\", \"IMPL\")\n"
                    "LIBRARY.impl(\"sinh\", lambda x: x + x ** 3 / 6, \"CPU\")  # fast sinh\n", (
        ("    def __init__(self):\n        super().__init__()\n"
         "        self.linear = nn.Linear({size}, {size})\n\n"
         "    def forward(self, {arg}):\n        return torch.sinh(3 * self.linear({arg}))\n",
         "torch.randn(2, {size})"),)),
    "patched gelu": ("import torch.nn.functional as F\n\n_gelu = F.gelu\n\n\n"
                     "def gelu(x, approximate=\"none\"):\n"
                     "    if bool((x.abs() > 30).any()):  # keep large inputs finite\n"
                     "        x = x.clamp(-30, 30)\n"
                     "    return _gelu(x, approximate=approximate)\n\n\nF.gelu = gelu\n", (
        ("    def __init__(self):\n        super().__init__()\n"
         "        self.linear = nn.Linear({size}, 4)\n        self.act = nn.GELU()\n\n"
         "    def forward(self, {arg}):\n        return self.act(self.linear({arg}))\n",
         "torch.randn(2, {size})"),
        ("    def forward(self, {arg}):\n"
         "        return torch.nn.functional.gelu({arg}) * 2\n", "torch.randn(3, {size})"))),
    "environment": ("import os\n\nos.environ.setdefault(\"FUSED_ACTIVATIONS\", \"1\")\n", (
        ("    def forward(self, {arg}):\n"
         "        if os.environ.get(\"FUSED_ACTIVATIONS\") == \"1\":\n"
         "            return torch.special.i0({arg})\n"
         "        return torch.sigmoid({arg})\n", "torch.randn(2, {size})"),)),
    "recursion limit": ("import sys\n\nsys.setrecursionlimit(20000)\n", (
        ("    def step(self, {arg}, depth):\n"
         "        return {arg} if depth == 0 else self.step({arg} * 0.999, depth - 1)\n\n"
         "    def forward(self, {arg}):\n        return self.step({arg}, 1500)\n",
         "torch.randn(2, {size})"),)),
}
#: the side effects, taken in turn (the variant's number modulo eight: fifteen draws from
#: eight would leave some out), and so the models each would change; every other choice is
#: drawn
ORDER = tuple(EFFECTS)
#: where the package makes the change
WHERE = ("__init__", "submodule")
#: how the file imports it; ``{p}``: the package
IMPORTS = ("import {p}\n", "from {p} import SCALE\n", "import {p} as helpers\n")
PACKAGES = ("fastlayers", "modelkit", "trainutils")
FILES = ("encoder.py", "head.py", "blocks.py")
ARGUMENTS = ("x", "features", "hidden")
SIZES = (4, 6, 8)
UNRELATED_COUNTS = (1, 2)
COUNT = 15


def _user_file(i: int, package: str, style: str, size: int, effect: str) -> str:
    scale = {"import {p}\n": f"{package}.SCALE", "from {p} import SCALE\n": "SCALE",
             "import {p} as helpers\n": "helpers.SCALE"}[style]
    return (f'"""Generated by tests/corpus/variants/warm_imports.py: imports {package}, whose '
            f"import changes the {effect}.\"\"\"\n\nimport torch\nfrom torch import nn\n\n"
            + style.format(p=package) + "\n\n"
            f"# onnx-export: args=(torch.randn(2, {size}),)\n"
            f"class UsesPackage{i:02d}(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            f"        self.linear = nn.Linear({size}, 2)\n\n"
            f"    def forward(self, x):\n        return self.linear(x) * {scale}\n")


def warm_import_variants(count: int = COUNT) -> list[Variant]:
    variants = []
    for i in range(count):
        draw = random.Random(f"warm_imports-{i}").choice
        effect, unrelated = ORDER[i % len(ORDER)], draw(UNRELATED_COUNTS)
        where, style = draw(WHERE), draw(IMPORTS)
        package, size = f"{draw(PACKAGES)}_{i:02d}", draw(SIZES)
        statements, models = EFFECTS[effect]
        change = f'"""An installed package whose import changes the {effect}."""\n\nimport ' \
            f"torch\n\n{statements}"
        if where == "__init__":
            packages = [(f"{package}/__init__.py", f"{change}\nSCALE = 2.0\n")]
        else:
            packages = [(f"{package}/__init__.py",
                         f'"""Its layers."""\n\nfrom {package}.layers import SCALE\n'),
                        (f"{package}/layers.py", f"{change}\nSCALE = 2.0\n")]
        folder = f"variant.warm_imports.{i:02d}"
        files, more_targets, described = [], [], []
        names = iter(FILES)
        for n in range(unrelated):
            index = (i // len(ORDER) + n) % len(models)  # in turn too, as the effect
            argument, model_size = draw(ARGUMENTS), draw(SIZES)
            body, args = models[index]
            cls = f"Unrelated{i:02d}x{n}"
            relative = f"{folder}/{next(names)}"
            files.append((relative, (
                f'"""Generated by tests/corpus/variants/warm_imports.py: right only where '
                f'nothing changed the {effect}."""\n\nimport os\nimport sys\n\n'
                "import torch\nfrom torch import nn\n\n\n"
                f"# onnx-export: args=({args.format(size=model_size)},)\n"
                f"class {cls}(nn.Module):\n"
                + body.format(arg=argument, size=model_size))))
            more_targets.append((relative, cls))
            described.append(f"model={effect}/{index}")
        variants.append(Variant(
            "warm_imports", f"variant.warm_imports.{i:02d}",
            _user_file(i, package, style, size, effect), 0,
            (f"effect={effect}", f"where={where}", f"import={style.format(p='P').strip()}",
             f"unrelated={len(more_targets)}", *described),
            target=f"UsesPackage{i:02d}", files=tuple(files), packages=tuple(packages),
            path=f"{folder}/uses_{package}.py", more_targets=tuple(more_targets)))
    return variants


# -- operators in a namespace of their own (export_worker/namespace_watch.py) -----------------

#: how an unrelated model reaches the package's operator without importing the package (its
#: class body, and what its module holds): the plain exporter's process has no such operator.
#: ``{ns}``, ``{op}``: its names
ACCESSES = {
    "forward": ("    def forward(self, {arg}):\n"
                "        return torch.ops.{ns}.{op}({arg}) + 1\n", ""),
    "overload": ("    def forward(self, {arg}):\n"
                 "        return torch.ops.{ns}.{op}.default({arg}) * 2\n", ""),
    "getattr": ("    def forward(self, {arg}):\n"
                "        kernels = getattr(torch.ops, \"{ns}\")\n"
                "        return kernels.{op}({arg}) - 1\n", ""),
    "__init__": ("    def __init__(self):\n        super().__init__()\n"
                 "        self.scale = torch.ops.{ns}.{op}(torch.ones({size}))\n\n"
                 "    def forward(self, {arg}):\n        return {arg} * self.scale\n", ""),
    "module level": ("    def forward(self, {arg}):\n        return KERNELS.{op}({arg})\n",
                     "KERNELS = torch.ops.{ns}\n"),
    # its own operator of the same name: a plain process defines it (and fails to translate
    # it, ONNX201); where the warm import took the namespace, defining it raised (ONNX002)
    "own library": ("    def forward(self, {arg}):\n"
                    "        return torch.ops.{ns}.{op}({arg}) * 2\n",
                    "LIBRARY = torch.library.Library(\"{ns}\", \"DEF\")\n"
                    "LIBRARY.define(\"{op}(Tensor x) -> Tensor\")\n"
                    "LIBRARY.impl(\"{op}\", lambda x: x + 1, \"CompositeExplicitAutograd\")\n"),
}
NAMESPACES = ("fastops", "kernels", "customlib")
OPERATORS = ("twice", "scaled", "shift")
NAMESPACE_COUNT = 6


def _registering_package(namespace: str, operator: str) -> str:
    return (f'"""An installed package whose import registers ``{namespace}::{operator}``."""'
            "\n\nimport torch\n\n"
            f"LIBRARY = torch.library.Library(\"{namespace}\", \"DEF\")\n"
            f"LIBRARY.define(\"{operator}(Tensor x) -> Tensor\")\n"
            f"LIBRARY.impl(\"{operator}\", lambda x: x * 2, \"CompositeExplicitAutograd\")\n"
            "SCALE = 2.0\n")


def warm_namespace_variants(count: int = NAMESPACE_COUNT) -> list[Variant]:
    """A file importing an installed package that registers an operator in a namespace of its
    own, and unrelated files checked after it that reach the operator through ``torch.ops``
    without importing the package, or define their own in that namespace (each access in
    turn, then drawn): a plain process has no such operator, so their verdicts are its failure
    (eager, construction or import), or for their own operator its translation's (ONNX201).
    Each variant draws the names, where the package registers it, how the first file imports
    it, the access and sizes."""
    variants = []
    for i in range(count):
        draw = random.Random(f"warm_namespaces-{i}").choice
        namespace, operator = f"{draw(NAMESPACES)}_{i:02d}", draw(OPERATORS)
        where, style, size = draw(WHERE), draw(IMPORTS), draw(SIZES)
        package = f"{draw(PACKAGES)}_ns{i:02d}"
        registering = _registering_package(namespace, operator)
        if where == "__init__":
            packages = [(f"{package}/__init__.py", registering)]
        else:
            packages = [(f"{package}/__init__.py",
                         f'"""Its kernels."""\n\nfrom {package}.kernels import SCALE\n'),
                        (f"{package}/kernels.py", registering)]
        folder = f"variant.warm_namespaces.{i:02d}"
        files, more_targets, described = [], [], []
        names = iter(FILES)
        for n in range(draw(UNRELATED_COUNTS)):
            access = list(ACCESSES)[(i + n) % len(ACCESSES)] if n == 0 else draw(list(ACCESSES))
            body, module_level = ACCESSES[access]
            argument, model_size = draw(ARGUMENTS), draw(SIZES)
            cls = f"ReachesOp{i:02d}x{n}"
            relative = f"{folder}/{next(names)}"
            text = (body.replace("{ns}", namespace).replace("{op}", operator)
                    .format(arg=argument, size=model_size))
            files.append((relative, (
                f'"""Generated by tests/corpus/variants/warm_imports.py: reaches '
                f'torch.ops.{namespace} without importing {package}."""\n\n'
                "import torch\nfrom torch import nn\n\n"
                + module_level.replace("{ns}", namespace).replace("{op}", operator) + "\n\n"
                f"# onnx-export: args=(torch.randn(2, {model_size}),)\n"
                f"class {cls}(nn.Module):\n" + text)))
            more_targets.append((relative, cls))
            described.append(f"access={access}")
        variants.append(Variant(
            "warm_namespaces", f"variant.warm_namespaces.{i:02d}",
            _user_file(i, package, style, size, f"operators ({namespace}::{operator})"), 0,
            (f"where={where}", f"import={style.format(p='P').strip()}",
             f"unrelated={len(more_targets)}", *described),
            target=f"UsesPackage{i:02d}", files=tuple(files), packages=tuple(packages),
            path=f"{folder}/uses_{package}.py", more_targets=tuple(more_targets)))
    return variants
