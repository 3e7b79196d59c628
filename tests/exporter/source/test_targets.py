"""Static target discovery: pragmas (one or many lines), ExportableModule subclasses, and a
diagnostic at the pragma for everything malformed. Nothing is executed here."""

from __future__ import annotations

import textwrap
from pathlib import Path

from exporter.source.targets import ANY_LINE, discover

PATH = Path("/workspace/model.py")


def _discover(source: str):
    return discover(PATH, textwrap.dedent(source))


def _spans(diagnostics):
    return [(d.rule, d.location.range.start.line, d.location.range.start.column,
             d.location.range.end.line, d.location.range.end.column) for d in diagnostics]


def test_pragma_over_several_lines_with_decorator_between():
    found = _discover('''
        import torch

        # onnx-export: args=(torch.randn(2, 8),),
        #     dynamic_shapes=({0: "batch"},),
        #     name="mlp"
        @some_decorator
        class MLP(torch.nn.Module):
            pass
    ''')
    assert found.diagnostics == []
    (target,) = found.targets
    assert (target.name, target.symbol, target.kind) == ("mlp", "MLP", "class")
    assert target.options["dynamic_shapes"].source == "({0: 'batch'},)"
    dynamic = target.options["dynamic_shapes"].range
    assert (dynamic.start.line, dynamic.start.column, dynamic.end.line, dynamic.end.column) == (
        5, 22, 5, 37)
    assert (target.definition.start.line, target.definition.start.column) == (8, 7)


def test_function_target_and_exportable_module():
    found = _discover('''
        import torch

        # onnx-export: atol=1e-4
        def build():
            return None

        class Auto(torch.onnx.ExportableModule):
            def example_arguments(self):
                return (torch.randn(1),), None

        class NeedsArguments(torch.onnx.ExportableModule):
            def __init__(self, width):
                super().__init__()
    ''')
    assert [(t.name, t.kind, t.exportable_module) for t in found.targets] == [
        ("build", "function", False), ("Auto", "class", True)]
    # not a target, and said so (issue "nothing lost": it was skipped without a word)
    (skipped,) = found.diagnostics
    assert _spans([skipped]) == [("ONNX005", 12, 7, 12, 21)]
    assert skipped.severity.value == "info"
    assert skipped.message == ("`NeedsArguments` is not checked: its constructor needs "
                               "arguments. Add `# onnx-export: init={...}` above the class to "
                               "check it.")


def test_malformed_pragmas_are_diagnostics_at_the_pragma():
    found = _discover('''
        # onnx-export: args=(1,
        class A:
            pass

        # onnx-export: (1, 2), weights="some"
        class B:
            pass

        # onnx-export: args=(1,), args=(2,)
        class C:
            pass

        def nested():
            # onnx-export: args=(1,)
            class D:
                pass
    ''')
    assert found.targets == []
    assert _spans(found.diagnostics) == [
        ("ONNX001", 2, 16, 2, 24),   # "(" was never closed
        ("ONNX001", 6, 16, 6, 22),   # positional argument
        ("ONNX001", 6, 32, 6, 38),   # weights must be "random" or "none"
        ("ONNX001", 10, 27, 10, 36),  # duplicate key
        ("ONNX001", 15, 5, 15, 29),  # not attached to a top-level class or def
    ]
    messages = " ".join(d.message for d in found.diagnostics)
    assert "never closed" in messages and "needs a key" in messages
    assert "given twice" in messages and "not attached" in messages


def test_syntax_error_is_one_diagnostic_at_the_error():
    found = _discover("class A(:\n    pass\n")
    assert found.targets == []
    assert _spans(found.diagnostics) == [("ONNX002", 1, 9, 1, 10)]


def test_duplicate_target_names():
    found = _discover('''
        # onnx-export: name="x"
        class A:
            pass

        # onnx-export: name="x"
        class B:
            pass
    ''')
    assert [t.symbol for t in found.targets] == ["A"]
    assert _spans(found.diagnostics) == [("ONNX001", 6, 21, 6, 24)]


def test_non_ascii_columns_count_characters():
    found = _discover('''
        # onnx-export: name="é", weights=1
        class A:
            pass
    ''')
    assert _spans(found.diagnostics) == [("ONNX001", 2, 34, 2, 35)]


def test_lines_break_where_python_and_lsp_break_them():
    """A line of only a form feed, or U+2028 / U+0085 inside a string, is no line break for
    Python or LSP; ``str.splitlines`` made it one and shifted every later line (issue
    "nothing lost")."""
    found = discover(PATH, 'import torch\n\f\nNOTE = "a\u2028b\x85c"\n\n'
                           '# onnx-export: args=(torch.randn(2),)\n'
                           'class Late(torch.nn.Module):\n    pass\n')
    assert found.diagnostics == []
    (target,) = found.targets
    definition = target.definition
    assert (definition.start.line, definition.start.column, definition.end.column) == (6, 7, 11)


