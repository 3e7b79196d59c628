"""``onnxlens check`` over nothing says so in every format (issue "read by people", item 3):
what it read, why nothing was checked, and a failure with ``--require-targets``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxlens.cli import main
from tests.sarif_tools import ERRORS_AND_WARNINGS, validate_with_multitool

HOW_TO_MARK = "mark a model with `# onnx-export:` or see docs/targets.md"


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("a note\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.ipynb").write_text("{not json")
    return tmp_path


@pytest.mark.parametrize("paths, files, reason", [
    (["plain.py"], 1, f"1 file read, no target: {HOW_TO_MARK}"),
    (["plain.py", "notes.txt"], 2,
     f"2 files read, no target: {HOW_TO_MARK} (notes.txt is neither a Python file nor a "
     "notebook)"),
    (["empty"], 0, "no Python file or notebook in `empty` (directories are searched for *.py "
     "and *.ipynb, without what `exclude` matches: docs/cli.md)"),
    (["bad.ipynb"], 1, "1 file read, no target could be loaded (the finding above says why)"),
])
def test_the_summary_says_what_was_read_and_why_nothing_was_checked(workspace, capsys, paths,
                                                                    files, reason):
    status = main(["check", *paths])
    out = capsys.readouterr().out
    assert status == (1 if paths == ["bad.ipynb"] else 0)  # ONNX002 is an error
    summary = out.rstrip().splitlines()[-2:]
    assert summary[0].startswith(f"Checked 0 target(s) in {files} file(s): ")
    assert summary[1] == f"warning: nothing checked: {reason}"


def test_require_targets_makes_nothing_checked_a_failure(workspace, capsys):
    assert main(["check", "empty", "--require-targets"]) == 5
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith(
        "error: nothing checked: no Python file or notebook in `empty`")


@pytest.mark.parametrize("required, command", [(False, "warning"), (True, "error")])
def test_github_format_annotates_a_run_that_checked_nothing(workspace, capsys, required,
                                                            command):
    status = main(["check", "plain.py", "--format", "github",
                   *(["--require-targets"] if required else [])])
    assert status == (5 if required else 0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"::{command} title=onnxlens::Nothing checked: 1 file read, no "
                        f"target: {HOW_TO_MARK}")


def test_json_carries_what_was_read_and_why(workspace, capsys):
    assert main(["check", "plain.py", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["nothing_checked"] == {
        "files_read": 1, "reason": f"1 file read, no target: {HOW_TO_MARK}",
        "severity": "warning"}
    assert captured.err == f"onnxlens: warning: nothing checked: 1 file read, no target: " \
        f"{HOW_TO_MARK}\n"


@pytest.mark.parametrize("required, level", [(False, "warning"), (True, "error")])
def test_sarif_says_why_nothing_was_checked_in_a_notification(workspace: Path, required,
                                                              level):
    log_path = workspace / "out.sarif"
    main(["check", "empty", "--format", "sarif", "-o", str(log_path),
          *(["--require-targets"] if required else [])])
    run = json.loads(log_path.read_text())["runs"][0]
    assert run["results"] == []
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is True  # onnxlens worked: there was nothing
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == level
    assert notification["message"]["text"].startswith(
        "Nothing checked: no Python file or notebook in `empty`")
    assert validate_with_multitool(log_path, levels=ERRORS_AND_WARNINGS) == []
    assert validate_with_multitool(log_path, rule_kind="Ghas") == []  # GitHub code scanning


def test_a_run_with_a_target_says_nothing_of_the_kind(capsys):
    """The clean examples: no nothing-checked line, no key (in-process: the same worker)."""
    from tests.conftest import FIXTURES

    assert main(["check", str(FIXTURES / "clean"), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "nothing_checked" not in json.loads(captured.out)
    assert "nothing checked" not in captured.err
