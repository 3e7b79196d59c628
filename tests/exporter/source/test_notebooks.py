"""A notebook as one module (exporter/source/notebooks.py): cells in order, one line of the
module per line of a cell, IPython syntax neutralised, a cell that does not parse left out."""

from __future__ import annotations

import ast
import json

import pytest

from exporter.findings.diagnostics import Range
from exporter.source.notebooks import (
    CellPosition,
    NotebookCodeTooBig,
    NotebookError,
    NotPythonNotebook,
    ipython_names,
    notebook_module,
    notebook_problem,
    raw_range,
)


def _notebook(*cells: tuple[str, str], ensure_ascii: bool = False) -> bytes:
    document = {"cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(True),
                           **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                          for kind, text in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(document, indent=1, ensure_ascii=ensure_ascii).encode()


def test_code_cells_in_order_each_line_where_it_was():
    module = notebook_module(_notebook(("markdown", "# Title\ntext\n"),
                                       ("code", "import torch\nx = 1\n"),
                                       ("markdown", "more"),
                                       ("code", "def f():\n    return x\n")))
    assert module.text == "import torch\nx = 1\ndef f():\n    return x\n"
    assert [(c.number, c.first_line) for c in module.cells] == [(2, 1), (4, 3)]
    assert module.position(4) == CellPosition(4, 2)
    assert module.module_line(4, 2) == 4
    assert module.position(5) is None
    assert module.problems == ()


def test_ipython_syntax_is_neutralised_and_keeps_the_line_count():
    cell = ("%matplotlib inline\nfiles = !ls\nfor name in []:\n    !echo {name}\n"
            "torch.nn?\nx = 1\n")
    module = notebook_module(_notebook(("code", cell), ("code", "%%bash\necho hi\n"),
                                       ("code", "%%time\ny = 2\n")))
    lines = module.text.splitlines()
    assert lines[:6] == ["pass  # %matplotlib inline", "files = None  # files = !ls",
                         "for name in []:", "    pass  # !echo {name}", "pass  # torch.nn?",
                         "x = 1"]
    assert lines[6:8] == ["# %%bash", "# echo hi"]  # not Python: the whole cell is out
    assert lines[8:] == ["pass  # %%time", "y = 2"]  # %%time runs its body as Python
    ast.parse(module.text)
    assert module.problems == ()


def test_valid_python_is_never_rewritten():
    """A line that starts with % inside a string of a cell that parses stays as written."""
    cell = 'text = """\n% of them\n!important\n"""\n'
    assert notebook_module(_notebook(("code", cell))).text == cell


def test_a_cell_that_does_not_parse_is_left_out_and_reported():
    module = notebook_module(_notebook(("code", "import torch\n"),
                                       ("code", "x = 1\ndef broken(:\n    pass\n"),
                                       ("code", "y = 2\n")))
    assert module.text == "import torch\n\n\n\ny = 2\n"
    [problem] = module.problems
    assert (problem.cell, problem.line, problem.column) == (2, 2, 12)
    assert module.position(5) == CellPosition(3, 1)


@pytest.mark.parametrize("raw, reason", [
    (b'{"cells": [', "not valid JSON"),
    (b'[1, 2]', "not a Jupyter notebook in nbformat 4"),
    (b'{"nbformat": 3, "worksheets": []}', "not a Jupyter notebook in nbformat 4"),
    (b'{"cells": [{"cell_type": "code", "source": 3}]}', "neither a string nor a list"),
    (b'\xff\xfe', "not valid JSON"),
])
def test_what_is_not_a_notebook_says_why(raw, reason):
    with pytest.raises(NotebookError, match=reason):
        notebook_module(raw)


@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_raw_range_finds_the_cell_text_in_the_file(ensure_ascii):
    raw = _notebook(("markdown", "intro"), ("code", "import torch\ncafé = torch.ones(1) + 1\n"),
                    ensure_ascii=ensure_ascii)
    module = notebook_module(raw)
    cell = module.cells[0]
    found = raw_range(cell, Range.of(2, 8, 2, 21))  # `torch.ones(1)`, after the é
    assert found is not None
    line = raw.decode().splitlines()[found.start.line - 1]
    assert line[found.start.column - 1:found.end.column - 1] == "torch.ones(1)"


def test_a_cell_written_as_one_string_points_at_that_string():
    document = {"cells": [{"cell_type": "code", "source": "a = 1\nb = 2\n"}], "nbformat": 4}
    raw = json.dumps(document).encode()
    cell = notebook_module(raw).cells[0]
    found = raw_range(cell, Range.of(2, 1, 2, 2))
    assert found is not None
    assert raw.decode()[found.start.column - 2] == '"'  # the string's opening quote


# -- issue 39: nothing lost, round 4 ------------------------------------------------------------

@pytest.mark.parametrize("text, given", [
    ("get_ipython().run_line_magic('matplotlib', 'inline')\n", True),
    ("def f():\n    return get_ipython().system('ls')\n", True),
    ("def get_ipython():\n    return None\nget_ipython()\n", False),  # theirs
    ("from IPython import get_ipython\nget_ipython()\n", False),
    ("try:\n    from IPython import get_ipython\nexcept ImportError:\n    pass\n"
     "get_ipython()\n", False),
    ("def g():\n    get_ipython = print\n    get_ipython()\nget_ipython()\n", True),  # local
    ("x = 1\n", False),  # not used
    ("text = 'get_ipython'\n", False),
])
def test_get_ipython_is_given_only_when_used_and_not_bound(text, given):
    names = ipython_names(text)
    assert ("get_ipython" in names) is given
    if given:
        shell = names["get_ipython"]()
        assert shell.run_line_magic("matplotlib", "inline") is None
        assert shell.system("pip install onnx") is None
        assert shell.run_cell_magic("time", "", "x = 1") is None
        with pytest.raises(AttributeError):  # no protocol is pretended
            shell.__array__  # noqa: B018


@pytest.mark.parametrize("metadata, language", [
    ({"kernelspec": {"language": "R", "name": "ir"}}, "R"),
    ({"language_info": {"name": "julia"}}, "julia"),
    ({"kernelspec": {"language": "python"}, "language_info": {"name": "scala"}}, "scala"),
])
def test_a_notebook_of_another_language_is_not_read_as_python(metadata, language):
    document = {"cells": [{"cell_type": "code", "source": "x <- 1\n"}], "metadata": metadata,
                "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(document).encode()
    with pytest.raises(NotPythonNotebook) as raised:
        notebook_module(raw)
    assert raised.value.language == language
    assert isinstance(notebook_problem(raw), NotPythonNotebook)


@pytest.mark.parametrize("metadata", [
    {}, {"kernelspec": {"language": "python", "name": "python3"},
         "language_info": {"name": "python", "version": "3.12.1"}},
    {"kernelspec": {"name": "python3"}}, {"language_info": {"name": "Python"}}])
def test_a_python_notebook_or_one_that_does_not_say_is_read(metadata):
    document = {"cells": [{"cell_type": "code", "source": "x = 1\n"}], "metadata": metadata,
                "nbformat": 4}
    raw = json.dumps(document).encode()
    assert notebook_module(raw).text == "x = 1\n"
    assert notebook_problem(raw) is None


@pytest.mark.parametrize("raw, reason", [
    (b'{"cells": [', "not valid JSON"),
    (b'{"metadata": {}}', "not a Jupyter notebook in nbformat 4"),
    (b'{"cells": [{"cell_type": "code", "source": 3}]}', "neither a string nor a list"),
    (b'\xff\xfe', "not valid JSON"),
])
def test_notebook_problem_says_what_notebook_module_raises(raw, reason):
    problem = notebook_problem(raw)
    assert problem is not None and reason in str(problem)


def test_the_size_limit_counts_the_code_cells_not_the_outputs():
    document = json.loads(_notebook(("code", "import torch\n"), ("code", "x = 1\n")))
    document["cells"][0]["outputs"] = [{"output_type": "display_data", "metadata": {},
                                        "data": {"image/png": "A" * 5000}}]
    raw = json.dumps(document).encode()
    assert notebook_module(raw, max_code_bytes=100).text == "import torch\nx = 1\n"
    with pytest.raises(NotebookCodeTooBig) as raised:
        notebook_module(raw, max_code_bytes=10)
    assert (raised.value.size, raised.value.limit) == (len("import torch\nx = 1\n"), 10)


def test_a_notebook_file_is_read_up_to_its_own_larger_limit(tmp_path):
    from exporter.source.text import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, decoding_problem

    assert MAX_NOTEBOOK_BYTES > MAX_SOURCE_BYTES
    huge = tmp_path / "huge.ipynb"
    with open(huge, "wb") as handle:  # sparse: takes no disk space, never read
        handle.truncate(MAX_NOTEBOOK_BYTES + 1024 * 1024)
    problem = decoding_problem(huge)
    assert problem is not None
    assert (problem.rule, problem.message) == (
        "ONNX002", "The file cannot be read: it is 257.0 MB, and onnxlens reads notebooks of "
        "at most 256.0 MB; it is not checked.")
    r_notebook = tmp_path / "r.ipynb"
    r_notebook.write_text(json.dumps({"cells": [], "nbformat": 4,
                                      "metadata": {"kernelspec": {"language": "R"}}}))
    problem = decoding_problem(r_notebook)
    assert problem is not None
    assert (problem.rule, problem.severity, problem.location.range.start.line) == (
        "ONNX005", "info", 1)