def test_a_file_nested_too_deeply_to_parse_is_one_diagnostic():
    """20,000 chained additions: a RecursionError traceback before (issue "nothing lost")."""
    found = discover(PATH, "import torch\ny = " + " + ".join(["x"] * 20000) + "\n")
    assert found.targets == []
    (problem,) = found.diagnostics
    assert _spans([problem]) == [("ONNX002", 1, 1, 1, 2)]
    assert problem.message == ("Python cannot parse this file: it is nested too deeply "
                               "(RecursionError); it cannot be imported either.")


def test_cpythons_spurious_recursion_depth_mismatch_does_not_lose_the_targets(monkeypatch):
    """CPython 3.11's ast constructor sometimes raises "AST constructor recursion depth
    mismatch" for a fine source (python/cpython#106905); the language server lost a check to
    it in tests/lsp/test_random_sequences.py. The parse is tried once more."""
    import ast

    real_parse = ast.parse
    raised = []

    def flaky_parse(source, *args, **kwargs):
        if not raised:
            raised.append(source)
            raise SystemError("AST constructor recursion depth mismatch (before=60, after=107)")
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", flaky_parse)
    found = _discover('''
        import torch

        # onnx-export: args=(torch.randn(2, 8),), name="mlp"
        class MLP(torch.nn.Module):
            pass
    ''')
    assert raised and [t.name for t in found.targets] == ["mlp"] and not found.diagnostics


def test_a_pragma_expression_nested_too_deeply_is_onnx001_at_the_pragma():
    """Issue "nothing lost, round 3", item 6: a 400-term `+` chain made ast.unparse raise
    RecursionError, and the whole file (and `check dir`) got no report."""
    terms = " + ".join(["1"] * 400)
    text = (f"import torch\n\n\n# onnx-export: args=(torch.randn(2, {terms}),)\n"
            "class Deep(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "# onnx-export: args=(torch.randn(2),)\n"
            "class Fine(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    found = discover(Path("deep.py"), text)
    assert [t.name for t in found.targets] == ["Fine"]
    (problem,) = found.diagnostics
    assert (problem.rule, problem.location.range.start.line) == ("ONNX001", 4)
    assert "nested too deeply" in problem.message


def test_a_function_with_no_inputs_that_returns_nothing_is_checked_with_the_call_it_reaches():
    """Its export call is in a helper of another file (timm's ``onnx_export``): the target is
    the first call it reaches from any line (``ANY_LINE``). A function that returns a value
    (a model), yields, has ``args=``, takes arguments or calls the exporter itself keeps its
    meaning."""
    found = _discover('''
        import torch
        from library import onnx_export

        # onnx-export:
        def script():
            def nested():
                return 1
            onnx_export(build(), "m.onnx")

        # onnx-export:
        def factory():
            if True:
                return build()

        # onnx-export:
        def generated():
            yield build()

        # onnx-export: args=(torch.randn(2),)
        def with_inputs():
            build()

        # onnx-export:
        def direct():
            torch.onnx.export(build(), (torch.randn(2),), "m.onnx")
    ''')
    assert found.diagnostics == []
    assert [(t.name, t.export_call_line) for t in found.targets] == [
        ("script", ANY_LINE), ("factory", None), ("generated", None), ("with_inputs", None),
        ("direct@26", 26)]


def test_a_function_callable_without_arguments_makes_its_calls_targets():
    """Export scripts give their entry point defaults (``def main(output="m.onnx",
    opset=18)``): a function every parameter of which has a default, or is ``*args`` or
    ``**kwargs``, is called with none, and its export calls are targets; so are a decorated
    function's, whatever its parameters (a click command takes them from the command line).
    An undecorated one with a parameter without a default cannot be called as it is: it is a
    builder target, whose failure says so (ONNX003)."""
    found = _discover('''
        import torch

        # onnx-export:
        def main(output="m.onnx", opset=18):
            torch.onnx.export(build(), (torch.randn(2),), output, opset_version=opset)

        # onnx-export:
        @torch.no_grad()
        def convert(directory=".", /, *, batch=4, **overrides):
            torch.onnx.export(build(), (torch.randn(batch),), directory + "/m.onnx")

        # onnx-export:
        def everything(*args, **kwargs):
            torch.onnx.export(build(), (torch.randn(2),), "m.onnx")

        # onnx-export:
        def needs_a_path(path, opset=18):
            torch.onnx.export(build(), (torch.randn(2),), path)

        # onnx-export:
        def needs_a_keyword(*, path):
            torch.onnx.export(build(), (torch.randn(2),), path)

        # onnx-export:
        @click.command()
        @click.option("--path", default="m.onnx")
        def command(path):
            torch.onnx.export(build(), (torch.randn(2),), path)
    ''')
    assert [(t.name, t.export_call_line) for t in found.targets] == [
        ("main@6", 6), ("convert@11", 11), ("everything@15", 15), ("needs_a_path", None),
        ("needs_a_keyword", None), ("command@29", 29)]
