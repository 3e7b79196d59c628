"""Export-call interception (docs/export-calls.md): a function marked ``# onnx-export:`` that can
be called without arguments and calls ``torch.onnx.export`` is a target per call
(``function@line``); every other export the code reaches while the target loads runs as the
plain exporter runs it, returns its ``ONNXProgram``, and its file is read back by the code, but
nothing is written into the user's tree. Each variant draws where the other export calls sit
(the module's top level, a helper, a thread started at top level, a ``try/except Exception``
around a failing export, another file of the variant, an installed package), where the target's
own call sits (directly, in a helper of the file, inside ``try/except BaseException: pass``, in
a thread the function starts and joins), what the code does with each result (``save`` after
``optimize``, ``onnx.load``, an ONNX Runtime session), whether the target's model exports (a
data-dependent branch: ONNX101; ``torch.special.i0``: ONNX201), the output paths (relative, a
folder beside the script, a temporary directory), names and sizes; ``line`` is the failing line
of the target's model, 0 when it exports. Each variant lives in a folder of its own
(``variant.export_calls.07/``), with its other files."""

from __future__ import annotations

import random

from tests.corpus.variants.common import Variant

#: where a non-target export call sits
OTHER_PLACES = ("top level", "helper", "thread", "try", "other file", "package")
#: where the target's own call sits
TARGET_FORMS = ("direct", "helper", "try", "thread")
#: what the code does with an export's result
USES = ("save", "onnx.load", "session")
#: the target's model: (kind, the rule its export fails with, "" when it exports)
TARGET_MODELS = (("linear", ""), ("conv", ""), ("branch", "ONNX101"), ("i0", "ONNX201"))
#: output paths; ``{file}``: the file name
PATHS = ('"{file}"', 'os.path.join(HERE, "exports", "{file}")',
         'os.path.join(tempfile.mkdtemp(), "{file}")')
FUNCTIONS = ("export_all", "main", "convert", "export_onnx")
FILES = ("export.py", "convert_model.py", "to_onnx.py")
ARGUMENTS = ("x", "features", "hidden")
SIZES = (4, 6, 8)
OTHER_COUNTS = (1, 2, 3)
#: the marked function's parameters, as scripts write an entry point; "argparse": none, and
#: its first statement parses the command line of ``python script.py`` (a check's too)
SIGNATURES = ("", "opset=18", "output_dir=HERE, *, verbose=False", "*argv, **options",
              "argparse")
PACKAGE = "onnx_export_kit"
COUNT = 15

_USE_BODY = {
    "save": ("    program = torch.onnx.export(model, args, dynamo=True)\n"
             "    program.optimize()\n"
             "    program.save(path)\n"
             "    return onnx.load(path)\n"),
    "onnx.load": ("    torch.onnx.export(model, args, path, dynamo=True)\n"
                  "    proto = onnx.load(path)\n"
                  "    onnx.checker.check_model(proto)\n"
                  "    return proto\n"),
    "session": ("    torch.onnx.export(model, args, path, dynamo=True)\n"
                "    session = ort.InferenceSession(path, providers=[\"CPUExecutionProvider\"])\n"
                "    return session.run(None, {session.get_inputs()[0].name: args[0].numpy()})\n"),
}
_IMPORTS = "import onnx\nimport onnxruntime as ort\nimport torch\n"


def _exporter(name: str, use: str) -> str:
    """A function ``name(model, args, path)`` that exports and uses the result."""
    return f"def {name}(model, args, path):\n{_USE_BODY[use]}"


def _side_model(i: int, size: int) -> str:
    return (f"class Side{i:02d}(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            f"        self.proj = nn.Linear({size}, 3)\n\n"
            "    def forward(self, x):\n"
            "        return torch.relu(self.proj(x))\n")


def _failing_side_model(i: int) -> str:
    return (f"class Flaky{i:02d}(nn.Module):\n"
            "    def forward(self, x):\n"
            "        if x.mean() > 0:\n"
            "            return x * 2\n"
            "        return x - 1\n")


