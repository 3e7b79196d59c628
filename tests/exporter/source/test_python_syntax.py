"""Parsing from several threads at once (CPython 3.11's shared AST constructor counter,
python/cpython#106905)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from exporter.source.python_syntax import parse_python
from tests.ast_race import errors_from_threads

SOURCE = "\n".join(f"def f{i}(x):\n    return [x + {i} for x in range(3)]" for i in range(40))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the shared counter is CPython 3.11's")
def test_the_race_is_real_for_plain_ast_parse():
    """The hazard the next test guards against happens here (else that test proves nothing)."""
    errors = errors_from_threads(lambda: ast.parse(SOURCE))
    assert any("recursion depth mismatch" in error for error in errors)


def test_parses_in_several_threads_at_once_all_succeed():
    assert errors_from_threads(lambda: parse_python(SOURCE)) == []


def test_the_product_and_the_judge_parse_only_through_it():
    """The corpus judge parsed its own code with a plain ``ast.parse`` in the fix-confirming
    threads, and a CI run failed there on the spurious SystemError."""
    repo = Path(__file__).resolve().parents[3]
    packages = ("exporter", "check_service", "export_worker", "lsp_server", "onnxlens")
    files = [path for package in packages for path in (repo / package).rglob("*.py")]
    files += sorted((repo / "tests" / "corpus").glob("*.py"))
    plain_parses = [
        f"{path.relative_to(repo)}:{node.lineno}"
        for path in files if path.name != "python_syntax.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr == "parse" and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "ast"
    ]
    assert len(files) > 50
    assert plain_parses == []
