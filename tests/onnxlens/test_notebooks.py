"""``onnxlens check`` on Jupyter notebooks (tests/onnxlens/notebooks/): the code cells run in
order as one module, and every output locates a finding by cell and line (docs/notebooks.md).

export.ipynb: cell 1 markdown; cell 2 magics and imports; cell 3 a helper; cell 4 the clean
target ``Clean`` (uses the helper); cell 5 markdown; cell 6 ``Branching``, which branches on a
tensor's values (ONNX101 at cell 6, line 4, column 12); cell 7 a ``%%bash`` cell; cell 8
``Quiet``, the same branch with the finding suppressed. broken_cell.ipynb: cell 2 does not
parse, the target in cell 3 is still checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onnxlens.cli import main
from tests.sarif_tools import (
    ERRORS_AND_WARNINGS,
    validate_with_multitool,
    validate_with_schema,
)

NOTEBOOKS = Path(__file__).parent / "notebooks"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("notebooks")
    for notebook in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(notebook, root / notebook.name)
    (root / "pyproject.toml").write_text("")
    return root


@pytest.fixture(scope="module")
def json_and_sarif(workspace: Path) -> tuple[int, dict, dict]:
    """One check of the workspace, JSON on stdout and SARIF in a file."""
    import contextlib
    import io
    import os

    sarif_file = workspace / "out.sarif"
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(workspace)
    try:
        with contextlib.redirect_stdout(out):
            code = main(["check", ".", "--format", "json", "--sarif-file", str(sarif_file)])
    finally:
        os.chdir(cwd)
    return code, json.loads(out.getvalue()), json.loads(sarif_file.read_text())


def test_text_locates_the_finding_by_cell_and_line(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    assert main(["check", "export.ipynb"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("export.ipynb:cell 6:4:12: error[ONNX101]: `if x.sum() > 0:` "
                          "depends on the values inside a tensor")
    assert " 4 |         if x.sum() > 0:\n   |            ^^^^^^^^^^^\n" in out  # cell's line
    assert out.rstrip().endswith("Checked 3 target(s) in 1 file(s): 1 error, 0 warnings "
                                 "(1 target(s) failing).")


def test_json_gives_the_cell_and_the_line_within_it(json_and_sarif):
    code, report, _ = json_and_sarif
    assert code == 1
    targets = {t["name"]: t for t in report["targets"]}
    assert {name: (t["path"], t["cell"], t["range"]["start"]["line"], t["ok"])
            for name, t in targets.items()} == {
        "Clean": ("export.ipynb", 4, 2, True),  # the helper of cell 3 was defined
        "Branching": ("export.ipynb", 6, 2, False),
        "Quiet": ("export.ipynb", 8, 2, True),  # its finding is suppressed
        "build": ("broken_cell.ipynb", 3, 2, True),
    }
    found = [(d["rule"], d["path"], d["cell"], d["range"]["start"]["line"],
              d["range"]["start"]["column"], d["range"]["end"]["column"])
             for d in report["diagnostics"]]
    assert found == [
        ("ONNX002", "broken_cell.ipynb", 2, 1, 12, 13),
        ("ONNX101", "export.ipynb", 6, 4, 12, 23),  # Quiet's is suppressed in its cell
    ]
    assert report["diagnostics"][0]["message"].startswith("Syntax error in cell 2: ")
    related = report["diagnostics"][1]["related"]
    assert [(r["cell"], r["range"]["start"]["line"]) for r in related] == [(6, 4)]


def test_sarif_points_into_the_notebook_file_and_names_the_cell(json_and_sarif, workspace):
    _, _, log = json_and_sarif
    assert validate_with_schema(log) == []
    assert validate_with_multitool(workspace / "out.sarif") == []
    results = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    location = results["ONNX101"]["locations"][0]
    assert location["properties"] == {"cell": 6, "cellLine": 4, "cellColumn": 12}
    physical = location["physicalLocation"]
    assert physical["artifactLocation"]["uri"] == "export.ipynb"
    region = physical["region"]
    raw_line = (workspace / "export.ipynb").read_text().splitlines()[region["startLine"] - 1]
    # the region is the finding's text inside the cell's JSON string
    assert raw_line[region["startColumn"] - 1:region["endColumn"] - 1] == "x.sum() > 0"
    # what a viewer shows: the cell's lines as the user wrote them, and the cell by name
    assert region["snippet"] == {"text": "        if x.sum() > 0:"}
    context = physical["contextRegion"]
    assert context["snippet"]["text"] == ("class Branching(nn.Module):\n"
                                          "    def forward(self, x):\n"
                                          "        if x.sum() > 0:\n"
                                          "            return x + 1\n"
                                          "        return x - 1")  # cell lines 2-6
    assert context["startLine"] < region["startLine"] < context["endLine"]
    # the context starts where the cell's text starts in the file's lines, so that a viewer
    # that places the region's columns in the context's snippet marks `x.sum() > 0`
    # (tests/onnxlens/test_sarif_viewer.py)
    first_raw = (workspace / "export.ipynb").read_text().splitlines()[context["startLine"] - 1]
    assert first_raw[context["startColumn"] - 1:] == 'class Branching(nn.Module):\\n",'
    message = results["ONNX101"]["message"]
    assert message["text"].startswith("cell 6, line 4: `if x.sum() > 0:` depends on")
    assert message["markdown"].startswith("cell 6, line 4: `if x.sum() > 0:` depends on")
    assert location["logicalLocations"] == [{"name": "Branching", "kind": "object",
                                             "fullyQualifiedName": "export.ipynb::Branching"}]
    assert validate_with_multitool(workspace / "out.sarif", levels=ERRORS_AND_WARNINGS) == []
    assert validate_with_multitool(workspace / "out.sarif", levels=ERRORS_AND_WARNINGS,
                                   rule_kind="Ghas") == []


def test_github_annotation_marks_the_line_in_the_notebook_file(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert main(["check", "broken_cell.ipynb", "--format", "github"]) == 1
    command = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("::error"))
    raw_lines = (workspace / "broken_cell.ipynb").read_text().splitlines()
    line = next(n for n, text in enumerate(raw_lines, 1) if "def broken(:" in text)
    assert command.startswith(f"::error file=broken_cell.ipynb,line={line},")
    assert "title=ONNX002::cell 2, line 1: Syntax error in cell 2" in command


def test_excludes_and_severities_apply_to_notebooks(workspace, tmp_path, monkeypatch, capsys):
    project = tmp_path / "project"
    shutil.copytree(workspace, project, ignore=shutil.ignore_patterns("*.sarif"))
    (project / "pyproject.toml").write_text(
        '[tool.onnxlens]\nextend-exclude = ["broken_cell.ipynb"]\n'
        'severity = { ONNX101 = "warning" }\n')
    monkeypatch.chdir(project)
    assert main(["check", ".", "--format", "json"]) == 0  # only a warning is left
    report = json.loads(capsys.readouterr().out)
    assert {t["path"] for t in report["targets"]} == {"export.ipynb"}
    assert [(d["rule"], d["severity"], d["cell"]) for d in report["diagnostics"]] == [
        ("ONNX101", "warning", 6)]


def test_a_file_that_is_not_a_notebook_is_one_clear_finding(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "half.ipynb").write_text('{"cells": [{"cell_type": "code", "source": ["onnx-export')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "half.ipynb"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("half.ipynb:1:1: error[ONNX002]: The notebook cannot be read: it is "
                          "not valid JSON (")
    assert (tmp_path / "half.ipynb").read_text().endswith("onnx-export")  # left as it was


# -- issue 38: a notebook's cells run as when run, and the check writes nothing ----------------

INSTALLED_HELPER = '''import torch


def export_to(model, path):
    torch.onnx.export(model, (torch.randn(2, 3),), path)
'''

EXPORTING_CELLS = [
    ("code", "import sys\nimport threading\n\nimport onnx\nimport onnxruntime as ort\n"
             "import torch"),
    ("code", "# onnx-export: args=(torch.randn(2, 3),)\nclass Doubling(torch.nn.Module):\n"
             "    def forward(self, x):\n        return x * 2"),
    ("code", 'torch.onnx.export(Doubling(), (torch.randn(2, 3),), "clean.onnx")'),
    ("code", 'names = [i.name for i in onnx.load("clean.onnx").graph.input]\n'
             'session = ort.InferenceSession("clean.onnx", providers=["CPUExecutionProvider"])'),
    ("code", "def save_model(model, path):\n"
             "    program = torch.onnx.export(model, (torch.randn(2, 3),))\n"
             "    program.save(path)\n    return program"),
    ("code", 'saved = save_model(Doubling(), "helper.onnx")\nsaved.optimize()'),
    ("code", "worker = threading.Thread(target=torch.onnx.export,\n"
             '                          args=(Doubling(), (torch.randn(2, 3),), "thread.onnx"))\n'
             "worker.start()\nworker.join()"),
    ("code", 'sys.path.insert(0, "../site")\nimport installed_helper\n\n'
             'installed_helper.export_to(Doubling(), "installed.onnx")'),
    ("markdown", "The export the notebook is for:"),
    ("code", "# onnx-export:\ndef export_cell():\n"
             '    torch.onnx.export(Doubling(), (torch.randn(2, 3),), "target.onnx",\n'
             "                      input_names=names)"),
]
EARLIER_CELLS = [
    ("code", "import torch\n\n\nclass Doubling(torch.nn.Module):\n"
             "    def forward(self, x):\n        return x * 2"),
    ("code", "# onnx-export:\ndef export_two():\n"
             "    p = torch.onnx.export(Doubling(), (torch.randn(2, 3),))\n"
             '    p.optimize()\n    p.save("a.onnx")\n'
             '    torch.onnx.export(Doubling(), (torch.randn(2, 3),), "b.onnx")'),
]
SWALLOWED_CELLS = [
    ("code", "import torch\n\n\nclass Branching(torch.nn.Module):\n"
             "    def forward(self, x):\n        if x.sum() > 0:\n            return x\n"
             "        return -x"),
    ("code", "try:  # fails when run, and the notebook goes on\n"
             '    torch.onnx.export(Branching(), (torch.randn(2, 3),), "failed.onnx")\n'
             "except Exception as error:\n    print(type(error).__name__)"),
    ("code", "# onnx-export:\ndef export_swallowed():\n    try:\n"
             '        torch.onnx.export(Branching(), (torch.randn(2, 3),), "b.onnx")\n'
             "    except BaseException:\n        pass"),
]


def _notebook_json(cells: list[tuple[str, str]]) -> str:
    return json.dumps({"cells": [
        {"cell_type": kind, "metadata": {}, "source": text.splitlines(True),
         **({"outputs": [], "execution_count": None} if kind == "code" else {})}
        for kind, text in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        indent=1)


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    return {path.relative_to(root).as_posix():
            (path.stat().st_size, path.stat().st_mtime_ns,
             path.read_bytes() if path.is_file() else b"")
            for path in [root, *sorted(root.rglob("*"))]}


@pytest.fixture(scope="module")
def exporting_notebooks(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict]:
    """One check of three notebooks whose cells export (issue 38): the report and the files
    before and after (the project and, beside it, the "installed" helper's directory)."""
    import contextlib
    import io
    import os

    root = tmp_path_factory.mktemp("exporting_notebooks")
    project, site = root / "project", root / "site"
    project.mkdir()
    site.mkdir()
    (site / "installed_helper.py").write_text(INSTALLED_HELPER)
    (project / "pyproject.toml").write_text("")
    for name, cells in (("exports", EXPORTING_CELLS), ("earlier", EARLIER_CELLS),
                        ("swallowed", SWALLOWED_CELLS)):
        (project / f"{name}.ipynb").write_text(_notebook_json(cells))
    (project / "clean.onnx").write_bytes(b"stale, not a model")  # what a read must not see
    for path in [root, *root.rglob("*")]:
        os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = _snapshot(root)
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(project)
    try:
        with contextlib.redirect_stdout(out):
            main(["check", ".", "--format", "json"])
    finally:
        os.chdir(cwd)
    return json.loads(out.getvalue()), before, _snapshot(root)


@pytest.mark.every_torch
def test_a_notebooks_exports_run_as_when_run_and_its_targets_are_checked(exporting_notebooks):
    """The cells' exports (top level, a helper of another cell, a thread, an "installed"
    helper) return their programs and their files are read back (onnx.load, ONNX Runtime),
    so the later cells and the targets load; the target's own call fails where the notebook
    swallows it, and a failing top-level call is caught by the notebook as when run."""
    report = exporting_notebooks[0]
    # (an export call's target is named by its cell and its line in the cell, as the user
    # sees it: never by a line of the module the cells make, which no cell has)
    assert {t["name"]: (t["path"], t["cell"], t["range"]["start"]["line"], t["ok"])
            for t in report["targets"]} == {
        "Doubling": ("exports.ipynb", 2, 2, True),
        "export_cell@cell10:3": ("exports.ipynb", 10, 3, True),
        "export_two@cell2:3": ("earlier.ipynb", 2, 3, True),
        "export_two@cell2:6": ("earlier.ipynb", 2, 6, True),
        "export_swallowed@cell3:4": ("swallowed.ipynb", 3, 4, False),
    }
    assert [(d["rule"], d["target"], d["path"], d["cell"], d["range"]["start"]["line"],
             d["range"]["start"]["column"], d["range"]["end"]["column"])
            for d in report["diagnostics"]] == [
        ("ONNX101", "export_swallowed@cell3:4", "swallowed.ipynb", 1, 6, 12, 23)]
    assert report["diagnostics"][0]["message"].startswith(
        "`if x.sum() > 0:` depends on the values inside a tensor")


@pytest.mark.every_torch
@pytest.mark.parametrize("written", [
    "project/clean.onnx",  # a top-level cell's export (a stale file of that name stays)
    "project/helper.onnx",  # ONNXProgram.save in a helper another cell defined
    "project/thread.onnx",  # a top-level thread
    "project/installed.onnx",  # a helper outside the workspace (as an installed package)
    "project/a.onnx",  # p.save() in the target's function, before its call
    "project/failed.onnx",  # a top-level export that failed
])
def test_a_notebook_check_writes_nothing(exporting_notebooks, written):
    _, before, after = exporting_notebooks
    assert after.get(written) == before.get(written)
    assert after.get(f"{written}.data") == before.get(f"{written}.data")


@pytest.mark.every_torch
def test_a_notebook_check_leaves_every_file_as_it_was(exporting_notebooks):
    _, before, after = exporting_notebooks
    assert after == before


# -- issue 39: nothing lost, round 4 ------------------------------------------------------------

DOUBLING = ("# onnx-export: args=(torch.randn(2, 3),)\nclass Doubling(torch.nn.Module):\n"
            "    def forward(self, x):\n        return x * 2")


def _check_json(directory: Path, *args: str) -> tuple[int, dict]:
    import contextlib
    import io
    import os

    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(directory)
    try:
        with contextlib.redirect_stdout(out):
            code = main(["check", *args, "--format", "json"])
    finally:
        os.chdir(cwd)
    return code, json.loads(out.getvalue())


def test_a_notebook_big_for_its_outputs_is_checked(tmp_path):
    """12 MB of base64 PNG in a cell's outputs: the code cells are what is checked (the file
    was refused: "it is 12.0 MB, and onnxlens reads Python files of at most 10.0 MB")."""
    (tmp_path / "pyproject.toml").write_text("")
    document = json.loads(_notebook_json([("code", "import torch"), ("code", DOUBLING)]))
    document["cells"][0]["outputs"] = [{
        "output_type": "display_data", "metadata": {},
        "data": {"image/png": "iVBORw0KGgo" + "A" * (12 * 1024 * 1024),
                 "text/plain": ["<Figure size 640x480 with 1 Axes>"]}}]
    (tmp_path / "plots.ipynb").write_text(json.dumps(document, indent=1))
    assert (tmp_path / "plots.ipynb").stat().st_size > 12 * 1024 * 1024

    code, report = _check_json(tmp_path, "plots.ipynb")

    assert report["diagnostics"] == []
    assert [(t["name"], t["cell"], t["ok"]) for t in report["targets"]] == [
        ("Doubling", 2, True)]
    assert code == 0


def test_a_notebook_whose_code_cells_are_too_big_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    filler = "# " + "x" * 97 + "\n"
    (tmp_path / "generated.ipynb").write_text(_notebook_json([
        ("code", "import torch\n" + filler * (11 * 1024 * 1024 // len(filler))),
        ("code", DOUBLING)]))

    code, report = _check_json(tmp_path, "generated.ipynb")

    assert code == 1
    assert report["targets"] == []
    assert [(d["rule"], d["severity"], d["message"]) for d in report["diagnostics"]] == [
        ("ONNX002", "error", "The file cannot be read: its code cells are 11.0 MB, and "
         "onnxlens reads at most 10.0 MB of a notebook's code; it is not checked.")]


R_CELLS = [
    ("markdown", "Fit in R; the Python side exports with torch.onnx."),
    ("code", "library(torch)\nx <- torch_randn(2, 3)"),
    ("code", "model <- nn_linear(3, 1)\ny <- model(x)"),
    ("code", "if (as.numeric(y$sum()) > 0) {\n  print('positive')\n}"),
]


@pytest.mark.parametrize("metadata, said", [
    ({"kernelspec": {"display_name": "R", "language": "R", "name": "ir"},
      "language_info": {"name": "R"}}, "R (`metadata.kernelspec.language`)"),
    ({"language_info": {"name": "julia", "version": "1.10.0"}},
     "julia (`metadata.language_info.name`)"),
])
def test_a_notebook_whose_kernel_is_not_python_is_not_read_as_python(
        tmp_path, monkeypatch, capsys, metadata, said):
    """It was parsed as Python: "Syntax error in cell 3", exit 1."""
    (tmp_path / "pyproject.toml").write_text("")
    document = json.loads(_notebook_json(R_CELLS))
    document["metadata"] = metadata
    (tmp_path / "analysis.ipynb").write_text(json.dumps(document, indent=1))
    monkeypatch.chdir(tmp_path)

    assert main(["check", "analysis.ipynb"]) == 0  # as for a file without targets

    out = capsys.readouterr().out
    assert out.startswith(
        f"analysis.ipynb:1:1: info[ONNX005]: The notebook is not checked: its kernel's "
        f"language is {said}, and onnxlens checks notebooks whose kernel is Python.\n")
    assert "Syntax error" not in out and "ONNX002" not in out
    code, report = _check_json(tmp_path, ".")
    assert code == 0
    assert report["targets"] == []
    assert [(d["rule"], d["severity"]) for d in report["diagnostics"]] == [("ONNX005", "info")]


GET_IPYTHON_CELLS = [
    ("code", "import torch\n\nget_ipython().run_line_magic('matplotlib', 'inline')\n"
             "get_ipython().system('pip install onnx')\nshell = get_ipython()"),
    ("code", DOUBLING),
    ("code", "# onnx-export:\ndef export_doubling():\n"
             "    get_ipython().run_cell_magic('time', '', 'pass')\n"
             '    torch.onnx.export(Doubling(), (torch.randn(2, 3),), "doubling.onnx")'),
]


def test_get_ipython_in_a_cell_does_not_stop_the_targets_from_loading(tmp_path):
    """``get_ipython()`` was a NameError at import: ONNX002 on every target."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "magics.ipynb").write_text(_notebook_json(GET_IPYTHON_CELLS))

    code, report = _check_json(tmp_path, "magics.ipynb")

    assert report["diagnostics"] == []
    assert {t["name"]: t["ok"] for t in report["targets"]} == {
        "Doubling": True, "export_doubling@cell3:4": True}
    assert code == 0
    assert not (tmp_path / "doubling.onnx").exists()


@pytest.mark.parametrize("text, said", [
    ("this is not JSON", "The notebook cannot be read: it is not valid JSON ("),
    ('{"metadata": {}, "nbformat": 4}', "The notebook cannot be read: it is not a Jupyter "
                                         "notebook in nbformat 4 (no `cells` list)"),
])
def test_an_invalid_notebook_named_on_the_command_line_is_reported(
        tmp_path, monkeypatch, capsys, text, said):
    """It said "Checked 0 target(s) in 0 file(s)" and exited 0: a file without a target
    marker was left out before its check could say it is not a notebook."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "broken.ipynb").write_text(text)
    monkeypatch.chdir(tmp_path)

    assert main(["check", "broken.ipynb"]) == 1

    out = capsys.readouterr().out
    assert out.startswith(f"broken.ipynb:1:1: error[ONNX002]: {said}")
    assert "in 1 file(s)" in out
    code, report = _check_json(tmp_path, ".")  # found in a directory: the same
    assert code == 1
    assert [(d["rule"], Path(d["path"]).name) for d in report["diagnostics"]] == [
        ("ONNX002", "broken.ipynb")]
