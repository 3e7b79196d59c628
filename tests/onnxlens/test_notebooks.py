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
from tests.sarif_tools import validate_with_multitool, validate_with_schema

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