def _target_model(i: int, kind: str, argument: str, size: int) -> str:
    head = (f"class Target{i:02d}(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n")
    if kind == "conv":
        return (head + "        self.conv = nn.Conv1d(2, 2, 3, padding=1)\n\n"
                f"    def forward(self, {argument}):\n"
                f"        return torch.tanh(self.conv({argument}))\n")
    head += f"        self.linear = nn.Linear({size}, {size})\n\n" \
        f"    def forward(self, {argument}):\n" \
        f"        y = self.linear({argument})\n"
    if kind == "branch":
        return head + "        if y.sum() > 0:\n            return y * 2\n        return y - 1\n"
    if kind == "i0":
        return head + "        return torch.special.i0(y)\n"
    return head + "        return torch.relu(y)\n"


def export_call_variants(count: int = COUNT) -> list[Variant]:
    variants = []
    for i in range(count):
        rng = random.Random(f"export_calls-{i}")
        draw = rng.choice
        form, (kind, rule), target_path = draw(TARGET_FORMS), draw(TARGET_MODELS), draw(PATHS)
        places = [draw(OTHER_PLACES) for _ in range(draw(OTHER_COUNTS))]
        uses = [draw(USES) for _ in places]
        paths = [draw(PATHS) for _ in places]
        function, script = f"{draw(FUNCTIONS)}_{i:02d}", draw(FILES)
        argument, size, side_size = draw(ARGUMENTS), draw(SIZES), draw(SIZES)
        signature = draw(SIGNATURES)  # drawn last: the variants drawn before keep the rest
        folder = f"variant.export_calls.{i:02d}"
        helpers = f"helpers_{i:02d}"
        files: list[tuple[str, str]] = [(f"{folder}/exports/README.txt",
                                         "The exported models go here.\n")]
        packages: list[tuple[str, str]] = []
        top: list[str] = []  # statements at the module's top level, after the definitions
        inside: list[str] = []  # statements of the function, before the target's call
        imports = ["import os", "import tempfile", "import threading", "", "import onnx",
                   "import onnxruntime as ort", "import torch", "from torch import nn"]
        local = []
        for n, (place, use, path) in enumerate(zip(places, uses, paths)):
            out = path.format(file=f"side_{n}.onnx")
            call = f"Side{i:02d}().eval(), (torch.randn(2, {side_size}),), {out}"
            if place == "top level":
                top.append(f"side_model = Side{i:02d}().eval()\n"
                           f"side_args = (torch.randn(2, {side_size}),)\n"
                           f"side_path = {out}\n" + "\n".join(
                               line[4:].replace("model", "side_model").replace(
                                   "args", "side_args").replace("path", "side_path")
                               for line in _USE_BODY[use].splitlines()
                               if not line.lstrip().startswith("return")) + "\n")
                if use == "save":
                    top[-1] = top[-1].replace("program.save(side_path)\n",
                                              "program.save(side_path)\n"
                                              "assert os.path.getsize(side_path) > 0\n")
            elif place in ("helper", "thread", "try"):
                name = f"export_side_{n}"
                local.append(_exporter(name, use))
                if place == "helper":
                    top.append(f"{name}({call})\n")
                elif place == "thread":
                    top.append(f"side_thread = threading.Thread(target={name}, args=({call}))\n"
                               "side_thread.start()\nside_thread.join()\n")
                else:
                    top.append(f"try:\n    {name}(Flaky{i:02d}(), (torch.randn(2, 3),), {out})\n"
                               "except Exception as error:  # the legacy exporter as a fallback\n"
                               "    print(f\"export failed: {type(error).__name__}\")\n")
            elif place == "other file":
                files.append((f"{folder}/{helpers}.py",
                              f'"""The export helpers of the variant."""\n\n{_IMPORTS}\n\n'
                              + "\n\n".join(_exporter(f"export_{n}", u) for n, u
                                            in enumerate(uses)) + "\n"))
                inside.append(f"{helpers}.export_{n}({call})")
                if f"import {helpers}" not in imports:
                    imports.append(f"import {helpers}")
            else:
                packages.append((f"{PACKAGE}/__init__.py",
                                 f'"""An installed package with export helpers."""\n\n'
                                 f"{_IMPORTS}\n\n" + "\n\n".join(
                                     _exporter(f"export_{u.replace('.', '_')}", u)
                                     for u in USES) + "\n"))
                inside.append(f"{PACKAGE}.export_{use.replace('.', '_')}({call})")
                if f"import {PACKAGE}" not in imports:
                    imports.append(f"import {PACKAGE}")
        out = target_path.format(file=f"target_{i:02d}.onnx")
        export = (f"torch.onnx.export(model, ({argument},), {out}, dynamo=True, "
                  f'input_names=["{argument}"])')
        if form == "helper":
            local.append("def _export_target(model, args, path):\n"
                         "    torch.onnx.export(model, args, path, dynamo=True)\n")
            call_lines = [f"_export_target(model, ({argument},), {out})"]
        elif form == "try":
            call_lines = ["try:", f"    {export}", "except BaseException:", "    pass"]
        elif form == "thread":
            call_lines = [f"worker = threading.Thread(target=lambda: {export})",
                          "worker.start()", "worker.join()"]
        else:
            call_lines = [export]
        shape = f"2, 2, {size}" if kind == "conv" else f"3, {size}"
        parsing = signature == "argparse"
        if parsing:
            imports.insert(0, "import argparse")
            top.insert(0, 'parser = argparse.ArgumentParser(description="Export the model.")\n'
                          'parser.add_argument("--opset", type=int, default=18)\n')
        body = [*(["options = parser.parse_args()"] if parsing else []), *inside,
                f"model = Target{i:02d}().eval()",
                f"{argument} = torch.randn({shape})", *call_lines,
                f'print("exported {function}")']
        source = (f'"""Generated by tests/corpus/variants/export_calls.py: other calls '
                  f"{', '.join(f'{p} ({u})' for p, u in zip(places, uses))}; the target's call "
                  f'{form}, its model {kind}."""\n\n' + "\n".join(imports) + "\n\n"
                  "HERE = os.path.dirname(os.path.abspath(__file__))\n\n\n"
                  + _side_model(i, side_size) + "\n\n" + _failing_side_model(i) + "\n\n"
                  + _target_model(i, kind, argument, size) + "\n\n"
                  + "".join(f"{text}\n\n" for text in local)
                  + "\n".join(top) + "\n\n# onnx-export:\n"
                  f"def {function}({'' if parsing else signature}):\n"
                  + "".join(f"    {line}\n" for line in body))
        lines = source.splitlines()
        first_call = call_lines[0].strip()
        call_line = next(n for n, text in enumerate(lines, 1)
                         if text.strip() == first_call and n > _definition(lines, function))
        if form == "try":
            call_line += 1
        failing = {"branch": "if y.sum() > 0:", "i0": "return torch.special.i0(y)"}
        line = next((n for n, text in enumerate(lines, 1) if text.strip() == failing.get(kind)),
                    0)
        variants.append(Variant(
            "export_calls", f"variant.export_calls.{i:02d}", source, line,
            (*(f"place={p}" for p in places), *(f"use={u}" for u in uses),
             *(f"path={p}" for p in (*paths, target_path)), f"form={form}", f"model={kind}",
             f"rule={rule}", f"signature={signature or 'none'}"),
            target=f"{function}@{call_line}", files=tuple(files), packages=tuple(packages),
            path=f"{folder}/{script}"))
    return variants


def _definition(lines: list[str], function: str) -> int:
    return next(n for n, text in enumerate(lines, 1) if text.startswith(f"def {function}("))


def expected_rule(variant: Variant) -> str:
    """The rule the target's export fails with ("" when it exports)."""
    return next(c for c in variant.choices if c.startswith("rule=")).partition("=")[2]
